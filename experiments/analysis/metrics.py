"""Episode-level metrics for planarena result tables.

Every number that ends up in a paper table is computed here, from the raw per-episode
records, with methods stated in the docstrings so a reader can recompute them. The unit of
resampling is the **task** (trials of one task are correlated), identified by
:func:`task_keys` (``seed`` is always part of it: task ids repeat across seeds):

* completion: share of episodes with ``success == True``; Wilson score interval when every
  task ran once, else a task (cluster) bootstrap interval, never narrower than Wilson;
* latency percentiles: numpy's default ``'linear'`` method (Hyndman & Fan type 7) with a
  task-bootstrap percentile interval; token means with a task-bootstrap interval;
* every bootstrap draws *counts* (multinomial task weights) in bounded chunks from an
  explicit ``numpy.random.Generator`` seeded by :func:`derive_seed` (``zlib.crc32``, never
  Python's salted ``hash()``), so memory does not grow with ``n_boot x n``;
* paired comparisons resample tasks; p-values from the exact sign test on per-task
  differences (McNemar's exact test when trials = 1), Holm-adjusted across a family;
* pass@k (Chen et al. 2021) and pass^k (Yao et al. 2024, tau-bench) per task;
* cost of success (means over completed episodes), Kaplan-Meier time to success, recovery
  stratified by the faults drawn before the planner acts (``exposed_faults``), robustness
  (completion with faults / without, paired by task) and consistency over trials.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from planarena.experiments.analysis.cells import (
    cell_keys,
    group_positions,
    iter_groups,
    planner_order_of,
    require_columns,
    sort_cells,
    success_bool,
    task_codes,
    task_keys,
)
from planarena.experiments.analysis.stats import (
    FloatArray,
    boot_rng,
    km_median,
    percentile,
    task_bootstrap_percentile,
    task_bootstrap_ratio,
    wilson_interval,
)
from planarena.experiments.records.columns import (
    FAILURE_MODES,
    MEAN_COLUMNS,
    REQUIRED_SUMMARY_INPUTS,
    ROLE_TOKEN_COLUMNS,
    SUMMARY_COLUMNS,
)
from planarena.experiments.records.runs import with_swept_columns


def _per_task(df: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    work = df.assign(_success=success_bool(df["success"]))
    return (
        work.groupby(list(keys), sort=False, dropna=False, observed=True)["_success"]
        .agg(n="size", c="sum")
        .reset_index()
    )


def _pass_k(df: pd.DataFrame, k: int, kind: str) -> pd.DataFrame:
    if not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    require_columns(df, ("planner", "env", "complexity", "task_id", "success"))
    out_col = {"at": "pass_at_k", "hat": "pass_hat_k", "same": "consistency"}[kind]
    keys = cell_keys(df)
    per_task = _per_task(df, task_keys(df))
    rows: list[dict[str, Any]] = []
    for key, sub in iter_groups(per_task, keys):
        kept = sub[sub["n"] >= k]
        scores = []
        for n_t, c_t in zip(kept["n"].tolist(), kept["c"].tolist(), strict=True):
            total = math.comb(n_t, k)
            if kind == "at":
                scores.append(1.0 - math.comb(n_t - c_t, k) / total)
            elif kind == "hat":
                scores.append(math.comb(c_t, k) / total)
            else:  # k trials drawn without replacement all agree (all succeed or all fail)
                scores.append((math.comb(c_t, k) + math.comb(n_t - c_t, k)) / total)
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "k": int(k),
                "n_tasks": len(kept),
                "n_tasks_excluded": int(len(sub) - len(kept)),
                out_col: float(np.mean(scores)) if scores else math.nan,
            }
        )
    columns = [*keys, "k", "n_tasks", "n_tasks_excluded", out_col]
    result = pd.DataFrame(rows, columns=columns)
    return sort_cells(result, keys, planner_order=planner_order_of(df, None))


def pass_at_k(df: pd.DataFrame, k: int) -> pd.DataFrame:
    """pass@k (Chen et al. 2021, "Evaluating Large Language Models Trained on Code"):
    P(at least one of k trials succeeds), per cell (planner, env, complexity, swept keys).

    Per task (:func:`task_keys`, seed included) with n trials and c successes, the unbiased
    estimator ``1 - C(n-c, k) / C(n, k)``, averaged over tasks; tasks with n < k are excluded
    (counted in ``n_tasks_excluded``) because the estimator needs k draws.
    """
    return _pass_k(df, k, "at")


def pass_hat_k(df: pd.DataFrame, k: int) -> pd.DataFrame:
    """pass^k (Yao et al. 2024, tau-bench): P(all of k trials succeed), per cell.

    Per task: ``C(c, k) / C(n, k)``, averaged over tasks; tasks with n < k are excluded.
    It measures reliability (consistency across retries), unlike pass@k. Note: planarena's
    trials are independent episodes (fresh LLM and fault draws), not tau-bench's rerun of the
    same environment state.
    """
    return _pass_k(df, k, "hat")


def consistency_k(df: pd.DataFrame, k: int) -> pd.DataFrame:
    """Share of tasks whose k trials all agree (all succeed or all fail), per cell.

    Per task: ``(C(c, k) + C(n-c, k)) / C(n, k)`` (k trials drawn without replacement from
    the task's n), averaged over tasks with n >= k; column ``consistency``.
    """
    return _pass_k(df, k, "same")


def summarize(
    df: pd.DataFrame,
    by: Sequence[str] | None = None,
    *,
    seed: int = 0,
    n_boot: int = 1000,
    confidence: float = 0.95,
    planner_order: Sequence[str] | None = None,
) -> pd.DataFrame:
    """One row per cell with completion, cost, latency and robustness metrics.

    ``by`` defaults to :func:`cell_keys` (planner, env, complexity and every swept key, e.g.
    ``seed`` in a multi-seed sweep). Columns: the ``by`` keys, then :data:`SUMMARY_COLUMNS`,
    then ``tokens_<role>_mean`` for each role column present (missing values count as 0), then
    ``recovery_rate_conditional`` and ``n_faulted``. Definitions (task = :func:`task_keys`):

    * ``n`` episodes, ``n_tasks`` distinct tasks, ``trials_max`` most episodes of one task.
    * ``completion_rate = successes / n``; only ``success == True`` counts (a
      ``correctly_reported_unreachable`` episode is not a completion). Interval
      (``completion_ci_method``): ``wilson`` when every task ran once; else ``task_bootstrap``:
      the percentile interval of ``n_boot`` task resamples of ``sum(successes)/sum(episodes)``,
      widened to contain the episode-level Wilson interval (so it is never narrower than an
      interval that treats correlated trials as independent).
    * ``*_mean``: arithmetic means over all episodes of the cell; ``tokens_mean`` (of
      ``tokens_total``) has a task-bootstrap interval. ``wall_s`` is ignored.
    * ``latency_p50/p99``: :func:`percentile` of ``latency_s`` (method 'linear'); intervals by
      :func:`task_bootstrap_percentile`.
    * cost of success: ``successes_tokens_mean``, ``successes_cost_mean`` and
      ``successes_latency_p50`` over completed episodes only; ``cost_per_success`` is all the
      cell's cost divided by its successes (what one completion costs, failures included);
      ``time_to_success_km_median``: :func:`km_median` of latency with failures censored.
    * ``harness_errors``: episodes with ``failure_mode == "harness_error"`` (kept in n).
    * ``recovery_rate_conditional``: success share among episodes with ``faults_injected > 0``
      (conditional on something the planner causes: more calls meet more faults; for a fair
      comparison use :func:`recovery_by_fault`).

    Every bootstrap has its own Generator seeded by ``derive_seed(seed, *cell_key, name)``.
    """
    df = with_swept_columns(df)
    by = cell_keys(df) if by is None else list(by)
    if not by:
        raise ValueError("'by' must name at least one column")
    require_columns(df, (*by, *REQUIRED_SUMMARY_INPUTS))
    cols = _SummaryInputs.of(df, by)
    boot = _Boot(seed=seed, n_boot=n_boot, confidence=confidence)
    rows = [
        {**dict(zip(by, key, strict=True)), **_cell_summary(cols, at, key, boot)}
        for key, at in group_positions(df, by)
    ]
    columns = [
        *by,
        *SUMMARY_COLUMNS,
        *(f"{r}_mean" for r in cols.roles),
        "recovery_rate_conditional",
        "n_faulted",
    ]
    result = pd.DataFrame(rows, columns=columns)
    for col in ("n", "n_tasks", "trials_max", "successes", "harness_errors", "n_faulted"):
        result[col] = result[col].astype("int64")
    return sort_cells(result, by, planner_order=planner_order_of(df, planner_order))


@dataclass(frozen=True)
class _Boot:
    """How :func:`summarize` bootstraps: the run's seed (each statistic derives its own
    Generator from it and the cell key), the number of resamples and the confidence."""

    seed: int
    n_boot: int
    confidence: float

    def ratio(self, sums: FloatArray, counts: FloatArray, *key: Hashable) -> tuple[float, float]:
        """:func:`task_bootstrap_ratio` with the Generator of the statistic named by ``key``."""
        return task_bootstrap_ratio(
            sums,
            counts,
            rng=boot_rng(self.seed, *key),
            n_boot=self.n_boot,
            confidence=self.confidence,
        )


@dataclass(frozen=True)
class _SummaryInputs:
    """Every column the cells of :func:`summarize` read, as one array each (a cell takes its
    rows by position and makes them float64): numpy's own numbers without a copy, others
    converted once."""

    success: npt.NDArray[np.bool_]
    values: dict[str, npt.NDArray[Any]]
    roles: list[str]
    harness: npt.NDArray[np.bool_]
    task: npt.NDArray[np.intp]

    @classmethod
    def of(cls, df: pd.DataFrame, by: Sequence[str]) -> _SummaryInputs:
        """The arrays of ``df``; tasks numbered by the task keys not in ``by``."""

        def numbers(series: pd.Series) -> npt.NDArray[Any]:
            raw = series.to_numpy()
            return raw if raw.dtype.kind in "biuf" else series.to_numpy(dtype=np.float64)

        roles = [c for c in ROLE_TOKEN_COLUMNS if c in df.columns]
        success = success_bool(df["success"])
        values = {src: numbers(df[src]) for _, src in MEAN_COLUMNS}
        for src in ("latency_s", "cost_usd", "faults_injected"):
            values[src] = numbers(df[src])
        for role in roles:
            values[role] = numbers(df[role].fillna(0))
        harness = (df["failure_mode"] == "harness_error").to_numpy(dtype=bool)
        tkeys = [k for k in ("seed", "task_id") if k in df.columns and k not in by]
        task = task_codes(df, tkeys) if tkeys else np.arange(len(df))
        return cls(success, values, roles, harness, task)

    def column(self, name: str, at: npt.NDArray[np.intp]) -> FloatArray:
        """Column ``name`` at rows ``at``, as float64."""
        return self.values[name][at].astype(np.float64)


def _cell_summary(
    cols: _SummaryInputs, at: npt.NDArray[np.intp], key: tuple[Hashable, ...], boot: _Boot
) -> dict[str, Any]:
    """One cell's :func:`summarize` columns from its rows ``at``."""
    success = cols.success[at]
    n = int(success.size)
    n_success = int(success.sum())
    task_ids, task_index = np.unique(cols.task[at], return_inverse=True)
    counts = np.bincount(task_index).astype(np.float64)
    ci_low, ci_high = wilson_interval(n_success, n, boot.confidence)
    method = "wilson"
    if counts.max() > 1:
        method = "task_bootstrap"
        s_task = np.bincount(task_index, weights=success.astype(np.float64))
        b_low, b_high = boot.ratio(s_task, counts, *key, "completion")
        ci_low, ci_high = min(ci_low, b_low), max(ci_high, b_high)
    row: dict[str, Any] = dict(
        n=n,
        n_tasks=int(task_ids.size),
        trials_max=int(counts.max()),
        successes=n_success,
        completion_rate=n_success / n,
        completion_ci_low=ci_low,
        completion_ci_high=ci_high,
        completion_ci_method=method,
    )
    for out_col, src in MEAN_COLUMNS:
        row[out_col] = float(np.mean(cols.column(src, at)))
    tokens = cols.column("tokens_total", at)
    row["tokens_mean_ci_low"], row["tokens_mean_ci_high"] = boot.ratio(
        np.bincount(task_index, weights=tokens), counts, *key, "tokens_mean"
    )
    latency = cols.column("latency_s", at)
    for q in (50, 99):
        name = f"latency_p{q}"
        row[name] = percentile(latency, q)
        low, high = task_bootstrap_percentile(
            latency,
            task_index,
            q,
            rng=boot_rng(boot.seed, *key, name),
            n_boot=boot.n_boot,
            confidence=boot.confidence,
        )
        row[f"{name}_ci_low"] = low
        row[f"{name}_ci_high"] = high
    cost = cols.column("cost_usd", at)
    row["cost_mean"] = float(np.mean(cost))
    row["harness_errors"] = int(cols.harness[at].sum())
    row.update(_success_costs(success, n_success, tokens, cost, latency))
    for role in cols.roles:
        row[f"{role}_mean"] = float(np.mean(cols.column(role, at)))
    faulted = cols.column("faults_injected", at) > 0
    n_faulted = int(faulted.sum())
    row["recovery_rate_conditional"] = float(success[faulted].mean()) if n_faulted else math.nan
    row["n_faulted"] = n_faulted
    return row


