"""The calibration registry: what an extractor receives, what it returns, and how a fit plugs in.

Calibration turns every LLM request of a replayed run into a :class:`Decision` (what was asked,
what was answered, and the oracle's view of the decision point, with no skill involved). An
extractor registered for the request's kind turns a decision into table rows; a fit registered
by name reads the whole table and returns estimates of skill-profile fields. Extractors and
fits of other modules (the judge side: ``fit_judge``) register here at import time, so the
orchestration never names them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from planarena.experiments.calibrate.oracle_view import OracleView
    from planarena.planners.llm.protocol import RequestContext

Row = dict[str, Any]
"""One observation of the decision table. Required keys: ``task`` (``env/complexity/task_id``,
the bootstrap unit), ``role``, ``kind``, ``quantity`` (the outcome's name, e.g. ``right_move``,
``malformed_json``, ``judge_prefers_right``), ``outcome`` (0/1 or a category),
``prompt_tokens``; any other key is a covariate."""

REQUIRED = ("task", "role", "kind", "quantity", "outcome", "prompt_tokens")


@dataclass
class Decision:
    """One LLM request of a replayed episode, with the answer it got and the oracle's view.

    ``view`` enumerates the options at the decision point from the env's oracle (skill-free:
    the same for any model); ``error_scale`` is the role's model-profile scale the run's
    simulator applied (1.0 for a real model, whose roles are one model)."""

    kind: str
    role: str
    context: RequestContext | None
    text: str
    prompt_tokens: int  # o200k count of the prompt (the simulator's measure of length)
    occurrence: int  # how often the very same messages were asked before in the episode
    index: int  # position of the request in the episode (0, 1, ...)
    planner: str
    env: str
    complexity: str
    task_id: str
    trial: int
    view: OracleView
    error_scale: float = 1.0
    messages: Sequence[Mapping[str, str]] = ()
    # a prompt asked before in the episode: whether the answer is the first asking's (None:
    # a first asking)
    same_as_first: bool | None = None
    plan_revision: int = 2  # the plan reader the run's planners used (PLAN_REVISIONS)

    @property
    def task(self) -> str:
        """The bootstrap unit: ``env/complexity/task_id``."""
        return f"{self.env}/{self.complexity}/{self.task_id}"

    def row(self, quantity: str, outcome: Any, **covariates: Any) -> Row:
        """A table row of this decision (the required keys filled in)."""
        return {
            "task": self.task,
            "role": self.role,
            "kind": self.kind,
            "quantity": quantity,
            "outcome": outcome,
            "prompt_tokens": self.prompt_tokens,
            "planner": self.planner,
            "trial": self.trial,
            "error_scale": self.error_scale,
            "occurrence": self.occurrence,
            **covariates,
        }


Extractor = Callable[[Decision], list[Row]]

EXTRACTORS: dict[str, list[Extractor]] = {}
"""Request kind -> the extractors run on every decision of that kind (in registration order)."""


def register_extractor(kind: str, fn: Extractor) -> Extractor:
    """Add ``fn`` to the extractors of ``kind`` (usable as ``register_extractor(kind, fn)``)."""
    EXTRACTORS.setdefault(str(kind), []).append(fn)
    return fn


@dataclass
class Estimate:
    """One parameter's estimate in one group (``pooled``, or ``role=planner``,
    ``kind=act``, ...). ``parameter`` is a :class:`SkillProfile` field; only pooled,
    identified estimates go into the written profile."""

    parameter: str
    value: float | None
    lo: float | None = None
    hi: float | None = None
    n: int = 0  # observations behind it (decisions, rows)
    tasks: int = 0  # distinct tasks (the bootstrap unit)
    identified: bool = False
    reason: str = ""  # why (not) identified, one phrase
    group: str = "pooled"
    note: str = ""  # how it was measured, for the report
    bounded: bool = False  # not identified only for its interval's width: the data still
    # exclude values outside it (a profile moves a default into it)


@dataclass
class FitOptions:
    """What every fit gets besides the table."""

    boot: int = 200  # bootstrap resamples over tasks
    seed: int = 0
    min_n: int = 30  # fewer observations: not identified
    min_tasks: int = 10  # fewer tasks (the bootstrap's unit): not identified
    max_width: float = 0.5  # a wider interval: not identified
    level: float = 0.95  # the intervals' coverage
    extra: dict[str, Any] = field(default_factory=dict)

    def interval(self, values: Any) -> tuple[float, float]:
        """The percentile interval of bootstrap replicates at :attr:`level`."""
        tail = 100 * (1 - self.level) / 2
        return float(np.percentile(values, tail)), float(np.percentile(values, 100 - tail))

    @property
    def drop(self) -> float:
        """The fall of the log-likelihood that bounds a one-sided interval at :attr:`level`
        (half the squared normal quantile: 1.92 at 95 %)."""
        from statistics import NormalDist

        return NormalDist().inv_cdf(1 - (1 - self.level) / 2) ** 2 / 2


Fit = Callable[[pd.DataFrame, FitOptions], list[Estimate]]

FITS: dict[str, Fit] = {}
"""Fit name -> fit. Each reads the rows it needs (by ``quantity``) and returns estimates."""


def register_fit(name: str, fn: Fit) -> Fit:
    """Register a fit under ``name`` (a later registration of the same name replaces it)."""
    FITS[name] = fn
    return fn


def task_resamples(tasks: Sequence[str], boot: int, seed: int) -> list[np.ndarray]:
    """``boot`` resamples of the distinct tasks, as a weight (multiplicity) per task index
    of ``sorted(set(tasks))``: the bootstrap unit is the task."""
    names = sorted(set(tasks))
    rng = np.random.default_rng(seed)
    return [
        np.bincount(rng.integers(0, len(names), len(names)), minlength=len(names))
        for _ in range(boot)
    ]


def bootstrap(
    rows: pd.DataFrame,
    statistic: Callable[[pd.DataFrame], float | None],
    options: FitOptions,
) -> tuple[float | None, float | None]:
    """A percentile interval (``options.level``, 95 % by default) of ``statistic`` over
    resamples of ``rows``' tasks (each draws tasks with replacement, all their rows)."""
    if rows.empty:
        return None, None
    names = sorted(set(rows["task"]))
    by_task = {t: g for t, g in rows.groupby("task", sort=False)}
    rng = np.random.default_rng(options.seed)
    values = []
    for _ in range(options.boot):
        picked = rng.integers(0, len(names), len(names))
        sample = pd.concat([by_task[names[i]] for i in picked], ignore_index=True)
        v = statistic(sample)
        if v is not None and np.isfinite(v):
            values.append(float(v))
    if not values:
        return None, None
    return options.interval(values)


