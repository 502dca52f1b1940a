"""The one LLM interface planners use, and its metering (tokens, time, cost per role).

A backend turns chat messages into text; each request declares its kind (what it asks for,
:mod:`planarena.planners.llm.protocol`). :class:`EpisodeLLM` wraps a backend for one episode:
it counts tokens from the real prompt and completion text (or the API's ``usage``), charges
simulated time (modelled, or the measured wall time of a real call), prices the call, and keeps
totals per role (planner, executor, evaluator, replanner, rollout).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol

from planarena.envs import caches, clock
from planarena.envs.jsontext import encoder
from planarena.planners.formats import PLAN_REVISION, Generated
from planarena.planners.llm.profiles import ModelProfile
from planarena.planners.llm.protocol import RequestContext
from planarena.planners.llm.tokens import (
    ENCODING,
    TOKENS_PER_MESSAGE,
    TOKENS_PER_REPLY,
    count_text,
)

Message = Mapping[str, str]
_DIGEST_JSON = encoder(ensure_ascii=False)


@lru_cache(maxsize=2048)  # recent messages; bounded
def _message_json(role: str, content: str) -> str:
    """``[role, content]`` as JSON: one item of :meth:`Request.digest_of`'s material."""
    return _DIGEST_JSON([role, content])


caches.register(_message_json.cache_clear)


ROLES = ("planner", "executor", "evaluator", "replanner", "rollout")


class BudgetExhausted(Exception):
    """A compute budget of the episode would be exceeded by the next call: the planner stops.

    Raised by :meth:`EpisodeLLM.complete` *before* the call, so no planner can overshoot a
    budget by more than the calls it already had in flight."""


class JobBudgetExhausted(BudgetExhausted):
    """The job's cost cap (``budget.max_cost_usd``) refused the call: the episode stops as for
    any budget, with the stop reason ``job_cost_cap``."""


class SpendGate(Protocol):
    """Decides, before each LLM call of an episode, whether the job may still spend: raises
    :class:`JobBudgetExhausted` to refuse it. Sees the episode's running :class:`Usage`."""

    def check(self, usage: Usage) -> None: ...


