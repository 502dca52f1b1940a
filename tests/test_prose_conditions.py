"""A condition written in words (``p_prose_condition``): the failure a small real model shows
most in plans ("The search engine is slow and its own API key" as a pre-condition).

The simulated model writes it in its plans' steps, whatever planner asked; the executor cannot
evaluate it and refuses the step, so the episode ends as a real model's does
(``plan_logic_error``). A ReAct turn carries no condition, so nothing changes for it. At 0 the
mechanism draws nothing: every shipped profile's runs are as before.
"""

from __future__ import annotations

import pytest
from planarena.planners.conditions import is_expression
from planarena.planners.llm.profiles import SKILLS, SkillProfile
from planarena.planners.llm.sim_decider import in_words

from tests.conftest import assert_unchanged_by, episode, tasks

PLAN_PLANNERS = ["plan_execute", "plan_execute_replan", "topo", "tot", "bfs", "mcts"]


def _perfect(p: float) -> SkillProfile:
    return SKILLS["perfect"].model_copy(update={"p_prose_condition": p})


def test_words_are_no_expression_and_expressions_are() -> None:
    for field in ("pre_conditions", "post_conditions"):
        assert not is_expression(in_words(field, "search_web"))
    assert not is_expression("The search engine is slow and its own API key")
    assert is_expression("step_1.status == success")
    assert is_expression("remaining_budget_usd > 0.10")
    assert not is_expression("") and not is_expression(None) and not is_expression(3)


@pytest.mark.parametrize("planner", PLAN_PLANNERS)
def test_a_perfect_model_writing_its_conditions_in_words_fails_every_plan(planner: str) -> None:
    """Decisions all right, no faults: with every condition in words no plan gets through
    (the executor refuses the step: ``plan_logic_error``); with none, every plan does."""
    for task in tasks("medium", n=3):
        worded, _ = episode(planner, task, skill=_perfect(1.0))
        assert not worded.success, (planner, task.task_id)
        assert worded.failure_mode == "plan_logic_error", (planner, worded.detail)
        assert "cannot parse condition" in worded.detail
        plain, _ = episode(planner, task, skill=_perfect(0.0))
        assert plain.success, (planner, task.task_id, plain.detail)


@pytest.mark.parametrize("planner", ["react", "reflexion"])
def test_turns_carry_no_condition_so_words_change_nothing(planner: str) -> None:
    assert_unchanged_by(planner, SKILLS["weak"], {"p_prose_condition": 1.0})


def test_scaled_makes_a_smaller_model_word_more_of_them() -> None:
    skill = SKILLS["strong"].model_copy(update={"p_prose_condition": 0.2})
    assert skill.scaled(2.0).p_prose_condition == pytest.approx(0.4)
    assert skill.scaled(10.0).p_prose_condition == 1.0
