"""Problem protocols: algorithms are written once against the async one.

LLM-backed problems propose/evaluate through network calls, so the canonical protocol is
async. Plain synchronous problems are wrapped by :class:`SyncAdapter` and driven by
:func:`run_sync`, which steps the coroutine without an event loop (cheap, and usable
from inside an already-running loop such as a notebook).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Generic, Protocol, TypeVar

S = TypeVar("S")
A = TypeVar("A")
T = TypeVar("T")

__all__ = ["AsyncProblem", "Problem", "SyncAdapter", "gather_ordered", "run_sync", "use_gather"]


class Problem(Protocol[S, A]):
    """Synchronous search problem.

    Optionally also define ``rollout(state, rng) -> float``; MCTS uses it instead of a
    random playout when present.
    """

    def initial_state(self) -> S: ...

    def actions(self, state: S) -> Sequence[A]:
        """Candidate expansions ("propose" for LLM planners)."""
        ...

    def step(self, state: S, action: A) -> S: ...

    def score(self, state: S) -> float:
        """Heuristic value in [0, 1] ("evaluate" for LLM planners)."""
        ...

    def is_terminal(self, state: S) -> bool: ...

    def reward(self, state: S) -> float:
        """Terminal value in [0, 1]; ranks solutions and feeds MCTS backprop."""
        ...


class AsyncProblem(Protocol[S, A]):
    """Async twin of :class:`Problem`; optional ``async rollout(state, rng) -> float``."""

    async def initial_state(self) -> S: ...

    async def actions(self, state: S) -> Sequence[A]: ...

    async def step(self, state: S, action: A) -> S: ...

    async def score(self, state: S) -> float: ...

    async def is_terminal(self, state: S) -> bool: ...

    async def reward(self, state: S) -> float: ...


class SyncAdapter(Generic[S, A]):
    """Expose a sync :class:`Problem` through the async protocol (no real awaiting)."""

    rollout: Callable[[S, random.Random], Awaitable[float]] | None

    def __init__(self, problem: Problem[S, A]) -> None:
        self.problem = problem
        sync_rollout: Callable[[S, random.Random], float] | None = getattr(problem, "rollout", None)
        self.rollout = None
        if sync_rollout is not None:

            async def rollout(state: S, rng: random.Random) -> float:
                return float(sync_rollout(state, rng))

            self.rollout = rollout

    async def initial_state(self) -> S:
        return self.problem.initial_state()

    async def actions(self, state: S) -> Sequence[A]:
        return self.problem.actions(state)

    async def step(self, state: S, action: A) -> S:
        return self.problem.step(state, action)

    async def score(self, state: S) -> float:
        return float(self.problem.score(state))

    async def is_terminal(self, state: S) -> bool:
        return bool(self.problem.is_terminal(state))

    async def reward(self, state: S) -> float:
        return float(self.problem.reward(state))


# True while run_sync drives a coroutine: there is no loop to schedule tasks on, so
# gather_ordered must await sequentially instead of using asyncio.gather.
_SYNC_DRIVEN: ContextVar[bool] = ContextVar("_SYNC_DRIVEN", default=False)


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (e.g. over a SyncAdapter) to completion.

    Avoids asyncio.run's per-call loop setup and works inside a running event loop.
    Raises RuntimeError if the coroutine actually suspends (a genuinely async problem
    was passed to a sync entry point).
    """
    token = _SYNC_DRIVEN.set(True)
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    finally:
        _SYNC_DRIVEN.reset(token)
    coro.close()
    raise RuntimeError(
        "problem suspended inside a sync entry point; use the *_async function instead"
    )


Gather = Callable[..., Awaitable[list[Any]]]
# A caller may install its own order-preserving gather (e.g. one that charges concurrent
# branches in its own notion of time); the search algorithms stay unaware of it.
_GATHER: ContextVar[Gather | None] = ContextVar("_GATHER", default=None)


@contextmanager
def use_gather(gather: Gather) -> Iterator[None]:
    """Run searches in this context with ``gather`` for their concurrent expansions."""
    token = _GATHER.set(gather)
    try:
        yield
    finally:
        _GATHER.reset(token)


async def gather_ordered(*aws: Awaitable[T]) -> list[T]:
    """Await all, results in argument order: concurrent under a loop, sequential in run_sync.

    Order-preserving, so trees are identical whichever way the search is driven.
    """
    if _SYNC_DRIVEN.get():
        return [await aw for aw in aws]
    custom = _GATHER.get()
    if custom is not None:
        return list(await custom(*aws))
    return list(await asyncio.gather(*aws))
