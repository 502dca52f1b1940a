"""OpenAIBackend against a fake OpenAI-compatible server on loopback (tests/fake_server.py).

The server enforces role alternation, reports fixed ``usage`` numbers unlike any tiktoken
count, applies ``max_tokens`` (``finish_reason: "length"``) and stop sequences, answers in
several real-model styles and counts the requests it received.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from fake_server import (
    COMPLETION_TOKENS,
    OVERFLOW_MARKER,
    PROMPT_TOKENS,
    REACT_STYLES,
    SLOW_MARKER,
    SLOW_S,
    FakeOpenAI,
    serve,
)
from planarena.envs import clock
from planarena.planners.llm.base import EndpointError, EpisodeLLM, Message, Request
from planarena.planners.llm.openai_backend import OpenAIBackend, merge_consecutive_roles
from planarena.planners.llm.profiles import ModelProfile
from planarena.planners.llm.tokens import count_messages, count_text

ROOT = Path(__file__).resolve().parents[1]
MODELS = {"default": ModelProfile(name="fake")}
PRICES = {"fake": {"usd_per_mtok_input": 1.0, "usd_per_mtok_output": 2.0}}
# what differs between a run and its cached rerun: how it executed, not what it recorded
EXECUTION_KEYS = ("wall_s", "llm_requests", "cache_hits", "llm_queue_s")


def generate(backend: OpenAIBackend, *batches: Sequence[Message]) -> list[str]:
    """Each batch of messages through the backend, in order, in one event loop."""

    async def go() -> list[str]:
        out = []
        for messages in batches:
            c = await backend.generate(
                messages, role="executor", model=MODELS["default"], request=Request("t")
            )
            out.append(c.text)
        return out

    return asyncio.run(go())


def test_returns_the_servers_text_and_episode_llm_meters_the_apis_usage(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", "sk-unit")
    backend = OpenAIBackend("fake", base_url=server.url, api_key_env="FAKE_KEY", prices=PRICES)
    messages = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": f"say hi {SLOW_MARKER}"},
    ]
    trace: list[dict[str, Any]] = []
    llm = EpisodeLLM(backend, MODELS, trace=trace)

    async def go() -> str:
        with clock.use_clock(clock.SimClock()):
            return await llm.complete(messages, role="executor")

    started = time.perf_counter()
    text = asyncio.run(go())
    whole_call_s = time.perf_counter() - started
    assert text == f"echo: say hi {SLOW_MARKER}"
    assert server.requests == 1 and server.bodies[0]["model"] == "fake"
    assert server.bodies[0]["messages"] == messages
    # tokens are the API's usage numbers, not tiktoken's counts of the same text
    assert count_messages(messages) != PROMPT_TOKENS and count_text(text) != COMPLETION_TOKENS
    u = llm.usage
    assert (u.calls, u.prompt_tokens, u.completion_tokens) == (1, PROMPT_TOKENS, COMPLETION_TOKENS)
    assert (u.requests, u.cache_hits, u.tokenizer) == (1, 0, "server:fake")
    assert u.o200k_tokens == count_messages(messages) + count_text(text)
    assert u.by_role["executor"] == PROMPT_TOKENS + COMPLETION_TOKENS
    assert u.total_cost_usd == pytest.approx((PROMPT_TOKENS * 1.0 + COMPLETION_TOKENS * 2.0) / 1e6)
    (event,) = trace
    assert (event["prompt_tokens"], event["completion_tokens"]) == (
        PROMPT_TOKENS,
        COMPLETION_TOKENS,
    )
    # the generation is visible: how it ended, what was sent and what came back
    assert event["finish_reason"] == "stop" and event["model"] == "fake"
    assert event["prompt"] == messages and event["completion"] == text
    assert "replayed" not in event
    # simulated LLM time is the measured wall time of the call (the server sleeps SLOW_S),
    # not the profile's modelled latency (bounded by the test's own timing of the whole call,
    # not by a fixed allowance, so a loaded machine cannot fail it)
    spent = event["t1"] - event["t0"]
    assert SLOW_S <= spent <= whole_call_s
    assert spent != pytest.approx(MODELS["default"].latency(PROMPT_TOKENS, COMPLETION_TOKENS))


def test_disk_cache_makes_repeats_free_and_stores_no_key(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    secret = "sk-cache-" + "7" * 24
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    cache = tmp_path / "cache"
    backend = OpenAIBackend("fake", base_url=server.url, cache_dir=str(cache))
    a = [{"role": "user", "content": "first"}]
    b = [{"role": "user", "content": "second"}]
    assert generate(backend, a, a) == ["echo: first", "echo: first"]  # same request identity
    assert server.requests == 1
    # a fresh backend (a new process, say) reads the same cache, usage and time included
    fresh = OpenAIBackend("fake", base_url=server.url, cache_dir=str(cache))

    async def cached() -> tuple[Any, ...]:
        c = await fresh.generate(a, role="executor", model=MODELS["default"], request=Request("t"))
        return c.prompt_tokens, c.completion_tokens, c.cached, c.finish_reason

    assert asyncio.run(cached()) == (PROMPT_TOKENS, COMPLETION_TOKENS, True, "stop")
    assert server.requests == 1
    assert generate(fresh, b) == ["echo: second"]
    assert server.requests == 2
    files = [p for p in cache.rglob("*") if p.is_file()]
    assert len(files) == 2 and all(p.suffix == ".json" for p in files)  # no temp file left
    for path in files:
        assert secret.encode() not in path.read_bytes(), path
    # the cache key depends on the model: another model is a miss
    other = OpenAIBackend("fake-2", base_url=server.url, cache_dir=str(cache))
    generate(other, a)
    assert server.requests == 3


def test_cache_identity_is_the_call_the_episode_and_the_sampling(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    """The k-th identical request of an episode is the k-th sample; another episode (another
    trial) or other sampling parameters are other requests; the planner is no part of it."""
    cache = str(tmp_path / "cache")
    messages = [{"role": "user", "content": "same prompt"}]

    async def ask(backend: OpenAIBackend, occurrence: int, role: str = "planner") -> bool:
        c = await backend.generate(
            messages, role=role, model=MODELS["default"], request=Request("d", occurrence)
        )
        return c.cached

    base = OpenAIBackend("fake", base_url=server.url, cache_dir=cache, temperature=0.7)
    trial0 = base.for_episode((0, "report", "t1", 0))
    trial1 = base.for_episode((0, "report", "t1", 1))
    hotter = OpenAIBackend("fake", base_url=server.url, cache_dir=cache, temperature=0.9)

    async def go() -> list[Any]:
        return [
            [await ask(trial0, k) for k in (0, 1, 2)],  # three samples: three requests
            [await ask(trial0, k, role="evaluator") for k in (0, 1, 2)],  # any role: hits
            await ask(trial1, 0),  # another trial: another request
            await ask(hotter.for_episode((0, "report", "t1", 0)), 0),  # other sampling
        ]

    assert asyncio.run(go()) == [[False] * 3, [True] * 3, False, False]
    assert server.requests == 5


def test_concurrent_identical_requests_send_one_and_replay_it(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    backend = OpenAIBackend("fake", base_url=server.url, cache_dir=str(tmp_path))
    messages = [{"role": "user", "content": f"together {SLOW_MARKER}"}]

    async def go() -> list[bool]:
        outs = await asyncio.gather(
            *(
                backend.generate(
                    messages, role="planner", model=MODELS["default"], request=Request("x")
                )
                for _ in range(3)
            )
        )
        return sorted(c.cached for c in outs)

    assert asyncio.run(go()) == [False, True, True]
    assert server.requests == 1


def test_time_waiting_for_a_concurrency_slot_is_queue_time_not_llm_time(
    server: FakeOpenAI,
) -> None:
    backend = OpenAIBackend("fake", base_url=server.url, max_concurrency=1)
    llm = EpisodeLLM(backend, MODELS)

    async def go() -> None:
        with clock.use_clock(clock.SimClock()):
            await asyncio.gather(
                *(
                    llm.complete(
                        [{"role": "user", "content": f"{i} {SLOW_MARKER}"}], role="planner"
                    )
                    for i in range(3)
                )
            )

    asyncio.run(go())
    # one request at a time: the 2nd waited for one slow reply, the 3rd for two
    assert llm.usage.queue_s >= 3 * SLOW_S * 0.9
    assert llm.usage.requests == 3


def test_no_request_carries_two_consecutive_messages_of_one_role(server: FakeOpenAI) -> None:
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "Task: x"},
        {"role": "user", "content": "Earlier attempts that failed:"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "Observation: o"},
        {"role": "user", "content": "The current path:"},
    ]
    assert merge_consecutive_roles(messages) == [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "Task: x\n\nEarlier attempts that failed:"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "Observation: o\n\nThe current path:"},
    ]
    backend = OpenAIBackend("fake", base_url=server.url)
    generate(backend, messages)
    assert server.rejected == 0 and server.requests == 1
    sent = server.bodies[0]["messages"]
    assert all(a["role"] != b["role"] for a, b in zip(sent, sent[1:], strict=False))


def _episode(
    server: FakeOpenAI,
    planner: str,
    *,
    cache: Path | None = None,
    trial: int = 0,
    planner_kwargs: dict[str, Any] | None = None,
    **backend_kwargs: Any,
) -> tuple[Any, dict[str, Any]]:
    from conftest import make_planner, tasks
    from planarena.envs.report.env import ReportEnv
    from planarena.experiments.run.episode import run_one

    backend = OpenAIBackend(
        "fake",
        base_url=server.url,
        cache_dir=str(cache) if cache else None,
        prices=PRICES,
        **backend_kwargs,
    )
    task = tasks("simple", 1)[0]
    seed_keys = (0, task.env, task.task_id, trial)
    return asyncio.run(
        run_one(
            planner_name=planner,
            planner=make_planner(planner, **(planner_kwargs or {})),
            env=ReportEnv(),
            task=task,
            backend=backend.for_episode(seed_keys),
            llm_label="openai:fake",
            models=MODELS,
            rules=[],
            seed=0,
            trial=trial,
        )
    )


def test_every_planner_against_a_strict_server_sends_only_alternating_roles(
    server: FakeOpenAI,
) -> None:
    for planner in ("react", "dfs", "plan_execute_replan", "tot", "bfs", "mcts"):
        record, _ = _episode(server, planner)
        assert record.failure_mode != "harness_error", (planner, record.detail)
    assert server.rejected == 0 and server.requests > 0


def test_tot_proposals_at_temperature_are_distinct_requests_and_a_rerun_replays_them(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    first, trace1 = _episode(server, "tot", cache=tmp_path, temperature=0.7)
    plan_requests = [b for b in server.bodies if "Plan JSON" in b["messages"][0]["content"]]
    proposals = [b for b in plan_requests if "Improve" not in b["messages"][-1]["content"]][:3]
    assert len(proposals) == 3  # beam 3: three requests with the very same messages
    assert len({json.dumps(b["messages"]) for b in proposals}) == 1
    texts = [e["completion"] for e in trace1["events"] if e["event"] == "llm"][:3]
    assert len(set(texts)) == 3  # ... and three different samples
    assert first.llm_requests == server.requests and first.cache_hits == 0
    assert first.llm_calls == first.llm_requests + first.cache_hits
    sent = server.requests
    again, trace2 = _episode(server, "tot", cache=tmp_path, temperature=0.7)
    assert server.requests == sent  # the rerun sends nothing
    assert (again.llm_requests, again.cache_hits) == (0, first.llm_calls)
    keep = {k: v for k, v in first.model_dump().items() if k not in EXECUTION_KEYS}
    assert {k: v for k, v in again.model_dump().items() if k not in EXECUTION_KEYS} == keep
    llm_events = [e for e in trace2["events"] if e["event"] == "llm"]
    assert llm_events and all(e["replayed"] for e in llm_events)
    # the stored tokens and wall time are replayed, so latency_s is the first run's
    assert again.latency_s == first.latency_s and again.tokens_total == first.tokens_total


@pytest.mark.parametrize("style", sorted(REACT_STYLES))
def test_react_answers_in_every_real_model_style(style: str) -> None:
    for srv in serve(style):
        record, trace = _episode(srv, "react")
        assert record.stop_reason == "answered", (style, record.detail)
        assert record.tool_calls == 1
        assert (record.plan_repairs > 0) == (style not in ("plain", "rambling", "native")), style
        (search, _finish) = [b for b in srv.bodies]
        # a turn ends before the observation it would invent, or a second turn
        assert search["stop"] == ["\nObservation:", "\nObservation :", "\nThought:"]
        assert search["max_tokens"] == 400  # the per-format allowance of a ReAct turn


def test_native_tool_calling_offers_the_tools_and_reads_the_call_as_a_turn() -> None:
    from conftest import make_planner, tasks
    from planarena.envs.report.env import SPECS, ReportEnv
    from planarena.experiments.run.episode import simulate
    from planarena.planners.llm.profiles import SKILLS

    for srv in serve("native"):
        record, trace = _episode(srv, "react", planner_kwargs={"tool_calling": "native"})
        assert record.stop_reason == "answered" and record.tool_calls == 1
        assert record.plan_repairs == 0  # a tool call needs no repair
        offered = [t["function"]["name"] for t in srv.bodies[0]["tools"]]
        assert offered == [*(t.name for t in SPECS), "finish"]
        events = [e for e in trace["events"] if e["event"] == "llm"]
        assert [e["finish_reason"] for e in events] == ["tool_calls", "tool_calls"]
        assert events[0]["completion"].startswith("Thought: Searching first.\nAction: search_web")
    # DFS: its k candidates come back as parallel tool calls (the judge is offered no tools)
    for srv in serve("native"):
        record, trace = _episode(srv, "dfs", planner_kwargs={"tool_calling": "native"})
        assert record.stop_reason == "answered" and record.plan_repairs == 0, record.detail
        proposals = [b for b in srv.bodies if "tools" in b]
        assert proposals and len(proposals) < len(srv.bodies)
        first = next(e for e in trace["events"] if e["event"] == "llm")
        assert first["completion"].startswith("Candidate 1:\nThought: Searching first.")
        assert first["tool_calls"] == 2
    # the simulator has no tool interface: the same planner reads its text turns
    task = tasks("simple", 1)[0]
    planner = make_planner("react", tool_calling="native")
    native, _ = simulate("react", planner, ReportEnv(), task, skill=SKILLS["perfect"])
    text, _ = simulate("react", make_planner("react"), ReportEnv(), task, skill=SKILLS["perfect"])
    assert native.model_dump(exclude={"wall_s"}) == text.model_dump(exclude={"wall_s"})


@pytest.mark.parametrize("supported", [True, False])
def test_json_mode_for_plans_falls_back_to_text_where_refused(supported: bool) -> None:
    for srv in serve():
        srv.json_mode = supported
        record, _ = _episode(srv, "plan_execute", json_mode=True)
        assert record.failure_mode != "malformed_output" and record.tool_calls > 0
        assert srv.bodies[0]["response_format"] == {"type": "json_object"}
        if not supported:  # refused (HTTP 400): the same request again as plain text
            assert "response_format" not in srv.bodies[1]
        plans = len(srv.bodies)
        _episode(srv, "react", json_mode=True)
        assert all("response_format" not in b for b in srv.bodies[plans:])  # plans only


def test_a_plan_cut_at_max_tokens_is_malformed_output_never_a_shorter_plan(
    server: FakeOpenAI,
) -> None:
    record, trace = _episode(server, "plan_execute", max_tokens=12)
    assert record.failure_mode == "malformed_output", record.detail
    (event,) = [e for e in trace["events"] if e["event"] == "llm"]
    assert event["finish_reason"] == "length" and event["completion"]
    assert record.tool_calls == 0


def test_unknown_model_costs_null_with_one_warning_and_is_named(server: FakeOpenAI) -> None:
    backend = OpenAIBackend("some-local-model", base_url=server.url)
    trace: list[dict[str, Any]] = []

    async def go(llm: EpisodeLLM) -> None:
        with clock.use_clock(clock.SimClock()):
            for i in range(3):
                await llm.complete([{"role": "user", "content": f"q{i}"}], role="planner")

    llm = EpisodeLLM(backend, {"default": ModelProfile(name="default")}, trace=trace)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(go(llm))
    assert len([w for w in caught if "some-local-model" in str(w.message)]) == 1
    assert llm.usage.total_cost_usd is None and llm.usage.unpriced_calls == 3
    assert {e["model"] for e in trace} == {"some-local-model"}
    assert server.bodies[0]["model"] == "some-local-model"


def test_retries_and_timeout_bound_the_whole_call(server: FakeOpenAI) -> None:
    """The whole call, SDK retries included, ends at ``timeout_s``: the server sees the first
    attempt only, where per-attempt timeouts would let the SDK send all three (counted, not
    timed, so a loaded machine cannot fail it)."""
    server.delay_s = 3.0
    backend = OpenAIBackend("fake", base_url=server.url, timeout_s=0.3, max_retries=2)
    with pytest.raises(EndpointError) as err:
        generate(backend, [{"role": "user", "content": "hello"}])
    assert err.value.kind == "APITimeoutError"  # the endpoint's failure, not the agent's
    assert "timeout_s=0.3 s" in str(err.value)
    time.sleep(1.0)  # any retry the SDK would have sent (its backoff is under a second)
    assert server.requests == 1


def test_a_prompt_beyond_the_models_context_is_the_endpoints_error(server: FakeOpenAI) -> None:
    backend = OpenAIBackend("fake", base_url=server.url, max_retries=0)
    with pytest.raises(EndpointError, match="maximum context length") as err:
        generate(backend, [{"role": "user", "content": f"long history {OVERFLOW_MARKER}"}])
    assert err.value.kind == "ContextLengthExceeded" and "HTTP 400" in str(err.value)


def test_sdk_retries_are_configurable_and_visible_in_the_trace(server: FakeOpenAI) -> None:
    server.fail_next = 1
    strict = OpenAIBackend("fake", base_url=server.url, max_retries=0)
    with pytest.raises(EndpointError) as err:
        generate(strict, [{"role": "user", "content": "hello"}])
    assert err.value.kind == "InternalServerError" and "HTTP 503" in str(err.value)
    server.fail_next = 1
    trace: list[dict[str, Any]] = []
    llm = EpisodeLLM(OpenAIBackend("fake", base_url=server.url, max_retries=1), MODELS, trace=trace)

    async def go() -> str:
        with clock.use_clock(clock.SimClock()):
            return await llm.complete([{"role": "user", "content": "again"}], role="planner")

    assert asyncio.run(go()) == "echo: again"
    assert trace[0]["retries"] == 1 and llm.usage.requests == 1


def test_key_comes_from_the_named_env_var_and_is_the_bearer_token(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong-variable")
    monkeypatch.setenv("PLANARENA_TEST_KEY", "sk-right-variable")
    backend = OpenAIBackend("fake", base_url=server.url, api_key_env="PLANARENA_TEST_KEY")
    generate(backend, [{"role": "user", "content": "hello"}])
    assert server.auth == ["Bearer sk-right-variable"]


def test_a_missing_key_without_base_url_is_a_clear_error(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PLANARENA_MISSING_KEY", raising=False)
    backend = OpenAIBackend("fake", api_key_env="PLANARENA_MISSING_KEY")
    with pytest.raises(RuntimeError, match="PLANARENA_MISSING_KEY"):
        generate(backend, [{"role": "user", "content": "hello"}])
    assert server.requests == 0


def cli(run_dir: Path, cache: Path, url: str, secret: str, *extra: str) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "openai_base_url")
    }
    env.update(OPENAI_API_KEY=secret, NO_PROXY="127.0.0.1,localhost")
    cmd = [
        sys.executable,
        "-m",
        "planarena.experiments.run.runner",
        "llm=openai",
        f"llm.base_url={url}",
        "llm.model=fake",
        "env=report",
        "complexity=simple",
        "n_tasks=2",
        "faults=none",
        "progress=false",
        f"hydra.run.dir={run_dir}",
        f"llm.cache_dir={cache}",
        *extra,
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "harness_error" not in out.stderr


def read_records(run_dir: Path, drop: Sequence[str] = ()) -> list[dict[str, Any]]:
    lines = (run_dir / "episodes.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(x).items() if k not in drop} for x in lines]


@pytest.mark.slow  # ~15 s: two CLI runs, each rendering figures
def test_cli_end_to_end_keeps_the_key_out_of_every_file_and_a_rerun_is_free(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    secret = "sk-secret-" + "5" * 24
    cache = tmp_path / "cache"
    extra = ("planner=[react,tot]", "llm.temperature=0.7")
    cli(tmp_path / "run1", cache, server.url, secret, *extra)
    rows = read_records(tmp_path / "run1")
    assert len(rows) == 4
    for r in rows:
        assert r["llm"] == "openai:fake"
        assert r["failure_mode"] != "harness_error"
        assert r["llm_calls"] == r["llm_requests"] + r["cache_hits"]
        assert r["tokenizer"] == "server:fake" and r["cost_usd"] is None  # no price for "fake"
        assert r["tokens_prompt"] == r["llm_calls"] * PROMPT_TOKENS  # the API's usage
        assert r["tokens_o200k"] > 0
    react = [r for r in rows if r["planner"] == "react"]
    for r in react:  # two turns (search, then finish)
        assert r["stop_reason"] == "answered" and r["llm_calls"] == 2 and r["tool_calls"] == 1
    # the records' requests are exactly the requests the server received
    assert sum(r["llm_requests"] for r in rows) == server.requests
    assert server.rejected == 0
    assert set(server.auth) == {f"Bearer {secret}"}
    assert (tmp_path / "run1" / ".hydra" / "config.yaml").exists()
    traces = [json.loads(x) for x in (tmp_path / "run1" / "traces.jsonl").read_text().splitlines()]
    llm_events = [e for t in traces for e in t["events"] if e["event"] == "llm"]
    assert all(e["model"] == "fake" and e["finish_reason"] for e in llm_events)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".log" for p in files) and any(p.is_relative_to(cache) for p in files)
    for path in files:
        assert secret.encode() not in path.read_bytes(), path

    sent = server.requests
    cli(tmp_path / "run2", cache, server.url, secret, *extra)
    assert server.requests == sent  # every call answered from the cache
    rerun = read_records(tmp_path / "run2")
    assert all(r["llm_requests"] == 0 and r["cache_hits"] == r["llm_calls"] for r in rerun)
    # same records but for how the run executed (the cache keeps the measured LLM time, so
    # latency_s matches too)
    assert read_records(tmp_path / "run2", EXECUTION_KEYS) == read_records(
        tmp_path / "run1", EXECUTION_KEYS
    )


def test_a_missing_key_stops_the_run_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    from planarena.experiments.run.llm_factory import BackendFactory

    monkeypatch.delenv("PLANARENA_ABSENT_KEY", raising=False)
    with pytest.raises(ValueError, match="PLANARENA_ABSENT_KEY"):
        BackendFactory({"backend": "openai", "model": "m", "api_key_env": "PLANARENA_ABSENT_KEY"})
    BackendFactory(
        {
            "backend": "openai",
            "model": "m",
            "base_url": "http://127.0.0.1:9/v1",
            "api_key_env": "PLANARENA_ABSENT_KEY",
        }
    )  # a local server needs no key
