"""A loopback HTTP proxy that makes an OpenAI-compatible server hostile, on a seeded schedule.

It sits between planarena and a chat server (the tests' stub, or ``planarena-local serve``)
and, for a share of the chat requests, answers as a failing server or network would:

========================  ===============================================================
kind                      what the client sees
========================  ===============================================================
``rate_limit_seconds``    429 with ``Retry-After: <seconds>``
``rate_limit_date``       429 with ``Retry-After: <HTTP-date>``
``http_500/502/503``      that status with an error body
``reset_before_headers``  the connection closed before any byte of the response
``reset_after_headers``   the status line and headers, part of the body, then closed
``cut_json``              status 200 and a body cut off mid-JSON
``not_json``              status 200 and an HTML page
``slow``                  the upstream's reply, sent after ``slow_s`` (set it past timeout_s)
``no_usage``              the upstream's reply without its ``usage`` block
========================  ===============================================================

The fault of a request is drawn from the seed, the digest of the request's body and how many
times that body arrived before (its attempt): a retry draws again, and the schedule does not
depend on the order in which concurrent requests arrive. ``GET /_proxy/stats`` (and
:meth:`FaultProxy.stats`) reports the injected counts per kind, the tokens the upstream served
in replies that reached the client intact (a reply whose client had already hung up, a slow
one or a slow server's, is ``abandoned`` instead), and for every 429 the wait before the same
request came back (bodies that several episodes sent are left out: whose retry it is cannot be
told).
Run it as ``python -m planarena.experiments.run.fault_proxy --upstream URL``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import email.utils
import hashlib
import json
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

FAULT_KINDS = (
    "rate_limit_seconds",
    "rate_limit_date",
    "http_500",
    "http_502",
    "http_503",
    "reset_before_headers",
    "reset_after_headers",
    "cut_json",
    "not_json",
    "slow",
    "no_usage",
)


@dataclass
class FaultSchedule:
    """Which fault each request meets: ``rates[kind]`` is its share of chat requests."""

    seed: int = 0
    rates: Mapping[str, float] = field(default_factory=dict)
    retry_after_s: int = 1  # the seconds form; the date form asks for the next whole second + 1
    slow_s: float = 3.0
    clears_after: int = 0  # > 0: a body's attempts from this one on are never faulted

    def __post_init__(self) -> None:
        unknown = sorted(set(self.rates) - set(FAULT_KINDS))
        if unknown:
            raise ValueError(f"unknown fault kind(s) {unknown}; known: {', '.join(FAULT_KINDS)}")
        if sum(self.rates.values()) > 1:
            raise ValueError(f"fault rates sum to {sum(self.rates.values()):g} > 1")

    def fault(self, digest: str, attempt: int) -> str | None:
        """The fault of this body's ``attempt``-th arrival (None: forwarded as is)."""
        if self.clears_after and attempt >= self.clears_after:
            return None
        material = f"{self.seed}:{digest}:{attempt}".encode()
        u = int.from_bytes(hashlib.blake2b(material, digest_size=8).digest(), "big") / 2**64
        edge = 0.0
        for kind in FAULT_KINDS:
            edge += self.rates.get(kind, 0.0)
            if u < edge:
                return kind
        return None


@dataclass
class _Stats:
    injected: Counter[str] = field(default_factory=Counter)
    requests: int = 0
    forwarded: int = 0
    served_prompt_tokens: int = 0  # usage of upstream replies that reached the client whole
    served_completion_tokens: int = 0
    hidden_usage_replies: int = 0  # replies delivered with their usage removed
    abandoned: int = 0  # upstream replies whose client had hung up (timed out) before them
    retry_waits: list[dict[str, float]] = field(default_factory=list)


