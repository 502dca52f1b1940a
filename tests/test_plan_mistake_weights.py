"""A plan step's own mistake weights (``w_hallucinate_plan``, ``w_premise_plan``,
``w_stop_plan``): a model can make different mistakes writing a plan than choosing one action
(the shipped 0.5B model cuts its plans short, and in a ReAct turn guesses an argument instead).

The mix belongs to the kind of decision point, whatever planner asks: a step written into a
plan (``plan``, ``revise_plan``, ``propose_steps``) draws from the plan weights, a tool call
(``act``, ``propose_actions``) from the shared ones. Unset, a plan weight takes the shared one,
and the simulator draws exactly as before, so every shipped profile's runs are unchanged.
"""

from __future__ import annotations

from collections import Counter

from planarena.planners.llm.profiles import PLAN_WEIGHTS, SKILLS, SkillProfile

from tests.conftest import episode, tasks

ACTION_PLANNERS = ("react", "dfs")  # write tool calls only
PLAN_PLANNERS = ("plan_execute", "bfs", "tot")  # write plan steps (their executors run them)


def _confused(**weights: float) -> SkillProfile:
    """A model whose every belief is confused (up to the 0.95 cap), with only the given
    mistakes on its mind: an action invents a tool, a plan step as ``weights`` say."""
    base = {w: 0.0 for w in ("w_premise", "w_stop", "w_dependency", "w_unchecked")}
    update = {"p_correct": 0.0, "systematic_share": 1.0, "w_hallucinate": 1.0, **base, **weights}
    return SKILLS["perfect"].model_copy(update=update)


def test_an_unset_plan_weight_takes_the_shared_one() -> None:
    skill = SKILLS["strong"].model_copy(update={"w_stop": 3.0, "w_stop_plan": 0.5})
    assert skill.resolved("w_stop_plan") == 0.5
    assert skill.resolved("w_stop") == 3.0
    assert skill.resolved("w_premise_plan") == skill.w_premise  # unset: shared
    assert set(PLAN_WEIGHTS.values()) <= set(SkillProfile.model_fields)


def test_plan_weights_move_plan_steps_and_nothing_else() -> None:
    """The same model but for its plan-step mix (every plan step stops the plan, or every one
    invents a tool): planners that only call tools run identically; planners that write plans
    fail the way the mix says."""
    stops = _confused(w_stop_plan=1.0, w_hallucinate_plan=0.0, w_premise_plan=0.0)
    invents = _confused(w_stop_plan=0.0, w_hallucinate_plan=1.0, w_premise_plan=0.0)
    work = tasks("medium", n=6)
    for planner in ACTION_PLANNERS:
        for task in work:
            a, a_trace = episode(planner, task, skill=stops)
            b, b_trace = episode(planner, task, skill=invents)
            assert a.model_dump(exclude={"wall_s"}) == b.model_dump(exclude={"wall_s"})
            assert a_trace == b_trace, (planner, task.task_id)
    for planner in PLAN_PLANNERS:
        cut = Counter(episode(planner, t, skill=stops)[0].failure_mode for t in work)
        invented = Counter(episode(planner, t, skill=invents)[0].failure_mode for t in work)
        assert "hallucinated_tool_call" not in cut, (planner, cut)
        assert cut["plan_logic_error"] >= 3, (planner, cut)  # a plan cut to nothing
        assert invented["hallucinated_tool_call"] == len(work), (planner, invented)


def test_plan_weights_at_the_shared_values_draw_as_unset() -> None:
    """Each plan weight set to its shared weight's value: the same records and traces."""
    skill = SKILLS["weak"].model_copy(update={"w_stop": 2.0, "w_premise": 0.5})
    same = skill.model_copy(update={own: getattr(skill, w) for own, w in PLAN_WEIGHTS.items()})
    for planner in ("react", "plan_execute_replan", "bfs", "mcts"):
        for task in tasks("complex", n=2):
            before, trace = episode(planner, task, skill=skill)
            after, after_trace = episode(planner, task, skill=same)
            assert after.model_dump(exclude={"wall_s"}) == before.model_dump(exclude={"wall_s"})
            assert after_trace == trace, (planner, task.task_id)
