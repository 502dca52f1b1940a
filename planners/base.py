"""The planner contract: one class, one coroutine, one result shape.

A planner sees only the task's goal text and the toolbox's catalogue; it calls tools through
the toolbox (which applies latency and faults) and the LLM through the metered handle. It
returns a :class:`PlannerResult`: the final answer (or None) and *why it stopped*; the episode
runner grades the answer and turns the stop reason into a failure mode.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Literal

from planarena.envs.rng import derive_rng
from planarena.envs.tools import Toolbox
from planarena.planners.llm.base import EpisodeLLM

StopReason = Literal[
    "answered",  # returned an answer it considers final
    "gave_up",  # stopped without an answer after a failure it could not handle
    "reported_unreachable",  # stopped, saying the goal cannot be reached
    "budget",  # ran out of turns / replans / LLM calls
    "job_cost_cap",  # the job's cost cap (budget.max_cost_usd) refused an LLM call
    "malformed_output",  # the model's output could not be parsed, repeatedly
    "plan_error",  # the plan was rejected (detail holds the PlanError reason)
    "tool_failure",  # a step failed and the strategy has no recovery left
    "precondition_failed",  # a step's pre-condition did not hold
]


@dataclass(frozen=True)
class TaskView:
    """What a planner may know of a task."""

    task_id: str
    goal: str
    seed: int = 0  # for the planner's own random draws (search tie-breaks, rollouts)

    def rng(self, *keys: object) -> random.Random:
        """A random stream of this planner on this task, derived from the run seed."""
        return derive_rng(self.seed, self.task_id, *keys)


@dataclass
class PlannerStats:
    retries: int = 0
    fallbacks: int = 0
    replans: int = 0
    skipped_steps: int = 0
    backtracks: int = 0  # branches a search abandoned after their action failed
    plan_repairs: int = 0  # plans that needed lenient JSON repair
    checked_successes: int = 0  # tool calls that returned normally inside a plan step
    postcondition_catches: int = 0  # ... whose result a code-checked post-condition rejected


@dataclass
class PlannerResult:
    answer: str | None
    stop: StopReason
    detail: str = ""
    stats: PlannerStats = field(default_factory=PlannerStats)
    trace: list[dict[str, Any]] = field(default_factory=list)


class Planner(ABC):
    """Base class of every strategy. Subclasses are built by Hydra from ``configs/planner``."""

    name: str = "planner"

    @abstractmethod
    async def run(self, task: TaskView, tools: Toolbox, llm: EpisodeLLM) -> PlannerResult:
        """Solve ``task`` with ``tools`` and ``llm``; never raise for agent-level failures."""