def judged(
    parameter: str,
    value: float | None,
    interval: tuple[float | None, float | None],
    n: int,
    tasks: int,
    options: FitOptions,
    *,
    group: str = "pooled",
    absent: str = "never observed",
    note: str = "",
) -> Estimate:
    """An :class:`Estimate` with its ``identified`` flag and reason by the shared rules:
    not observed (``absent`` says what never happened), fewer than ``min_n`` observations or
    ``min_tasks`` tasks, an interval wider than ``max_width``; else identified."""
    lo, hi = interval
    wide = False  # not identified only for its interval's width (Estimate.bounded)
    if n == 0 or value is None:
        ok, reason = False, absent
    elif n < options.min_n:
        ok, reason = False, f"n={n} < {options.min_n}"
    elif tasks < options.min_tasks:
        ok, reason = False, f"only {tasks} tasks < {options.min_tasks} (the bootstrap's unit)"
    elif lo is None or hi is None:
        ok, reason = False, "no bootstrap interval"
    elif hi - lo > options.max_width:
        ok, reason, wide = False, f"interval width {hi - lo:.2f} > {options.max_width}", True
    else:
        ok, reason = True, f"n={n} over {tasks} tasks"
    return Estimate(parameter, value, lo, hi, n, tasks, ok, reason, group, note, bounded=wide)


def at_the_edge(
    interval: tuple[float, float], events: int, n: int, level: float, scale: float = 1.0
) -> tuple[float, float]:
    """A bootstrap interval of a rate with no event (or only events) in ``n`` rows is the
    single point 0 (or 1): every resample sees none. It is widened to the exact binomial
    bound at ``level`` (Clopper-Pearson: ``1 - (tail)^(1/n)``; the rows taken as independent,
    so it is never wider than their clustering would make it), divided by the rows' smallest
    error ``scale``: 0 of 47 replans is no evidence that the rate is below 0.05."""
    tail = (1.0 - level) / 2.0
    bound = 1.0 - tail ** (1.0 / n)
    lo, hi = interval
    if events == 0:
        return lo, max(hi, min(1.0, bound / scale))
    if events == n and scale == 1.0:
        return min(lo, 1.0 - bound), hi
    return lo, hi


def bernoulli(
    rows: pd.DataFrame,
    parameter: str,
    options: FitOptions,
    *,
    absent: str,
    note: str = "",
    group: str = "pooled",
) -> Estimate:
    """The MLE of a Bernoulli rate (the mean of 0/1 ``outcome``) with its task bootstrap
    (per-task sums resampled: fast for any number of rows)."""
    n = len(rows)
    if n == 0:
        return judged(parameter, None, (None, None), 0, 0, options, group=group, absent=absent,
                      note=note)  # fmt: skip
    per_task = (
        rows.assign(y=rows["outcome"].astype(float)).groupby("task")["y"].agg(["sum", "count"])
    )
    sums, counts = per_task["sum"].to_numpy(), per_task["count"].to_numpy()
    value = float(sums.sum() / counts.sum())
    weights = np.array(task_resamples(list(per_task.index), options.boot, options.seed))
    rates = (weights @ sums) / np.maximum(weights @ counts, 1)
    interval = at_the_edge(options.interval(rates), int(sums.sum()), n, options.level)
    return judged(parameter, value, interval, n, len(sums), options, group=group, absent=absent,
                  note=note)  # fmt: skip
