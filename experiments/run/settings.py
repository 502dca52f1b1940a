"""The typed schema of the root config: a bad value is one line naming key, value and what is
allowed."""

from __future__ import annotations

from typing import Any, Literal

from omegaconf import ListConfig
from planarena.envs.base import COMPLEXITIES
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    field_validator,
    model_validator,
)


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BudgetSettings(_Settings):
    max_tokens_per_episode: PositiveInt | None = None
    max_llm_calls_per_episode: PositiveInt | None = None
    max_cost_usd: PositiveFloat | None = None  # per job, accounted in job order (cost_cap)


class ExecutorSettings(_Settings):
    parallel: bool | None = None


class SequentialSettings(_Settings):
    """A study's cells in stages (experiments/studies/sequential.py)."""

    stages: list[PositiveInt] = []  # tasks per env x complexity at each interim look
    alpha: float = Field(0.05, gt=0.0, lt=1.0)  # the chance a settled comparison is wrong
    margin: float = Field(0.05, ge=0.0, lt=1.0)  # a completion difference within it: a tie

    @field_validator("stages")
    @classmethod
    def _increasing(cls, value: list[int]) -> list[int]:
        if any(b <= a for a, b in zip(value, value[1:], strict=False)):
            raise ValueError("must increase from one look to the next")
        return value


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
    resume: bool | Literal["force"]  # force: resume records made by other code
    progress: bool
    write_traces: bool
    figures: bool | None = None
    fail_fast: NonNegativeInt = 5
    concurrent_llm_calls: bool = True
    trial_faults: Literal["same", "redraw"] = "same"
    shard: NonNegativeInt = 0  # this job runs the study's cells i with i % shards == shard
    shards: PositiveInt = 1
    study: str | None = None  # a registered study (experiment=<name> sets it); its own
    # parameters sit under a key of its name (sensitivity.factors, budget_curves.budgets)
    dry_run: bool = False  # estimate calls, tokens and dollars from a short sim pass; exit
    executor: ExecutorSettings = ExecutorSettings()
    recovery: Literal["article", "equal"] = "article"  # equal: every planner's recovery
    # uncapped up to equal_recovery_calls LLM calls, the replanner the default model
    equal_recovery_calls: PositiveInt = 40
    grading: Literal["facts", "exact"] = "facts"  # facts: an answer carrying the task's
    # facts in any wording completes it; exact: the answer tool's wording (envs/grading.py)
    plan_revision: Literal[1, 2, 3] = 3  # the plan prompt and reader (planners/formats.py,
    # PLAN_REVISIONS); 1: as the shipped 0.5B recording was made, 2: as the 1.5B one
    budget: BudgetSettings = BudgetSettings()
    sequential: SequentialSettings = SequentialSettings()

    @model_validator(mode="after")
    def _stages_fit(self) -> RunSettings:
        stages = self.sequential.stages
        if stages and self.study is None:
            raise ValueError(
                "sequential.stages: only a study's cells can stop early (set experiment=...)"
            )
        if stages and stages[-1] >= self.n_tasks:
            raise ValueError(
                f"sequential.stages: each look must come before n_tasks={self.n_tasks} "
                f"(got {stages[-1]})"
            )
        return self

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


def as_list(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple, ListConfig)):
        return list(value)
    if isinstance(value, str) and "," in value:
        return [v.strip() for v in value.split(",") if v.strip()]
    return [value]
