"""A job's episodes in job order, each built when asked for: what runs, not how."""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import overload

from omegaconf import DictConfig, OmegaConf
from planarena.envs.base import Env, Task, task_id
from planarena.envs.faults import FaultConfig
from planarena.experiments.run.llm_factory import (
    validated,
)
from planarena.experiments.run.settings import as_list
from planarena.planners.base import Planner


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
    cell: int = 0  # a study's cell (its index in the study's cells); 0 in a plain run
    cell_label: str = ""

    @property
    def task(self) -> Task:
        return self.maker.task(self.ref)

    def key(self, seed: int, config_id: str) -> tuple[str, str, str, str, int, int, str, str]:
        """What identifies its record in the run dir (:func:`record_key` of the record)."""
        r = self.ref
        return (
            self.planner_name,
            r.env,
            r.complexity,
            r.task_id,
            seed,
            self.trial,
            config_id,
            self.cell_label,
        )


def fault_config(cfg: DictConfig) -> FaultConfig:
    return validated(FaultConfig, OmegaConf.to_container(cfg.faults, resolve=True), "faults")  # type: ignore[arg-type]


class JobList(Sequence[Job]):
    """A job's episodes in job order (cell, env, complexity, planner, task, trial), each
    :class:`Job` built when asked for (a list of them held most of a large job's memory
    before its records). ``positions`` (job indices, a ``range`` or an ``array``) selects a
    subset without copying the jobs: those left to run on resume, one worker's share.
    ``cells`` labels a study's cells (one unnamed cell in a plain run): every cell runs the
    same tasks."""

    def __init__(
        self,
        blocks: Sequence[tuple[str, Sequence[TaskRef]]],
        planners: Sequence[str],
        trials: int,
        maker: TaskMaker,
        positions: Sequence[int] | None = None,
        cells: Sequence[str] = ("",),
    ) -> None:
        self.blocks = list(blocks)  # (env name, refs) per env x complexity, in job order
        self.planners = list(planners)
        self.trials = trials
        self.maker = maker
        self.cells = list(cells)
        self.starts = [0]
        for _, refs in self.blocks:
            self.starts.append(self.starts[-1] + len(self.planners) * len(refs) * trials)
        self.per_cell = self.starts[-1]
        total = self.per_cell * len(self.cells)
        self.positions: Sequence[int] = range(total) if positions is None else positions

    def __len__(self) -> int:
        return len(self.positions)

    def job(self, index: int) -> Job:
        """The job with index ``index`` in the whole job (not in this selection)."""
        cell, within = divmod(index, self.per_cell)
        b = bisect_right(self.starts, within) - 1
        env_name, refs = self.blocks[b]
        offset = within - self.starts[b]
        per_planner = len(refs) * self.trials
        planner, rest = divmod(offset, per_planner)
        task, trial = divmod(rest, self.trials)
        return Job(
            index,
            self.planners[planner],
            env_name,
            refs[task],
            trial,
            self.maker,
            cell,
            self.cells[cell],
        )

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

    def upto(self, n_tasks: int, cells: Collection[int]) -> JobList:
        """These jobs of ``cells`` (by index) on each env x complexity's first ``n_tasks``
        tasks: one stage of a sequential study (every planner and trial of those tasks)."""
        keep = array("q")
        for index in self.positions:
            cell, within = divmod(index, self.per_cell)
            if cell not in cells:
                continue
            b = bisect_right(self.starts, within) - 1
            per_planner = len(self.blocks[b][1]) * self.trials
            if (within - self.starts[b]) % per_planner // self.trials < n_tasks:
                keep.append(index)
        return self.select(keep)

    def without(self, done: Callable[[Job], bool]) -> JobList:
        """The jobs not ``done`` (all of them, unchanged, when none is)."""
        left = array("q", (j.index for j in self if not done(j)))
        return self if len(left) == len(self) else self.select(left)


def build_jobs(
    cfg: DictConfig,
    planners: dict[str, Planner],
    envs: dict[str, Env],
    faults: FaultConfig,
    cells: Sequence[str] = ("",),
) -> JobList:
    maker = TaskMaker(envs, int(cfg.seed), faults.unreachable_rate)
    complexities = [str(c) for c in as_list(cfg.complexity)]
    blocks = [
        (env_name, maker.refs(env_name, complexity, int(cfg.n_tasks)))
        for env_name in envs
        for complexity in complexities
    ]
    return JobList(blocks, list(planners), int(cfg.trials), maker, cells=cells)
