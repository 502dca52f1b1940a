"""The one episode loop: runs a job list's episodes (in process, concurrently or in worker
processes), appends their records in job order and stops on errors that are not the agent's."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from planarena.envs.jsontext import encoder
from planarena.experiments.records.schema import (
    EPISODES,
    JOB_COST_CAP,
    NOT_MEASURED,
    TRACES,
)
from planarena.experiments.run.cost_cap import CostCapReached, CostLedger, JobCostGate
from planarena.experiments.run.episode import EpisodeContext, EpisodeRecord, run_episode
from planarena.experiments.run.jobs import Job, JobList
from planarena.experiments.run.llm_factory import (
    INFRASTRUCTURE_ERRORS,
    InfrastructureError,
)
from planarena.experiments.run.workers import Finished, available_cores, can_fork, run_in_workers

_TRACE_JSON = encoder(default=str, sort_keys=True)


class OrderedWriter:
    """Appends records in job order even when episodes finish out of order. An episode's
    trace line is written before its record, so a complete record line commits both."""

    def __init__(self, episodes: Path, traces: Path | None, order: Sequence[int]) -> None:
        self.episodes = episodes.open("a", encoding="utf-8")
        self.traces = traces.open("a", encoding="utf-8") if traces else None
        self.order = order
        self.next = 0
        self.written = 0
        self.buffer: dict[int, tuple[str, str]] = {}
        self.closed = False

    def put(self, index: int, record: EpisodeRecord, trace: dict[str, Any]) -> None:
        if self.closed:
            return
        self.buffer[index] = (
            record.model_dump_json(),
            _TRACE_JSON(trace) if self.traces is not None else "",
        )
        self._drain()

    def _drain(self) -> None:
        while self.next < len(self.order) and self.order[self.next] in self.buffer:
            line, trace_line = self.buffer.pop(self.order[self.next])
            if self.traces is not None:
                self.traces.write(trace_line + "\n")
                self.traces.flush()
            self.episodes.write(line + "\n")
            self.episodes.flush()
            self.next += 1
            self.written += 1

    def put_lines(self, index: int, line: str, trace_line: str) -> None:
        """An episode serialized elsewhere (a worker process): the same lines as :meth:`put`."""
        if self.closed:
            return
        self.buffer[index] = (line, trace_line)
        self._drain()

    def close(self) -> None:
        self.closed = True
        self.episodes.close()
        if self.traces is not None:
            self.traces.close()


def _progress(total: int, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(
        total=total,
        disable=not enabled,
        desc="episodes",
        unit="ep",
        file=sys.stderr,
        dynamic_ncols=True,
        leave=False,
    )


class HarnessStop(RuntimeError):
    """The job stopped itself: an infrastructure error, or the same error every time."""


class FailFast:
    """Stops a job whose errors are not the agent's: when the endpoint is gone (it cannot be
    reached, times out, or refuses the key: :data:`INFRASTRUCTURE_ERRORS`) before it answered
    any request of the job, or in ``first_n`` episodes in a row after it did; or when
    the first ``first_n`` episodes all end in the same harness or infrastructure error (a bad
    value that raises in every episode, a model name the server does not serve).

    ``answered``: the endpoint already answered this job's preflight. A slow or faulty
    server's first chat reply can then be the first to fail without the server being gone
    (a fault drill against llama.cpp stopped a resume on one injected timeout)."""

    def __init__(self, first_n: int, *, answered: bool = False) -> None:
        self.first_n = first_n
        self.errors: list[str] = []
        self.any_clean = False
        self.unreachable_run = 0  # unreachable-endpoint episodes since the last clean one
        self.answered = answered  # the endpoint answered a request of this job

    def check(self, record: EpisodeRecord | Finished) -> None:
        self.answered = self.answered or int(getattr(record, "llm_requests", 0) or 0) > 0
        if record.failure_mode not in NOT_MEASURED:
            self.any_clean, self.unreachable_run = True, 0
            return
        where = f"{record.planner} on {record.task_id}"
        if record.detail.split(":", 1)[0] in INFRASTRUCTURE_ERRORS:
            # an endpoint that never answered this job is gone; one that did (a clean
            # episode, or a reply in any episode) is flaky until first_n episodes in a row
            # find it unreachable (each is rerun on resume)
            self.unreachable_run += 1
            alive = self.any_clean or self.answered
            if not alive or self.unreachable_run >= max(1, self.first_n):
                raise InfrastructureError(f"{record.detail} ({where})")
            return
        if self.any_clean or not self.first_n:
            return
        self.errors.append(record.detail)
        if len(self.errors) >= self.first_n and len(set(self.errors)) == 1:
            raise HarnessStop(
                f"the first {self.first_n} episodes all failed with the same "
                f"{record.failure_mode.replace('_', ' ')}: {record.detail}"
            )


async def run_jobs(
    cfg: DictConfig,
    jobs: JobList,
    contexts: Sequence[EpisodeContext],
    out_dir: Path,
    spent_usd: float = 0.0,
    *,
    endpoint_answered: bool = False,
) -> int:
    """Runs ``jobs`` (each under its cell's context), appending their records; returns how
    many were written (``endpoint_answered``: the preflight reached it; :class:`FailFast`).

    With ``budget.max_cost_usd`` the job's cost (``spent_usd`` already recorded, then each
    episode in job order) is capped (:mod:`planarena.experiments.run.cost_cap`); reaching it
    raises :class:`CostCapReached` once every record it allows is written."""
    # Long on purpose: the four ways of running (worker processes, in order, concurrent, and
    # each under the cost cap) share one writer, one guard and one progress bar, and the
    # closures below keep that state in one place instead of threading it through helpers.
    llm_cfg = OmegaConf.to_container(cfg.llm, resolve=True)
    assert isinstance(llm_cfg, dict)
    backend_kind = str(llm_cfg.get("backend", "sim"))
    budget_cfg = cfg.get("budget") or {}
    cap = budget_cfg.get("max_cost_usd")
    ledger = None if cap is None else CostLedger(float(cap), spent_usd)
    writer = OrderedWriter(
        out_dir / EPISODES,
        out_dir / TRACES if cfg.write_traces else None,
        jobs.positions,
    )
    guard = FailFast(int(cfg.get("fail_fast", 5) or 0), answered=endpoint_answered)
    n_workers = episode_workers(cfg, backend_kind, capped=ledger is not None, n_jobs=len(jobs))
    semaphore = asyncio.Semaphore(int(cfg.concurrency))
    bar = _progress(len(jobs), bool(cfg.progress))

    async def episode(
        job: Job, gate: JobCostGate | None = None
    ) -> tuple[EpisodeRecord, dict[str, Any]]:
        return await run_episode(contexts[job.cell], job, cost_gate=gate)

    def record(job: Job, rec: EpisodeRecord, trace: dict[str, Any]) -> None:
        try:
            guard.check(rec)
        finally:  # a stop (the endpoint gone, the same error every time) still records the
            writer.put(job.index, rec, trace)  # episode that showed it (it runs again on resume)
        bar.update(1)

    async def one(job: Job) -> None:
        async with semaphore:
            rec, trace = await episode(job)
            record(job, rec, trace)
        # yield to the event loop: Ctrl-C cancels the job at an await, and a simulated
        # episode may never suspend, so without this the whole job ran before it stopped
        await asyncio.sleep(0)

    async def one_capped(position: int, job: Job) -> None:
        """One episode under the job's cost cap: run against the live bound, then, in job
        order, recorded as it ran, run again with its exact allowance, or dropped."""
        assert ledger is not None
        ran: tuple[EpisodeRecord, dict[str, Any], JobCostGate] | None = None
        async with semaphore:
            if ledger.may_start(position):
                gate = ledger.gate(position)
                ran = (*await episode(job, gate), gate)
        await ledger.turn(position)  # every earlier episode recorded or dropped
        if ledger.stopped:
            ledger.done(position, None)
            return
        allowance = ledger.allowance()
        if ran is not None and ran[2].agrees_with(allowance):
            rec, trace = ran[0], ran[1]
        else:  # it sent a call its exact allowance refuses (or did not start): again, exactly
            ledger.reruns += 1
            async with semaphore:
                rec, trace = await episode(job, ledger.gate(position, allowance))
        record(job, rec, trace)
        ledger.done(position, rec.cost_usd or 0.0, cut=rec.stop_reason == JOB_COST_CAP)
        await asyncio.sleep(0)  # where Ctrl-C lands, as in one()

    async def produce(job: Job) -> Finished:  # in a worker process: the lines put() writes
        rec, trace = await episode(job)
        return Finished(
            job.index,
            rec.planner,
            rec.task_id,
            rec.failure_mode,
            rec.detail,
            rec.model_dump_json(),
            _TRACE_JSON(trace) if writer.traces is not None else "",
        )

    try:
        if n_workers > 1:
            from planarena.planners.llm.tokens import encoding

            encoding()  # loaded once here, not once per worker
            with closing(run_in_workers(jobs, n_workers, produce)) as results:
                for done in results:
                    try:
                        guard.check(done)
                    finally:  # an infrastructure stop still records it (rerun on resume)
                        writer.put_lines(done.index, done.line, done.trace_line)
                    bar.update(1)
                    # let the event loop run: Ctrl-C cancels this task at an await, and a
                    # loop with none ran every episode before the interrupt took effect
                    await asyncio.sleep(0)
        elif ledger is not None and int(cfg.concurrency) <= 1:
            for position, job in enumerate(jobs):
                await one_capped(position, job)
        elif ledger is not None:
            await asyncio.gather(*(one_capped(p, job) for p, job in enumerate(jobs)))
        elif int(cfg.concurrency) <= 1:
            for job in jobs:
                await one(job)
        else:
            await asyncio.gather(*(one(job) for job in jobs))
    finally:
        writer.close()
        bar.close()
    if ledger is not None and (ledger.cut or ledger.dropped):
        raise CostCapReached(ledger.summary(writer.written))
    return writer.written


MIN_JOBS_PER_WORKER = 16
"""``workers=auto`` forks no more workers than this many jobs each keep busy."""


def _parallel_launcher() -> bool:
    """Whether Hydra runs this job beside others (joblib, submitit, ...): their processes
    already use the cores."""
    if not HydraConfig.initialized():
        return False
    target = str(OmegaConf.select(HydraConfig.get(), "launcher._target_", default="") or "")
    return bool(target) and not target.endswith("BasicLauncher")


def episode_workers(cfg: DictConfig, backend: str, *, capped: bool, n_jobs: int) -> int:
    """Processes to run ``n_jobs`` episodes on. Only the simulated LLM is spread (a real
    LLM's episodes wait on the server: ``concurrency`` overlaps them in one process), never
    under a cost cap (charged in job order, in one process), and ``auto`` leaves the cores to
    a parallel launcher's other jobs."""
    setting = cfg.get("workers", "auto")
    if backend != "sim" or capped or not can_fork() or n_jobs < 2:
        return 1
    if setting == "auto":
        if _parallel_launcher():
            return 1
        return max(1, min(available_cores(), n_jobs // MIN_JOBS_PER_WORKER))
    return max(1, min(int(setting), n_jobs))
