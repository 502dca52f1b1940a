"""The ground truth of an episode's post-conditions: wrong results returned, caught, false alarms.

A post-condition is worth what it catches and what it wrongly refuses, and both need the truth
that only the harness holds. Per episode, three counts go into the record:

- ``wrong_returned``: tool calls that returned normally with a result an injected fault
  altered (a ``wrong_result``, "200 but wrong": the call log marks them ``ok`` and
  ``injected``);
- ``wrong_caught``: those of them a plan step's post-condition rejected;
- ``check_false_alarms``: post-condition rejections of a result the task could have used: not
  altered by a fault, and passing every check of the pool (``GoldStep.checks``) of a step the
  oracle says remains to be done with that tool (the one with the same arguments, if any).

The other rejections (``postcondition_catches`` less these two) refused a result that was
wrong for the task without any fault: a stale page, a decoy, an empty search for a report
that does not exist, a call no remaining step needs.

A rejection is read from the trace: the executor's ``step`` event with failure
``postcondition``, matched to the call that ended the step (a returned call with the same
simulated end, inside the step's interval; the step's own tool first, else its fallback's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from planarena.envs.oracle import Obs, Oracle, literal_args
from planarena.envs.tools import ToolCallRecord
from planarena.planners.conditions import ConditionError, evaluate_condition
from pydantic import BaseModel

CHECK_KEYS = ("wrong_returned", "wrong_caught", "check_false_alarms")
"""The record keys this module fills, in the record's order."""

R = TypeVar("R", bound=BaseModel)


def wrong_returned(call: ToolCallRecord) -> bool:
    """A call that returned normally with a result an injected fault altered."""
    return call.ok and call.injected


def rejected_calls(
    events: Sequence[Mapping[str, Any]], calls: Sequence[ToolCallRecord]
) -> list[int | None]:
    """Per post-condition rejection in ``events`` (in order), the index in ``calls`` of the
    result it rejected (None if no returned call ended that step, which the executor never
    does). Each call is matched at most once."""
    used: set[int] = set()
    out: list[int | None] = []
    for ev in events:
        if ev.get("event") != "step" or ev.get("failure") != "postcondition":
            continue
        t0, t1 = float(ev["t0"]), float(ev["t1"])
        ends = [
            i
            for i, c in enumerate(calls)
            if c.ok and c.t_end == t1 and c.t_start >= t0 and i not in used
        ]
        own = [i for i in ends if calls[i].tool == ev.get("tool")]
        match = (own or ends or [None])[-1]
        if match is not None:
            used.add(match)
        out.append(match)
    return out


def _observation(i: int, call: ToolCallRecord) -> Obs:
    return Obs(
        f"call{i}",
        call.tool,
        call.args,
        call.result if call.ok else None,
        None if call.ok else (call.error_kind or "error"),
    )


def _passes(checks: Sequence[str], result: Any) -> bool:
    try:
        return all(evaluate_condition(c, {"result": result}) for c in checks)
    except ConditionError:
        return False


def usable(oracle: Oracle, calls: Sequence[ToolCallRecord], i: int) -> bool:
    """Whether call ``i``'s result was one the task could use: no fault altered it, and it
    passes the whole check pool of a step that remains (given every call before it) with the
    call's tool (or as its fallback), the step with the same arguments when there is one."""
    call = calls[i]
    if not call.ok or call.injected:
        return False
    before = [_observation(k, c) for k, c in enumerate(calls[:i])]
    mine = [g for g in oracle.remaining(before) if call.tool in (g.tool, g.fallback)]
    same = [g for g in mine if literal_args(g.args, before) == call.args]
    return any(g.checks and _passes(g.checks, call.result) for g in same or mine)


def check_counts(
    events: Sequence[Mapping[str, Any]],
    calls: Sequence[ToolCallRecord],
    oracle_of: Callable[[], Oracle] | None = None,
) -> dict[str, int]:
    """The :data:`CHECK_KEYS` of one episode from its trace events and call log.
    ``oracle_of`` gives the task's oracle, asked only for a rejected result that no fault
    altered (without it, no rejection counts as a false alarm)."""
    returned = sum(wrong_returned(c) for c in calls)
    caught = alarms = 0
    oracle: Oracle | None = None
    for i in rejected_calls(events, calls):
        if i is None:
            continue
        if wrong_returned(calls[i]):
            caught += 1
        elif oracle_of is not None:
            oracle = oracle or oracle_of()
            alarms += usable(oracle, calls, i)
    return {"wrong_returned": returned, "wrong_caught": caught, "check_false_alarms": alarms}


def with_check_counts(
    record: R,
    events: Sequence[Mapping[str, Any]],
    calls: Sequence[ToolCallRecord],
    oracle_of: Callable[[], Oracle] | None = None,
) -> R:
    """``record`` with its :data:`CHECK_KEYS` set from the episode (the one hook the episode
    loop calls; the record's class declares the keys, so they keep their place in it)."""
    return record.model_copy(update=check_counts(events, calls, oracle_of))