class FaultProxy:
    """The proxy, served on 127.0.0.1 from a thread of its own (:meth:`start`/:meth:`stop`),
    or from the caller's loop (:meth:`serve`)."""

    def __init__(self, upstream: str, schedule: FaultSchedule, port: int = 0) -> None:
        parts = urlsplit(upstream)
        self.upstream_host = parts.hostname or "127.0.0.1"
        self.upstream_port = parts.port or 80
        self.schedule = schedule
        self.port = port
        self._stats = _Stats()
        self._attempts: Counter[str] = Counter()
        self._fresh: Counter[str] = Counter()  # first attempts per body (>1: several senders)
        self._pending_429: dict[str, tuple[float, float]] = {}  # digest -> (time, asked wait)
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.base_events.Server | None = None
        self._ready = threading.Event()

    @property
    def url(self) -> str:
        """The base URL to give the client (``llm.base_url``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def stats(self) -> dict[str, Any]:
        with self._lock:
            s = self._stats
            waits = list(s.retry_waits)
            return {
                "requests": s.requests,
                "forwarded": s.forwarded,
                "injected": dict(sorted(s.injected.items())),
                "served_prompt_tokens": s.served_prompt_tokens,
                "served_completion_tokens": s.served_completion_tokens,
                "hidden_usage_replies": s.hidden_usage_replies,
                "abandoned": s.abandoned,
                "retry_waits": waits,
                "retry_after_honoured": sum(w["waited_s"] >= w["asked_s"] - 0.05 for w in waits),
            }

    # --- serving ----------------------------------------------------------------------------

    async def serve(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        async with self._server:
            await self._server.serve_forever()

    def start(self) -> FaultProxy:
        def run() -> None:
            self._loop = asyncio.new_event_loop()
            with contextlib.suppress(asyncio.CancelledError):
                self._loop.run_until_complete(self.serve())

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the fault proxy did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._server is not None:
            self._loop.call_soon_threadsafe(self._server.close)
            for task in asyncio.all_tasks(self._loop):
                self._loop.call_soon_threadsafe(task.cancel)
        if self._thread is not None:
            self._thread.join(timeout=10)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {
                k.strip().lower(): v.strip()
                for k, _, v in (x.partition(":") for x in lines[1:] if x)
            }
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            if method == "GET" and path == "/_proxy/stats":
                await _write(writer, 200, json.dumps(self.stats()).encode())
                return
            await self._answer(reader, writer, method, path, lines[1:], body)
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _answer(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        method: str,
        path: str,
        header_lines: list[str],
        body: bytes,
    ) -> None:
        chat = method == "POST" and path.endswith("/chat/completions")
        digest = hashlib.sha256(body).hexdigest()[:16]
        fault = None
        with self._lock:
            if chat:
                self._stats.requests += 1
                attempt = self._attempts[digest]
                self._attempts[digest] += 1
                fault = self.schedule.fault(digest, attempt)
                # a retry by the SDK says so (another episode may send the same body afresh)
                retry = _header(header_lines, "x-stainless-retry-count") not in ("0",)
                self._fresh[digest] += not retry
                if retry and digest in self._pending_429:
                    t, asked = self._pending_429.pop(digest)
                    if self._fresh[digest] == 1:  # one sender of this body: its own retry
                        self._stats.retry_waits.append(
                            {"asked_s": round(asked, 3), "waited_s": round(time.time() - t, 3)}
                        )
                if fault:
                    self._stats.injected[fault] += 1
        if fault and fault not in ("slow", "no_usage"):
            await self._inject(writer, fault, digest)
            return
        status, reply = await self._forward(method, path, header_lines, body)
        if fault == "slow":
            await asyncio.sleep(self.schedule.slow_s)
        usage = None
        if chat and status == 200:
            with contextlib.suppress(ValueError, AttributeError):
                payload = json.loads(reply)
                usage = payload.get("usage")
                if fault == "no_usage" and usage is not None:
                    del payload["usage"]
                    reply = json.dumps(payload).encode()
        # a client that timed out has closed its end: its reply is written to no one (a slow
        # server's reply, not only an injected slow one), and is not counted as delivered
        gone = reader.at_eof()
        await _write(writer, status, reply)
        if chat and status == 200 and gone:
            with self._lock:
                self._stats.abandoned += 1
        elif chat and status == 200:
            with self._lock:
                self._stats.forwarded += 1
                if fault == "no_usage":
                    self._stats.hidden_usage_replies += 1
                elif isinstance(usage, dict):
                    self._stats.served_prompt_tokens += int(usage.get("prompt_tokens") or 0)
                    self._stats.served_completion_tokens += int(usage.get("completion_tokens") or 0)

    async def _inject(self, writer: asyncio.StreamWriter, fault: str, digest: str) -> None:
        if fault.startswith("rate_limit"):
            now = time.time()
            if fault == "rate_limit_seconds":
                asked, value = float(self.schedule.retry_after_s), str(self.schedule.retry_after_s)
            else:
                when = int(now) + 2  # HTTP-dates have whole seconds
                asked, value = when - now, email.utils.formatdate(when, usegmt=True)
            with self._lock:
                self._pending_429[digest] = (now, asked)
            error = {"error": {"message": "rate limited (fault proxy)", "type": "rate_limit"}}
            await _write(writer, 429, json.dumps(error).encode(), {"Retry-After": value})
        elif fault.startswith("http_"):
            error = {"error": {"message": f"{fault} (fault proxy)", "type": "server_error"}}
            await _write(writer, int(fault[5:]), json.dumps(error).encode())
        elif fault == "reset_before_headers":
            writer.transport.abort()
        elif fault == "reset_after_headers":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 4096\r\n\r\n{\"id\": \"chatcmpl-")  # fmt: skip
            await writer.drain()
            writer.transport.abort()
        elif fault == "cut_json":
            await _write(writer, 200, b'{"id": "chatcmpl-cut", "choices": [{"index": 0, "mess')
        elif fault == "not_json":
            page = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
            await _write(writer, 200, page, {"Content-Type": "text/html"})

    async def _forward(
        self, method: str, path: str, header_lines: list[str], body: bytes
    ) -> tuple[int, bytes]:
        """The upstream's status and body (one connection per request)."""
        reader, writer = await asyncio.open_connection(self.upstream_host, self.upstream_port)
        keep = [h for h in header_lines if h and h.split(":", 1)[0].strip().lower()
                not in ("connection", "host", "content-length", "accept-encoding")]  # fmt: skip
        head = [f"{method} {path} HTTP/1.1", f"Host: {self.upstream_host}:{self.upstream_port}",
                *keep, f"Content-Length: {len(body)}", "Connection: close", "", ""]  # fmt: skip
        writer.write("\r\n".join(head).encode("latin-1") + body)
        await writer.drain()
        raw = await reader.read()
        writer.close()
        head_bytes, _, rest = raw.partition(b"\r\n\r\n")
        lines = head_bytes.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {
            k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])
        }
        if headers.get("transfer-encoding", "").lower() == "chunked":
            rest = _dechunk(rest)
        elif "content-length" in headers:
            rest = rest[: int(headers["content-length"])]
        return status, rest


