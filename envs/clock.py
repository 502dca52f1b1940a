"""Simulated time: concurrent branches overlap, so an episode's latency is its critical path.

Each asyncio task sees its own :class:`SimClock` through a context variable. ``run_parallel``
forks one clock per branch at the parent's current time and, when all branches finish, moves the
parent to the latest branch end. Tool latencies, backoff waits and modelled LLM time all advance
the current clock through :func:`advance`; nothing sleeps in wall time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")


class SimClock:
    """A monotone simulated clock in seconds."""

    __slots__ = ("now",)

    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"cannot move time backwards by {seconds}")
        self.now += seconds


_CURRENT: ContextVar[SimClock | None] = ContextVar("planarena_clock", default=None)
# Whether concurrently issued LLM calls overlap in simulated time (one switch for every
# planner: ``concurrent_llm_calls`` in the config). Off, they are charged one after another,
# as with a server that serves one request at a time.
_CONCURRENT: ContextVar[bool] = ContextVar("planarena_concurrent_calls", default=True)


def current_clock() -> SimClock:
    clock = _CURRENT.get()
    if clock is None:
        raise RuntimeError("no simulated clock is active; wrap the episode in use_clock()")
    return clock


def now() -> float:
    return current_clock().now


def advance(seconds: float) -> None:
    """Spend ``seconds`` of simulated time on the current branch."""
    current_clock().advance(seconds)


async def sleep(seconds: float) -> None:
    """A simulated wait (e.g. backoff); yields to the loop so concurrent branches interleave."""
    advance(seconds)
    await asyncio.sleep(0)


@contextmanager
def use_clock(clock: SimClock) -> Iterator[SimClock]:
    token = _CURRENT.set(clock)
    try:
        yield clock
    finally:
        _CURRENT.reset(token)


@contextmanager
def use_concurrency(concurrent: bool) -> Iterator[None]:
    token = _CONCURRENT.set(concurrent)
    try:
        yield
    finally:
        _CONCURRENT.reset(token)


async def gather(*aws: Awaitable[T]) -> list[T]:
    """The one clock-aware gather for concurrent LLM calls (and searches' expansions): each
    awaitable runs on its own branch of the clock and the caller resumes at the latest end;
    with concurrency switched off they run one after another on the caller's clock. Results
    are in argument order either way."""
    if not _CONCURRENT.get() or len(aws) <= 1:
        return [await aw for aw in aws]

    async def branch(aw: Awaitable[T]) -> T:
        return await aw

    return await run_parallel([lambda aw=aw: branch(aw) for aw in aws])


async def run_parallel(branches: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
    """Run branches concurrently in simulated time; the caller resumes at the latest end."""
    parent = current_clock()
    start = parent.now
    if len(branches) == 1:
        return [await branches[0]()]

    async def one(branch: Callable[[], Awaitable[T]]) -> tuple[T, float]:
        with use_clock(SimClock(start)) as clock:
            value = await branch()
            return value, clock.now

    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(one(b)) for b in branches]
    except BaseExceptionGroup as group_error:
        # the first branch's error, as a sequential run would have raised it (a budget
        # stop, or our own bug): callers handle one exception, never a group
        raise group_error.exceptions[0] from None
    outcomes = [t.result() for t in tasks]
    parent.now = max([start, *(end for _, end in outcomes)])
    return [value for value, _ in outcomes]