class EndpointError(Exception):
    """The LLM endpoint did not answer the request: unreachable, timed out, refused the key,
    or rejected it with an HTTP 4xx/5xx error (a prompt beyond the model's context included).

    Not the agent's failure: the episode is recorded as ``infrastructure_error``, left out of
    the tables and run again on resume. ``kind`` names the error (the SDK's exception class,
    or ``ContextLengthExceeded``); the message starts with it."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


@dataclass(frozen=True)
class Budget:
    """Per-episode compute limits that bind every planner alike (None = unlimited)."""

    max_tokens: int | None = None
    max_calls: int | None = None


@dataclass(frozen=True)
class Request:
    """The identity of one LLM request in an episode: what was asked, and how many times the
    very same messages were asked before in this episode. Backends key their random draws
    (sim) and their response cache (real models) by it, never by who sends the request, so the
    same prompt gets the same answer from whichever planner sends it, and the k-th identical
    request (a second proposal, another rollout) is a distinct request.

    ``kind`` is what the request declares it asks for (a
    :class:`~planarena.planners.llm.protocol.RequestKind`; None when the planner declared none).
    It rides along for the backend to answer by, and is not part of the identity: the same
    messages keep the same draws whatever kind they are sent as."""

    digest: str
    occurrence: int = 0
    # the prompt's o200k token count, already taken for the budget: passed along so a backend
    # need not count it again (not part of the identity)
    o200k_prompt: int | None = field(default=None, compare=False)
    kind: str | None = field(default=None, compare=False)
    # what the request is about, as data (observations, the plan, the candidates): the
    # simulated LLM answers from it, a real backend ignores it; not part of the identity
    context: RequestContext | None = field(default=None, compare=False)

    @staticmethod
    def digest_of(messages: Sequence[Message]) -> str:
        """A hash of the JSON list ``[[role, content], ...]``, built from each message's
        encoding (cached: a transcript resends the same messages every turn)."""
        material = "[" + ", ".join([_message_json(m["role"], m["content"]) for m in messages]) + "]"
        return hashlib.blake2b(material.encode(), digest_size=16).hexdigest()


class PromptReader:
    """A request's digest (:meth:`Request.digest_of`) and o200k prompt tokens
    (:func:`~planarena.planners.llm.tokens.count_messages`), continued from the last request's
    when its messages begin with the very same message texts (a transcript that grows turn by
    turn is hashed and counted once, not once a turn). Equal to the two functions for any
    messages."""

    __slots__ = ("_seen", "_state", "_tokens")

    def __init__(self) -> None:
        self._seen: list[tuple[str, str]] = []  # the (role, content) objects read last
        self._state = hashlib.blake2b(b"[", digest_size=16)  # the material after them
        self._tokens = TOKENS_PER_REPLY

    def read(self, messages: Sequence[Message]) -> tuple[str, int]:
        """(digest, prompt tokens) of ``messages``."""
        seen = self._seen
        n = len(seen)
        if (
            n
            and n <= len(messages)
            and all(
                messages[i]["role"] is r and messages[i]["content"] is c
                for i, (r, c) in enumerate(seen)
            )
        ):
            state, tokens = self._state.copy(), self._tokens
        else:
            n, state, tokens = 0, hashlib.blake2b(b"[", digest_size=16), TOKENS_PER_REPLY
        for i in range(n, len(messages)):
            role, content = messages[i]["role"], messages[i]["content"]
            item = _message_json(role, content)
            state.update((", " + item if i else item).encode())
            tokens += TOKENS_PER_MESSAGE + count_text(content)
        self._seen = [(m["role"], m["content"]) for m in messages]
        self._state, self._tokens = state, tokens
        final = state.copy()
        final.update(b"]")
        return final.hexdigest(), tokens


@dataclass(frozen=True)
class Completion:
    """What a backend returns. Token counts and wall time are None when the backend has none.

    A real backend also names the model that answered (``model``) and then prices the call
    itself (``cost_usd``; None when its price is unknown); without ``model`` the role's model
    profile names and prices it. ``cached`` marks a reply replayed from the response cache
    (its stored tokens and wall time are replayed with it; no request was sent), ``queue_s``
    the wall time the request waited for a concurrency slot, ``log`` extra fields for the
    trace event (the prompt and completion text, the served model)."""

    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    wall_s: float | None = None
    finish_reason: str | None = None
    cached: bool = False
    model: str | None = None
    cost_usd: float | None = None
    queue_s: float = 0.0
    log: Mapping[str, Any] | None = None


class LLMBackend(Protocol):
    """Turns one request's messages into a :class:`Completion`. ``request.kind`` says what the
    request asks for (the simulated LLM answers by it; a real model reads the prompt)."""

    name: str

    async def generate(
        self, messages: Sequence[Message], *, role: str, model: ModelProfile, request: Request
    ) -> Completion: ...


@dataclass
class Usage:
    """Per-episode totals."""

    calls: int = 0  # made by the planner: requests + cache hits
    requests: int = 0  # sent to a server (the simulator's calls count as requests)
    cache_hits: int = 0  # answered from the response cache (stored tokens and time replayed)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0  # of the priced calls
    unpriced_calls: int = 0  # calls to a model with no price entry: the episode's cost unknown
    o200k_tokens: int = 0  # prompt + completion counted with o200k_base, whatever the model
    server_counted: int = 0  # calls whose tokens are the API's usage (the model's tokenizer)
    served_by: set[str] = field(default_factory=set)  # the models that answered
    queue_s: float = 0.0  # wall time spent waiting for a concurrency slot
    by_role: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ROLES, 0))
    calls_by_role: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ROLES, 0))

    @property
    def total_cost_usd(self) -> float | None:
        """The episode's cost; None if any call was to a model with no known price."""
        return None if self.unpriced_calls else self.cost_usd

    @property
    def tokenizer(self) -> str:
        """Which tokenizer produced ``prompt_tokens``/``completion_tokens``: ``o200k_base``
        (counted here), ``server:<model>`` (the API's usage), or ``mixed``."""
        if not self.server_counted:
            return ENCODING
        if self.server_counted == self.calls:
            return "server:" + "+".join(sorted(self.served_by))
        return "mixed"


