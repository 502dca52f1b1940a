"""Paired comparisons of planners: the completion difference on the tasks both ran.

The task is the unit (trials of one task are correlated): per task each planner's success
rate, their difference averaged over shared tasks, a task bootstrap interval, the exact sign
test, and Holm's adjustment over a table's every pair.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from planarena.experiments.analysis.cells import (
    iter_groups,
    pair_keys,
    planner_order_of,
    require_columns,
    sort_cells,
    success_bool,
    swept_keys,
)
from planarena.experiments.analysis.stats import (
    FloatArray,
    derive_seed,
    holm,
    percentile_interval,
    resampled_sums,
    sign_test_p,
)
from planarena.experiments.records.runs import with_swept_columns


def paired_difference(
    df: pd.DataFrame,
    planner_a: str,
    planner_b: str,
    *,
    seed: int,
    n_boot: int = 2000,
    confidence: float = 0.95,
    on: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Paired completion difference on shared tasks, the task as the unit.

    Per task (``on``, default :func:`pair_keys`: seed, env, complexity, task_id and swept
    keys) each planner's success rate over its trials; ``d_t = rate_a_t - rate_b_t``;
    ``mean_diff`` is the mean of ``d_t`` over tasks both planners ran. The interval is a
    percentile bootstrap resampling tasks (multinomial counts, ``default_rng(seed)``);
    ``degenerate`` says the interval has zero width (every resample gives the same value,
    e.g. all tasks agree), which is no evidence of precision. ``wins_a``/``wins_b`` count tasks
    with ``d_t > 0`` / ``< 0`` and ``p_value`` is :func:`sign_test_p` of those (McNemar's exact
    test when trials = 1).
    """
    df = with_swept_columns(df)
    on = pair_keys(df) if on is None else list(on)
    require_columns(df, ("planner", "success", *on))
    part = df[df["planner"].isin([planner_a, planner_b])]
    rates = _rate_columns(_task_rates(part, on))
    return _paired_stats(
        rates, planner_a, planner_b, seed=seed, n_boot=n_boot, confidence=confidence
    )


def _task_rates(df: pd.DataFrame, on: Sequence[str]) -> pd.DataFrame:
    """Per-task success rate of each planner: rows = tasks (``on``, sorted), columns = planners.

    Raises if a planner has two episodes of one task and trial (the pairing would be
    ambiguous, e.g. a run merged twice)."""
    on = list(on)
    episode_keys = [*on, *(["trial"] if "trial" in df.columns and "trial" not in on else [])]
    dup = df.duplicated([*episode_keys, "planner"])
    if dup.any():
        planners = sorted(map(str, set(df.loc[dup, "planner"])))
        raise ValueError(
            f"planner(s) {planners} have {int(dup.sum())} duplicate episodes for {episode_keys}"
        )
    work = df[[*on, "planner"]].copy()
    work["_s"] = success_bool(df["success"]).astype(np.float64)
    grouped = work.groupby([*on, "planner"], sort=True, dropna=False, observed=True)["_s"]
    return grouped.mean().unstack("planner")


def _rate_columns(rates: pd.DataFrame) -> dict[Hashable, FloatArray]:
    """:func:`_task_rates`' columns as arrays (a frame's column is slow to look up, and a
    planner's is looked up once per other planner)."""
    return {p: rates[p].to_numpy(dtype=np.float64) for p in rates.columns}


def _paired_stats(
    rates: Mapping[Hashable, FloatArray],
    planner_a: str,
    planner_b: str,
    *,
    seed: int,
    n_boot: int,
    confidence: float,
) -> dict[str, Any]:
    """:func:`paired_difference`'s numbers from per-task rates (:func:`_rate_columns`; tasks
    both planners ran)."""
    if planner_a in rates and planner_b in rates:
        a, b = rates[planner_a], rates[planner_b]
        ran = ~(np.isnan(a) | np.isnan(b))  # tasks both planners ran
        a, b = a[ran], b[ran]
    else:
        a = b = np.empty(0)
    diff = a - b
    n_pairs = int(diff.size)
    if n_pairs:
        rng = np.random.default_rng(seed)
        parts = [total / n_pairs for (total,) in resampled_sums(rng, [diff], n_boot)]
        low, high = percentile_interval(np.concatenate(parts), confidence)
    else:
        low = high = math.nan
    wins_a, wins_b = int((diff > 0).sum()), int((diff < 0).sum())
    return {
        "planner_a": planner_a,
        "planner_b": planner_b,
        "n_pairs": n_pairs,
        "n_tasks": n_pairs,
        "rate_a": float(a.mean()) if n_pairs else math.nan,
        "rate_b": float(b.mean()) if n_pairs else math.nan,
        "mean_diff": float(diff.mean()) if n_pairs else math.nan,
        "ci_low": low,
        "ci_high": high,
        "degenerate": bool(n_pairs and low == high),
        "wins_a": wins_a,
        "wins_b": wins_b,
        "p_value": sign_test_p(wins_a, wins_b),
        "confidence": confidence,
        "n_boot": n_boot,
        "seed": seed,
    }


def pairwise_comparisons(
    df: pd.DataFrame,
    *,
    seed: int,
    n_boot: int = 1000,
    alpha: float = 0.05,
    planner_order: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Every pair of planners per (env, complexity, swept keys other than seed), paired on
    tasks (seeds pooled: tasks of different seeds are different tasks). Columns: the group
    keys, ``planner_a``, ``planner_b`` and :func:`paired_difference`'s fields, ``p_holm``
    (Holm-adjusted over every row of the table, one family) and ``verdict``: ``better`` /
    ``worse`` (a vs b) when ``p_holm < alpha``, else ``no difference``."""
    df = with_swept_columns(df)
    planners = planner_order_of(df, planner_order)
    planners = [p for p in planners if p in set(df["planner"])]
    groups = ["env", "complexity", *(k for k in swept_keys(df) if k != "seed")]
    on = pair_keys(df)
    require_columns(df, ("planner", "success", *on))
    rows: list[dict[str, Any]] = []
    for key, sub in iter_groups(df, groups):
        rates = _rate_columns(_task_rates(sub, on))
        present = [p for p in planners if p in rates]
        for i, a in enumerate(present):
            for b in present[i + 1 :]:
                d = _paired_stats(
                    rates,
                    a,
                    b,
                    seed=derive_seed(seed, *key, a, b),
                    n_boot=n_boot,
                    confidence=0.95,
                )
                if d["n_pairs"] == 0:
                    continue
                rows.append({**dict(zip(groups, key, strict=True)), **d})
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    out["p_holm"] = holm(out["p_value"].tolist())
    out["verdict"] = [
        ("better" if d > 0 else "worse") if p < alpha else "no difference"
        for d, p in zip(out["mean_diff"], out["p_holm"], strict=True)
    ]
    out = out.drop(columns=["confidence", "n_boot", "seed"])
    return sort_cells(out, groups).reset_index(drop=True)