def _success_costs(
    success: npt.NDArray[np.bool_],
    n_success: int,
    tokens: FloatArray,
    cost: FloatArray,
    latency: FloatArray,
) -> dict[str, float]:
    """The cost of success columns of :func:`summarize` (completed episodes only)."""
    return {
        "successes_tokens_mean": float(tokens[success].mean()) if n_success else math.nan,
        "successes_cost_mean": float(cost[success].mean()) if n_success else math.nan,
        "successes_latency_p50": percentile(latency[success], 50),
        "cost_per_success": float(cost.sum() / n_success) if n_success else math.nan,
        "time_to_success_km_median": km_median(latency, success),
    }


def seed_spread(summary: pd.DataFrame) -> pd.DataFrame:
    """Between-seed spread of completion: one row per cell without ``seed``.

    Columns: the other keys, ``n_seeds``, ``completion_mean`` (mean of the per-seed rates),
    ``completion_sd`` (sample standard deviation, ddof = 1; NaN with one seed), ``completion_min``,
    ``completion_max``. Empty when ``summary`` has no ``seed`` column.
    """
    if "seed" not in summary.columns:
        return pd.DataFrame()
    start = list(summary.columns).index("n")
    keys = [k for k in summary.columns[:start] if k != "seed"]
    rows = []
    for key, sub in iter_groups(summary, keys):
        rates = sub["completion_rate"].to_numpy(dtype=np.float64)
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "n_seeds": int(rates.size),
                "completion_mean": float(rates.mean()),
                "completion_sd": float(rates.std(ddof=1)) if rates.size > 1 else math.nan,
                "completion_min": float(rates.min()),
                "completion_max": float(rates.max()),
            }
        )
    return pd.DataFrame(rows)


