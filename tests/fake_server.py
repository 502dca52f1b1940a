"""A tiny OpenAI-compatible chat server on loopback (no other network), for tests.

Like a strict real server it rejects a request with two consecutive messages of one role
(HTTP 400, as chat templates that enforce alternation do), reports ``usage`` numbers unlike
any tiktoken count, and applies ``max_tokens`` (a reply longer than the allowance, counted in
words, is cut and ends with ``finish_reason: "length"``) and ``stop`` sequences. It scripts its
reply from the request: a ReAct turn (in the server's ``style``), a Plan JSON (a different one
per request when the temperature is above 0, as a sampling model would), a score, candidate
steps, an outcome, or an echo. It counts the requests it received.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PROMPT_TOKENS = 4321  # the fake API's usage numbers: no tiktoken count of these prompts
COMPLETION_TOKENS = 87
SLOW_MARKER = "[slow]"  # a user message containing this is answered after SLOW_S
SLOW_S = 0.1
OVERFLOW_MARKER = "[overflow]"  # a request containing this exceeds the model's context (400)
QUERY = {"query": "Acme annual report 2025"}
FINISH_ARGS = {"answer": "done", "status": "success"}

# One ReAct turn in the styles real models write (the shared corpus of tests/test_parsers.py
# covers each in isolation; here they go through a whole episode over HTTP).
REACT_STYLES: dict[str, tuple[str, str]] = {
    "plain": (
        f"Thought: I should search.\nAction: search_web\nAction Input: {json.dumps(QUERY)}",
        f"Thought: done.\nAction: finish\nAction Input: {json.dumps(FINISH_ARGS)}",
    ),
    "markdown": (
        "**Thought:** I should search.\n**Action:** search_web\n**Action Input:**\n"
        f"```json\n{json.dumps(QUERY, indent=2)}\n```",
        f"**Thought:** done.\n**Action:** finish\n**Action Input:** {json.dumps(FINISH_ARGS)}",
    ),
    "lowercase_single_quotes": (
        "thought: search.\naction: search_web\naction input: {'query': 'Acme annual report 2025',}",
        "thought: done.\naction: finish\naction input: {'answer': 'done', 'status': 'success'}",
    ),
    "function_call": (
        'Thought: search.\nAction: search_web(query="Acme annual report 2025")',
        "Thought: I know it.\nFinal Answer: done",
    ),
    # native tool calling (see native_tool_calls); without ``tools`` offered, plain text
    "native": (
        f"Thought: I should search.\nAction: search_web\nAction Input: {json.dumps(QUERY)}",
        f"Thought: done.\nAction: finish\nAction Input: {json.dumps(FINISH_ARGS)}",
    ),
    # a model that keeps going and invents the observation: the stop sequence cuts it
    "rambling": (
        f"Thought: search.\nAction: search_web\nAction Input: {json.dumps(QUERY)}\n"
        'Observation: {"top_url": "https://invented.example"}\nThought: invented',
        f"Thought: done.\nAction: finish\nAction Input: {json.dumps(FINISH_ARGS)}",
    ),
}


def plan_json(n: int) -> str:
    steps = [
        {"id": "step_1", "tool": "search_web", "args": QUERY},
        {
            "id": "step_2",
            "tool": "generate_summary",
            "args": {"data": ["{{step_1.result}}"]},
            "depends_on": ["step_1"],
        },
    ]
    return json.dumps({"goal": f"report (sample {n})", "steps": steps})


def scripted_reply(body: dict[str, Any], n: int, style: str) -> str:
    messages = body.get("messages", [])
    system = " ".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
    users = [str(m.get("content", "")) for m in messages if m.get("role") == "user"]
    last = users[-1] if users else ""
    if "Rate each candidate" in last:
        return "Score 1: 0.9\nScore 2: 0.5\nScore 3: 0.5"
    if "Score: <a number" in last:
        return "**Score:** 8/10"
    if "Outcome:" in last:
        return "Outcome: success"
    if "Respond in exactly this format" in system:
        first, then = REACT_STYLES[style]
        return then if "Observation:" in " ".join(users) else first
    if "Plan JSON" in system:
        sample = n if float(body.get("temperature") or 0) > 0 else 0
        return plan_json(sample)
    return f"echo: {last}"


def native_tool_calls(body: dict[str, Any], style: str) -> list[dict[str, Any]] | None:
    """With ``style="native"`` and ``tools`` offered, a ReAct turn comes back as a tool call."""
    if style != "native" or not body.get("tools"):
        return None
    users = [str(m.get("content", "")) for m in body.get("messages", []) if m["role"] == "user"]
    done = "Observation:" in " ".join(users)
    name, args = ("finish", FINISH_ARGS) if done else ("search_web", QUERY)
    calls = [(name, args)]
    if "candidate next actions" in users[-1]:  # k candidates: parallel tool calls
        calls.append(("search_web_backup", QUERY) if not done else ("finish", FINISH_ARGS))
    return [
        {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for i, (n, a) in enumerate(calls, 1)
    ]


class FakeOpenAI(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, style: str = "plain") -> None:
        super().__init__(("127.0.0.1", 0), FakeHandler)
        self.lock = threading.Lock()
        self.auth: list[str | None] = []
        self.bodies: list[dict[str, Any]] = []
        self.style = style
        self.rejected = 0
        self.delay_s = 0.0  # every reply waits this long (timeouts)
        self.json_mode = True  # False: a request with response_format is refused (HTTP 400)
        self.fail_next = 0  # the next this many requests get HTTP ``fail_status`` (503)
        self.fail_status = 503
        self.fail_message = "overloaded"
        self.gets = 0  # GET requests received (GET /models: the pre-flight check)
        # hostile replies for the next requests, one mode each: "not_json" (an HTML page with
        # status 200), "cut_json" (the reply cut off mid-JSON), "no_choices" (a JSON object
        # without choices), "no_usage" (a good reply without its usage block)
        self.hostile: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    @property
    def requests(self) -> int:
        with self.lock:
            return len(self.bodies)


def alternation_error(messages: Sequence[dict[str, Any]]) -> str | None:
    for a, b in zip(messages, messages[1:], strict=False):
        if a.get("role") == b.get("role"):
            return f"Conversation roles must alternate; two consecutive {a.get('role')!r}"
    return None


def apply_limits(text: str, body: dict[str, Any]) -> tuple[str, str]:
    """The reply cut at the first stop sequence, then at max_tokens (counted in words)."""
    for stop in body.get("stop") or []:
        if stop in text:
            text = text[: text.index(stop)]
    limit = body.get("max_tokens") or body.get("max_completion_tokens")
    words = text.split(" ")
    if limit is not None and len(words) > int(limit):
        return " ".join(words[: int(limit)]), "length"
    return text, "stop"


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
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # client gave up
            self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        with self.server.lock:
            self.server.gets += 1
        self._send(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        if self.path != "/v1/chat/completions":
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        messages = body.get("messages", [])
        error = alternation_error(messages)
        with self.server.lock:
            if error:
                self.server.rejected += 1
            else:
                self.server.auth.append(self.headers.get("Authorization"))
                self.server.bodies.append(body)
            n = len(self.server.bodies)
        if error:
            self._send(400, {"error": {"message": error, "type": "invalid_request_error"}})
            return
        with self.server.lock:
            fail, self.server.fail_next = (
                self.server.fail_next > 0,
                max(0, self.server.fail_next - 1),
            )
        if fail:
            error = {"message": self.server.fail_message, "type": "server_error"}
            self._send(self.server.fail_status, {"error": error})
            return
        if body.get("response_format") and not self.server.json_mode:
            message = "response_format is not supported by this server"
            self._send(400, {"error": {"message": message, "type": "invalid_request_error"}})
            return
        if any(OVERFLOW_MARKER in str(m.get("content", "")) for m in messages):
            message = "This model's maximum context length is 8192 tokens; the prompt has 9001"
            self._send(400, {"error": {"message": message, "code": "context_length_exceeded"}})
            return
        with self.server.lock:
            hostile = self.server.hostile.pop(0) if self.server.hostile else None
        if hostile in ("not_json", "cut_json", "no_choices"):
            self._send_hostile(hostile)
            return
        if any(SLOW_MARKER in str(m.get("content", "")) for m in messages):
            time.sleep(SLOW_S)
        if self.server.delay_s:
            time.sleep(self.server.delay_s)
        text, finish = apply_limits(scripted_reply(body, n, self.server.style), body)
        tool_calls = native_tool_calls(body, self.server.style)
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if tool_calls is not None:
            message = {"role": "assistant", "content": "Searching first.", "tool_calls": tool_calls}
            finish = "tool_calls"
        reply = {
            "id": f"chatcmpl-fake-{n}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": body.get("model", "fake"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": finish,
                }
            ],
            "usage": {
                "prompt_tokens": PROMPT_TOKENS,
                "completion_tokens": COMPLETION_TOKENS,
                "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
            },
        }
        if hostile == "no_usage":
            del reply["usage"]
        self._send(200, reply)

    def _send_hostile(self, mode: str) -> None:
        """A reply a proxy or a broken server might give: status 200, no usable body."""
        if mode == "not_json":
            data, kind = b"<html><body>502 Bad Gateway</body></html>", "text/html"
        elif mode == "cut_json":
            data, kind = (
                b'{"id": "chatcmpl-cut", "choices": [{"index": 0, "mess',
                "application/json",
            )
        else:
            data, kind = (
                b'{"id": "chatcmpl-empty", "object": "chat.completion"}',
                "application/json",
            )
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(data)


def serve(style: str = "plain") -> Iterator[FakeOpenAI]:
    """A running server for a pytest fixture (``yield from serve()``)."""
    srv = FakeOpenAI(style)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=5)
