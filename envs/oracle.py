"""Shared shapes of the ground-truth oracle that the simulated LLM reads.

The oracle answers one question: *given what an agent has observed so far, which steps remain,
done right?* (:meth:`remaining`). It knows nothing of planners: a ReAct turn, a first plan and
a replan are all the same question asked with different observations. Each gold step may carry
a ``trap`` (the same step done the locally attractive wrong way, e.g. a vague query) or a
``trap_plan`` (an attractive wrong way to go on, e.g. accept stale figures and move on).

A gold step also carries ``checks``: the post-conditions a careful model could think of for
it, from what the task needs of its result (the fields the answer states or a later step
reads, and the task's own conditions such as the fiscal year), never from the fault
configuration. A simulated model writes some of them into its plan; which way a result can
be wrong (the field a fault nulls) is not among what an oracle reads to build them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol

# Pseudo-tools of gold steps: stop and report that the goal cannot be reached; submit the
# answer in hand (as a trap: believing a wrong answer done).
REPORT_UNREACHABLE = "report_unreachable"
SUBMIT_ANSWER = "finish"


@dataclass(frozen=True)
class Ref:
    """A reference to the result of an observed call or of an earlier gold step."""

    key: str
    path: tuple[str, ...] = ()


@dataclass(frozen=True)
class Obs:
    """One observed tool call: ``error`` is the ToolError kind, or None on success."""

    key: str
    tool: str
    args: dict[str, Any]
    result: Any = None
    error: str | None = None


@dataclass
class GoldStep:
    """One correct remaining step; args may hold :class:`Ref` s to observations or gold steps."""

    key: str
    tool: str
    args: dict[str, Any]
    deps: list[str] = field(default_factory=list)
    post: list[str] = field(default_factory=list)
    pre: list[str] = field(default_factory=list)  # world facts to check before the call
    fallback: str | None = None
    trap: GoldStep | None = None  # the same step done the attractive wrong way
    trap_plan: list[GoldStep] | None = None  # an attractive wrong way to go on from here
    # the post-conditions a careful model could write (fault-independent; see the module doc)
    checks: list[str] = field(default_factory=list)


# A check ``result.<field> <op> <literal>`` whose comparison fails when the field is null
# (ordering against null is false, equality with a non-null literal is false): it already
# covers the field being missing.
_COVERS = re.compile(r"^result\.(\w+)\s*(?:==|>=|<=|>|<)\s*(?!\s|null\b|none\b)", re.IGNORECASE)


def null_check(name: str) -> str:
    """The post-condition that a result field is present: ``result.<name> != null``."""
    return f"result.{name} != null"


def check_pool(needed: Iterable[str], task_checks: Iterable[str] = ()) -> list[str]:
    """A step's pool of checks: a not-null check for each field of its result that the task
    needs, then the task's own conditions on the result. A field one of those conditions
    already compares (``result.year == 2023`` fails on a null year) gets no not-null check
    of its own: one check per field, so a model that writes each check with some chance
    covers each field with that chance."""
    return list(_check_pool(tuple(needed), tuple(task_checks)))


@lru_cache(maxsize=4096)
def _check_pool(needed: tuple[str, ...], task_checks: tuple[str, ...]) -> tuple[str, ...]:
    """:func:`check_pool`, cached: an oracle builds the same step's pool on every call."""
    covered = {m.group(1) for c in task_checks if (m := _COVERS.match(c.strip()))}
    nulls = [null_check(f) for f in dict.fromkeys(needed) if f not in covered]
    return tuple(dict.fromkeys([*nulls, *task_checks]))


class Oracle(Protocol):
    def remaining(
        self, observations: Sequence[Obs], overlooked: frozenset[str] = frozenset()
    ) -> list[GoldStep]:
        """The right remaining steps *as a model sees them*: observations whose keys are in
        ``overlooked`` are taken at face value (their subtle warning sign was missed)."""
        ...

    def subtle(self, observation: Obs) -> bool:
        """Whether an observation carries a warning sign a model may miss (a stale date, a
        null field): the model's chance to overlook it is a skill (``p_miss_signal``)."""
        ...

    def answer(self, observations: Sequence[Obs]) -> str | None: ...

    def partial_answer(self, observations: Sequence[Obs]) -> str: ...

    def hallucinated_tools(self) -> list[str]: ...

    def tool_names(self) -> frozenset[str]: ...


def resolve_ref(ref: Ref, observations: Sequence[Obs]) -> Any:
    """The literal value a Ref points at in the observations (None if missing)."""
    for obs in reversed(observations):
        if obs.key == ref.key and obs.error is None:
            value: Any = obs.result
            for part in ref.path:
                value = value.get(part) if isinstance(value, dict) else None
            return value
    return None


def literal_args(args: Any, observations: Sequence[Obs]) -> Any:
    """Args with every Ref replaced by the observed value (how an acting model writes them)."""
    if isinstance(args, Ref):
        return resolve_ref(args, observations)
    if isinstance(args, dict):
        return {k: literal_args(v, observations) for k, v in args.items()}
    if isinstance(args, list):
        return [literal_args(v, observations) for v in args]
    return args
