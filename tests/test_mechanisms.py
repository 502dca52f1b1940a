"""Mechanism tests: behaviour that must emerge from what the planners do."""

from __future__ import annotations

import statistics

import pytest
from planarena.envs.faults import FaultRule
from planarena.planners.llm.profiles import SKILLS

from tests.conftest import ALL_PLANNERS, episode, tasks

PLANNERS = ["react", "plan_execute", "plan_execute_replan"]


@pytest.mark.parametrize("planner", ALL_PLANNERS)
@pytest.mark.parametrize("complexity", ["simple", "medium", "complex"])
def test_perfect_skill_without_faults_always_completes(planner: str, complexity: str) -> None:
    for task in tasks(complexity, n=6):
        record, _ = episode(planner, task)
        assert record.success, (task.task_id, record.failure_mode, record.detail)
        assert record.failure_mode == "none"
        assert record.progress == 1.0


INVALID_KEY = FaultRule(kind="invalid_api_key", tools=["search_web"], rate=1.0, scope="episode")


def test_invalid_key_with_fallback_replan_recovers_static_fails() -> None:
    for task in tasks("medium", n=4):
        static, static_trace = episode("plan_execute", task, rules=[INVALID_KEY])
        assert not static.success
        assert static.failure_mode == "gave_up_after_tool_failure"
        # the plan's pre-condition on the world fact api_key_valid.search_web blocked the
        # step before any call: the dead key is never called
        assert "api_key_valid.search_web" in static.detail
        assert not any(c["tool"] == "search_web" for c in static_trace["tool_calls"])
        replan, trace = episode("plan_execute_replan", task, rules=[INVALID_KEY])
        assert replan.success, replan.detail
        assert replan.fallbacks >= 1
        used = {c["tool"] for c in trace["tool_calls"] if c["ok"]}
        assert "search_web_backup" in used and "search_web" not in used


def test_transient_503_is_retried_and_backoff_shows_in_latency() -> None:
    burst = FaultRule(
        kind="http_503", tools=["search_web"], rate=1.0, scope="call", max_consecutive=2, cost_s=0.2
    )
    for task in tasks("simple", n=4):
        clean, _ = episode("plan_execute_replan", task)
        faulty, trace = episode("plan_execute_replan", task, rules=[burst])
        assert faulty.success
        assert faulty.retries == 2 and faulty.fallbacks == 0 and faulty.replans == 0
        waits = [e["wait_s"] for e in trace["events"] if e["event"] == "retry"]
        assert waits == [0.5, 1.0]
        # two failed calls (0.2 s each) and the 0.5 s + 1 s backoff lie on the critical path
        assert faulty.latency_s == pytest.approx(clean.latency_s + 0.4 + 1.5, abs=1e-6)
        static, _ = episode("plan_execute", task, rules=[burst])
        assert not static.success and static.retries == 0


def test_empty_result_makes_the_replanner_rewrite_the_query() -> None:
    empty = FaultRule(
        kind="empty_result",
        tools=["search_web", "search_web_backup"],
        rate=1.0,
        scope="args",
        args_key=["query"],
        match={"query": "annual report 2"},
    )
    for task in tasks("simple", n=3):
        record, trace = episode("plan_execute_replan", task, rules=[empty])
        assert record.success, record.detail
        assert record.replans >= 1
        queries = [
            c["args"]["query"] for c in trace["tool_calls"] if c["tool"].startswith("search")
        ]
        assert len(set(queries)) >= 2, queries  # the args were rewritten, not just retried
        static, _ = episode("plan_execute", task, rules=[empty])
        assert static.failure_mode == "gave_up_after_tool_failure"


def test_password_protected_pdf_needs_a_replan_to_another_source() -> None:
    locked = FaultRule(
        kind="password_protected", tools=["parse_pdf"], rate=1.0, scope="args", args_key=["url"]
    )
    for task in tasks("medium", n=3):
        record, trace = episode("plan_execute_replan", task, rules=[locked])
        assert record.success and record.replans >= 1
        assert any(c["tool"] == "fetch_filing" for c in trace["tool_calls"])
        react, _ = episode("react", task, rules=[locked])
        assert react.success  # a perfect model reads the error and switches source


def test_trap_visits_grow_with_p_trap() -> None:
    """The trap's pull is one skill field: with p_trap 0 no planner ever opens the stale press
    release; raising it makes every planner open it more often. The belief draw is shared
    across levels (a point fooled at 0.25 is fooled at 0.6), so the count cannot fall; 40
    trap-heavy tasks make a tie at two distant levels implausible."""
    pool = tasks("medium", n=40, p_stale_trap=1.0)

    def touched(p_trap: float) -> int:
        skill = SKILLS["perfect"].model_copy(update={"p_trap": p_trap})
        hits = 0
        for planner in ("react", "plan_execute_replan"):
            for task in pool:
                _, trace = episode(planner, task, skill=skill)
                hits += any(
                    c["tool"] == "parse_pdf" and "news.example" in c["args"].get("url", "")
                    for c in trace["tool_calls"]
                )
        return hits

    low, mid, high = touched(0.0), touched(0.25), touched(0.6)
    assert low == 0 and low < mid < high, (low, mid, high)


def test_react_prompt_grows_every_turn_plan_execution_is_flat() -> None:
    """ReAct resends its whole history: within an episode every prompt is longer than the
    one before (an identity of the transcript), so longer tasks cost more per call. A plan
    costs one call and no LLM token for a successful step."""
    per_call = {}
    for complexity in ("simple", "complex"):
        records = []
        for t in tasks(complexity, n=4):
            record, trace = episode("react", t)
            prompts = [e["prompt_tokens"] for e in trace["events"] if e["event"] == "llm"]
            assert all(a < b for a, b in zip(prompts, prompts[1:], strict=False)), prompts
            records.append(record)
            plan, _ = episode("plan_execute", t)
            assert plan.llm_calls == 1  # one plan; no LLM call for any successful step
            assert plan.tokens_executor == 0 and plan.tool_calls >= 4
        per_call[complexity] = statistics.mean(r.tokens_prompt / r.llm_calls for r in records)
    assert per_call["complex"] > per_call["simple"], per_call


def test_unreachable_goal_is_reported_not_faked() -> None:
    pool = tasks("medium", n=30, unreachable_rate=1.0)
    assert all(t.unreachable for t in pool)
    for planner in ("react", "plan_execute_replan", "tot", "dfs"):
        modes = [episode(planner, t)[0].failure_mode for t in pool[:6]]
        assert set(modes) == {"correctly_reported_unreachable"}, (planner, modes)
    same = tasks("medium", n=30)  # the rate changes no other property of a task
    assert [t.world["branches"][0] for t in same] == [t.world["branches"][0] for t in pool]


def test_200_but_wrong_is_caught_by_a_post_condition() -> None:
    wrong = FaultRule(
        kind="wrong_result",
        tools=["extract_data"],
        rate=1.0,
        scope="call",
        max_consecutive=1,
        corrupt_fields=["revenue"],
    )
    for task in tasks("simple", n=3):
        static, trace = episode("plan_execute", task, rules=[wrong])
        assert not static.success and "post-condition failed" in static.detail
        assert static.failure_mode == "gave_up_after_tool_failure"
        assert all(c["ok"] for c in trace["tool_calls"])  # every call "succeeded"
        replan, _ = episode("plan_execute_replan", task, rules=[wrong])
        assert replan.success and replan.replans >= 1
        react, _ = episode("react", task, rules=[wrong])
        assert react.success  # a perfect model notices the null and extracts again
