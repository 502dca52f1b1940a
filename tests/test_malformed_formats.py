"""A malformed rate per output format (``p_malformed_action``, ``_candidates``, ``_plan``,
``_steps``): a model can be far worse at one format than another (the shipped 0.5B model breaks
0 % of its candidate actions and two thirds of its candidate steps).

The rate belongs to the format asked for, whatever planner asks: a planner meets it only
through the formats it requests. Unset, a format takes ``p_malformed``, and the simulator draws
exactly as before, so every shipped profile's runs are unchanged.
"""

from __future__ import annotations

import pytest
from planarena.envs.faults import FaultRule
from planarena.planners.llm.profiles import MALFORMED_FORMATS, SKILLS, SkillProfile

from tests.conftest import episode, tasks

# planner -> the formats its proposer writes (a judge's scores keep p_malformed)
WRITES = {
    "react": {"action"},
    "plan_execute": {"plan_json"},
    "bfs": {"steps_json"},
    "mcts": {"steps_json"},
    "dfs": {"candidates"},
}


def _perfect(broken: str | None) -> SkillProfile:
    update = {field: 1.0 if fmt == broken else 0.0 for fmt, field in MALFORMED_FORMATS.items()}
    return SKILLS["perfect"].model_copy(update=update)


def test_an_unset_format_takes_p_malformed_and_a_set_one_its_own() -> None:
    skill = SKILLS["weak"].model_copy(update={"p_malformed_steps": 0.5})
    assert skill.malformed_rate("steps_json") == 0.5
    assert skill.malformed_rate("action") == skill.malformed_rate() == skill.p_malformed
    assert skill.malformed_rate("scores") == skill.p_malformed  # a format with no field


@pytest.mark.parametrize("planner", sorted(WRITES))
def test_a_broken_format_fails_exactly_the_planners_that_write_it(planner: str) -> None:
    """A perfect model that breaks every answer in one format: a planner that writes that
    format never completes; with another format broken, it completes every task."""
    for fmt in MALFORMED_FORMATS:
        for task in tasks("medium", n=2):
            record, _ = episode(planner, task, skill=_perfect(fmt))
            if fmt in WRITES[planner]:
                assert not record.success, (planner, fmt, task.task_id)
                if fmt != "candidates":  # a list cut short can keep its first candidates:
                    # DFS then searches on with fewer and runs out (budget_exhausted)
                    assert record.failure_mode == "malformed_output", (planner, record.detail)
            else:
                assert record.success, (planner, fmt, task.task_id, record.detail)


def test_unset_formats_draw_as_p_malformed_does() -> None:
    """Each format set to p_malformed's own value: the same records and traces as unset."""
    skill = SKILLS["weak_json"]
    same = skill.model_copy(update={f: skill.p_malformed for f in MALFORMED_FORMATS.values()})
    for planner in ("react", "bfs", "plan_execute_replan"):
        for task in tasks("medium", n=2):
            before, trace = episode(planner, task, skill=skill)
            after, after_trace = episode(planner, task, skill=same)
            assert after.model_dump(exclude={"wall_s"}) == before.model_dump(exclude={"wall_s"})
            assert after_trace == trace, (planner, task.task_id)


def test_scaled_makes_a_smaller_model_break_its_own_formats_more() -> None:
    skill = SKILLS["strong"].model_copy(update={"p_malformed_steps": 0.2})
    smaller = skill.scaled(2.0)
    assert smaller.p_malformed_steps == pytest.approx(0.4)
    assert smaller.p_malformed_action is None  # still p_malformed's, which is scaled
    assert smaller.malformed_rate("action") == pytest.approx(2 * skill.p_malformed)


def test_a_replan_takes_the_plans_rate_unless_set() -> None:
    """``p_malformed_replan`` falls back to ``p_malformed_plan``, which falls back to
    ``p_malformed``: a replan is a plan first."""
    skill = SKILLS["weak"].model_copy(update={"p_malformed_plan": 0.6})
    assert skill.malformed_rate("replan_json") == 0.6
    assert SKILLS["weak"].malformed_rate("replan_json") == SKILLS["weak"].p_malformed
    own = skill.model_copy(update={"p_malformed_replan": 0.05})
    assert own.malformed_rate("replan_json") == 0.05 and own.malformed_rate("plan_json") == 0.6


@pytest.mark.parametrize("planner", ["plan_execute_replan", "topo", "tot"])
def test_a_broken_replan_fails_only_where_a_replan_is_written(planner: str) -> None:
    """Every replan broken, first plans intact: a perfect model fails once a fault makes it
    replan (malformed output), and completes where nothing failed."""
    skill = _perfect("replan_json")
    wrong_once = FaultRule(kind="wrong_result", tools=["extract_data"], rate=1.0, max_consecutive=1)
    for task in tasks("medium", n=2):
        faulted, _ = episode(planner, task, skill=skill, rules=[wrong_once])
        assert faulted.failure_mode == "malformed_output", (planner, faulted.detail)
        clean, _ = episode(planner, task, skill=skill)
        assert clean.success, (planner, clean.detail)


def _turns(trace: dict) -> list[bool]:
    """Per ReAct turn of a trace, whether it came back unparseable."""
    out = []
    for e in trace["events"]:
        if e["event"] == "parse_error":
            out[-1:] = [True]
        elif e["event"] == "llm":
            out.append(False)
    return out


def test_a_formats_persistence_falls_back_as_its_rate_does() -> None:
    skill = SKILLS["weak"].model_copy(
        update={"malformed_persistence": 0.3, "malformed_persistence_plan": 0.7}
    )
    assert skill.persistence("action") == skill.persistence("scores") == 0.3
    assert skill.persistence("plan_json") == skill.persistence("replan_json") == 0.7
    assert SKILLS["weak"].persistence("steps_json") == 0.0  # every shipped profile: 0


def test_a_persistent_model_breaks_a_format_again_as_it_did_last() -> None:
    """With a ReAct turn's ``malformed_persistence`` 1 every turn of an episode is broken as
    its first was; at 0 the turns draw afresh (some episodes mix broken and intact turns)."""
    base = SKILLS["weak"].model_copy(update={"p_malformed_action": 0.4})
    sticky = base.model_copy(update={"malformed_persistence_action": 1.0})
    mixed = 0
    for task in tasks("medium", n=6):
        _, trace = episode("react", task, skill=sticky)
        turns = _turns(trace)
        assert len(set(turns)) <= 1, (task.task_id, turns)
        _, fresh = episode("react", task, skill=base)
        mixed += len(set(_turns(fresh))) > 1
    assert mixed > 0
