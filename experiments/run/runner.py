"""The ``planarena`` command: a Hydra app that runs planners x envs x complexities x tasks.

Every job writes into its Hydra run directory: ``episodes.jsonl`` (one record per episode,
appended in a fixed order as episodes finish, so a crash loses nothing and a rerun resumes),
``traces.jsonl``, ``episodes.parquet``, ``summary.md/.csv/.tex``, ``run.json`` (the
configuration's fingerprint) and ``status.json``; it prints the completion table. The same
command and seed give byte-identical records (``wall_s`` aside) whatever ``concurrency`` is.

Before any episode the config is validated (one line naming key, value and what is allowed),
a real LLM endpoint gets one request, and the run dir is locked and bound to the
configuration's fingerprint (see :mod:`planarena.experiments.records.store`). Errors that are not the agent's
stop the job with one line and a non-zero exit; they are never recorded as episodes.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
from array import array
from bisect import bisect_right
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from hydra.utils import instantiate
from omegaconf import DictConfig, ListConfig, OmegaConf
from planarena.configs import CONFIG_DIR
from planarena.envs import caches
from planarena.envs.base import COMPLEXITIES, Env, ParamError, Task, task_id
from planarena.envs.faults import FaultConfig
from planarena.envs.jsontext import encoder
from planarena.experiments.records import (
    EPISODES,
    INFRASTRUCTURE_ERROR,
    JOB_COST_CAP,
    NOT_MEASURED,
    STATUS_FILE,
    TRACES,
    RecordsError,
    RunDirError,
    RunLock,
    claim_identity,
    measured,
    repair_run_dir,
    write_json_atomic,
)
from planarena.experiments.run.cost_cap import CostCapReached, CostLedger, JobCostGate
from planarena.experiments.run.episode import EpisodeRecord, run_episode
from planarena.experiments.run.llm_factory import (
    INFRASTRUCTURE_ERRORS,
    BackendFactory,
    ConfigError,
    InfrastructureError,
    check_cost_cap,
    describe,
    llm_label,
    model_profiles,
    preflight,
    validated,
)
from planarena.experiments.run.workers import Finished, available_cores, can_fork, run_in_workers
from planarena.planners.base import Planner
from planarena.planners.llm.base import Budget
from pydantic import (
    BaseModel,
    ConfigDict,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    field_validator,
)

if TYPE_CHECKING:
    import pandas as pd


def _unique_suffix() -> str:
    return str(os.getpid())


def _job_dir_name(override_dirname: str) -> str:
    """A sweep job's dir from its overrides (``planner=react,seed=1``): stable when a sweep
    is extended; ``/`` escaped, very long names shortened with a hash."""
    import hashlib

    name = override_dirname.replace("/", "%2F") or "default"
    if len(name) > 200:
        name = name[:180] + "~" + hashlib.sha256(name.encode()).hexdigest()[:12]
    return name


# ``${planarena_unique:}`` makes default run dirs unique (the pid beside the time: two jobs
# started in the same second cannot share a dir); ``${planarena_job_dir:...}`` names sweep job
# dirs. Cached, so every read of the run dir in one job gives the same value.
OmegaConf.register_new_resolver("planarena_unique", _unique_suffix, use_cache=True, replace=True)
OmegaConf.register_new_resolver("planarena_job_dir", _job_dir_name, replace=True)

# One encoder for every trace line (``json.dumps`` with options builds one per call).
_TRACE_JSON = encoder(default=str, sort_keys=True)


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BudgetSettings(_Settings):
    max_tokens_per_episode: PositiveInt | None = None
    max_llm_calls_per_episode: PositiveInt | None = None
    max_cost_usd: PositiveFloat | None = None  # per job, accounted in job order (cost_cap)


class ExecutorSettings(_Settings):
    parallel: bool | None = None


class RunSettings(_Settings):
    """The typed schema of ``configs/config.yaml`` (groups are validated by their own models:
    skill and model profiles, fault rules, planner and env constructors)."""

    planner: dict[str, Any]
    env: dict[str, Any]
    llm: dict[str, Any]
    faults: dict[str, Any]
    complexity: list[str]
    n_tasks: PositiveInt
    trials: PositiveInt
    seed: int
    concurrency: PositiveInt
    workers: PositiveInt | Literal["auto"] = "auto"
    resume: bool
    progress: bool
    write_traces: bool
    figures: bool | None = None
    fail_fast: NonNegativeInt = 5
    concurrent_llm_calls: bool = True
    trial_faults: Literal["same", "redraw"] = "same"
    report_extra: Literal["seed_tables", "sensitivity", "budget_curves", "scenarios"] | None = None
    dry_run: bool = False  # estimate calls, tokens and dollars from a short sim pass; exit
    sensitivity: dict[str, Any] | None = None  # experiment=sensitivity: factors, corners
    budget_curves: dict[str, Any] | None = None  # experiment=budget_curves: budgets
    executor: ExecutorSettings = ExecutorSettings()
    budget: BudgetSettings = BudgetSettings()

    @field_validator("workers", mode="before")
    @classmethod
    def _workers(cls, value: Any) -> Any:
        if value == "auto" or (
            isinstance(value, int) and not isinstance(value, bool) and value > 0
        ):
            return value
        raise ValueError("must be a positive number of processes or auto")

    @field_validator("complexity", mode="before")
    @classmethod
    def _complexities(cls, value: Any) -> list[str]:
        values = as_list(value)
        if not values:
            raise ValueError(f"name at least one of {list(COMPLEXITIES)}")
        for v in values:
            if v not in COMPLEXITIES:
                raise ValueError(f"must be one of {list(COMPLEXITIES)}")
        twice = sorted({str(v) for v in values if values.count(v) > 1})
        if twice:  # each of its tasks would run twice, and the tables refuse duplicates
            raise ValueError(f"names {', '.join(twice)} more than once; name each once")
        return [str(v) for v in values]


@dataclass(frozen=True)
class TaskRef:
    """Which task a job runs: task ``number`` of an env's (seed, complexity) sequence, with
    the names its records carry. The task itself is built again when the job runs (tasks are
    1-2 KB each: kept for every job, they were most of a 100k-episode job's memory)."""

    env_name: str  # the config's key in ``env``
    complexity: str
    number: int
    env: str  # the env's own name, as records carry it (env=file names it by its file)
    task_id: str


class NamedRefs(Sequence[TaskRef]):
    """The refs of the first ``n`` tasks of an env that names its tasks by :func:`task_id`,
    each built when asked for."""

    def __init__(self, env_name: str, complexity: str, env: str, n: int) -> None:
        self.env_name, self.complexity, self.env, self.n = env_name, complexity, env, n

    def __len__(self) -> int:
        return self.n

    @overload
    def __getitem__(self, i: int) -> TaskRef: ...
    @overload
    def __getitem__(self, i: slice) -> list[TaskRef]: ...
    def __getitem__(self, i: int | slice) -> TaskRef | list[TaskRef]:
        if isinstance(i, slice):
            return [self[k] for k in range(self.n)[i]]
        k = range(self.n)[i]  # bounds and negative indices as a list has them
        return TaskRef(
            self.env_name, self.complexity, k, self.env, task_id(self.env, self.complexity, k)
        )


class TaskMaker:
    """Builds a job's task from its :class:`TaskRef`, keeping the last :attr:`keep` built
    (tasks are plain data that episodes only read)."""

    keep = 256
    """Tasks kept (the most recently used). The planners of a job run an env x complexity's
    tasks one after another: with up to this many tasks there, each is built once, not once
    a planner."""

    def __init__(self, envs: dict[str, Env], seed: int, unreachable_rate: float) -> None:
        self.envs = envs
        self.seed = seed
        self.unreachable_rate = unreachable_rate
        self._recent: OrderedDict[TaskRef, Task] = OrderedDict()

    def refs(self, env_name: str, complexity: str, n: int, chunk: int = 1000) -> Sequence[TaskRef]:
        """Refs of the first ``n`` tasks. An env that names its tasks by :func:`task_id` (as
        every env here does; checked on its first task, and on every task when it is built)
        is not asked for the others; any other env's tasks are generated ``chunk`` at a time
        and not kept."""
        if n <= 0:
            return []
        (first,) = self._generate(env_name, complexity, 1, 0)
        if first.task_id == task_id(first.env, complexity, 0):
            return NamedRefs(env_name, complexity, first.env, n)
        out: list[TaskRef] = []
        for start in range(0, n, chunk):
            tasks = self._generate(env_name, complexity, min(chunk, n - start), start)
            out += [
                TaskRef(env_name, complexity, start + i, t.env, t.task_id)
                for i, t in enumerate(tasks)
            ]
        return out

    def task(self, ref: TaskRef) -> Task:
        if (task := self._recent.get(ref)) is not None:
            self._recent.move_to_end(ref)
            return task
        (task,) = self._generate(ref.env_name, ref.complexity, 1, ref.number)
        if task.task_id != ref.task_id:  # an env whose task i depends on how many it made
            raise RuntimeError(f"env {ref.env_name!r} made {task.task_id}, not {ref.task_id}")
        self._recent[ref] = task
        if len(self._recent) > self.keep:
            self._recent.popitem(last=False)
        return task

    def _generate(self, env_name: str, complexity: str, n: int, start: int) -> list[Task]:
        return self.envs[env_name].generate(
            n,
            seed=self.seed,
            complexity=complexity,
            unreachable_rate=self.unreachable_rate,
            start=start,
        )


@dataclass(frozen=True)
class Job:
    index: int
    planner_name: str
    env_name: str
    ref: TaskRef
    trial: int
    maker: TaskMaker = field(compare=False, repr=False)

    @property
    def task(self) -> Task:
        return self.maker.task(self.ref)

    def key(self, seed: int, config_id: str) -> tuple[str, str, str, str, int, int, str]:
        r = self.ref
        return (self.planner_name, r.env, r.complexity, r.task_id, seed, self.trial, config_id)


def as_list(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple, ListConfig)):
        return list(value)
    if isinstance(value, str) and "," in value:
        return [v.strip() for v in value.split(",") if v.strip()]
    return [value]


