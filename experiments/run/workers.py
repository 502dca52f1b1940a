"""A job's episodes on several processes: the simulated LLM and the worlds are pure CPU, so a
job on one process uses one core however many it has.

Workers are forked after everything an episode needs is built (planners, envs, the job list),
so they inherit it instead of rebuilding or unpickling it. Worker ``k`` of ``n`` runs jobs
``k, k+n, k+2n, ...`` in job order (neighbouring jobs cost alike, so the shards stay level)
and sends each finished episode back as its two serialized lines; the parent stays the run
dir's only writer and writes them in job order. An episode's lines do not depend on which
process ran it: every draw is keyed by the seed and the episode, never by a process-wide
stream. A worker that dies or raises stops the job with its message; Ctrl-C reaches every
process of the group, and the parent ends the workers and keeps what it wrote.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import signal
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, TypeVar

J = TypeVar("J")

BATCH = 16
"""Episodes a worker sends at once: fewer messages, and at most ``BATCH`` x workers episodes
in flight (what a kill -9 can lose)."""


@dataclass(frozen=True)
class Finished:
    """One episode as a worker sends it back: what the parent's checks read, and the lines."""

    index: int
    planner: str
    task_id: str
    failure_mode: str | None
    detail: str
    line: str
    trace_line: str


class WorkerFailed(RuntimeError):
    """A worker process raised or died: our bug or the machine's, never an episode's."""


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def _die_with_parent(parent: int) -> None:
    """A worker must not outlive its parent: an orphan would keep the run dir's lock (its
    inherited descriptor) and compute for nobody. Linux kills it with the parent."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the broken pipe ends it at its next send
        pass
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)


def _worker(
    conn: Connection,
    shard: Sequence[Any],
    produce: Callable[[Any], Awaitable[Finished]],
    parent: int,
    inherited: Sequence[Connection],
) -> None:
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and ends us
    for other in inherited:  # the parent's reading ends: a send must fail once it is gone
        other.close()

    async def main() -> None:
        batch: list[Finished] = []
        for job in shard:
            batch.append(await produce(job))
            if len(batch) >= BATCH:
                conn.send(batch)
                batch = []
        if batch:
            conn.send(batch)

    try:
        asyncio.run(main())
        conn.send(None)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which stops the job
        with contextlib.suppress(OSError):
            conn.send(f"{type(exc).__name__}: {exc}")
    finally:
        conn.close()


def run_in_workers(
    jobs: Sequence[J], n_workers: int, produce: Callable[[J], Awaitable[Finished]]
) -> Iterator[Finished]:
    """Yields every job's :class:`Finished`, as workers send them (not in job order).

    ``produce`` runs in the forked workers (it may close over anything: nothing is pickled
    but the results). Closing the iterator early (an exception in the caller, Ctrl-C) ends the
    workers."""
    context = multiprocessing.get_context("fork")
    procs: list[multiprocessing.process.BaseProcess] = []
    live: dict[Connection, multiprocessing.process.BaseProcess] = {}
    try:
        for k in range(n_workers):
            receive, send = context.Pipe(duplex=False)
            inherited = [*live, receive]
            proc = context.Process(
                target=_worker,
                args=(send, jobs[k::n_workers], produce, os.getpid(), inherited),
                daemon=True,
            )
            proc.start()
            send.close()  # the parent's copy: EOF on `receive` once the worker is gone
            procs.append(proc)
            live[receive] = proc
        while live:
            for conn in wait(list(live)):
                try:
                    message = conn.recv()
                except EOFError:
                    proc = live.pop(conn)
                    proc.join()
                    raise WorkerFailed(
                        f"an episode worker died (exit code {proc.exitcode}) before finishing"
                    ) from None
                if message is None:
                    live.pop(conn).join()
                elif isinstance(message, str):
                    live.pop(conn).join()
                    raise WorkerFailed(f"an episode worker failed: {message}")
                else:
                    yield from message
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
        for proc in procs:
            proc.join()
        for conn in live:
            conn.close()
