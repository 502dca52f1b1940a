"""Fault injection as a toolbox wrapper, seeded, configured by the ``faults=`` group.

Each rule names a fault kind, the tools it applies to, a rate and a *scope* that says what one
draw covers:

- ``call``: every call draws afresh (transient 503, 429 with retry-after, timeouts, and
  "200 but wrong" results, which return normally with a needed field null); a burst
  cap bounds how many consecutive calls with the same args can fail, as real outages end;
- ``episode``: one draw per tool per episode (an invalid API key stays invalid);
- ``args``: one draw per argument value, shared by all the rule's tools (a query that finds
  nothing finds nothing on the backup engine either; a password-protected PDF stays protected).

Draws are keyed by meaning (episode seed, tool, args, attempt), never by call order, so every
planner meets the same faults on the same task.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from envs import clock
from envs.rng import uniform01
from envs.tools import CallCounter, Toolbox, ToolboxWrapper, ToolError, args_key

Scope = Literal["call", "episode", "args"]

_MESSAGES = {
    "http_503": "503 Service Unavailable",
    "rate_limit_429": "429 Too Many Requests",
    "timeout": "request timed out",
    "invalid_api_key": "401 invalid API key",
    "empty_result": "200 OK but no results for these arguments",
    "password_protected": "document is password-protected",
    "wrong_result": "200 OK, but the payload lacks what was asked for",
}


class FaultRule(BaseModel):
    """One kind of fault on some tools."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal[
        "http_503",
        "rate_limit_429",
        "timeout",
        "invalid_api_key",
        "empty_result",
        "password_protected",
        "wrong_result",
    ]
    tools: list[str]
    rate: float = Field(ge=0.0, le=1.0)
    scope: Scope = "call"
    max_consecutive: int = Field(default=2, ge=1)  # scope=call: longest burst on the same args
    cost_s: float = Field(default=0.2, ge=0.0)  # simulated time a faulted call takes
    retry_after_s: float | None = None  # rate_limit_429: what the server asks for
    args_key: list[str] | None = None  # scope=args: which args identify the thing (default all)
    match: dict[str, str] | None = None  # only calls whose args[k] contains the text v
    corrupt_fields: list[str] = Field(default_factory=lambda: ["revenue"])  # wrong_result:
    # fields of a successful result returned as null ("200 but wrong": only a post-condition
    # catches it)

    def applies(self, tool: str, args: Mapping[str, Any]) -> bool:
        if tool not in self.tools or self.rate <= 0.0:
            return False
        if self.match is None:
            return True
        return all(v.lower() in str(args.get(k, "")).lower() for k, v in self.match.items())


class FaultConfig(BaseModel):
    """The ``faults=`` config group: a named list of rules."""

    model_config = ConfigDict(extra="forbid")

    name: str = "custom"
    rules: list[FaultRule] = Field(default_factory=list)
    # share of tasks whose data does not exist (one competitor has not published): the honest
    # answer is to report failure. Drawn per task on its own stream, so raising it changes no
    # other property of any task.
    unreachable_rate: float = Field(default=0.0, ge=0.0, le=1.0)


class FaultInjector(ToolboxWrapper):
    """Raises injected :class:`ToolError` s before the inner tool runs, per the rules."""

    def __init__(
        self, inner: Toolbox, rules: Sequence[FaultRule], *, seed_keys: tuple[object, ...]
    ):
        super().__init__(inner)
        self.rules = list(rules)
        self.seed_keys = seed_keys
        self.counter = CallCounter()
        self._streak: dict[tuple[int, str, str], int] = {}
        self.injected = 0

    def _key(self, rule: FaultRule, args: Mapping[str, Any]) -> str:
        if rule.args_key is None:
            return args_key(args)
        return args_key({k: args.get(k) for k in rule.args_key})

    async def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        key = args_key(args)
        attempt = self.counter.next(name, key)
        for index, rule in enumerate(self.rules):
            if not rule.applies(name, args):
                continue
            if rule.scope == "episode":
                hit = uniform01(*self.seed_keys, "fault", index, rule.kind, name) < rule.rate
            elif rule.scope == "args":
                hit = (
                    uniform01(*self.seed_keys, "fault", index, rule.kind, self._key(rule, args))
                    < rule.rate
                )
            else:
                streak_key = (index, name, key)
                streak = self._streak.get(streak_key, 0)
                draw = uniform01(*self.seed_keys, "fault", index, rule.kind, name, key, attempt)
                hit = streak < rule.max_consecutive and draw < rule.rate
                self._streak[streak_key] = streak + 1 if hit else 0
            if hit and rule.kind == "wrong_result":
                self.injected += 1
                result = dict(await self.inner.call(name, args))
                for field_name in rule.corrupt_fields:
                    if field_name in result:
                        result[field_name] = None
                return result
            if hit:
                self.injected += 1
                clock.advance(rule.cost_s)
                raise ToolError(
                    rule.kind,
                    f"{name}: {_MESSAGES[rule.kind]}",
                    retry_after=rule.retry_after_s,
                    injected=True,
                )
        return await self.inner.call(name, args)