def fault_config(cfg: DictConfig) -> FaultConfig:
    return validated(FaultConfig, OmegaConf.to_container(cfg.faults, resolve=True), "faults")  # type: ignore[arg-type]


class JobList(Sequence[Job]):
    """A job's episodes in job order (env, complexity, planner, task, trial), each
    :class:`Job` built when asked for: a list of them was ~0.4 KB per episode, most of a
    100k-episode job's memory before its records. ``positions`` (job indices, a ``range`` or
    an ``array``) selects a subset without copying the jobs: those left to run on resume,
    one worker's share."""

    def __init__(
        self,
        blocks: Sequence[tuple[str, Sequence[TaskRef]]],
        planners: Sequence[str],
        trials: int,
        maker: TaskMaker,
        positions: Sequence[int] | None = None,
    ) -> None:
        self.blocks = list(blocks)  # (env name, refs) per env x complexity, in job order
        self.planners = list(planners)
        self.trials = trials
        self.maker = maker
        self.starts = [0]
        for _, refs in self.blocks:
            self.starts.append(self.starts[-1] + len(self.planners) * len(refs) * trials)
        self.positions: Sequence[int] = range(self.starts[-1]) if positions is None else positions

    def __len__(self) -> int:
        return len(self.positions)

    def job(self, index: int) -> Job:
        """The job with index ``index`` in the whole job (not in this selection)."""
        b = bisect_right(self.starts, index) - 1
        env_name, refs = self.blocks[b]
        offset = index - self.starts[b]
        per_planner = len(refs) * self.trials
        planner, rest = divmod(offset, per_planner)
        task, trial = divmod(rest, self.trials)
        return Job(index, self.planners[planner], env_name, refs[task], trial, self.maker)

    @overload
    def __getitem__(self, i: int) -> Job: ...
    @overload
    def __getitem__(self, i: slice) -> JobList: ...
    def __getitem__(self, i: int | slice) -> Job | JobList:
        if isinstance(i, slice):
            return self.select(self.positions[i])
        return self.job(self.positions[i])

    def __iter__(self) -> Iterator[Job]:
        return map(self.job, self.positions)

    def select(self, positions: Sequence[int]) -> JobList:
        """These jobs (by job index) of the same grid."""
        chosen = JobList.__new__(JobList)
        chosen.__dict__.update(self.__dict__)
        chosen.positions = positions
        return chosen

    def without(self, done: Callable[[Job], bool]) -> JobList:
        """The jobs not ``done`` (all of them, unchanged, when none is)."""
        left = array("q", (j.index for j in self if not done(j)))
        return self if len(left) == len(self) else self.select(left)


