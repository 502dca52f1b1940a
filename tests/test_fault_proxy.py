"""A hostile server, made by the loopback fault proxy (experiments/run/fault_proxy.py) in front
of the stub server: every fault it injects is the endpoint's failure (retried by the SDK,
``Retry-After`` honoured, or recorded as ``infrastructure_error`` and rerun on resume), never a
harness error; a job of 200+ episodes at concurrency 8 ends with each recorded exactly once,
and a job killed with SIGKILL mid-request resumes without asking for a reply it has cached."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_server import FakeOpenAI
from planarena.experiments.run.fault_drill import drill, records, report
from planarena.experiments.run.fault_proxy import (
    FAULT_KINDS,
    FaultProxy,
    FaultSchedule,
    parse_rates,
)
from test_infrastructure_errors import assert_infrastructure, episode

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def upstream(server: FakeOpenAI) -> str:
    return server.url.removesuffix("/v1")


def proxy_for(upstream: str, rates: dict[str, float], **kw: float) -> FaultProxy:
    return FaultProxy(upstream, FaultSchedule(0, rates, **kw)).start()  # type: ignore[arg-type]


@pytest.fixture
def proxies() -> Iterator[list[FaultProxy]]:
    started: list[FaultProxy] = []
    yield started
    for p in started:
        p.stop()


def test_the_schedule_is_seeded_by_body_and_attempt_not_arrival_order() -> None:
    schedule = FaultSchedule(3, parse_rates("all=0.05"))
    draws = [schedule.fault(f"body{i}", a) for i in range(400) for a in range(3)]
    again = [schedule.fault(f"body{i}", a) for i in reversed(range(400)) for a in range(3)]
    assert draws == [d for i in range(400) for d in again[3 * (399 - i) : 3 * (400 - i)]]
    assert set(draws) - {None} == set(FAULT_KINDS)  # every kind is drawn at these rates
    assert 0.4 < sum(d is not None for d in draws) / len(draws) < 0.7  # 11 x 0.05
    with pytest.raises(ValueError, match="unknown fault kind"):
        FaultSchedule(0, {"http_418": 0.1})
    with pytest.raises(ValueError, match="sum to"):
        FaultSchedule(0, parse_rates("all=0.1"))


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        ("cut_json", "MalformedResponse"),
        ("not_json", "MalformedResponse"),
        ("slow", "APITimeoutError"),
        ("http_503", "InternalServerError"),
        ("reset_before_headers", "APIConnectionError"),
        ("reset_after_headers", "APIConnectionError"),
    ],
)
def test_each_fault_that_outlasts_the_retries_is_the_endpoints_failure(
    upstream: str, proxies: list[FaultProxy], kind: str, error: str
) -> None:
    """Every attempt meets the fault (rate 1): the episode is an infrastructure error of the
    right kind, for a ReAct transcript and a plan alike; none is a harness error."""
    proxies.append(proxy := proxy_for(upstream, {kind: 1.0}, slow_s=1.5))
    for planner in ("react", "plan_execute"):
        record, trace = episode(proxy.url, planner, timeout_s=1.0)
        assert_infrastructure(record, trace, error)
    assert proxy.stats()["injected"] == {kind: 2}


def test_retry_after_is_waited_for_in_both_forms_and_the_retry_succeeds(
    upstream: str, proxies: list[FaultProxy]
) -> None:
    """Every request's first two attempts are refused with a 429 (seconds or date form)."""
    rates = {"rate_limit_seconds": 0.5, "rate_limit_date": 0.5}
    proxies.append(proxy := proxy_for(upstream, rates, clears_after=2))
    record, _ = episode(proxy.url, "react", max_retries=2, timeout_s=60)
    assert record.failure_mode != "infrastructure_error", record.detail
    stats = proxy.stats()
    assert stats["injected"].keys() == rates.keys()
    assert len(stats["retry_waits"]) == 2 * record.llm_calls
    assert stats["retry_after_honoured"] == len(stats["retry_waits"])


def test_a_reply_the_client_stopped_waiting_for_is_not_counted_as_served(
    server: FakeOpenAI, upstream: str, proxies: list[FaultProxy]
) -> None:
    """No fault injected, but the server takes longer than the client's timeout: the proxy
    writes the reply to a closed connection and must not count its tokens as served (a
    real server's slow reply did, in the drill against llama.cpp: 2 of 379)."""
    server.delay_s = 1.5
    proxies.append(proxy := proxy_for(upstream, {}))
    record, trace = episode(proxy.url, "react", timeout_s=0.5)
    assert_infrastructure(record, trace, "APITimeoutError")
    time.sleep(1.5)  # the upstream answers after the client left
    stats = proxy.stats()
    assert stats["abandoned"] == 1 and stats["forwarded"] == 0
    assert stats["served_prompt_tokens"] == stats["served_completion_tokens"] == 0


def test_a_reply_without_usage_is_counted_and_says_so(
    upstream: str, proxies: list[FaultProxy]
) -> None:
    proxies.append(proxy := proxy_for(upstream, {"no_usage": 1.0}))
    record, _ = episode(proxy.url, "react")
    stats = proxy.stats()
    assert stats["hidden_usage_replies"] == stats["forwarded"] == record.llm_calls > 0
    assert stats["served_prompt_tokens"] == 0 < record.tokens_prompt  # counted by us
    assert "o200k" in record.tokenizer