class EpisodeLLM:
    """The metered LLM handle a planner receives for one episode."""

    def __init__(
        self,
        backend: LLMBackend,
        models: Mapping[str, ModelProfile],
        *,
        trace: list[dict[str, Any]] | None = None,
        budget: Budget | None = None,
        cost_gate: SpendGate | None = None,
        plan_revision: int = PLAN_REVISION,
    ) -> None:
        if "default" not in models:
            raise ValueError("models must contain a 'default' profile")
        self.backend = backend
        self.models = models
        self.usage = Usage()
        self.trace = trace if trace is not None else []
        self.budget = budget or Budget()
        self.cost_gate = cost_gate  # the job's cost cap, if any
        self.plan_revision = plan_revision  # which plan prompt and reader the planners use
        self._asked: Counter[str] = Counter()
        self._prompts = PromptReader()

    def model_for(self, role: str) -> ModelProfile:
        return self.models.get(role, self.models["default"])

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        role: str,
        kind: str | None = None,
        context: RequestContext | None = None,
        tools: Sequence[Any] | None = None,
    ) -> str:
        """The model's reply to ``messages``. With a known ``finish_reason`` it is a
        :class:`~planarena.planners.formats.Generated` (a str), so parsers can refuse to repair an
        output cut at ``max_tokens``. ``kind`` declares what the request asks for (a
        :class:`~planarena.planners.llm.protocol.RequestKind`): the simulated LLM answers by it
        alone and refuses a request without one (``ProtocolError``); ``context`` states what
        the request is about as data (the simulated LLM reads it instead of the prompt; a real
        backend ignores it). ``tools`` (tool specs)
        offers native tool calling to a backend that supports it (``native_tools``); others
        ignore it and read the prompt."""
        if role not in ROLES:
            raise ValueError(f"unknown LLM role {role!r}; expected one of {ROLES}")
        model = self.model_for(role)
        digest, counted_prompt = self._prompts.read(messages)
        self._check_budget(counted_prompt)
        if self.cost_gate is not None:  # the job's cost cap: refused before anything is sent
            self.cost_gate.check(self.usage)
        request = Request(digest, self._asked[digest], counted_prompt, kind, context)
        self._asked[digest] += 1
        start = clock.now()
        extra = {"tools": tools} if tools and getattr(self.backend, "native_tools", False) else {}
        out = await self.backend.generate(
            messages, role=role, model=model, request=request, **extra
        )
        # a reasoning model's hidden reasoning, modelled (``ModelProfile.reasoning_tokens``):
        # completion tokens no text carries; a backend that counts its own tokens (a real
        # API's usage) already includes them
        reasoning = model.reasoning_tokens if out.completion_tokens is None else 0
        counted_completion = count_text(out.text) + reasoning
        prompt = out.prompt_tokens if out.prompt_tokens is not None else counted_prompt
        completion = (
            out.completion_tokens if out.completion_tokens is not None else counted_completion
        )
        clock.advance(out.wall_s if out.wall_s is not None else model.latency(prompt, completion))
        cost = model.cost(prompt, completion) if out.model is None else out.cost_usd
        u = self.usage
        u.calls += 1
        u.cache_hits += out.cached
        u.requests += not out.cached
        u.prompt_tokens += prompt
        u.completion_tokens += completion
        u.o200k_tokens += counted_prompt + counted_completion
        u.queue_s += out.queue_s
        if out.prompt_tokens is not None:
            u.server_counted += 1
            u.served_by.add(out.model or model.name)
        if cost is None:
            u.unpriced_calls += 1
        else:
            u.cost_usd += cost
        u.by_role[role] += prompt + completion
        u.calls_by_role[role] += 1
        event: dict[str, Any] = {
            "event": "llm",
            "role": role,
            "model": out.model or model.name,
            "t0": start,
            "t1": clock.now(),
            "prompt_tokens": prompt,
            "completion_tokens": completion,
        }
        if reasoning:
            event["reasoning_tokens"] = reasoning  # part of completion_tokens
        if out.finish_reason is not None:
            event["finish_reason"] = out.finish_reason
        if out.cached:
            event["replayed"] = True  # from the response cache: stored tokens and time
        if out.queue_s:
            event["queue_s"] = round(out.queue_s, 6)
        if out.log:
            event.update(out.log)
        self.trace.append(event)
        return out.text if out.finish_reason is None else Generated(out.text, out.finish_reason)

    def _check_budget(self, prompt_tokens: int) -> None:
        """Refuse a call that would cross a budget (its prompt alone is known beforehand)."""
        b, u = self.budget, self.usage
        if b.max_calls is not None and u.calls + 1 > b.max_calls:
            raise BudgetExhausted(f"LLM call budget of {b.max_calls} calls reached")
        used = u.prompt_tokens + u.completion_tokens
        if b.max_tokens is not None and used + prompt_tokens > b.max_tokens:
            raise BudgetExhausted(
                f"token budget of {b.max_tokens} reached ({used} used, next prompt {prompt_tokens})"
            )