def build_jobs(
    cfg: DictConfig, planners: dict[str, Planner], envs: dict[str, Env], faults: FaultConfig
) -> JobList:
    maker = TaskMaker(envs, int(cfg.seed), faults.unreachable_rate)
    complexities = [str(c) for c in as_list(cfg.complexity)]
    blocks = [
        (env_name, maker.refs(env_name, complexity, int(cfg.n_tasks)))
        for env_name in envs
        for complexity in complexities
    ]
    return JobList(blocks, list(planners), int(cfg.trials), maker)


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
    """Stops a job whose errors are not the agent's: at once when the endpoint is gone (it
    cannot be reached, times out, or refuses the key: :data:`INFRASTRUCTURE_ERRORS`), or when
    the first ``first_n`` episodes all end in the same harness or infrastructure error (a bad
    value that raises in every episode, a model name the server does not serve)."""

    def __init__(self, first_n: int) -> None:
        self.first_n = first_n
        self.errors: list[str] = []
        self.any_clean = False

    def check(self, record: EpisodeRecord | Finished) -> None:
        if record.failure_mode not in NOT_MEASURED:
            self.any_clean = True
            return
        where = f"{record.planner} on {record.task_id}"
        if record.detail.split(":", 1)[0] in INFRASTRUCTURE_ERRORS:
            raise InfrastructureError(f"{record.detail} ({where})")
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
    planners: dict[str, Planner],
    envs: dict[str, Env],
    faults: FaultConfig,
    out_dir: Path,
    config_id: str = "",
    spent_usd: float = 0.0,
) -> int:
    """Runs ``jobs``, appending their records; returns how many were written.

    With ``budget.max_cost_usd`` the job's cost (``spent_usd`` already recorded, then each
    episode in job order) is capped (:mod:`planarena.experiments.run.cost_cap`); reaching it raises
    :class:`CostCapReached` once every record it allows is written."""
    llm_cfg = OmegaConf.to_container(cfg.llm, resolve=True)
    assert isinstance(llm_cfg, dict)
    factory = BackendFactory(llm_cfg)
    models = model_profiles(llm_cfg)
    label = llm_label(llm_cfg)
    budget_cfg = cfg.get("budget") or {}
    budget = Budget(
        max_tokens=budget_cfg.get("max_tokens_per_episode"),
        max_calls=budget_cfg.get("max_llm_calls_per_episode"),
    )
    cap = budget_cfg.get("max_cost_usd")
    ledger = None if cap is None else CostLedger(float(cap), spent_usd)
    writer = OrderedWriter(
        out_dir / EPISODES,
        out_dir / TRACES if cfg.write_traces else None,
        jobs.positions,
    )
    guard = FailFast(int(cfg.get("fail_fast", 5) or 0))
    n_workers = episode_workers(cfg, factory.kind, capped=ledger is not None, n_jobs=len(jobs))
    semaphore = asyncio.Semaphore(int(cfg.concurrency))
    bar = _progress(len(jobs), bool(cfg.progress))
    seed = int(cfg.seed)
    extra: dict[str, Any] = {}
    if "concurrent_llm_calls" in cfg:  # simulated-time overlap of concurrent LLM calls
        extra["concurrent_llm_calls"] = bool(cfg.concurrent_llm_calls)
    if "trial_faults" in cfg:  # trials of a task meet the same world, or a redrawn one
        extra["redraw_faults"] = cfg.trial_faults == "redraw"

    async def episode(
        job: Job, gate: JobCostGate | None = None
    ) -> tuple[EpisodeRecord, dict[str, Any]]:
        env = envs[job.env_name]
        task = job.task
        seed_keys = (seed, task.env, task.task_id, job.trial)
        # the LLM stream is keyed by (seed, env, task, trial) and each request: same prompt,
        # same answer, whichever planner sends it
        backend = factory.for_episode(env, task, seed_keys)
        return await run_episode(
            planner_name=job.planner_name,
            planner=planners[job.planner_name],
            env=env,
            task=task,
            backend=backend,
            llm_label=label,
            faults_label=faults.name,
            models=models,
            rules=faults.rules,
            seed=seed,
            trial=job.trial,
            budget=budget,
            config_id=config_id,
            cost_gate=gate,
            **extra,
        )

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


