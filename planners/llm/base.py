"""The one LLM interface planners use, and its metering (tokens, time, cost per role).

A backend turns chat messages into text. :class:`EpisodeLLM` wraps a backend for one episode:
it counts tokens from the real prompt and completion text (or the API's ``usage``), charges
simulated time (modelled, or the measured wall time of a real call), prices the call, and keeps
totals per role (planner, executor, evaluator, replanner, rollout).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from envs import clock
from planners.llm.profiles import ModelProfile
from planners.llm.tokens import count_messages, count_text

Message = Mapping[str, str]
ROLES = ("planner", "executor", "evaluator", "replanner", "rollout")


@dataclass(frozen=True)
class Completion:
    """What a backend returns. Token counts and wall time are None when the backend has none."""

    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    wall_s: float | None = None


class LLMBackend(Protocol):
    name: str

    async def generate(
        self, messages: Sequence[Message], *, role: str, model: ModelProfile
    ) -> Completion: ...


@dataclass
class Usage:
    """Per-episode totals."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    by_role: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ROLES, 0))
    calls_by_role: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ROLES, 0))


class EpisodeLLM:
    """The metered LLM handle a planner receives for one episode."""

    def __init__(
        self,
        backend: LLMBackend,
        models: Mapping[str, ModelProfile],
        *,
        trace: list[dict[str, Any]] | None = None,
    ) -> None:
        if "default" not in models:
            raise ValueError("models must contain a 'default' profile")
        self.backend = backend
        self.models = models
        self.usage = Usage()
        self.trace = trace if trace is not None else []

    def model_for(self, role: str) -> ModelProfile:
        return self.models.get(role, self.models["default"])

    async def complete(self, messages: Sequence[Message], *, role: str) -> str:
        if role not in ROLES:
            raise ValueError(f"unknown LLM role {role!r}; expected one of {ROLES}")
        model = self.model_for(role)
        start = clock.now()
        out = await self.backend.generate(messages, role=role, model=model)
        prompt = out.prompt_tokens if out.prompt_tokens is not None else count_messages(messages)
        completion = (
            out.completion_tokens if out.completion_tokens is not None else count_text(out.text)
        )
        clock.advance(out.wall_s if out.wall_s is not None else model.latency(prompt, completion))
        cost = model.cost(prompt, completion)
        u = self.usage
        u.calls += 1
        u.prompt_tokens += prompt
        u.completion_tokens += completion
        u.cost_usd += cost
        u.by_role[role] += prompt + completion
        u.calls_by_role[role] += 1
        self.trace.append(
            {
                "event": "llm",
                "role": role,
                "model": model.name,
                "t0": start,
                "t1": clock.now(),
                "prompt_tokens": prompt,
                "completion_tokens": completion,
            }
        )
        return out.text
