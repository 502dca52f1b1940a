"""The records' ground truth of post-conditions: wrong results returned, caught, false alarms.

Counted from the episode's trace (the executor's ``step`` events) and call log (the fault
injector marks a "200 but wrong" result ``ok`` and ``injected``) when the record is built.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from planarena.envs import clock
from planarena.envs.faults import FaultRule
from planarena.envs.oracle import GoldStep, Obs
from planarena.envs.report import ReportEnv, ReportWorld
from planarena.envs.tools import ToolCallRecord
from planarena.experiments.records.checks import CHECK_KEYS, check_counts, rejected_calls
from planarena.experiments.run.episode import EpisodeRecord
from planarena.experiments.studies.seed_tables import render, table_checks
from planarena.planners.llm.profiles import SKILLS

from tests.conftest import episode, tasks

WRONG_REVENUE = FaultRule(
    kind="wrong_result",
    tools=["extract_data"],
    rate=0.5,
    scope="call",
    max_consecutive=1,
    corrupt_fields=["revenue"],
)


def call(
    tool: str, t0: float, t1: float, *, ok: bool = True, injected: bool = False, result: Any = None
) -> Any:
    return ToolCallRecord(
        tool=tool, args={}, t_start=t0, t_end=t1, ok=ok, injected=injected, result=result or {}
    )


def step(tool: str, t0: float, t1: float, failure: str | None = None) -> dict[str, Any]:
    return {
        "event": "step",
        "id": f"{tool}@{t0}",
        "tool": tool,
        "t0": t0,
        "t1": t1,
        "ok": failure is None,
        "failure": failure,
        "error_kind": None,
    }


class CountingOracle:
    """An oracle with three ``good`` steps left, less one per ``good`` result seen; a good
    result is one whose ``fine`` field is true (its pool)."""

    def remaining(
        self, observations: Sequence[Obs], overlooked: frozenset[str] = frozenset()
    ) -> list[GoldStep]:
        done = sum(o.tool == "good" and o.error is None for o in observations)
        pool = ["result.fine == true"]
        return [GoldStep(f"s{i}", "good", {}, checks=pool) for i in range(max(0, 3 - done))]


def test_a_rejection_is_matched_to_the_call_that_ended_its_step() -> None:
    """A step retried after a 503 rejects its second call's result; of two parallel steps
    ending at different times, each rejection finds its own call; a step event that is not
    a post-condition failure matches nothing."""
    calls = [
        call("extract_data", 0.0, 0.2, ok=False, injected=True),  # a 503, retried
        call("extract_data", 0.7, 3.0, injected=True),  # returned, wrong
        call("parse_pdf", 3.0, 8.0),  # parallel with the next one
        call("search_web", 3.0, 5.0, injected=True),
        call("generate_summary", 8.0, 9.0),
    ]
    events = [
        step("extract_data", 0.0, 3.0, "postcondition"),
        step("search_web", 3.0, 5.0, "postcondition"),
        step("parse_pdf", 3.0, 8.0, "precondition"),
        step("generate_summary", 8.0, 9.0, "postcondition"),
        step("missing", 20.0, 21.0, "postcondition"),
    ]
    assert rejected_calls(events, calls) == [1, 3, 4, None]
    counts = check_counts(events, calls)
    assert counts == {"wrong_returned": 2, "wrong_caught": 2, "check_false_alarms": 0}


def test_a_false_alarm_is_a_refused_result_that_passes_its_step_pool() -> None:
    """Refused: a result that passes the pool of a remaining step with its tool (a false
    alarm), one that fails it, and one of a tool no remaining step uses (neither is)."""
    calls = [
        call("good", 0.0, 1.0, result={"fine": True}),
        call("good", 1.0, 2.0, result={"fine": False}),
        call("bad", 2.0, 3.0, result={"fine": True}),
    ]
    events = [step(c.tool, c.t_start, c.t_end, "postcondition") for c in calls]
    assert check_counts(events, calls, CountingOracle) == {
        "wrong_returned": 0,
        "wrong_caught": 0,
        "check_false_alarms": 1,
    }
    assert check_counts(events, calls)["check_false_alarms"] == 0  # no oracle: none counted


def test_the_report_oracle_tells_a_stale_page_a_right_one_and_a_wrong_result_apart() -> None:
    """Real calls on a report task: a rejected stale press release is no false alarm (it
    fails the parse step's year check), a rejected right report is one, and a rejected "200
    but wrong" extract is a caught wrong result."""
    env = ReportEnv(p_stale_trap=1.0)
    task = env.generate(1, seed=0, complexity="simple")[0]
    b = ReportWorld.of(task).branches[0]
    rule = WRONG_REVENUE.model_copy(update={"rate": 1.0})
    tools = env.make_tools(task, rules=[rule], seed_keys=(0, task.env, task.task_id))

    async def run() -> None:
        with clock.use_clock(clock.SimClock()):
            await tools.toolbox.call("parse_pdf", {"url": b.press_url})
            doc = await tools.toolbox.call("parse_pdf", {"url": b.report_url})
            await tools.toolbox.call("extract_data", {"doc_id": doc["doc_id"]})

    asyncio.run(run())
    calls = tools.calls
    assert [c.ok for c in calls] == [True, True, True] and calls[2].injected
    events = [step(c.tool, c.t_start, c.t_end, "postcondition") for c in calls]
    counts = check_counts(events, calls, lambda: env.oracle(task))
    assert counts == {"wrong_returned": 1, "wrong_caught": 1, "check_false_alarms": 1}
    counts = check_counts(events[:1] + events[2:], calls, lambda: env.oracle(task))
    assert counts["check_false_alarms"] == 0  # only the stale page and the wrong extract


def test_an_empty_search_for_a_report_that_does_not_exist_is_no_false_alarm() -> None:
    """The search returned, truthfully, nothing: informative, yet not what the step needs
    (its pool asks for a result), so refusing it is no false alarm."""
    env = ReportEnv(p_stale_trap=0.0)
    tasks_ = env.generate(10, seed=0, complexity="simple", unreachable_rate=1.0)
    task = next(t for t in tasks_ if t.unreachable)
    b = ReportWorld.of(task).branches[0]
    tools = env.make_tools(task, rules=[], seed_keys=(0, task.env, task.task_id))
    query = env.oracle(task).remaining([])[0].args["query"]

    async def run() -> None:
        with clock.use_clock(clock.SimClock()):
            await tools.toolbox.call("search_web", {"query": query})

    asyncio.run(run())
    (searched,) = tools.calls
    assert searched.ok and searched.result["count"] == 0, (b.company, searched.result)
    events = [step("search_web", searched.t_start, searched.t_end, "postcondition")]
    assert check_counts(events, tools.calls, lambda: env.oracle(task))["check_false_alarms"] == 0


def _run(planner: str, n: int = 4) -> list[tuple[EpisodeRecord, dict[str, Any]]]:
    skill = SKILLS["perfect"]  # every check a pool offers, written (check_coverage 1)
    return [
        episode(planner, task, rules=[WRONG_REVENUE], skill=skill)
        for complexity in ("simple", "medium")
        for task in tasks(complexity, n=n)
    ]


def test_a_run_with_wrong_results_counts_them_and_what_caught_them() -> None:
    for planner in ("plan_execute_replan", "react"):
        runs = _run(planner)
        totals = {k: sum(getattr(r, k) for r, _ in runs) for k in CHECK_KEYS}
        assert totals["wrong_returned"] > 0, planner
        for record, trace in runs:
            marked = sum(c["ok"] and c["injected"] for c in trace["tool_calls"])
            assert record.wrong_returned == marked
            assert record.wrong_caught <= record.wrong_returned
            assert record.wrong_caught + record.check_false_alarms <= record.postcondition_catches
            keys = list(record.model_dump())
            assert keys.index("checked_calls") + 1 == keys.index("wrong_returned")
        if planner == "react":  # no plan, no post-condition: nothing is caught
            assert totals["wrong_caught"] == 0
        else:  # the revenue check of the extract's pool catches a nulled revenue
            assert totals["wrong_caught"] > 0
            assert totals["check_false_alarms"] == 0  # a pool's checks hold on right results


def test_a_fault_free_run_has_no_wrong_result() -> None:
    record, _ = episode("plan_execute_replan", tasks("medium", n=1)[0], skill="strong")
    assert (record.wrong_returned, record.wrong_caught) == (0, 0)


def test_the_seed_tables_report_recall_and_precision_next_to_the_article(tmp_path: Path) -> None:
    rows = [
        {**record.model_dump(), "planner": planner}
        for planner in ("plan_execute_replan", "react")
        for record, _ in _run(planner, n=3)
    ]
    df = pd.DataFrame(rows)
    table = table_checks(df, seed=0)
    assert table is not None
    by = table.set_index("planner")
    replan = by.loc["plan_execute_replan"]
    assert replan["caught"] <= replan["wrong returned"] and replan["wrong returned"] > 0
    assert "article 15-20%" in replan["recall"]
    assert by.loc["react", "recall"].startswith("0.0% [0.0, ")  # an interval, not a point
    text = render(df, {"seed": 0}, tmp_path)
    assert "## Post-conditions: recall and precision" in text
    assert (tmp_path / "seed_table_checks.csv").exists()
    # records written before the ground truth: said so, no table
    old = df.drop(columns=list(CHECK_KEYS))
    assert table_checks(old) is None
    assert "not in these records" in render(old, {"seed": 0}, tmp_path)