def instantiate_group(node: DictConfig | None, group: str) -> dict[str, Any]:
    if node is None:
        return {}
    out = {}
    for name, spec in node.items():
        try:
            out[name] = instantiate(spec)
        except Exception as exc:  # noqa: BLE001 - a constructor rejecting a config value
            cause = exc.__cause__ or exc
            if isinstance(cause, ValidationError):  # a typed constructor (planners.params)
                raise ConfigError(describe(cause, f"{group}.{name}")) from None
            if isinstance(cause, ParamError):  # an env's range check: "key=value: allowed"
                raise ConfigError(f"{group}.{name}.{cause}") from None
            # one line: a message's own lines (a family file's every problem) joined by "; "
            text = "; ".join(" ".join(x.split()) for x in str(cause).splitlines() if x.strip())
            raise ConfigError(f"{group}.{name}: {type(cause).__name__}: {text}") from None
    return out


FAMILY_DIGEST = "declaration_sha256"
"""The key, beside ``env.<name>.path`` in the run's identity (``run.json``), holding the hash
of the family file's declaration as loaded."""


@dataclass
class Prepared:
    """A validated config, its planners, envs, faults and jobs: nothing touched on disk."""

    cfg: DictConfig
    container: dict[str, Any]
    planners: dict[str, Planner]
    envs: dict[str, Env]
    faults: FaultConfig
    jobs: JobList


