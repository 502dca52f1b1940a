"""A wrong call that runs (``w_other``, ``w_other_plan``): among its mistakes a model calls
another tool of the env than the right one, with the right step's arguments, and the world
answers it. Most of the shipped 0.5B model's wrong plan steps and many of its wrong actions
were such calls; without the option, a simulated confused belief had to stop, guess or invent
instead, and a plan cut short was refused where the real one ran.

The option belongs to the kind of decision point (a tool call or a plan step), never to a
planner. At 0 it is not on offer and nothing is drawn for it, so every shipped profile's runs
are as before.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from planarena.envs.report import ReportEnv
from planarena.experiments.calibrate.oracle_view import OracleView
from planarena.planners.llm.profiles import SKILLS, SkillProfile
from planarena.planners.llm.sim_decider import Decider
from planarena.planners.llm.sim_mind import SimMind

from tests.conftest import assert_unchanged_by, episode, tasks

WRONG_CALL_ERRORS = {"bad_args", "not_found"}  # how the world answers a call it cannot use


def _confused(**weights: float) -> SkillProfile:
    """A model whose every belief is confused (up to the 0.95 cap), its only mistakes those in
    ``weights``."""
    off = ("w_hallucinate", "w_premise", "w_stop", "w_dependency", "w_unchecked", "w_other")
    update = {"p_correct": 0.0, "systematic_share": 1.0, **dict.fromkeys(off, 0.0), **weights}
    return SKILLS["perfect"].model_copy(update=update)


@pytest.mark.parametrize("planner", ["react", "dfs", "plan_execute", "mcts"])
def test_a_wrong_call_runs_and_the_world_answers_it(planner: str) -> None:
    """Every mistake a wrong call: nothing invented, no plan cut short and refused; the calls
    reach the env, which refuses them."""
    wrong = _confused(w_other=1.0)
    first_wrong = 0
    for task in tasks("medium", n=4):
        record, trace = episode(planner, task, skill=wrong)
        assert record.failure_mode not in {
            "hallucinated_tool_call", "plan_logic_error", "malformed_output",
        }, (planner, record.failure_mode, record.detail)  # fmt: skip
        assert record.tool_calls >= 1 and record.tool_errors >= 1, (planner, record.detail)
        steps = [e for e in trace["events"] if e["event"] == "step"]
        if planner == "plan_execute":  # its one plan: the first step is the wrong call
            first_wrong += steps[0]["tool"] != "search_web"  # every medium task starts there
            assert {s["error_kind"] for s in steps} & WRONG_CALL_ERRORS, steps
    assert planner != "plan_execute" or first_wrong >= 3  # a belief is right 5 % of the time


def test_stopping_instead_leaves_a_plan_with_nothing_to_run() -> None:
    """The same confused model whose only plan-step mistake is ending the plan: its first plan
    is empty and refused (what the simulator did before the option existed)."""
    stops = _confused(w_stop=1.0)
    modes = Counter(episode("plan_execute", t, skill=stops)[0].failure_mode
                    for t in tasks("medium", n=4))  # fmt: skip
    assert modes["plan_logic_error"] >= 3, modes  # a belief is right 5 % of the time


def test_the_option_keeps_to_its_kind_of_decision_point() -> None:
    """A wrong call in plan steps only leaves a tool-calling planner as it was, and in tool
    calls only leaves a plan writer as it was (no draw is made where the option is off)."""
    weaker = SKILLS["weak"].scaled(3.0)  # errs often: a slip that could land on it would
    assert_unchanged_by("react", weaker, {"w_other_plan": 5.0}, n=4)
    assert_unchanged_by("dfs", weaker, {"w_other_plan": 5.0}, n=4)
    assert_unchanged_by("plan_execute", weaker, {"w_other": 5.0, "w_other_plan": 0.0}, n=4)


def test_a_plan_step_takes_the_shared_weight_unset() -> None:
    skill = SKILLS["strong"].model_copy(update={"w_other": 2.5})
    assert skill.resolved("w_other_plan") == 2.5
    assert SKILLS["strong"].w_other == 0.0  # off in the shipped profiles


def test_the_wrong_tool_is_one_draw_an_episode_never_an_option_of_its_own() -> None:
    """The tool a model would call instead of a step is the same every time it is asked in an
    episode, never the step's own tool, fallback or trap tool; episodes differ."""
    env = ReportEnv()
    chosen: Counter[str] = Counter()
    for task in tasks("complex", n=6):
        oracle = env.oracle(task)
        mind = SimMind(SKILLS["weak"], oracle, seed_keys=(0, task.task_id))
        for g in mind.initial_gold().gold:
            tool = mind.other_tool(g)
            assert tool is not None and tool == mind.other_tool(g)
            own = {g.tool, g.fallback, g.trap.tool if g.trap is not None else None}
            assert tool not in own and tool in oracle.tool_names(), (g.key, tool)
            view = OracleView(oracle, (0, task.task_id))
            assert view.mind.other_tool(g) == tool  # calibration reads the same option
            chosen[tool] += 1
    assert len(chosen) >= 3, chosen


def test_at_zero_the_option_is_not_on_offer() -> None:
    """At weight 0 no decision point lists a wrong call (its look is never drawn, no slip can
    land on it); at a positive weight every point does."""
    env = ReportEnv()
    task = tasks("medium", n=1)[0]
    for weight, offered in ((0.0, False), (1.0, True)):
        skill = SKILLS["weak"].model_copy(update={"w_other": weight})
        mind = SimMind(skill, env.oracle(task), seed_keys=(0, task.task_id))
        decider = Decider(mind, skill, random.Random(0), 0)
        gold = mind.initial_gold().gold
        assert all(("other" in decider._step_options(g)) == offered for g in gold)
        options = decider._action_options(gold, [], frozenset())
        assert ("other" in options) == offered, options


@pytest.mark.parametrize("planner", ["react", "plan_execute", "mcts"])
def test_a_slip_never_lands_on_a_wrong_call(planner: str) -> None:
    """A wrong call is a mistake the model believes in: a model whose every error is a
    sampling slip (``systematic_share`` 0) runs the same with the option on as off (its look
    is never drawn, so no slip, alternative candidate or judge's view sees it)."""
    slips_only = SKILLS["weak"].scaled(3.0).model_copy(update={"systematic_share": 0.0})
    assert_unchanged_by(planner, slips_only, {"w_other": 5.0}, n=4)
