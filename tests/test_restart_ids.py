"""A replan numbered from step_1 again (``p_restart_ids``): what a small real model did with
every replan it wrote, reusing the id of a step that had already run or failed.

The simulated model numbers a plan written after steps ran from 1 again, whatever planner
asked; the executor refuses a replan that reuses an executed step's id, so the episode ends as
the real model's did (``plan_logic_error``, ``duplicate_id``). A first plan has nothing to
restart from, and a ReAct turn carries no id: nothing changes for them. At 0 the mechanism
draws nothing, so every shipped profile's runs are as before.
"""

from __future__ import annotations

import pytest
from planarena.envs.faults import FaultRule
from planarena.planners.llm.profiles import SKILLS, SkillProfile

from tests.conftest import assert_unchanged_by, episode, tasks

REPLANNERS = ["plan_execute_replan", "topo", "tot"]
# the first extract_data call of an episode returns a wrong figure; the perfect model's
# checks catch it, the step fails, and a replanner asks for a new plan for what remains
WRONG_ONCE = FaultRule(kind="wrong_result", tools=["extract_data"], rate=1.0, max_consecutive=1)


def _perfect(p: float) -> SkillProfile:
    return SKILLS["perfect"].model_copy(update={"p_restart_ids": p})


def _rejections(trace: dict) -> list[str]:
    return [e["reason"] for e in trace["events"] if e["event"] == "replan_rejected"]


@pytest.mark.parametrize("planner", REPLANNERS)
def test_a_replan_numbered_from_one_again_is_refused(planner: str) -> None:
    """Decisions all right: every replan that restarts its numbering is refused as reusing an
    executed id, and the episode fails for it; numbered on, the replan repairs the episode."""
    for task in tasks("medium", n=3):
        restarted, trace = episode(planner, task, skill=_perfect(1.0), rules=[WRONG_ONCE])
        assert not restarted.success, (planner, task.task_id)
        assert restarted.failure_mode == "plan_logic_error", (planner, restarted.detail)
        assert _rejections(trace) and set(_rejections(trace)) == {"duplicate_id"}
        numbered, trace = episode(planner, task, skill=_perfect(0.0), rules=[WRONG_ONCE])
        assert numbered.success and not _rejections(trace), (planner, numbered.detail)


@pytest.mark.parametrize("planner", ["plan_execute", "react", "dfs"])
def test_nothing_ran_nothing_to_restart(planner: str) -> None:
    """A planner that writes its one plan before anything runs, or none: the rate changes
    neither the records nor the traces of a weak model under faults (no draw is made)."""
    assert_unchanged_by(planner, SKILLS["weak"], {"p_restart_ids": 1.0}, rules=[WRONG_ONCE])


def test_scaled_makes_a_smaller_model_restart_more() -> None:
    skill = SKILLS["strong"].model_copy(update={"p_restart_ids": 0.2})
    assert skill.scaled(2.0).p_restart_ids == pytest.approx(0.4)
    assert skill.scaled(10.0).p_restart_ids == 1.0