def _header(lines: list[str], name: str) -> str | None:
    for line in lines:
        key, _, value = line.partition(":")
        if key.strip().lower() == name:
            return value.strip()
    return None


def _dechunk(data: bytes) -> bytes:
    out, pos = bytearray(), 0
    while True:
        line_end = data.index(b"\r\n", pos)
        size = int(data[pos:line_end].split(b";")[0], 16)
        if size == 0:
            return bytes(out)
        out += data[line_end + 2 : line_end + 2 + size]
        pos = line_end + 2 + size + 2


async def _write(
    writer: asyncio.StreamWriter, status: int, body: bytes, extra: Mapping[str, str] | None = None
) -> None:
    headers = {"Content-Type": "application/json", **dict(extra or {})}
    reason = {200: "OK", 429: "Too Many Requests", 500: "Internal Server Error",
              502: "Bad Gateway", 503: "Service Unavailable"}.get(status, "Status")  # fmt: skip
    lines = [f"HTTP/1.1 {status} {reason}", *(f"{k}: {v}" for k, v in headers.items()),
             f"Content-Length: {len(body)}", "Connection: close", "", ""]  # fmt: skip
    writer.write("\r\n".join(lines).encode("latin-1") + body)
    with contextlib.suppress(ConnectionError):
        await writer.drain()


def parse_rates(text: str) -> dict[str, float]:
    """``kind=rate,kind=rate`` or ``all=rate`` (every kind at that rate)."""
    rates: dict[str, float] = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        kind, _, value = item.partition("=")
        for k in FAULT_KINDS if kind == "all" else (kind,):
            rates[k] = float(value)
    return rates


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m planarena.experiments.run.fault_proxy",
        description="A loopback proxy that injects HTTP and network faults on a seeded schedule.",
    )
    parser.add_argument("--upstream", required=True, help="e.g. http://127.0.0.1:8080")
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rates", default="all=0.02", help="kind=rate,... or all=rate")
    parser.add_argument("--retry-after", type=int, default=1, help="seconds in a 429's header")
    parser.add_argument("--slow-s", type=float, default=3.0, help="delay of a slow reply")
    args = parser.parse_args(argv)
    try:
        schedule = FaultSchedule(args.seed, parse_rates(args.rates), args.retry_after, args.slow_s)
    except ValueError as exc:
        parser.exit(2, f"fault_proxy: {exc}\n")
    proxy = FaultProxy(args.upstream, schedule, args.port)
    print(f"fault proxy on {proxy.url.removesuffix('/v1')} -> {args.upstream}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(proxy.serve())
    print(json.dumps(proxy.stats(), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
