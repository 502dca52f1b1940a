"""Reflection and model-written checks: what each buys comes from its named skill field.

- ``reflexion`` is ReAct plus ``reflect`` requests: with ``reflection_gain`` 0 its critiques
  change no decision, so it makes exactly ReAct's tool calls; with a positive gain it
  recovers from failures ReAct repeats.
- A plan's post-conditions are the model's own (``check_coverage`` of a fault-independent
  pool): a corrupted field no written check covers passes, for every plan planner; raising
  the coverage catches it.
"""

from __future__ import annotations

import pytest
from planarena.envs.faults import FaultRule
from planarena.planners.llm.profiles import SKILLS, SkillProfile

from tests.conftest import episode, make_planner, tasks

QUIET = {  # no source of difference but the decisions themselves
    "systematic_share": 1.0,
    "p_malformed": 0.0,
    "p_sloppy_json": 0.0,
    "context_scale_tokens": 1e12,
}
# every search fails first with a permanent error: the model must change course
NO_KEY = FaultRule(kind="invalid_api_key", tools=["search_web"], rate=1.0, scope="episode")
PLAN_PLANNERS = ["plan_execute", "plan_execute_replan", "topo", "tot", "bfs", "mcts"]


def _skill(**fields: float) -> SkillProfile:
    return SKILLS["strong"].model_copy(update={**QUIET, **fields})


def _calls(trace: dict) -> list[tuple[str, str]]:
    return [(c["tool"], str(c["args"])) for c in trace["tool_calls"]]


def test_reflexion_with_no_reflection_gain_makes_reacts_calls() -> None:
    skill = _skill(reflection_gain=0.0, p_persist=0.6)
    reflected = 0
    for task in tasks("medium", n=8):
        react, react_trace = episode("react", task, rules=[NO_KEY], skill=skill)
        reflexion, trace = episode("reflexion", task, rules=[NO_KEY], skill=skill)
        assert _calls(trace) == _calls(react_trace), task.task_id
        assert (reflexion.success, reflexion.failure_mode) == (react.success, react.failure_mode)
        reflected += reflexion.llm_calls - react.llm_calls
    assert reflected > 0  # it did reflect: those calls are all that differs


def test_reflection_gain_lets_reflexion_recover_where_react_persists() -> None:
    skill = _skill(reflection_gain=1.0, p_persist=0.9)
    react_ok = reflexion_ok = 0
    for task in tasks("medium", n=8):
        react, _ = episode("react", task, rules=[NO_KEY], skill=skill)
        reflexion, _ = episode("reflexion", task, rules=[NO_KEY], skill=skill)
        assert reflexion.success or not react.success, task.task_id  # never worse, same task
        react_ok += react.success
        reflexion_ok += reflexion.success
    assert reflexion_ok >= react_ok + 3, (react_ok, reflexion_ok)


# extract_data loses the profit figure on every call; no check the oracle wrote is in play
PROFIT_LOST = FaultRule(
    kind="wrong_result", tools=["extract_data"], rate=1.0, scope="call", corrupt_fields=["profit"]
)


@pytest.mark.parametrize("planner", PLAN_PLANNERS)
def test_an_uncovered_field_passes_and_coverage_catches_it(planner: str) -> None:
    # no trap, missed signal, wrong move or diverse sample in the way of the extraction (a
    # search whose candidates include an early end may take it and never meet the lost field)
    calm = {"p_trap": 0.0, "p_miss_signal": 0.0, "p_correct": 1.0, "sample_diversity": 0.0}
    for task in tasks("simple", n=3):
        blind, _ = episode(
            make_planner(planner),
            task,
            rules=[PROFIT_LOST],
            skill=_skill(check_coverage=0.0, **calm),
        )
        assert blind.wrong_returned > 0, (planner, task.task_id)
        assert blind.wrong_caught == 0  # no check written: the null profit went through
        assert not blind.success  # ... into the answer
        careful, _ = episode(
            make_planner(planner),
            task,
            rules=[PROFIT_LOST],
            skill=_skill(check_coverage=1.0, **calm),
        )
        assert careful.wrong_caught == careful.wrong_returned > 0, (planner, task.task_id)
        assert careful.failure_mode != "false_success"  # caught: never passed off as done
        if planner != "plan_execute":  # a planner that retries or replans gets it right
            assert careful.success, (planner, task.task_id, careful.detail)


def test_a_plans_pre_conditions_and_fallback_are_the_models_own() -> None:
    """A plan step's world-fact pre-condition (``api_key_valid.search_web == true``) and its
    fallback tool are written with ``precondition_coverage`` (fault-independent draws), not
    copied from the oracle: at 1 the checked fact stops the step before any call with the dead
    key; at 0 the plan calls the dead key and fails unverified."""
    calm = {"p_trap": 0.0, "p_miss_signal": 0.0, "p_correct": 1.0, "sample_diversity": 0.0}
    for task in tasks("simple", n=4):
        written, trace = episode(
            make_planner("plan_execute"),
            task,
            rules=[NO_KEY],
            skill=_skill(precondition_coverage=1.0, **calm),
        )
        dead = [c for c in trace["tool_calls"] if c["tool"] == "search_web" and not c["ok"]]
        assert not dead, task.task_id  # the fact was checked before the dead key was called
        assert written.failure_mode != "precondition_unverified", task.task_id
        unwritten, trace = episode(
            make_planner("plan_execute"),
            task,
            rules=[NO_KEY],
            skill=_skill(precondition_coverage=0.0, **calm),
        )
        dead = [c for c in trace["tool_calls"] if c["tool"] == "search_web" and not c["ok"]]
        assert dead and unwritten.failure_mode == "precondition_unverified", task.task_id


def test_written_pre_conditions_are_drawn_once_per_step_and_condition() -> None:
    """The same model writes the same pre-conditions and fallback for a step in every plan
    of an episode (one draw per step and condition), and about ``precondition_coverage`` of
    them over many steps."""
    from planarena.envs.oracle import GoldStep
    from planarena.planners.llm.sim import SimLLM

    skill = _skill(precondition_coverage=0.5)
    sim = SimLLM(skill, None, seed_keys=(7,))  # type: ignore[arg-type]  # no oracle read
    steps = [
        GoldStep(f"s{i}", "search_web", {}, pre=[f"fact_{i}_{j} == true" for j in range(4)],
                 fallback="search_web_backup")
        for i in range(100)
    ]  # fmt: skip
    first = [(sim.written_pre(skill, g), sim.written_fallback(skill, g)) for g in steps]
    again = [(sim.written_pre(skill, g), sim.written_fallback(skill, g)) for g in steps]
    assert first == again
    share = sum(len(pre) for pre, _ in first) / 400
    named = sum(fb is not None for _, fb in first) / 100
    assert 0.4 < share < 0.6 and 0.35 < named < 0.65, (share, named)
