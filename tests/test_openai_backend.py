"""OpenAIBackend against a tiny fake OpenAI-compatible server on loopback (no other network).

The server scripts its reply from the request (a valid ReAct turn for a ReAct prompt, an echo
otherwise), reports fixed ``usage`` numbers unlike any tiktoken count, counts requests and
records the Authorization header it received.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from envs import clock
from planners.llm.base import EpisodeLLM, Message, Request
from planners.llm.openai_backend import OpenAIBackend
from planners.llm.profiles import ModelProfile
from planners.llm.tokens import count_messages, count_text

ROOT = Path(__file__).resolve().parents[1]
PROMPT_TOKENS = 4321  # the fake API's usage numbers: no tiktoken count of these prompts
COMPLETION_TOKENS = 87
SLOW_MARKER = "[slow]"  # a user message containing this is answered after SLOW_S
SLOW_S = 0.1
SEARCH_TURN = (
    "Thought: I should search for the report.\n"
    "Action: search_web\n"
    'Action Input: {"query": "Acme annual report 2025"}'
)
FINISH_TURN = (
    'Thought: I have what I need.\nAction: finish\nAction Input: {"answer": "done", '
    '"status": "success"}'
)
MODELS = {"default": ModelProfile(name="fake")}


def scripted_reply(messages: Sequence[dict[str, Any]]) -> str:
    system = " ".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
    users = [str(m.get("content", "")) for m in messages if m.get("role") == "user"]
    if "Respond in exactly this format" in system:
        if any(u.startswith("Observation:") for u in users):
            return FINISH_TURN
        return SEARCH_TURN
    return f"echo: {users[-1] if users else ''}"


class FakeOpenAI(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), FakeHandler)
        self.lock = threading.Lock()
        self.auth: list[str | None] = []
        self.bodies: list[dict[str, Any]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    @property
    def requests(self) -> int:
        with self.lock:
            return len(self.bodies)


class FakeHandler(BaseHTTPRequestHandler):
    server: FakeOpenAI
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        if self.path != "/v1/chat/completions":
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        with self.server.lock:
            self.server.auth.append(self.headers.get("Authorization"))
            self.server.bodies.append(body)
            n = len(self.server.bodies)
        messages = body.get("messages", [])
        if any(SLOW_MARKER in str(m.get("content", "")) for m in messages):
            time.sleep(SLOW_S)
        self._send(
            200,
            {
                "id": f"chatcmpl-fake-{n}",
                "object": "chat.completion",
                "created": 1_700_000_000,
                "model": body.get("model", "fake"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": scripted_reply(messages)},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": PROMPT_TOKENS,
                    "completion_tokens": COMPLETION_TOKENS,
                    "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
                },
            },
        )


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    srv = FakeOpenAI()
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=5)


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy or base-URL override from the developer's shell may redirect a request."""
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


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
    backend = OpenAIBackend("fake", base_url=server.url, api_key_env="FAKE_KEY")
    messages = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": f"say hi {SLOW_MARKER}"},
    ]
    trace: list[dict[str, Any]] = []
    llm = EpisodeLLM(backend, MODELS, trace=trace)

    async def go() -> str:
        with clock.use_clock(clock.SimClock()):
            return await llm.complete(messages, role="executor")

    text = asyncio.run(go())
    assert text == f"echo: say hi {SLOW_MARKER}"
    assert server.requests == 1 and server.bodies[0]["model"] == "fake"
    assert server.bodies[0]["messages"] == messages
    # tokens are the API's usage numbers, not tiktoken's counts of the same text
    assert count_messages(messages) != PROMPT_TOKENS and count_text(text) != COMPLETION_TOKENS
    u = llm.usage
    assert (u.calls, u.prompt_tokens, u.completion_tokens) == (1, PROMPT_TOKENS, COMPLETION_TOKENS)
    assert u.by_role["executor"] == PROMPT_TOKENS + COMPLETION_TOKENS
    assert u.cost_usd == pytest.approx(MODELS["default"].cost(PROMPT_TOKENS, COMPLETION_TOKENS))
    (event,) = trace
    assert (event["prompt_tokens"], event["completion_tokens"]) == (
        PROMPT_TOKENS,
        COMPLETION_TOKENS,
    )
    # simulated LLM time is the measured wall time of the call (the server sleeps SLOW_S),
    # not the profile's modelled latency
    spent = event["t1"] - event["t0"]
    assert SLOW_S <= spent < SLOW_S + 5
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
    assert generate(backend, a, a) == ["echo: first", "echo: first"]
    assert server.requests == 1
    # a fresh backend (a new process, say) reads the same cache, usage included
    fresh = OpenAIBackend("fake", base_url=server.url, cache_dir=str(cache))

    async def cached() -> tuple[int | None, int | None]:
        c = await fresh.generate(a, role="executor", model=MODELS["default"], request=Request("t"))
        return c.prompt_tokens, c.completion_tokens

    assert asyncio.run(cached()) == (PROMPT_TOKENS, COMPLETION_TOKENS)
    assert server.requests == 1
    assert generate(fresh, b) == ["echo: second"]
    assert server.requests == 2
    files = [p for p in cache.rglob("*") if p.is_file()]
    assert len(files) == 2 and all(p.suffix == ".json" for p in files)
    for path in files:
        assert secret.encode() not in path.read_bytes(), path
    # the cache key depends on the model: another model is a miss
    other = OpenAIBackend("fake-2", base_url=server.url, cache_dir=str(cache))
    generate(other, a)
    assert server.requests == 3


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


