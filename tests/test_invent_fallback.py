"""A plan step's fallback naming a tool the catalogue lacks (``p_invent_fallback``): what the
1.5B model did in many of its plans (a placeholder, an invented ``_backup`` name).

The simulated model names, for a step, its invented tool as the fallback with this chance,
whatever planner asked; the plan reader refuses such a plan (``unknown_fallback``), so every
planner that writes plans ends as the real model's did (``hallucinated_tool_call``). ReAct
names no fallback: nothing changes for it. At 0 the mechanism draws nothing, so every shipped
profile's runs are as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from planarena.planners.llm.profiles import SKILLS, SkillProfile

from tests.conftest import assert_unchanged_by, episode, tasks
from tests.test_calibrate_recovery import assert_rate_recovered, sim_run

PLAN_WRITERS = ["plan_execute", "plan_execute_replan", "topo", "tot", "bfs"]


def _perfect(p: float) -> SkillProfile:
    return SKILLS["perfect"].model_copy(update={"p_invent_fallback": p})


@pytest.mark.parametrize("planner", PLAN_WRITERS)
def test_a_plan_naming_a_fallback_that_does_not_exist_is_refused(planner: str) -> None:
    """Decisions all right: every plan names an invented fallback, the reader refuses it and
    the episode fails as a hallucinated tool; naming none, the same model completes."""
    for task in tasks("medium", n=2):
        invented, trace = episode(planner, task, skill=_perfect(1.0))
        assert not invented.success, (planner, task.task_id)
        assert invented.failure_mode == "hallucinated_tool_call", (planner, invented.detail)
        own, _ = episode(planner, task, skill=_perfect(0.0))
        assert own.success, (planner, own.detail)


@pytest.mark.parametrize("planner", ["react", "reflexion"])
def test_a_planner_that_writes_no_plan_is_untouched(planner: str) -> None:
    """No plan, no fallback: the rate changes neither the records nor the traces of a weak
    model under the default faults (no draw is made)."""
    assert_unchanged_by(planner, SKILLS["weak"], {"p_invent_fallback": 1.0})


def test_a_small_rate_changes_only_the_plans_it_hits() -> None:
    """A rate too small to hit any step leaves a plan planner's records and traces as they
    were: the draw is keyed by the step alone and moves no other random stream (at 0 no
    draw is made at all)."""
    assert_unchanged_by("plan_execute_replan", SKILLS["weak"], {"p_invent_fallback": 1e-12})


def test_scaled_makes_a_smaller_model_invent_more() -> None:
    skill = SKILLS["strong"].model_copy(update={"p_invent_fallback": 0.2})
    assert skill.scaled(2.0).p_invent_fallback == pytest.approx(0.4)
    assert skill.scaled(10.0).p_invent_fallback == 1.0
    assert SKILLS["strong"].scaled(3.0).p_invent_fallback == 0.0


@pytest.mark.slow  # a sim run and its fit: about 10 s
def test_an_invented_fallback_rate_recovered(tmp_path: Path) -> None:
    """``p_invent_fallback`` is a rate per step of a freshly written plan; a run that writes
    no plan says so."""
    truth = {"p_invent_fallback": 0.1}
    run = sim_run(tmp_path / "run", 8, truth, env="[report]", planners="[plan_execute]")
    assert_rate_recovered(tmp_path, run, truth, absent="no plan step was ever written")
