"""Any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp server) via the openai SDK.

The API key is read from the environment variable named in config (never the key itself in
config), so it cannot reach a record, a trace or Hydra's saved config.

**Response cache with per-call identity.** A reply is stored under the hash of everything
that determines it: model, base URL, sampling (temperature, max_tokens, stop sequences), the
request's messages digest *and its occurrence in the episode* (the k-th identical request is
the k-th sample: ToT's three identical proposals at temperature > 0 are three requests), and
the episode's identity (seed, env, task, trial; never the planner, so the same prompt gets the
same answer from whichever planner sends it). A rerun replays exactly the first run; a hit
replays the stored tokens and wall time and is flagged (``Completion.cached``). Entries are
written atomically (a unique temporary file, then ``os.replace``); concurrent identical
requests in one process wait for the first one (a hit, not a second request), and if another
process stored the entry first, its reply is used, so records always match a rerun.

**Request hygiene.** Consecutive messages of the same role are merged (chat templates that
enforce alternation reject them); each request gets the stop sequences and ``max_tokens`` of
the format it asks for (:func:`planarena.planners.formats.request_format`); the SDK's retries are
``max_retries`` and the whole call, retries included, is bounded by ``timeout_s``.

**Errors are the endpoint's.** A request the endpoint does not answer (connection refused,
timeout, a rejected key, an HTTP 4xx/5xx error, a prompt beyond the model's context) raises
:class:`~planarena.planners.llm.base.EndpointError`; the episode is recorded as
``infrastructure_error`` (not an agent failure) and runs again on resume.

**Prices and names.** The record and trace name the model actually used; its price comes from
the ``prices`` table keyed by model name. A model with no entry is recorded with cost null
(one warning), never another model's price.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import os
import re
import time
import uuid
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planarena.planners.formats import (
    MAX_TOKENS,
    STOP_SEQUENCES,
    render_tool_calls,
    request_format,
    tool_schemas,
)
from planarena.planners.llm.base import Completion, EndpointError, Message, Request
from planarena.planners.llm.profiles import ModelProfile
from planarena.planners.llm.rate_limit import RateLimiter
from planarena.planners.llm.tokens import count_messages, count_text

# The openai SDK (a heavy import) is imported inside the functions that talk to an endpoint,
# so importing this module costs nothing until a request is made. No import cycle is involved.

_CONTEXT_OVERFLOW = re.compile(
    r"context[ _](length|size|window)|maximum context|context_length_exceeded|too many tokens",
    re.IGNORECASE,
)
CACHE_VERSION = 2  # bump when the key material or the entry format changes


def merge_consecutive_roles(messages: Sequence[Message]) -> list[dict[str, str]]:
    """Messages with consecutive same-role messages joined (blank line between): no request
    ever carries two consecutive messages of one role."""
    out: list[dict[str, str]] = []
    for m in messages:
        if out and out[-1]["role"] == m["role"]:
            out[-1]["content"] = f"{out[-1]['content']}\n\n{m['content']}"
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return out


def endpoint_error(exc: Exception) -> EndpointError:
    """The SDK's error as an :class:`EndpointError` (the endpoint's failure, not the agent's):
    its class name as the kind (``ContextLengthExceeded`` for a 400 that says the prompt is
    beyond the model's context), the HTTP status and the server's message, on one line."""
    import openai

    kind = type(exc).__name__
    if isinstance(exc, openai.BadRequestError) and _CONTEXT_OVERFLOW.search(str(exc)):
        kind = "ContextLengthExceeded"
    status = getattr(exc, "status_code", None)
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        text = body["message"]  # the server's own words, without the SDK's "Error code: ..."
    else:
        text = str(exc).removeprefix(f"Error code: {status} - ")
    cause = exc.__cause__
    text += f" ({type(cause).__name__}: {cause})" if cause is not None else ""
    prefix = f"HTTP {status}: " if status is not None else ""
    return EndpointError(kind, prefix + " ".join(text.split()))


def call_timed_out(timeout_s: float) -> EndpointError:
    """The whole call, SDK retries included, ran past ``timeout_s``: classified here, under
    the SDK's own timeout name, so it is the same failure mode as the SDK's per-attempt timeout.

    Not built as ``openai.APITimeoutError``: its constructor needs a real request object, and
    what it reads from one differs across the supported openai range (3.x reads its headers)."""
    return EndpointError(
        "APITimeoutError", f"no reply within timeout_s={timeout_s:g} s, retries included"
    )


def malformed_response(exc: Exception) -> EndpointError:
    """A reply with status 200 whose body is no chat completion (an HTML error page from a
    proxy, a body cut off mid-JSON, an object without ``choices``): the endpoint failed, as
    with an HTTP error, so the episode is rerun on resume rather than charged to anyone."""
    cause = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
    return EndpointError("MalformedResponse", f"the reply is not a chat completion ({cause})")


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def episode_key(seed_keys: Sequence[object]) -> str:
    """A short stable identity of an episode (seed, env, task_id, trial)."""
    material = json.dumps([str(k) for k in seed_keys])
    return hashlib.blake2b(material.encode(), digest_size=12).hexdigest()


@dataclass(frozen=True)
class Price:
    usd_per_mtok_input: float
    usd_per_mtok_output: float

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (
            prompt_tokens * self.usd_per_mtok_input + completion_tokens * self.usd_per_mtok_output
        ) / 1e6


@dataclass
class _Shared:
    """State every per-episode view of one backend shares."""

    semaphore: asyncio.Semaphore
    limiter: RateLimiter = field(default_factory=RateLimiter)
    client: Any = None
    inflight: dict[str, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)
    json_mode_refused: bool = False  # the server rejected response_format: plain text then
    warned: set[str] = field(default_factory=set)


class OpenAIBackend:
    name = "openai"
    native_tools = True  # accepts ``tools``: a tool call comes back as a Thought/Action turn

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        max_concurrency: int = 4,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        max_tokens_by_format: Mapping[str, int] | None = None,
        stop: bool = True,
        cache_dir: str | None = None,
        timeout_s: float = 120.0,
        max_retries: int = 2,
        prices: Mapping[str, Mapping[str, float]] | None = None,
        write_text: bool = True,
        json_mode: bool = False,
        offline: bool = False,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        episode: str = "",
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.temperature = temperature
        self.max_tokens = max_tokens  # one value for every format (None: per-format defaults)
        self.max_tokens_by_format = {**MAX_TOKENS, **dict(max_tokens_by_format or {})}
        self.stop = stop
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.prices = {
            name: Price(float(p["usd_per_mtok_input"]), float(p["usd_per_mtok_output"]))
            for name, p in (prices or {}).items()
        }
        self.write_text = write_text
        self.json_mode = json_mode  # response_format json_object for plans, where accepted
        self.cache = Path(cache_dir) if cache_dir else None
        self.offline = offline  # answer from the cache only: a miss is an EndpointError
        self.episode = episode
        self._shared = _Shared(
            asyncio.Semaphore(max_concurrency),
            RateLimiter(requests_per_minute, tokens_per_minute),
        )

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> OpenAIBackend:
        """The backend an ``llm=openai`` config describes (``configs/llm/openai.yaml``)."""
        max_tokens = cfg.get("max_tokens")
        by_format = {k: v for k, v in dict(cfg.get("max_tokens_by_format") or {}).items() if v}
        cache_dir = cfg.get("cache_dir")
        return cls(
            str(cfg["model"]),
            base_url=cfg.get("base_url"),
            api_key_env=str(cfg.get("api_key_env", "OPENAI_API_KEY")),
            max_concurrency=int(cfg.get("max_concurrency", 4)),
            temperature=float(cfg.get("temperature", 0.0)),
            max_tokens=None if max_tokens is None else int(max_tokens),
            max_tokens_by_format=by_format,  # a null format keeps its default
            stop=bool(cfg.get("stop", True)),
            cache_dir=None if cache_dir is None else str(cache_dir),
            timeout_s=float(cfg.get("timeout_s", 120.0)),
            max_retries=int(cfg.get("max_retries", 2)),
            prices=cfg.get("prices"),
            write_text=bool(cfg.get("write_text", True)),
            json_mode=bool(cfg.get("json_mode", False)),
            offline=bool(cfg.get("offline", False)),
            requests_per_minute=_optional_float(cfg.get("requests_per_minute")),
            tokens_per_minute=_optional_float(cfg.get("tokens_per_minute")),
        )

    def for_episode(self, seed_keys: Sequence[object]) -> OpenAIBackend:
        """A view of this backend for one episode: its cache keys carry the episode's
        identity; client, concurrency bound, cache and in-flight requests are shared."""
        view = copy.copy(self)
        view.episode = episode_key(seed_keys)
        return view

    # --- pricing ----------------------------------------------------------------------------

    def price(self, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        """The call's cost from the price table, by the requested model's name (then the
        served name); None, with one warning per model, if neither has an entry."""
        for name in (self.model, model):
            if name in self.prices:
                return self.prices[name].cost(prompt_tokens, completion_tokens)
        if self.model not in self._shared.warned:
            self._shared.warned.add(self.model)
            warnings.warn(
                f"no price for model {self.model!r} in llm.prices: its cost is recorded as "
                "null (to price it, add an entry under prices: in the llm config you run, "
                "configs/llm/<name>.yaml, or in a config of your own)",
                stacklevel=3,
            )
        return None

    # --- request ----------------------------------------------------------------------------

    def _get_client(self) -> Any:
        if self._shared.client is None:
            from openai import AsyncOpenAI

            key = os.environ.get(self.api_key_env)
            if not key and self.base_url is None:
                raise RuntimeError(
                    f"set the {self.api_key_env} environment variable "
                    "(or llm.base_url for a local server)"
                )
            self._shared.client = AsyncOpenAI(
                api_key=key or "not-needed",
                base_url=self.base_url,
                timeout=self.timeout_s,
                max_retries=self.max_retries,
            )
        return self._shared.client

    def sampling(self, messages: Sequence[Message]) -> dict[str, Any]:
        """The sampling parameters of this request: temperature, the format's max_tokens and
        stop sequences."""
        fmt = request_format(messages)
        params: dict[str, Any] = {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens
            or self.max_tokens_by_format.get(fmt, MAX_TOKENS["other"]),
        }
        if self.stop and fmt in STOP_SEQUENCES:
            params["stop"] = STOP_SEQUENCES[fmt]
        if self.json_mode and fmt == "plan":  # a Plan JSON is one object: JSON mode fits
            params["response_format"] = {"type": "json_object"}
        return params

    def _cache_key(
        self, messages: Sequence[Message], request: Request, params: Mapping[str, Any]
    ) -> str:
        material = json.dumps(
            {
                "v": CACHE_VERSION,
                "model": self.model,
                "base_url": self.base_url,
                "sampling": dict(params),
                "messages": Request.digest_of(messages),
                "occurrence": request.occurrence,
                "episode": self.episode,
            },
            sort_keys=True,
        )
        return hashlib.sha256(material.encode()).hexdigest()

    def _params(self, messages: Sequence[Message], tools: Sequence[Any] | None) -> dict[str, Any]:
        params = self.sampling(messages)
        if tools:  # offered through the API (and part of the cache key, like all params)
            params["tools"] = tool_schemas(tools)
            params["tool_choice"] = "auto"
        return params

    def cache_path(
        self, messages: Sequence[Message], request: Request, tools: Sequence[Any] | None = None
    ) -> Path | None:
        """Where this request's reply is (or would be) cached; None without a cache."""
        return self._path(self._cache_key(messages, request, self._params(messages, tools)))

    def _path(self, key: str) -> Path | None:
        return None if self.cache is None else self.cache / key[:2] / f"{key}.json"

    def _store(self, path: Path, entry: dict[str, Any]) -> dict[str, Any]:
        """Write ``entry`` atomically; if another writer stored this key first, theirs wins
        (and is returned), so every record agrees with what a rerun will replay."""
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            return json.loads(path.read_text())
        tmp = path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
        tmp.write_text(json.dumps(entry, ensure_ascii=False))
        os.replace(tmp, path)
        return entry

    async def _request(self, messages: list[dict[str, str]], params: Mapping[str, Any]) -> dict:
        """One request; if the server refuses JSON mode, again without it (the lenient text
        parser reads the plan). The cache key keeps the configured parameters either way.
        Any error of the API (connection, timeout, key, an HTTP 4xx/5xx, a prompt beyond the
        model's context) is raised as an :class:`EndpointError`: the endpoint's failure."""
        import openai

        try:
            return await self._request_json_or_text(messages, params)
        except openai.APIError as exc:
            raise endpoint_error(exc) from exc

    async def _request_json_or_text(
        self, messages: list[dict[str, str]], params: Mapping[str, Any]
    ) -> dict:
        import openai

        if "response_format" in params and not self._shared.json_mode_refused:
            try:
                return await self._send(messages, params)
            except openai.BadRequestError as exc:
                if "response_format" not in str(exc) and "json" not in str(exc).lower():
                    raise
                self._shared.json_mode_refused = True
        params = {k: v for k, v in params.items() if k != "response_format"}
        return await self._send(messages, params)

    async def _send(self, messages: list[dict[str, str]], params: Mapping[str, Any]) -> dict:
        t_queue = time.perf_counter()
        limiter = self._shared.limiter
        reserved = count_messages(messages) + int(params["max_tokens"]) if limiter.active else 0
        await limiter.acquire(reserved)  # the job's requests and tokens per minute
        async with self._shared.semaphore:
            queue_s = time.perf_counter() - t_queue
            start = time.perf_counter()
            create = self._get_client().chat.completions.with_raw_response.create(
                model=self.model, messages=messages, **params
            )
            try:  # the whole call, SDK retries included, within timeout_s
                raw = await asyncio.wait_for(create, self.timeout_s)
            except TimeoutError:
                raise call_timed_out(self.timeout_s) from None
            wall = time.perf_counter() - start
        try:  # a body that is no chat completion (HTML, cut off, no choices): the endpoint's
            response = raw.parse()
            choice = response.choices[0]
            usage = response.usage
            text = choice.message.content or ""
            calls = getattr(choice.message, "tool_calls", None) or []
            pairs = [(c.function.name, c.function.arguments or "") for c in calls]
        except (ValueError, TypeError, AttributeError, IndexError, KeyError) as exc:
            raise malformed_response(exc) from None
        if limiter.active:
            used = getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None)
            limiter.settle(reserved, sum(u for u in used if u is not None) or reserved)
        if calls:  # native tool calling: written as the turn (or candidates) it stands for
            text = render_tool_calls(text, pairs)
        return {
            "text": text,
            "tool_calls": len(calls),
            "retries": int(getattr(raw, "retries_taken", 0) or 0),  # the SDK's, in this call
            "finish_reason": choice.finish_reason,
            "prompt_tokens": getattr(usage, "prompt_tokens", None),
            "completion_tokens": getattr(usage, "completion_tokens", None),
            "wall_s": wall,
            "served_model": getattr(response, "model", None) or self.model,
            "queue_s": queue_s,
        }

    async def generate(
        self,
        messages: Sequence[Message],
        *,
        role: str,
        model: ModelProfile,
        request: Request,
        tools: Sequence[Any] | None = None,
    ) -> Completion:
        del role, model  # never part of a request's identity; the backend names its model
        # request.kind is not read (nor required): a real model reads only the prompt, and the
        # format's stop sequences and max_tokens come from the prompt too (request_format)
        sent = merge_consecutive_roles(messages)
        params = self._params(messages, tools)
        key = self._cache_key(messages, request, params)
        path = self._path(key)
        cached, queue_s = False, 0.0
        if path is not None and path.exists():
            entry, cached = json.loads(path.read_text()), True
        elif path is not None and key in self._shared.inflight:
            entry, cached = await asyncio.shield(self._shared.inflight[key]), True
        elif self.offline:  # a replay: nothing is sent, a reply not recorded is the endpoint's
            raise EndpointError("NotInCache", f"llm.offline: no reply in {self.cache} for it")
        elif path is None:
            entry = await self._request(sent, params)
            queue_s = entry.pop("queue_s")
        else:
            future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
            self._shared.inflight[key] = future
            try:
                entry = await self._request(sent, params)
                queue_s = entry.pop("queue_s")
                entry = self._store(path, entry)
                future.set_result(entry)
            except asyncio.CancelledError:
                future.cancel()
                raise
            except BaseException as exc:
                future.set_exception(exc)
                future.exception()  # retrieved: no "never retrieved" warning if none waits
                raise
            finally:
                self._shared.inflight.pop(key, None)
        prompt, completion = entry["prompt_tokens"], entry["completion_tokens"]
        priced_prompt = count_messages(messages) if prompt is None else prompt
        priced_completion = count_text(entry["text"]) if completion is None else completion
        served = str(entry.get("served_model") or self.model)
        log: dict[str, Any] = {"served_model": served} if served != self.model else {}
        if entry.get("tool_calls"):
            log["tool_calls"] = entry["tool_calls"]
        if entry.get("retries") and not cached:
            log["retries"] = entry["retries"]  # HTTP attempts beyond the first (SDK retries)
        if self.write_text:
            log["prompt"] = sent
            log["completion"] = entry["text"]
        return Completion(
            entry["text"],
            prompt,
            completion,
            entry["wall_s"],
            finish_reason=entry.get("finish_reason"),
            cached=cached,
            model=self.model,
            cost_usd=self.price(served, priced_prompt, priced_completion),
            queue_s=queue_s,
            log=log or None,
        )
