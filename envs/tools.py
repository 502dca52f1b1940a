"""The tool interface a planner sees, and the wrappers that add latency and record calls.

A planner gets a :class:`Toolbox`: a catalogue (names, descriptions, JSON-schema args) and one
coroutine, ``call(name, args)``, that returns an observation dict or raises :class:`ToolError`.
A ``ToolError`` is something the agent is meant to see and handle (a fault, a bad argument, a
missing document); any other exception escaping a tool is a bug in planarena and surfaces as
``harness_error``. Cross-cutting concerns are wrappers, Gymnasium style: latency, fault
injection (``envs.faults``) and the call log used by the grader and the metrics.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from planarena.envs import clock
from planarena.envs.jsontext import encoder
from planarena.envs.rng import KeyedDraws

# Transient kinds: a retry can help. Faults are injected by envs.faults; world errors
# (not_found, bad_args, unknown_tool) come from the tools themselves.
TRANSIENT_KINDS = frozenset({"http_503", "rate_limit_429", "timeout"})
# A tool refusing input that shows the plan's logic is wrong (a placeholder left unfilled, a
# retrieval hop missing before a synthesis): no fault, a retry cannot help, a replan can.
PLAN_LOGIC = "plan_logic"


class ToolError(Exception):
    """A tool failure the agent observes. ``kind`` names it; ``retryable`` says a retry can help."""

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        retryable: bool | None = None,
        retry_after: float | None = None,
        injected: bool = False,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.retryable = kind in TRANSIENT_KINDS if retryable is None else retryable
        self.retry_after = retry_after
        self.injected = injected

    def observation(self) -> str:
        """The text an agent sees, e.g. ``ERROR http_503: service unavailable``."""
        return f"ERROR {self.kind}: {self.message}"


class FaultedResult(dict[str, Any]):
    """A result a fault wrapper altered but returned normally (a "200 but wrong" payload).

    The agent sees an ordinary observation dict; :class:`CallLog` marks the call injected,
    with ``fault_kind`` as its ``error_kind``, and hands the agent a plain ``dict`` copy.
    """

    def __init__(self, data: Mapping[str, Any], *, fault_kind: str) -> None:
        super().__init__(data)
        self.fault_kind = fault_kind


@dataclass(frozen=True)
class ToolSpec:
    """What a planner may know about a tool."""

    name: str
    description: str
    parameters: Mapping[str, Any]  # JSON schema of the args object

    def signature(self) -> str:
        props = self.parameters.get("properties", {})
        args = ", ".join(f"{k}: {v.get('type', 'any')}" for k, v in props.items())
        return f"{self.name}({args}) — {self.description}"


def validate_args(spec: ToolSpec, args: Any) -> dict[str, Any]:
    """Check args against the (small) JSON schema subset we use; raise ``bad_args``."""
    if not isinstance(args, dict):
        raise ToolError("bad_args", f"{spec.name} expects a JSON object of arguments")
    props: Mapping[str, Any] = spec.parameters.get("properties", {})
    for name in spec.parameters.get("required", []):
        if name not in args or args[name] in (None, ""):
            raise ToolError("bad_args", f"{spec.name}: missing required argument '{name}'")
    unknown = sorted(set(args) - set(props))
    if unknown:
        raise ToolError("bad_args", f"{spec.name}: unknown argument(s) {unknown}")
    py_types: dict[str, type | tuple[type, ...]] = {
        "string": str,
        "integer": int,
        "number": (int, float),
        "array": list,
        "object": dict,
        "boolean": bool,
    }
    for name, value in args.items():
        expected = py_types.get(props[name].get("type", ""), object)
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise ToolError(
                "bad_args", f"{spec.name}: argument '{name}' must be a {props[name].get('type')}"
            )
    return args


@dataclass
class ToolCallRecord:
    """One call as the env saw it (the grader and the metrics read these)."""

    tool: str
    args: dict[str, Any]
    t_start: float
    t_end: float
    ok: bool
    error_kind: str | None = None  # the ToolError's kind; on an ok call, the injected fault's
    injected: bool = False  # a fault was injected (raised, or an ok call's altered result)
    result: Any = None


class Toolbox:
    """The interface planners use. Subclasses implement ``_call``; wrappers delegate."""

    def catalogue(self) -> list[ToolSpec]:
        raise NotImplementedError

    def names(self) -> list[str]:
        return [spec.name for spec in self.catalogue()]

    def spec(self, name: str) -> ToolSpec | None:
        return next((s for s in self.catalogue() if s.name == name), None)

    async def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def facts(self) -> dict[str, Any]:
        """World facts a plan's pre-conditions may check (e.g. ``api_key_valid.search_web``);
        reading them costs no call. A world or wrapper adds what it knows."""
        return {"internet_accessible": True}

    def fact_names(self) -> dict[str, str]:
        """Each fact :meth:`facts` holds and what it is, read at no instant (a plan prompt
        names them before anything runs): ``flag`` (one value), ``tool`` (a table by tool
        name) or ``key`` (a table by the world's own keys, which a prompt does not show)."""
        tools = set(self.names())
        return {name: fact_kind(value, tools) for name, value in self.facts().items()}


def fact_kind(value: Any, tools: set[str]) -> str:
    """``flag``, ``tool`` or ``key`` (:meth:`Toolbox.fact_names`)."""
    if not isinstance(value, Mapping):
        return "flag"
    return "tool" if set(value) <= tools else "key"


class ToolboxWrapper(Toolbox):
    """Base class of wrappers: forwards everything to ``inner``."""

    def __init__(self, inner: Toolbox) -> None:
        self.inner = inner

    def catalogue(self) -> list[ToolSpec]:
        return self.inner.catalogue()

    def facts(self) -> dict[str, Any]:
        return self.inner.facts()

    def fact_names(self) -> dict[str, str]:
        return self.inner.fact_names()

    async def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        return await self.inner.call(name, args)


@dataclass(frozen=True)
class LatencyProfile:
    """Heavy-tailed (log-normal) latency of one tool, in simulated seconds."""

    median_s: float
    sigma: float = 0.6
    cap_s: float = 60.0

    def draw(self, u: float) -> float:
        """Inverse-CDF draw from a uniform ``u`` (keeps one named draw per call)."""
        u = min(max(u, 1e-9), 1 - 1e-9)
        z = _probit(u)
        return min(self.cap_s, self.median_s * math.exp(self.sigma * z))


def _probit(p: float) -> float:
    """Inverse standard normal CDF (Acklam's rational approximation; |error| < 1.2e-9)."""
    a = (
        -3.969683028665376e01,
        2.209460984245205e02,
        -2.759285104469687e02,
        1.383577518672690e02,
        -3.066479806614716e01,
        2.506628277459239e00,
    )
    b = (
        -5.447609879822406e01,
        1.615858368580409e02,
        -1.556989798598866e02,
        6.680131188771972e01,
        -1.328068155288572e01,
    )
    c = (
        -7.784894002430293e-03,
        -3.223964580411365e-01,
        -2.400758277161838e00,
        -2.549732539343734e00,
        4.374664141464968e00,
        2.938163982698783e00,
    )
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)
    lo = 0.02425
    if p < lo:
        q = math.sqrt(-2 * math.log(p))
        return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / (
            (((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1
        )
    if p > 1 - lo:
        return -_probit(1 - p)
    q = p - 0.5
    r = q * q
    return (
        (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5])
        * q
        / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
    )


_ARGS_KEY = encoder(sort_keys=True, ensure_ascii=False, default=str)


def args_key(args: Mapping[str, Any]) -> str:
    """A canonical text form of args, used to key per-argument draws and faults."""
    return _ARGS_KEY(args)


class CallCounter:
    """Counts calls per (tool, args) so repeated identical calls get distinct named draws."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str], int] = {}

    def next(self, tool: str, key: str) -> int:
        n = self._counts.get((tool, key), 0)
        self._counts[(tool, key)] = n + 1
        return n


class LatencyWrapper(ToolboxWrapper):
    """Charges each call its simulated latency on the current branch's clock."""

    def __init__(
        self,
        inner: Toolbox,
        profiles: Mapping[str, LatencyProfile],
        *,
        seed_keys: tuple[object, ...],
        default: LatencyProfile = LatencyProfile(1.0),
    ) -> None:
        super().__init__(inner)
        self.profiles = profiles
        self.default = default
        self.seed_keys = seed_keys
        self.draws = KeyedDraws(*seed_keys)
        self.counter = CallCounter()

    async def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        key = args_key(args)
        n = self.counter.next(name, key)
        profile = self.profiles.get(name, self.default)
        clock.advance(profile.draw(self.draws.uniform01("latency", name, key, n)))
        return await self.inner.call(name, args)


@dataclass
class CallLog(ToolboxWrapper):
    """Outermost wrapper: records every call with its simulated start and end."""

    inner: Toolbox
    records: list[ToolCallRecord] = field(default_factory=list)
    on_call: Callable[[ToolCallRecord], None] | None = None

    async def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        start = clock.now()
        record = ToolCallRecord(tool=name, args=args, t_start=start, t_end=start, ok=False)
        try:
            result = await self.inner.call(name, args)
            record.ok = True
            if isinstance(result, FaultedResult):  # returned ok, but a fault altered it
                record.injected = True
                record.error_kind = result.fault_kind
                result = dict(result)
            record.result = result
            return result
        except ToolError as err:
            record.error_kind = err.kind
            record.injected = err.injected
            raise
        finally:
            record.t_end = clock.now()
            self.records.append(record)
            if self.on_call is not None:
                self.on_call(record)