def cli(run_dir: Path, cache: Path, url: str, secret: str) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "openai_base_url")
    }
    env.update(OPENAI_API_KEY=secret, NO_PROXY="127.0.0.1,localhost")
    cmd = [
        sys.executable,
        "-m",
        "experiments.runner",
        "llm=openai",
        f"llm.base_url={url}",
        "llm.model=fake",
        "planner=react",
        "complexity=simple",
        "n_tasks=2",
        "faults=none",
        "progress=false",
        f"hydra.run.dir={run_dir}",
        f"llm.cache_dir={cache}",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "harness_error" not in out.stderr


def read_records(run_dir: Path, drop: str = "") -> list[dict[str, Any]]:
    lines = (run_dir / "episodes.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(x).items() if k != drop} for x in lines]


@pytest.mark.slow  # ~11 s: two CLI runs, each rendering figures
def test_cli_end_to_end_keeps_the_key_out_of_every_file_and_a_rerun_is_free(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    secret = "sk-secret-" + "5" * 24
    cache = tmp_path / "cache"
    cli(tmp_path / "run1", cache, server.url, secret)
    rows = read_records(tmp_path / "run1")
    assert len(rows) == 2
    for r in rows:
        assert r["llm"] == "openai:fake" and r["planner"] == "react"
        assert r["failure_mode"] != "harness_error" and r["stop_reason"] == "answered"
        # two turns (search, then finish), each metered with the API's usage numbers
        assert r["llm_calls"] == 2 and r["tool_calls"] == 1
        assert (r["tokens_prompt"], r["tokens_completion"]) == (
            2 * PROMPT_TOKENS,
            2 * COMPLETION_TOKENS,
        )
    assert server.requests == 4
    assert set(server.auth) == {f"Bearer {secret}"}
    assert (tmp_path / "run1" / ".hydra" / "config.yaml").exists()
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".log" for p in files) and any(p.is_relative_to(cache) for p in files)
    for path in files:
        assert secret.encode() not in path.read_bytes(), path

    cli(tmp_path / "run2", cache, server.url, secret)
    assert server.requests == 4  # every call answered from the cache
    # same records (the cache also keeps the measured LLM time, so latency_s matches too)
    assert read_records(tmp_path / "run2", drop="wall_s") == [
        {k: v for k, v in r.items() if k != "wall_s"} for r in rows
    ]


def test_a_missing_key_stops_the_run_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    from experiments.llm_factory import BackendFactory

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