def failure_distribution(
    df: pd.DataFrame,
    by: Sequence[str] = ("planner",),
    *,
    planner_order: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Share of each failure mode among failed episodes (``success == False``) per group.

    Columns: ``by`` keys, ``n_failed``, then one column per mode in :data:`FAILURE_MODES`
    order (modes outside that list are appended alphabetically so rows still sum to 1).
    Groups without failures are kept with ``n_failed == 0`` and NaN shares.
    """
    by = list(by)
    require_columns(df, (*by, "success", "failure_mode"))
    success = success_bool(df["success"])
    failed_modes = df.loc[~success, "failure_mode"].astype(str)
    extra = sorted(set(failed_modes) - set(FAILURE_MODES))
    modes = [*FAILURE_MODES, *extra]
    work = df[by].copy()
    work["_failed"] = ~success
    work["_mode"] = df["failure_mode"].astype(str)

    rows: list[dict[str, Any]] = []
    for key, sub in iter_groups(work, by):
        failed = sub.loc[sub["_failed"], "_mode"]
        n_failed = int(failed.size)
        counts = failed.value_counts()
        row: dict[str, Any] = dict(zip(by, key, strict=True))
        row["n_failed"] = n_failed
        for mode in modes:
            row[mode] = int(counts.get(mode, 0)) / n_failed if n_failed else math.nan
        rows.append(row)
    result = pd.DataFrame(rows, columns=[*by, "n_failed", *modes])
    result["n_failed"] = result["n_failed"].astype("int64")
    return sort_cells(result, by, planner_order=planner_order_of(df, planner_order))
