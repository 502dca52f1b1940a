"""Each rung of the recovery ladder, driven directly through the executor with hand-written
plans against the report world's real tools (no LLM call is needed by any of these plans)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

from planarena.envs import clock
from planarena.envs.faults import FaultRule
from planarena.envs.report.env import ReportEnv
from planarena.planners.base import PlannerResult, PlannerStats
from planarena.planners.executor import STATIC, LadderPolicy, PlanExecutor
from planarena.planners.llm.base import EpisodeLLM

from tests.conftest import MODELS, tasks

TASK = tasks("medium", n=1)[0]
COMPANY = TASK.world["branches"][0]["company"]
YEAR = TASK.world["branches"][0]["year"]


def _step(sid: str, tool: str, args: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": sid, "tool": tool, "args": args, "depends_on": [], **extra}


def _run(
    policy: LadderPolicy, steps: list[dict[str, Any]], rules: list[FaultRule]
) -> tuple[PlannerResult, PlanExecutor, Any]:
    tools = ReportEnv().make_tools(TASK, rules=rules, seed_keys=(0, TASK.task_id))
    llm = EpisodeLLM(object(), MODELS)  # type: ignore[arg-type] # these plans never replan
    executor = PlanExecutor(policy, tools.toolbox, llm, TASK.goal, PlannerStats())
    plan = json.dumps({"goal": TASK.goal, "steps": steps})

    async def go() -> PlannerResult:
        with clock.use_clock(clock.SimClock()):
            return await executor.execute_text(plan)

    return asyncio.run(go()), executor, tools


SEARCH = _step("step_1", "search_web", {"query": f"{COMPANY} annual report {YEAR}"})
ONLY_RETRY = replace(STATIC, retry=True)


def _outage(kind: str = "http_503", **extra: Any) -> FaultRule:
    return FaultRule(kind=kind, tools=["search_web"], rate=1.0, max_consecutive=99, **extra)


def test_retry_rung_honours_the_steps_own_retry_limit() -> None:
    for limit in (0, 1, 3):
        result, executor, _ = _run(ONLY_RETRY, [{**SEARCH, "retry_limit": limit}], [_outage()])
        assert result.stop == "tool_failure"
        assert executor.stats.retries == limit
        waits = [e["wait_s"] for e in executor.trace if e["event"] == "retry"]
        assert waits == [0.5, 1.0, 2.0][:limit]  # the seed's exponential backoff


def test_retry_after_of_a_429_is_waited_out() -> None:
    rule = FaultRule(
        kind="rate_limit_429",
        tools=["search_web"],
        rate=1.0,
        max_consecutive=1,
        retry_after_s=3.0,
    )
    result, executor, tools = _run(ONLY_RETRY, [{**SEARCH, "retry_limit": 3}], [rule])
    assert result.stop == "answered"
    waits = [e["wait_s"] for e in executor.trace if e["event"] == "retry"]
    assert waits == [3.0]  # max(backoff 0.5, retry-after 3.0): one wait, then it succeeds
    ignoring = replace(ONLY_RETRY, honor_retry_after=False)
    result2, executor2, _ = _run(ignoring, [{**SEARCH, "retry_limit": 1}], [rule])
    # waiting 0.5 s inside a 3 s retry-after meets the 429 again: the step fails
    assert result2.stop == "tool_failure" and executor2.stats.retries == 1


def test_fallback_rung_switches_tool_after_retries() -> None:
    dead = FaultRule(kind="invalid_api_key", tools=["search_web"], rate=1.0, scope="episode")
    policy = replace(STATIC, retry=True, fallback=True)
    result, executor, tools = _run(policy, [{**SEARCH, "fallback": "search_web_backup"}], [dead])
    assert result.stop == "answered" and executor.stats.fallbacks == 1
    assert [r.tool for r in tools.log.records] == ["search_web", "search_web_backup"]
    assert executor.stats.retries == 0  # a 401 is not transient: no retry


def test_skip_rung_skips_a_step_nothing_depends_on_but_never_the_last() -> None:
    broken = _step("step_1", "parse_pdf", {"url": "https://nowhere.example/x.pdf"})
    steps = [broken, {**SEARCH, "id": "step_2"}]
    policy = replace(STATIC, skip_independent=True)
    result, executor, _ = _run(policy, steps, [])
    assert result.stop == "answered" and executor.stats.skipped_steps == 1
    last = [{**SEARCH, "id": "step_1"}, {**broken, "id": "step_2"}]
    result, executor, _ = _run(policy, last, [])
    assert result.stop == "tool_failure" and executor.stats.skipped_steps == 0


def test_two_failures_in_one_parallel_batch_are_both_handled() -> None:
    a = _step("step_1", "parse_pdf", {"url": "https://nowhere.example/a.pdf"})
    b = _step("step_2", "parse_pdf", {"url": "https://nowhere.example/b.pdf"})
    c = {**SEARCH, "id": "step_3"}
    policy = replace(STATIC, skip_independent=True, parallel=True)
    result, executor, tools = _run(policy, [a, b, c], [])
    assert result.stop == "answered" and executor.stats.skipped_steps == 2
    starts = {r.args.get("url", r.tool): r.t_start for r in tools.log.records}
    assert len(set(starts.values())) == 1  # one batch: all three started together


def test_a_precondition_on_a_step_result_blocks_the_step() -> None:
    search = {**SEARCH, "post_conditions": []}
    parse = _step(
        "step_2",
        "parse_pdf",
        {"url": "{{step_1.result.url}}"},
        depends_on=["step_1"],
        pre_conditions=["step_1.result.count > 5"],  # the search finds fewer: blocked
    )
    result, executor, tools = _run(STATIC, [search, parse], [])
    assert result.stop == "precondition_failed"
    assert [r.tool for r in tools.log.records] == ["search_web"]  # parse never called
