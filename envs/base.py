"""The env contract: a seeded task generator, a toolbox per episode, a grader and an oracle.

An env makes :class:`Task` s (plain data), builds the toolbox an episode's planner may use
(world tools wrapped in latency, faults and a call log), grades the final answer against the
task, and exposes the ground-truth :class:`planarena.envs.oracle.Oracle` that only the simulated
LLM reads.

The envs a run can name are the Hydra config group ``configs/env/`` (one yaml each, whose
``_target_`` is the env's class): that is the one registry, so there is none in code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from planarena.envs.faults import FaultInjector, FaultRule
from planarena.envs.oracle import Oracle
from planarena.envs.tools import CallLog, LatencyProfile, LatencyWrapper, Toolbox, ToolCallRecord

COMPLEXITIES = ("simple", "medium", "complex")


class ParamError(ValueError):
    """An env parameter out of its range; the message starts ``key=value:`` so the runner can
    name the config key (``env.report.p_stale_trap=2: ...``)."""


def check_share(key: str, value: object) -> None:
    """``value`` must be a share, a number between 0 and 1 (a probability of the world)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ParamError(f"{key}={value!r}: must be a share between 0 and 1")


def task_id(env: str, complexity: str, index: int) -> str:
    """The id of task ``index`` of an env's (seed, complexity) sequence. Every env names its
    tasks so; a job names the tasks it will run without generating them (and checks the name
    when it builds the task)."""
    return f"{env}-{complexity}-{index:04d}"


@dataclass(frozen=True)
class Task:
    """One task instance. ``world`` is the env's plain-data ground truth."""

    task_id: str
    env: str
    complexity: str
    goal: str
    world: dict[str, Any]
    unreachable: bool = False


@dataclass(frozen=True)
class Grade:
    """The grader's verdict on one episode."""

    success: bool
    progress: float  # share of required facts present in the final answer
    trap_in_answer: bool = False  # the answer carries facts from a locally attractive dead end
    trap_touched: bool = False  # the agent opened a trap document at some point
    saw_missing_data: bool = False  # the agent observed that required data does not exist
    detail: str = ""


@dataclass
class EpisodeTools:
    """What an episode gets from its env: the planner's toolbox and the env-side handles."""

    toolbox: Toolbox
    log: CallLog
    faults: FaultInjector
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def calls(self) -> list[ToolCallRecord]:
        return self.log.records


class Env(Protocol):
    name: str

    def generate(
        self,
        n: int,
        *,
        seed: int,
        complexity: str,
        unreachable_rate: float = 0.0,
        start: int = 0,
    ) -> list[Task]:
        """Tasks ``start .. start + n - 1`` of the (seed, complexity) sequence: task ``i`` is
        the same whatever ``n`` and ``start`` (a job builds them in chunks, or one at a time)."""
        ...

    def make_tools(
        self, task: Task, *, rules: Sequence[FaultRule], seed_keys: tuple[object, ...]
    ) -> EpisodeTools: ...

    def grade(self, task: Task, answer: str | None, calls: Sequence[ToolCallRecord]) -> Grade: ...

    def oracle(self, task: Task) -> Oracle: ...

    def exposure(
        self, task: Task, *, rules: Sequence[FaultRule], seed_keys: tuple[object, ...]
    ) -> list[str]:
        """Fault kinds drawn for this episode before any planner acts, on the calls a correct
        solution makes (sorted, unique): the planner-independent denominator of recovery."""
        ...


def wrap_tools(
    world: Toolbox,
    *,
    latency: dict[str, LatencyProfile],
    rules: Sequence[FaultRule],
    seed_keys: tuple[object, ...],
) -> EpisodeTools:
    """The standard wrapper stack: call log ∘ faults ∘ latency ∘ world.

    Faults sit outside latency so a faulted call costs the fault's own time (a 503 is fast,
    a timeout is slow), not the tool's normal latency as well.
    """
    latency_wrapped = LatencyWrapper(world, latency, seed_keys=seed_keys)
    faults = FaultInjector(latency_wrapped, rules, seed_keys=seed_keys)
    log = CallLog(faults)
    return EpisodeTools(toolbox=log, log=log, faults=faults)