# --- whole jobs through the proxy (experiments/run/fault_drill.py) ---------------------------

JOB = [
    "llm=openai", "llm.model=fake", "llm.timeout_s=2.5", "env=[report,file]",
    "planner=[react,plan_execute_replan]", "faults=none", "concurrency=8", "figures=false",
]  # fmt: skip


@pytest.fixture(autouse=True)
def _importable_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))


@pytest.mark.slow  # 204 episodes through every fault, resumed until done: about a minute
def test_a_job_through_every_fault_ends_with_each_episode_once_and_served_tokens(
    upstream: str, proxies: list[FaultProxy], tmp_path: Path
) -> None:
    proxies.append(proxy := proxy_for(upstream, parse_rates("all=0.025"), slow_s=3.0))
    result = drill(proxy, [*JOB, "n_tasks=17"], tmp_path, pass_timeout_s=300)
    assert result.problems() == [], report(result)
    assert result.episodes == 2 * 2 * 3 * 17
    errors = [p.infrastructure_errors for p in result.passes]
    assert errors[0] > 0 and errors[-1] == 0  # infrastructure errors happened, all rerun
    assert set(result.proxy["injected"]) == set(FAULT_KINDS)
    assert result.proxy["retry_waits"]
    assert result.hidden_usage > 0 and result.cache_entries == result.delivered
    print(report(result))


@pytest.mark.slow  # a job killed mid-request, then resumed: about 20 s
def test_a_job_killed_mid_request_resumes_without_asking_a_cached_reply_again(
    server: FakeOpenAI, upstream: str, proxies: list[FaultProxy], tmp_path: Path
) -> None:
    server.delay_s = 0.2  # every reply takes a while: requests are in flight at the kill
    proxies.append(proxy := proxy_for(upstream, {}))
    result = drill(proxy, [*JOB, "n_tasks=6"], tmp_path, kill_after=40, pass_timeout_s=300)
    assert result.passes[0].killed and result.killed_after and result.killed_after >= 40
    assert len(records(tmp_path / "run")) == 72 and result.problems() == [], report(result)
    # every reply the resume was sent is a new cache entry: none it had cached was asked again
    assert result.delivered == result.cache_entries
    assert any(r["cache_hits"] for r in records(tmp_path / "run"))  # the kill's replies replayed


# --- the job's side: fail-fast and client-side rate limits -----------------------------------


def test_an_endpoint_that_answered_before_is_flaky_not_gone() -> None:
    from types import SimpleNamespace

    from planarena.experiments.run.llm_factory import InfrastructureError
    from planarena.experiments.run.loop import FailFast

    def rec(mode: str | None, detail: str = "") -> SimpleNamespace:
        return SimpleNamespace(failure_mode=mode, detail=detail, planner="react", task_id="t")

    timeout = rec("infrastructure_error", "APITimeoutError: no reply")
    with pytest.raises(InfrastructureError):  # never answered: gone
        FailFast(5).check(timeout)
    ff = FailFast(3)
    ff.check(rec(None))
    ff.check(timeout), ff.check(timeout), ff.check(rec("false_success"))  # reset by a clean one
    ff.check(timeout), ff.check(timeout)
    with pytest.raises(InfrastructureError):
        ff.check(timeout)  # three in a row


def test_rate_limits_hold_requests_and_tokens_per_minute() -> None:
    import asyncio

    from planarena.planners.llm.rate_limit import RateLimiter

    now = [0.0]

    async def go(limiter: RateLimiter, tokens: int, n: int) -> list[float]:
        starts = []
        for _ in range(n):
            await limiter.acquire(tokens)
            starts.append(now[0])
        return starts

    async def fake_sleep(s: float) -> None:
        now[0] += s

    real_sleep = asyncio.sleep
    asyncio.sleep = fake_sleep  # type: ignore[assignment]
    try:
        rpm = RateLimiter(requests_per_minute=60, clock=lambda: now[0])  # 1/s, burst 10
        starts = asyncio.run(go(rpm, 0, 30))
        assert starts[9] == 0.0 and starts[29] == pytest.approx(20.0)
        now[0] = 0.0
        tpm = RateLimiter(tokens_per_minute=6000, clock=lambda: now[0])  # 100/s, burst 1000
        starts = asyncio.run(go(tpm, 500, 6))
        assert starts[1] == 0.0 and starts[5] == pytest.approx(20.0)
        tpm.settle(500, 100)  # unused allowance comes back
        assert tpm.tokens is not None and tpm.tokens.level == pytest.approx(400.0)
    finally:
        asyncio.sleep = real_sleep  # type: ignore[assignment]
    with pytest.raises(ValueError, match="requests_per_minute"):
        RateLimiter(requests_per_minute=0)


def test_an_endpoint_that_answered_a_request_is_flaky_even_before_a_clean_episode() -> None:
    """A slow real server: the first episodes' long replies time out after others were
    answered; that is a flaky endpoint, not a gone one."""
    from types import SimpleNamespace

    from planarena.experiments.run.loop import FailFast

    timeout = SimpleNamespace(
        failure_mode="infrastructure_error", detail="APITimeoutError: no reply",
        planner="react", task_id="t", llm_requests=3,
    )  # fmt: skip
    FailFast(5).check(timeout)  # three replies came before the timeout: not stopped