def validate(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config, checked against its schema (and the LLM's skill and model
    profiles); raises :class:`ConfigError` naming key, value and what is allowed."""
    container = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(container, dict)
    container.pop("hydra", None)
    settings = validated(RunSettings, container, "")
    # the skill profile with its overrides; the backend's key (a dry run needs none)
    BackendFactory(container["llm"], check_key=not settings.dry_run)
    model_profiles(container["llm"])
    check_cost_cap(container)  # a cost cap needs the model's price
    if isinstance(settings.workers, int) and settings.workers > 1 and not settings.dry_run:
        if container["llm"].get("backend", "sim") != "sim":
            raise ConfigError(
                f"workers={settings.workers}: worker processes run the simulated LLM; a real "
                "LLM's episodes overlap in one process with concurrency=N (and "
                "llm.max_concurrency)"
            )
        if settings.budget.max_cost_usd is not None:
            raise ConfigError(
                f"workers={settings.workers} with budget.max_cost_usd: the cost cap charges "
                "episodes in job order in one process; drop one of them"
            )
    return container


def prepare(cfg: DictConfig, container: dict[str, Any] | None = None) -> Prepared:
    """Validate the whole config and build everything an episode needs (planners, envs,
    faults, jobs) before any episode runs; nothing is touched on disk."""
    container = container or validate(cfg)
    parallel = OmegaConf.select(cfg, "executor.parallel")
    if parallel is not None:  # the ablation switch: one value for every plan planner
        for spec in cfg.planner.values():
            if "parallel" in spec:
                spec.parallel = bool(parallel)
    planners: dict[str, Planner] = instantiate_group(cfg.planner, "planner")
    envs: dict[str, Env] = instantiate_group(cfg.env, "env")
    if not planners or not envs:
        raise ConfigError("select at least one planner and one env")
    for name, env in envs.items():  # a family file's content is part of the run's identity
        spec = container.get("env", {}).get(name)
        if isinstance(spec, dict) and spec.get("path") is not None and hasattr(env, "digest"):
            spec[FAMILY_DIGEST] = env.digest  # (the path alone: an edited file resumed)
    faults = fault_config(cfg)
    jobs = build_jobs(cfg, planners, envs, faults)
    return Prepared(cfg, container, planners, envs, faults, jobs)


def run(
    cfg: DictConfig,
    out_dir: Path,
    *,
    prepared: Prepared | None = None,
    lock: RunLock | None = None,
    on_claim: Callable[[str], None] | None = None,
) -> Path:
    """Run the configured sweep into ``out_dir``; returns the episodes file.

    Validates first; then, holding the dir's lock (``lock``, or one taken here for the call),
    binds the dir to the config's fingerprint, repairs the records files and runs the
    episodes not yet recorded under that fingerprint (``harness_error`` and
    ``infrastructure_error`` ones, and one the cost cap cut, run again). Raises
    :class:`CostCapReached` when the job stopped at ``budget.max_cost_usd``.
    """
    prepared = prepared or prepare(cfg)
    out_dir.mkdir(parents=True, exist_ok=True)
    own_lock = lock is None
    held = lock or RunLock(out_dir)
    try:
        resume = bool(cfg.resume)
        config_id = claim_identity(out_dir, prepared.container, resume=resume)
        if on_claim is not None:
            on_claim(config_id)
        done: set[tuple[str, str, str, str, int, int, str]] = set()
        spent_usd = 0.0  # what the kept records cost counts toward budget.max_cost_usd
        if resume:
            repaired = repair_run_dir(out_dir)
            for message in repaired.messages:
                print(f"WARNING: {message}", file=sys.stderr)
            done, spent_usd = repaired.done, repaired.spent_usd
        seed = int(cfg.seed)
        todo = prepared.jobs.without(lambda j: j.key(seed, config_id) in done)
        asyncio.run(
            run_jobs(
                cfg,
                todo,
                prepared.planners,
                prepared.envs,
                prepared.faults,
                out_dir,
                config_id,
                spent_usd,
            )
        )
    finally:
        if own_lock:
            held.release()
    return out_dir / EPISODES


def finish(
    out_dir: Path, seed: int, planner_order: Sequence[str], *, figures: bool = True
) -> tuple[str, pd.DataFrame]:
    """Parquet copy, summaries and (optionally) figures; returns the completion table and the
    records' columns the tables, figures and the job's messages read (``detail`` too).

    The records are copied to Parquet a chunk at a time, keeping only those columns (repeated
    strings as categoricals): about 0.2 KB an episode is held, not its whole record."""
    from planarena.experiments.records.columns import CATEGORY_COLUMNS, EPISODE_COLUMNS
    from planarena.experiments.analysis.tables import format_completion_table, write_summaries
    from planarena.experiments.records.store import write_parquet

    df = write_parquet(  # detail: for harness_error_summary (mostly "", so a categorical)
        out_dir / EPISODES,
        out_dir / "episodes.parquet",
        columns=(*EPISODE_COLUMNS, "detail"),
        categories=(*CATEGORY_COLUMNS, "detail"),
    )
    summary = write_summaries(df, out_dir, seed=seed, planner_order=list(planner_order))
    if figures:
        from planarena.experiments.analysis.figures import write_figures

        order = list(planner_order)
        write_figures(measured(df), out_dir, seed=seed, planner_order=order, summary=summary)
    return format_completion_table(summary), df


_NOT_MEASURED_WHY = {
    "harness_error": "bugs of ours, see traces.jsonl",
    INFRASTRUCTURE_ERROR: "the LLM endpoint failed, not the agent; left out of the tables",
}


def harness_error_summary(df: pd.DataFrame) -> str:
    """``N harness_error episode(s) (...): 3x KeyError: ...; ...`` (the most common first),
    and the same for ``infrastructure_error``."""
    parts = []
    for mode, why in _NOT_MEASURED_WHY.items():
        errors = df[df["failure_mode"] == mode]
        if errors.empty:
            continue
        counts = Counter(str(d)[:120] for d in errors["detail"])
        top = "; ".join(f"{n}x {d}" for d, n in counts.most_common(3))
        more = f"; and {len(counts) - 3} other error(s)" if len(counts) > 3 else ""
        parts.append(f"{len(errors)} {mode} episode(s) ({why}): {top}{more}")
    return "; ".join(parts) + "; rerun the same command to run them again"


def save_hydra_files(out_dir: Path, cfg: DictConfig) -> None:
    """``.hydra/config.yaml``, ``hydra.yaml`` and ``overrides.yaml``, written once the job
    holds the dir (``hydra.output_subdir`` is null so a refused job never overwrites them)."""
    hc = HydraConfig.get()
    target = out_dir / ".hydra"
    target.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(cfg, target / "config.yaml")
    OmegaConf.save(OmegaConf.create({"hydra": OmegaConf.to_container(hc)}), target / "hydra.yaml")
    OmegaConf.save(hc.overrides.task, target / "overrides.yaml")


def _saved(out_dir: Path) -> int:
    path = out_dir / EPISODES
    if not path.exists():
        return 0
    with path.open("rb") as fh:
        return sum(1 for line in fh if line.endswith(b"\n"))


STATUS = {0: "ok", 1: "harness_errors", 5: "cost_cap"}
"""``status.json``'s status by exit status (any other: failed); 1 with only infrastructure
errors is ``infrastructure_errors``."""


def execute(cfg: DictConfig, out_dir: Path, *, in_sweep: bool) -> tuple[int, str]:
    """One job from validation to tables; returns (exit status, one-line outcome).

    Exit status: 0 done (or a dry run); 1 done, but some episodes were not measured (harness
    or infrastructure errors); 2 a config or run-dir error (nothing ran); 3 stopped by an
    infrastructure error or a repeated error; 5 stopped at the job's cost cap
    (``budget.max_cost_usd``; the tables hold the episodes recorded); 130 interrupted (4: a
    bug of ours in a sweep job, which :func:`app` records so the sweep goes on).
    """
    lock: RunLock | None = None
    capped: CostCapReached | None = None
    try:
        choices = HydraConfig.get().runtime.choices if HydraConfig.initialized() else {}
        experiment = choices.get("experiment")
        if experiment is not None and experiment not in group_options("experiment"):
            options = ", ".join(group_options("experiment"))
            raise ConfigError(f"experiment={experiment}: no such experiment; choose from {options}")
        container = validate(cfg)
        if container.get("dry_run"):  # no request, no lock, nothing written
            from planarena.experiments.run.dry_run import estimate

            print(estimate(cfg, prepare(cfg, container)))
            return 0, ""
        preflight(container["llm"])  # a dead endpoint stops the job before anything is built
        prepared = prepare(cfg, container)
        out_dir.mkdir(parents=True, exist_ok=True)
        lock = RunLock(out_dir)
        try:
            run(
                cfg,
                out_dir,
                prepared=prepared,
                lock=lock,
                on_claim=lambda _: save_hydra_files(out_dir, cfg),
            )
        except CostCapReached as exc:  # a clean stop: the records written are complete
            capped = exc
        del prepared  # the jobs and their tasks (1-2 KB each): the tables read the records
        caches.clear_all()  # and the episode phase's caches: none of it is read again
        gc.collect()
        figures = cfg.get("figures")
        draw = bool(figures) if figures is not None else not in_sweep  # the aggregate draws them
        table, df = finish(out_dir, int(cfg.seed), list(cfg.planner), figures=draw)
    except (ConfigError, RunDirError, RecordsError) as exc:
        return 2, f"planarena: {exc}"
    except (InfrastructureError, HarnessStop) as exc:
        return 3, (
            f"planarena: stopped: {exc}; {_saved(out_dir)} episode(s) saved in {out_dir} "
            "(fix the cause and rerun the same command to resume)"
        )
    except KeyboardInterrupt:
        return 130, (
            f"planarena: interrupted; {_saved(out_dir)} episode(s) saved in {out_dir}; "
            "rerun the same command to resume"
        )
    finally:
        if lock is not None:
            lock.release()
    from planarena.experiments.analysis.tables import (
        completion_heading,  # pandas: loaded once records exist
    )

    print(f"\n{completion_heading(measured(df))} — {out_dir}\n{table}")
    extra = cfg.get("report_extra")
    if extra:  # a named experiment's own report: experiments.<name>.render
        import importlib

        render = importlib.import_module(f"experiments.{extra}").render
        container = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(container, dict)
        container.pop("hydra", None)
        print("\n" + render(measured(df), container, out_dir, seed=int(cfg.seed)))
    errors = df["failure_mode"].isin(NOT_MEASURED).any()
    if capped is not None:
        also = f"; {harness_error_summary(df)}" if errors else ""
        return 5, f"planarena: stopped: {capped}{also}"
    if errors:
        return 1, f"planarena: {harness_error_summary(df)}"
    return 0, ""


def write_status(out_dir: Path, code: int, message: str, overrides: list[str]) -> None:
    status = STATUS.get(code, "failed")
    if code == 1 and "harness_error episode" not in message:
        status = "infrastructure_errors"
    if code == 2 and not out_dir.exists():
        return
    write_json_atomic(
        out_dir / STATUS_FILE,
        {"status": status, "exit_code": code, "message": message, "overrides": overrides},
    )


def _remove_if_only_empty_logs(out_dir: Path) -> None:
    """Remove ``out_dir`` if all it holds is Hydra's empty job log (``<job>.log``)."""
    if not out_dir.is_dir():
        return
    entries = list(out_dir.iterdir())
    if all(p.is_file() and p.suffix == ".log" and p.stat().st_size == 0 for p in entries):
        for p in entries:
            p.unlink()
        out_dir.rmdir()


@hydra.main(version_base="1.3", config_path="pkg://planarena.configs", config_name="config")
def app(cfg: DictConfig) -> None:
    hc = HydraConfig.get()
    out_dir = Path(hc.runtime.output_dir)
    in_sweep = hc.mode == RunMode.MULTIRUN
    try:
        code, message = execute(cfg, out_dir, in_sweep=in_sweep)
    except Exception as exc:
        if not in_sweep:
            raise  # a bug of ours: Hydra shows the traceback
        import traceback

        traceback.print_exc()  # in a sweep: shown, recorded, and the other jobs go on
        code, message = 4, f"planarena: {type(exc).__name__}: {exc}"
    if message:
        print(message, file=sys.stderr)
    if code == 0 and cfg.get("dry_run"):  # a dry run leaves no dir behind (Hydra's empty
        _remove_if_only_empty_logs(out_dir)  # job log aside, it wrote nothing)
        return
    if code != 2 or in_sweep:  # a refused job leaves another job's dir untouched
        write_status(out_dir, code, message, list(hc.overrides.task))
    if code == 130 or (code and not in_sweep):  # in a sweep the other jobs go on (the
        sys.exit(code)  # aggregate names this one), unless the user stopped the sweep


CHECKED_GROUPS = ("planner", "env", "llm", "faults", "experiment")
"""Config groups whose options are this package's files: a typo in one is refused with one
line before Hydra composes (Hydra's own error is a block of text, and for the optional
``experiment`` group no error at all: the job ran without it)."""


def group_options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml"))


def unknown_group_choice(args: Sequence[str]) -> str | None:
    """``group=value: ...`` for the first command-line choice of a config group that names no
    config file (a sweep's values and ``[a,b]`` lists each checked), else None. Skipped when
    the config search path is extended (other config dirs may hold the option)."""
    if any("searchpath" in a or a.startswith(("-cd", "--config-dir", "-cp")) for a in args):
        return None
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import Glob

    overrides = [a for a in args if not a.startswith("-") and "=" in a]
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception:  # noqa: BLE001 - not ours to judge: Hydra reports its own syntax errors
        return None
    for o in parsed:
        group = o.key_or_group
        if group not in CHECKED_GROUPS or o.is_delete():
            continue
        if isinstance(o.value(), Glob):
            continue
        if o.is_sweep_override():
            values = list(o.sweep_string_iterator())
        else:
            value = o.value()
            values = [str(v) for v in value] if isinstance(value, list) else [str(value)]
        options = group_options(group)
        for v in values:
            if v not in options and not (group == "experiment" and v == "null"):
                return f"{group}={v}: no such {group} config; choose from {', '.join(options)}"
    return None


PACKAGED_GROUPS = ("planner", "env")
"""Groups whose options each sit at ``<group>.<option>`` (``# @package planner.react``); the
other groups' chosen option is the whole ``<group>`` node."""


def unknown_key_override(args: Sequence[str]) -> str | None:
    """One line for the first command-line override of a key the config does not have
    (``n_taks=3``, ``planner.react.paralel=true``), naming the keys it could have meant;
    Hydra refuses these after composing, in a block of text, with exit status 1.

    Checked before Hydra composes, from the config files: the root config's keys, the
    group option files' keys, and those of a chosen experiment (which may add keys and
    choose options). Only a key that certainly does not exist is refused; anything this
    cannot settle (Hydra's own keys, an option with no file here, a key inside a value, an
    extended search path) is left to Hydra. ``+key=`` adds a key and is checked after
    composing, against the schema."""
    if any("searchpath" in a or a.startswith(("-cd", "--config-dir", "-cp")) for a in args):
        return None
    overrides = [a for a in args if not a.startswith("-") and "=" in a]
    if not overrides:
        return None
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception:  # noqa: BLE001 - not ours to judge: Hydra reports its own syntax errors
        return None
    chosen = {"llm": "sim", "faults": "default"}  # config.yaml's defaults
    given = {
        o.key_or_group: o.value()
        for o in parsed
        if o.key_or_group in ("llm", "faults", "experiment")
        and not o.is_sweep_override()
        and isinstance(o.value(), str)
    }
    known = _option_keys_at(CONFIG_DIR / "config.yaml")
    experiment = given.pop("experiment", None)
    if experiment not in (None, "null"):
        path = CONFIG_DIR / "experiment" / f"{experiment}.yaml"
        if not path.is_file():
            return None  # refused elsewhere, by name
        known.update(_option_keys_at(path))
        chosen.update(_experiment_choices(path))
    chosen.update(given)
    for o in parsed:
        key = o.key_or_group
        if o.is_add() or o.is_force_add() or o.is_delete() or o.package or "@" in key:
            continue
        if "/" in key:  # a nested config group's choice (hydra/launcher=joblib): Hydra's
            continue
        head, *path = key.split(".")
        note = ""  # the option a group's keys come from
        if head == "hydra" or not path:
            if head not in known and head != "hydra" and head not in CHECKED_GROUPS:
                return _no_such_key(
                    o.input_line, head, "", {**known, **dict.fromkeys(CHECKED_GROUPS)}
                )
            continue  # Hydra's own settings; a root key; a group choice (checked by name)
        if head in PACKAGED_GROUPS:
            option, *path = path
            where = f"{head}.{option}"
            group_file = CONFIG_DIR / head / f"{option}.yaml"
        elif head in ("llm", "faults"):
            where, note = head, f" (with {head}={chosen[head]})"
            group_file = CONFIG_DIR / head / f"{chosen[head]}.yaml"
        else:
            where, group_file = "", None
        if group_file is not None:
            if not group_file.is_file() or not path:
                continue  # an option with no file here, or the whole option replaced
            node: Any = _option_keys_at(group_file)
        else:
            node, path = known, [head, *path]
        for part in path:
            if not isinstance(node, dict):
                break  # inside a value (a list, a string): Hydra's to judge
            if part not in node:
                return _no_such_key(o.input_line, part, where, node, note)
            node = node[part]
            where = f"{where}.{part}" if where else part
    return None


def _option_keys_at(path: Path) -> dict[str, Any]:
    """What a config file puts in the config: its keys but its defaults list."""
    node = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    return {k: v for k, v in node.items() if k != "defaults"} if isinstance(node, dict) else {}


def _experiment_choices(path: Path) -> dict[str, str]:
    """The llm and faults options an experiment file chooses (``override /llm: sim``)."""
    defaults = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    out = {}
    entries = defaults.get("defaults", []) if isinstance(defaults, dict) else []
    for entry in entries if isinstance(entries, list) else []:
        for name, value in entry.items() if isinstance(entry, dict) else []:
            group = str(name).removeprefix("override").strip().lstrip("/")
            if group in ("llm", "faults") and isinstance(value, str):
                out[group] = value
    return out


def _no_such_key(line: str, part: str, where: str, node: dict[str, Any], note: str = "") -> str:
    from difflib import get_close_matches

    names = sorted(str(k) for k in node if not str(k).startswith("_"))
    near = get_close_matches(part, names, n=1)
    hint = f"; did you mean {near[0]}?" if near else ""
    scope = f" in {where}{note}" if where else ""
    return f"{line}: no key {part!r}{scope}{hint} (keys: {', '.join(names)})"


def secret_on_command_line(args: Sequence[str]) -> str | None:
    """One line refusing an override that would put a secret into the config
    (``+llm.api_key=sk-...``, or the key pasted as ``llm.api_key_env``), checked before
    Hydra writes anything (a sweep's ``multirun.yaml`` lists its overrides); never shows
    the value."""
    from planarena.experiments.run.llm_factory import secret_in_config

    for arg in args:
        if arg.startswith("-") or "=" not in arg:
            continue
        key, value = arg.split("=", 1)
        *head, last = key.lstrip("+~").split(".")
        problem = secret_in_config({last: value}, ".".join(head) or "llm")
        if problem is not None:
            return problem
    return None


def main() -> None:
    args = sys.argv[1:]
    problem = (
        secret_on_command_line(args) or unknown_group_choice(args) or unknown_key_override(args)
    )
    if problem is not None:
        print(f"planarena: {problem}", file=sys.stderr)
        sys.exit(2)
    app()


def cli() -> None:
    """The ``planarena`` command: :func:`main`, ended without the interpreter's teardown."""
    from planarena.experiments.process import run_and_exit

    run_and_exit(main)


if __name__ == "__main__":
    cli()
