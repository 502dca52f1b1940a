"""Episode-level metrics for planarena result tables.

Every number that ends up in a paper table is computed here, from the raw per-episode
records, with methods stated in the docstrings so a reader can recompute them:

* completion: share of episodes with ``success == True`` and a Wilson score interval;
* latency percentiles: numpy's default ``'linear'`` method (Hyndman & Fan type 7) with a
  percentile-bootstrap interval whose seed is derived from the run seed and the cell key
  via ``zlib.crc32`` (never Python's salted ``hash()``);
* pass@k / pass^k: the unbiased per-task estimators used by tau-bench.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Hashable, Iterable, Sequence
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

PERCENTILE_METHOD = "linear"
"""numpy percentile method used everywhere (Hyndman & Fan 1996, definition 7)."""

COMPLEXITY_ORDER: tuple[str, ...] = ("simple", "medium", "complex")
"""Canonical complexity order; every output sorts complexity this way, not alphabetically."""

FAILURE_MODES: tuple[str, ...] = (
    "dead_end",
    "gave_up_after_tool_failure",
    "precondition_unverified",
    "plan_logic_error",
    "hallucinated_tool_call",
    "malformed_output",
    "budget_exhausted",
    "false_success",
    "harness_error",
    "correctly_reported_unreachable",
)
"""Canonical failure-mode order used for failure-distribution columns."""

ROLE_TOKEN_COLUMNS: tuple[str, ...] = (
    "tokens_planner",
    "tokens_executor",
    "tokens_evaluator",
    "tokens_replanner",
    "tokens_rollout",
)
"""Optional per-role token columns; missing values inside a present column count as 0."""

DEFAULT_BY: tuple[str, ...] = ("planner", "env", "complexity")
TASK_KEYS: tuple[str, ...] = ("planner", "env", "complexity", "task_id")
PAIR_KEYS: tuple[str, ...] = ("env", "complexity", "task_id", "trial")

SUMMARY_COLUMNS: tuple[str, ...] = (
    "n",
    "successes",
    "completion_rate",
    "completion_ci_low",
    "completion_ci_high",
    "progress_mean",
    "tokens_mean",
    "tokens_prompt_mean",
    "tokens_completion_mean",
    "llm_calls_mean",
    "tool_calls_mean",
    "retries_mean",
    "fallbacks_mean",
    "replans_mean",
    "latency_p50",
    "latency_p50_ci_low",
    "latency_p50_ci_high",
    "latency_p99",
    "latency_p99_ci_low",
    "latency_p99_ci_high",
    "cost_mean",
    "harness_errors",
)
"""Fixed summary columns that follow the group-key columns, in output order."""

# (output column, source column) pairs averaged per cell, in output order.
_MEAN_COLUMNS: tuple[tuple[str, str], ...] = (
    ("progress_mean", "progress"),
    ("tokens_mean", "tokens_total"),
    ("tokens_prompt_mean", "tokens_prompt"),
    ("tokens_completion_mean", "tokens_completion"),
    ("llm_calls_mean", "llm_calls"),
    ("tool_calls_mean", "tool_calls"),
    ("retries_mean", "retries"),
    ("fallbacks_mean", "fallbacks"),
    ("replans_mean", "replans"),
)

_REQUIRED_SUMMARY_INPUTS: tuple[str, ...] = (
    "success",
    "failure_mode",
    "latency_s",
    "cost_usd",
    "faults_injected",
    *(src for _, src in _MEAN_COLUMNS),
)

FloatArray = npt.NDArray[np.float64]


# --------------------------------------------------------------------------- basic statistics


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion.

    Chosen over the normal (Wald) interval because it stays inside [0, 1] and keeps
    reasonable coverage for the small n and rates near 0/1 typical of benchmark cells.
    Returns ``(nan, nan)`` when ``n == 0``.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return (math.nan, math.nan)
    z = NormalDist().inv_cdf(1.0 - (1.0 - confidence) / 2.0)
    p = successes / n
    z2 = z * z
    denom = 1.0 + z2 / n
    center = (p + z2 / (2.0 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / denom
    # The closed form is exactly 0 / 1 at the extremes; pin them to avoid float fuzz.
    low = 0.0 if successes == 0 else max(0.0, center - half)
    high = 1.0 if successes == n else min(1.0, center + half)
    return (low, high)


def percentile(values: npt.ArrayLike, q: float) -> float:
    """q-th percentile (q in [0, 100]) with numpy's default ``'linear'`` method.

    'linear' is Hyndman & Fan type 7 (also pandas' ``quantile`` default), so readers
    recomputing with numpy or pandas defaults get identical numbers. Empty input -> nan;
    NaNs are not dropped (they propagate), so bad records are visible rather than hidden.
    """
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        return math.nan
    return float(np.percentile(arr, q, method=PERCENTILE_METHOD))


def percentile_stat(q: float) -> Callable[..., Any]:
    """Vectorized percentile statistic (``stat(x, axis=...)``) for :func:`bootstrap_ci`."""

    def stat(x: npt.ArrayLike, axis: int | None = None) -> Any:
        return np.percentile(x, q, axis=axis, method=PERCENTILE_METHOD)

    return stat


def bootstrap_ci(
    values: npt.ArrayLike,
    stat: Callable[..., Any],
    *,
    seed: int,
    n_boot: int = 1000,
    confidence: float = 0.95,
    vectorized: bool = True,
) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval for ``stat(values)``.

    Procedure (so it can be reproduced exactly): ``rng = numpy.random.default_rng(seed)``;
    ``idx = rng.integers(0, n, size=(n_boot, n))``; compute ``stat`` on each row of
    ``values[idx]``; return the ``(1-confidence)/2`` and ``(1+confidence)/2`` percentiles
    (method 'linear') of those ``n_boot`` statistics. With ``vectorized=True`` the stat is
    called once as ``stat(resamples, axis=1)`` (works for ``np.mean``, ``np.median`` and
    :func:`percentile_stat`); otherwise it is applied row by row. Empty input -> (nan, nan).
    """
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    arr = np.asarray(values, dtype=np.float64).ravel()
    n = arr.size
    if n == 0:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    resamples = arr[idx]
    if vectorized:
        stats = np.asarray(stat(resamples, axis=1), dtype=np.float64)
    else:
        stats = np.array([float(stat(row)) for row in resamples], dtype=np.float64)
    if stats.shape != (n_boot,):
        raise ValueError(f"stat must return one value per resample, got shape {stats.shape}")
    alpha = 1.0 - confidence
    low, high = np.percentile(
        stats, [100.0 * alpha / 2.0, 100.0 * (1.0 - alpha / 2.0)], method=PERCENTILE_METHOD
    )
    return (float(low), float(high))


def derive_seed(seed: int, *parts: object) -> int:
    """Stable per-cell seed: ``zlib.crc32`` of ``"seed|part1|part2|..."`` (UTF-8).

    Python's ``hash()`` of strings is salted per process, so it would make CIs change
    between runs; crc32 is stable across processes, platforms and Python versions.
    """
    key = "|".join(str(p) for p in (seed, *parts))
    return zlib.crc32(key.encode("utf-8"))


# --------------------------------------------------------------------------- ordering helpers


def _first_appearance(values: Iterable[Hashable]) -> list[Hashable]:
    """Unique values in order of first appearance."""
    return list(dict.fromkeys(values))


def _natural_sorted(values: Iterable[Hashable]) -> list[Hashable]:
    """Sort by value when comparable (numbers numerically), else by string form."""
    items = list(values)
    try:
        return sorted(items)  # type: ignore[type-var]
    except TypeError:
        return sorted(items, key=lambda v: (type(v).__name__, str(v)))


def sort_cells(
    frame: pd.DataFrame,
    keys: Sequence[str],
    *,
    planner_order: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Sort rows by ``keys`` in the project's canonical order and reset the index.

    planner: ``planner_order`` first, then unlisted planners by first appearance in
    ``frame``; complexity: simple < medium < complex (unknown values after, sorted);
    any other key: sorted by value (by string form if mixed types). Deterministic.
    """
    if frame.empty or not keys:
        return frame.reset_index(drop=True)
    rank_cols: list[str] = []
    ranked = frame.reset_index(drop=True).copy()
    for i, key in enumerate(keys):
        col = ranked[key]
        if key == "planner":
            order = list(planner_order or [])
            order += [p for p in _first_appearance(col) if p not in order]
        elif key == "complexity":
            extra = sorted((c for c in set(col) if c not in COMPLEXITY_ORDER), key=str)
            order = [*COMPLEXITY_ORDER, *extra]
        else:
            order = _natural_sorted(set(col))
        ranks = {v: r for r, v in enumerate(order)}
        rank_name = f"__rank_{i}"
        ranked[rank_name] = [ranks[v] for v in col]
        rank_cols.append(rank_name)
    ranked = ranked.sort_values(rank_cols, kind="stable")
    return ranked.drop(columns=rank_cols).reset_index(drop=True)


def _planner_order(df: pd.DataFrame, planner_order: Sequence[str] | None) -> list[str]:
    """Explicit order first, then remaining planners by first appearance in the episodes."""
    order = list(planner_order or [])
    if "planner" in df.columns:
        order += [p for p in _first_appearance(df["planner"]) if p not in order]
    return order


def _require(df: pd.DataFrame, columns: Iterable[str]) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise KeyError(f"episode table is missing required columns: {missing}")


def _success_bool(series: pd.Series) -> npt.NDArray[np.bool_]:
    """Strict bool conversion: NaN or non 0/1 values raise instead of becoming True."""
    if series.isna().any():
        raise ValueError("'success' contains missing values")
    values = series.to_numpy()
    if values.dtype != np.bool_:
        uniq = set(pd.unique(values).tolist())
        if not uniq <= {0, 1}:  # True == 1 and False == 0 in Python sets
            raise ValueError(f"'success' must be boolean, got values {sorted(map(str, uniq))}")
    return values.astype(bool)


def _groups(
    df: pd.DataFrame, by: Sequence[str]
) -> Iterable[tuple[tuple[Hashable, ...], pd.DataFrame]]:
    """Group in first-appearance order, yielding tuple keys even for a single column."""
    for key, sub in df.groupby(list(by), sort=False, dropna=False, observed=True):
        yield (key if isinstance(key, tuple) else (key,)), sub


# --------------------------------------------------------------------------- pass@k / pass^k


def _pass_k(df: pd.DataFrame, k: int, kind: str) -> pd.DataFrame:
    if not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    _require(df, (*TASK_KEYS, "success"))
    out_col = "pass_at_k" if kind == "at" else "pass_hat_k"
    cell_keys = list(DEFAULT_BY)
    work = df.assign(_success=_success_bool(df["success"]))
    per_task = (
        work.groupby(list(TASK_KEYS), sort=False, dropna=False, observed=True)["_success"]
        .agg(n="size", c="sum")
        .reset_index()
    )
    rows: list[dict[str, Any]] = []
    for key, sub in _groups(per_task, cell_keys):
        kept = sub[sub["n"] >= k]
        scores = []
        for n_t, c_t in zip(kept["n"].tolist(), kept["c"].tolist(), strict=True):
            total = math.comb(n_t, k)
            if kind == "at":
                scores.append(1.0 - math.comb(n_t - c_t, k) / total)
            else:
                scores.append(math.comb(c_t, k) / total)
        rows.append(
            {
                **dict(zip(cell_keys, key, strict=True)),
                "k": int(k),
                "n_tasks": len(kept),
                "n_tasks_excluded": int(len(sub) - len(kept)),
                out_col: float(np.mean(scores)) if scores else math.nan,
            }
        )
    columns = [*cell_keys, "k", "n_tasks", "n_tasks_excluded", out_col]
    result = pd.DataFrame(rows, columns=columns)
    return sort_cells(result, cell_keys, planner_order=_planner_order(df, None))


def pass_at_k(df: pd.DataFrame, k: int) -> pd.DataFrame:
    """tau-bench pass@k per (planner, env, complexity): P(at least one of k trials succeeds).

    Per task (planner, env, complexity, task_id) with n trials and c successes:
    ``1 - C(n-c, k) / C(n, k)``, averaged over tasks; tasks with n < k are excluded
    (counted in ``n_tasks_excluded``) because the unbiased estimator needs k draws.
    """
    return _pass_k(df, k, "at")


def pass_hat_k(df: pd.DataFrame, k: int) -> pd.DataFrame:
    """tau-bench pass^k per (planner, env, complexity): P(all of k trials succeed).

    Per task: ``C(c, k) / C(n, k)``, averaged over tasks; tasks with n < k are excluded.
    It measures reliability (consistency across retries), unlike pass@k.
    """
    return _pass_k(df, k, "hat")


# --------------------------------------------------------------------------- summary


def summarize(
    df: pd.DataFrame,
    by: Sequence[str] = DEFAULT_BY,
    *,
    seed: int = 0,
    n_boot: int = 1000,
    confidence: float = 0.95,
    planner_order: Sequence[str] | None = None,
) -> pd.DataFrame:
    """One row per cell of ``by`` with completion, cost, latency and robustness metrics.

    Columns: the ``by`` keys, then :data:`SUMMARY_COLUMNS`, then ``tokens_<role>_mean`` for
    each role column present (missing values count as 0), then ``recovery_rate`` and
    ``n_faulted``. Definitions:

    * ``completion_rate = successes / n`` with only ``success == True`` counted (a
      ``correctly_reported_unreachable`` episode is not a completion); Wilson CI.
    * ``*_mean``: arithmetic means over all episodes of the cell (``tokens_mean`` uses
      ``tokens_total``; ``cost_mean`` uses ``cost_usd``). ``wall_s`` is ignored.
    * ``latency_p50/p99``: :func:`percentile` of ``latency_s`` (method 'linear'); CIs from
      :func:`bootstrap_ci` with ``n_boot`` resamples and seed
      ``derive_seed(seed, *cell_key, "latency_p50")`` (resp. ``"latency_p99"``), applied to
      the cell's latencies sorted ascending (so input row order does not matter).
    * ``harness_errors``: episodes with ``failure_mode == "harness_error"`` (kept in n).
    * ``recovery_rate``: success share among episodes with ``faults_injected > 0``
      (NaN when ``n_faulted == 0``).
    """
    by = list(by)
    if not by:
        raise ValueError("'by' must name at least one column")
    _require(df, (*by, *_REQUIRED_SUMMARY_INPUTS))
    roles = [c for c in ROLE_TOKEN_COLUMNS if c in df.columns]
    work = df.copy()
    work["_success"] = _success_bool(df["success"])
    for role in roles:
        work[role] = work[role].fillna(0)

    rows: list[dict[str, Any]] = []
    for key, sub in _groups(work, by):
        success = sub["_success"].to_numpy(dtype=bool)
        n = int(success.size)
        n_success = int(success.sum())
        ci_low, ci_high = wilson_interval(n_success, n, confidence)
        row: dict[str, Any] = dict(zip(by, key, strict=True))
        row.update(
            n=n,
            successes=n_success,
            completion_rate=n_success / n,
            completion_ci_low=ci_low,
            completion_ci_high=ci_high,
        )
        for out_col, src in _MEAN_COLUMNS:
            row[out_col] = float(np.mean(sub[src].to_numpy(dtype=np.float64)))
        # Sorted so the bootstrap CI does not depend on the row order of the input file.
        latency = np.sort(sub["latency_s"].to_numpy(dtype=np.float64))
        for q in (50, 99):
            name = f"latency_p{q}"
            row[name] = percentile(latency, q)
            low, high = bootstrap_ci(
                latency,
                percentile_stat(q),
                seed=derive_seed(seed, *key, name),
                n_boot=n_boot,
                confidence=confidence,
            )
            row[f"{name}_ci_low"] = low
            row[f"{name}_ci_high"] = high
        row["cost_mean"] = float(np.mean(sub["cost_usd"].to_numpy(dtype=np.float64)))
        row["harness_errors"] = int((sub["failure_mode"] == "harness_error").sum())
        for role in roles:
            row[f"{role}_mean"] = float(np.mean(sub[role].to_numpy(dtype=np.float64)))
        faulted = sub["faults_injected"].to_numpy(dtype=np.float64) > 0
        n_faulted = int(faulted.sum())
        row["recovery_rate"] = float(success[faulted].mean()) if n_faulted else math.nan
        row["n_faulted"] = n_faulted
        rows.append(row)

    columns = [*by, *SUMMARY_COLUMNS, *(f"{r}_mean" for r in roles), "recovery_rate", "n_faulted"]
    result = pd.DataFrame(rows, columns=columns)
    for col in ("n", "successes", "harness_errors", "n_faulted"):
        result[col] = result[col].astype("int64")
    return sort_cells(result, by, planner_order=_planner_order(df, planner_order))


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
    _require(df, (*by, "success", "failure_mode"))
    success = _success_bool(df["success"])
    failed_modes = df.loc[~success, "failure_mode"].astype(str)
    extra = sorted(set(failed_modes) - set(FAILURE_MODES))
    modes = [*FAILURE_MODES, *extra]
    work = df[by].copy()
    work["_failed"] = ~success
    work["_mode"] = df["failure_mode"].astype(str)

    rows: list[dict[str, Any]] = []
    for key, sub in _groups(work, by):
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
    return sort_cells(result, by, planner_order=_planner_order(df, planner_order))


def paired_difference(
    df: pd.DataFrame,
    planner_a: str,
    planner_b: str,
    *,
    seed: int,
    n_boot: int = 2000,
    confidence: float = 0.95,
    on: Sequence[str] = PAIR_KEYS,
) -> dict[str, Any]:
    """Paired completion difference ``mean(success_a - success_b)`` on shared episodes.

    Episodes are matched on ``on`` (env, complexity, task_id, trial), so task difficulty
    cancels out and the CI is tighter than comparing two independent rates. The CI is a
    percentile bootstrap over pairs (resampling whole pairs) with
    ``default_rng(seed)``. Raises if a planner has duplicate episodes for a key, because
    the pairing would then be ambiguous.
    """
    on = list(on)
    _require(df, ("planner", "success", *on))
    sides: list[pd.DataFrame] = []
    for planner in (planner_a, planner_b):
        part = df.loc[df["planner"] == planner, on].copy()
        part["_success"] = _success_bool(df.loc[df["planner"] == planner, "success"])
        dup = part.duplicated(on)
        if dup.any():
            raise ValueError(
                f"planner {planner!r} has {int(dup.sum())} duplicate episodes for keys {on}"
            )
        sides.append(part)
    merged = sides[0].merge(sides[1], on=on, how="inner", suffixes=("_a", "_b"))
    merged = sort_cells(merged, on)
    a = merged["_success_a"].to_numpy(dtype=np.float64)
    b = merged["_success_b"].to_numpy(dtype=np.float64)
    diff = a - b
    n_pairs = int(diff.size)
    low, high = bootstrap_ci(diff, np.mean, seed=seed, n_boot=n_boot, confidence=confidence)
    return {
        "planner_a": planner_a,
        "planner_b": planner_b,
        "n_pairs": n_pairs,
        "rate_a": float(a.mean()) if n_pairs else math.nan,
        "rate_b": float(b.mean()) if n_pairs else math.nan,
        "mean_diff": float(diff.mean()) if n_pairs else math.nan,
        "ci_low": low,
        "ci_high": high,
        "confidence": confidence,
        "n_boot": n_boot,
        "seed": seed,
    }
