"""Fault injection as a toolbox wrapper, seeded, configured by the ``faults=`` group.

Each rule names a fault kind, the tools it applies to, a rate and a *scope* that says what one
draw covers:

- ``call``: every call draws afresh (timeouts, and "200 but wrong" results, which return
  normally with a needed field null); a burst cap bounds how many consecutive calls with the
  same args can fail;
- ``window``: outages in *simulated time* (a 503 burst lasts seconds, not calls): time is cut
  into slots of ``slot_s`` seconds, each slot of each tool starts an outage with probability
  ``rate`` at a drawn offset. Its length is ``duration_s`` (fixed), or, with
  ``duration_median_s``, drawn per outage (per tool and slot) from a lognormal with that median
  and log-space spread ``duration_sigma``, clipped to [``duration_min_s``, ``duration_max_s``];
  either is then multiplied by ``duration_scale`` (``faults.duration_scale``). An outage may
  run over any number of later slots. Every call inside an outage fails, so an immediate retry
  fails again and a backoff that waits the outage out succeeds. A 429 (any scope) blocks the
  tool until its retry-after has elapsed: calls before then get the 429 again, so ignoring
  retry-after costs failures;
- ``episode``: one draw per tool per episode (an invalid API key stays invalid);
- ``args``: one draw per argument value, shared by all the rule's tools (a query that finds
  nothing finds nothing on the backup engine either; a password-protected PDF stays protected).

Draws are keyed by meaning (episode seed, tool, args, attempt), never by call order, so every
planner meets the same faults on the same task.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from statistics import NormalDist
from typing import Any, Literal

from planarena.envs import clock
from planarena.envs.rng import KeyedDraws
from planarena.envs.tools import (
    CallCounter,
    FaultedResult,
    Toolbox,
    ToolboxWrapper,
    ToolError,
    args_key,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

Scope = Literal["call", "episode", "args", "window"]
DEFAULT_DURATION_S = 4.0  # a window rule's outage length when it gives neither form
_NORMAL = NormalDist()

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
    slot_s: float = Field(default=30.0, gt=0.0)  # scope=window: one outage draw per slot
    # scope=window, how long an outage lasts: a fixed ``duration_s`` (4 s when nothing is
    # given), or a lognormal drawn per outage: median ``duration_median_s``, log-space standard
    # deviation ``duration_sigma``, clipped to [duration_min_s, duration_max_s]. Either is then
    # multiplied by ``duration_scale`` (the ``faults.duration_scale`` knob sets it).
    duration_s: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)
    duration_min_s: float = Field(default=1.0, gt=0.0, allow_inf_nan=False)
    duration_max_s: float = Field(default=600.0, gt=0.0, allow_inf_nan=False)
    duration_median_s: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)
    duration_sigma: float = Field(default=1.0, ge=0.0, le=5.0, allow_inf_nan=False)
    duration_scale: float = Field(default=1.0, gt=0.0, allow_inf_nan=False)
    args_key: list[str] | None = None  # scope=args: which args identify the thing (default all)
    match: dict[str, str] | None = None  # only calls whose args[k] contains the text v
    corrupt_fields: list[str] = Field(default_factory=lambda: ["revenue"])  # wrong_result:
    # fields of a successful result returned as null ("200 but wrong": only a post-condition
    # catches it)

    @field_validator("duration_max_s")
    @classmethod
    def _max_above_min(cls, value: float, info: ValidationInfo) -> float:
        low = info.data.get("duration_min_s")
        if low is not None and value < low:
            raise ValueError(f"is below duration_min_s={low}")
        return value

    @field_validator("duration_median_s")
    @classmethod
    def _median_alone_and_inside(cls, value: float | None, info: ValidationInfo) -> float | None:
        """A fixed length or a distribution, not both; a median inside the clip (otherwise
        it would not be the median)."""
        if value is None:
            return value
        if info.data.get("duration_s") is not None:
            raise ValueError(
                "give duration_s (a fixed outage length) or duration_median_s (a lognormal "
                "one), not both"
            )
        low, high = info.data.get("duration_min_s"), info.data.get("duration_max_s")
        if low is not None and high is not None and not low <= value <= high:
            raise ValueError(f"lies outside [duration_min_s, duration_max_s] = [{low}, {high}]")
        return value

    @property
    def longest_outage_s(self) -> float:
        """The longest an outage of this rule can last (how far back a slot can reach)."""
        if self.duration_median_s is None:
            return self.fixed_duration_s * self.duration_scale
        return self.duration_max_s * self.duration_scale

    @property
    def fixed_duration_s(self) -> float:
        return DEFAULT_DURATION_S if self.duration_s is None else self.duration_s

    def outage_length(self, u: float) -> float:
        """An outage's length from one uniform draw ``u`` in [0, 1): the ``u``-quantile of the
        rule's distribution, so a larger ``duration_scale`` lengthens every outage of the same
        draws by the same factor (paired comparisons across scales)."""
        if self.duration_median_s is None:
            return self.fixed_duration_s * self.duration_scale
        z = _NORMAL.inv_cdf(min(max(u, 1e-12), 1.0 - 1e-12))
        drawn = self.duration_median_s * math.exp(self.duration_sigma * z)
        return min(max(drawn, self.duration_min_s), self.duration_max_s) * self.duration_scale

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
    # study knobs, applied per run or cell (experiments/run/prepare.py): every rule's rate
    # times ``rate_scale`` (capped at 1), every outage's length times ``duration_scale``
    rate_scale: float = Field(default=1.0, ge=0.0, allow_inf_nan=False)
    duration_scale: float = Field(default=1.0, gt=0.0, allow_inf_nan=False)


def with_duration_scale(rules: Sequence[FaultRule], scale: float) -> list[FaultRule]:
    """``rules`` with every window rule's outages ``scale`` times as long (the same draws:
    an outage that started keeps its start, only its length grows)."""
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"faults.duration_scale={scale}: must be a positive number")
    return [
        r.model_copy(update={"duration_scale": r.duration_scale * scale})
        if r.scope == "window"
        else r
        for r in rules
    ]


class _ServiceUp(Mapping[str, bool]):
    """``service_up.<tool>`` at one instant, computed only for the tools a condition reads."""

    def __init__(self, injector: FaultInjector, t: float) -> None:
        self._injector = injector
        self._t = t
        self._names = injector.inner.names()

    def __getitem__(self, tool: str) -> bool:
        if tool not in self._names:
            raise KeyError(tool)
        return self._injector.service_up(tool, self._t)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


class FaultInjector(ToolboxWrapper):
    """Raises injected :class:`ToolError` s before the inner tool runs, per the rules; a
    ``wrong_result`` returns the inner result altered, as a :class:`FaultedResult` (so the
    call log marks the call injected). ``injected`` counts both."""

    def __init__(
        self, inner: Toolbox, rules: Sequence[FaultRule], *, seed_keys: tuple[object, ...]
    ) -> None:
        super().__init__(inner)
        self.rules = list(rules)
        self.seed_keys = seed_keys
        self.draws = KeyedDraws(*seed_keys)
        self.counter = CallCounter()
        self._streak: dict[tuple[int, str, str], int] = {}
        self._blocked_until: dict[str, float] = {}  # tool -> end of a 429's retry-after
        self._key_valid: dict[str, bool] | None = None
        self._episode_hits: dict[tuple[int, str], bool] = {}
        # (rule, tool, slot) -> (start, length) of that slot's outage, or None
        self._outages: dict[tuple[int, str, int], tuple[float, float] | None] = {}
        self._by_tool: dict[str, list[tuple[int, FaultRule]]] = {}
        self.injected = 0

    def _rules_of(self, tool: str) -> list[tuple[int, FaultRule]]:
        """(index, rule) of the rules that may apply to ``tool`` (its name listed, a positive
        rate), in rule order; ``applies`` still checks a rule's ``match`` per call."""
        known = self._by_tool.get(tool)
        if known is None:
            known = [(i, r) for i, r in enumerate(self.rules) if tool in r.tools and r.rate > 0.0]
            self._by_tool[tool] = known
        return known

    def _episode_hit(self, index: int, rule: FaultRule, tool: str) -> bool:
        """Drawn once per episode (and kept: every call of the tool asks again)."""
        known = self._episode_hits.get((index, tool))
        if known is None:
            known = self.draws.uniform01("fault", index, rule.kind, tool) < rule.rate
            self._episode_hits[(index, tool)] = known
        return known

    def _in_outage(self, index: int, rule: FaultRule, tool: str, t: float) -> bool:
        """Whether simulated time ``t`` falls in an outage of ``tool``: this slot's, or an
        earlier slot's that runs over (as far back as the rule's longest outage reaches)."""
        slot = int(t // rule.slot_s)
        back = math.ceil(rule.longest_outage_s / rule.slot_s)
        for k in range(slot, max(slot - back, 0) - 1, -1):
            outage = self._outage(index, rule, tool, k)
            if outage is not None and outage[0] <= t < outage[0] + outage[1]:
                return True
        return False

    def _outage(self, index: int, rule: FaultRule, tool: str, k: int) -> tuple[float, float] | None:
        """(start, length) of the outage of slot ``k`` (None: no outage in that slot); drawn
        once, keyed by rule, tool and slot, so every planner meets the same outages."""
        key = (index, tool, k)
        if key in self._outages:
            return self._outages[key]
        outage = None
        if self.draws.uniform01("outage", index, rule.kind, tool, k) < rule.rate:
            start = (k + self.draws.uniform01("outage-at", index, tool, k)) * rule.slot_s
            length = rule.outage_length(
                0.5
                if rule.duration_median_s is None  # a fixed length draws nothing
                else self.draws.uniform01("outage-length", index, tool, k)
            )
            outage = (start, length)
        self._outages[key] = outage
        return outage

    def predrawn(self, tool: str, args: Mapping[str, Any]) -> list[str]:
        """Fault kinds a call of ``tool`` with ``args`` meets whoever makes it and whenever:
        the episode- and argument-scoped draws (a dead key, a locked PDF, a query that finds
        nothing). These are fixed before any planner acts, so they give every planner the
        same denominator for recovery metrics."""
        kinds = []
        for index, rule in self._rules_of(tool):
            if not rule.applies(tool, args) or rule.scope not in ("episode", "args"):
                continue
            if rule.scope == "episode":
                hit = self._episode_hit(index, rule, tool)
            else:
                key = self._key(rule, args)
                hit = self.draws.uniform01("fault", index, rule.kind, key) < rule.rate
            if hit:
                kinds.append(rule.kind)
        return kinds

    def facts(self) -> dict[str, Any]:
        """World facts a pre-condition may check before a call: whether each tool's API key is
        valid (an ``invalid_api_key`` draw is a property of the world, checkable without
        calling), whether each tool's service is up right now (not in an outage window) and
        whether the network is reachable."""
        if self._key_valid is None:  # drawn once per episode: fixed before anyone acts
            self._key_valid = dict.fromkeys(self.inner.names(), True)
            for index, rule in enumerate(self.rules):
                if rule.kind != "invalid_api_key" or rule.scope != "episode" or rule.rate <= 0:
                    continue
                for tool in rule.tools:
                    if tool in self._key_valid and self._episode_hit(index, rule, tool):
                        self._key_valid[tool] = False
        return {
            **self.inner.facts(),
            "api_key_valid": self._key_valid,
            "service_up": _ServiceUp(self, clock.now()),
        }

    def fact_names(self) -> dict[str, str]:
        """The world's facts and the two tables by tool this wrapper adds (``service_up`` is
        read at the instant a condition is checked, so it is named without a clock)."""
        return {**self.inner.fact_names(), "api_key_valid": "tool", "service_up": "tool"}

    def service_up(self, tool: str, t: float) -> bool:
        return not any(
            rule.scope == "window" and tool in rule.tools and self._in_outage(i, rule, tool, t)
            for i, rule in enumerate(self.rules)
            if rule.rate > 0
        )

    def _key(self, rule: FaultRule, args: Mapping[str, Any]) -> str:
        if rule.args_key is None:
            return args_key(args)
        return args_key({k: args.get(k) for k in rule.args_key})

    async def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        key = args_key(args)
        attempt = self.counter.next(name, key)
        now = clock.now()
        if now < self._blocked_until.get(name, -1.0):  # still inside a 429's retry-after
            self.injected += 1
            clock.advance(0.05)
            raise ToolError(
                "rate_limit_429",
                f"{name}: {_MESSAGES['rate_limit_429']} (retry after "
                f"{self._blocked_until[name] - now:.1f} s)",
                retry_after=self._blocked_until[name] - now,
                injected=True,
            )
        for index, rule in self._rules_of(name):
            if not rule.applies(name, args):
                continue
            if rule.scope == "episode":
                hit = self._episode_hit(index, rule, name)
            elif rule.scope == "window":
                hit = self._in_outage(index, rule, name, now)
            elif rule.scope == "args":
                subset = self._key(rule, args)  # not ``key``: later rules key by the whole call
                hit = self.draws.uniform01("fault", index, rule.kind, subset) < rule.rate
            else:
                streak_key = (index, name, key)
                streak = self._streak.get(streak_key, 0)
                draw = self.draws.uniform01("fault", index, rule.kind, name, key, attempt)
                hit = streak < rule.max_consecutive and draw < rule.rate
                self._streak[streak_key] = streak + 1 if hit else 0
            if hit and rule.kind == "wrong_result":
                # counted once the call has returned: a call the tool itself refuses (a
                # not_found) raises its own, not injected, error and delivers no fault.
                # Returned normally, marked so the call log records it as injected.
                result = FaultedResult(await self.inner.call(name, args), fault_kind=rule.kind)
                self.injected += 1
                for field_name in rule.corrupt_fields:
                    if field_name in result:
                        result[field_name] = None
                return result
            if hit:
                self.injected += 1
                if rule.kind == "rate_limit_429" and rule.retry_after_s:
                    self._blocked_until[name] = now + rule.retry_after_s
                clock.advance(rule.cost_s)
                raise ToolError(
                    rule.kind,
                    f"{name}: {_MESSAGES[rule.kind]}",
                    retry_after=rule.retry_after_s,
                    injected=True,
                )
        return await self.inner.call(name, args)
