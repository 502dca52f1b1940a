"""The statistics behind the sensitivity verdicts: paired intervals per cell, pooled, per factor.

Every planner runs the same tasks in every cell, so two planners are compared *paired*, the
task as the unit (``d = rate_a - rate_b`` per task, a rate over the task's trials):

- **Per cell**: the exact conditional (McNemar) interval of the difference: given the ``m`` tasks
  on which the two differ, the share ``p`` that ``a`` wins has a Clopper-Pearson interval, and
  the difference is ``m / n * (2 p - 1)``. It excludes 0 exactly when the exact sign test
  (:func:`~planarena.experiments.analysis.stats.sign_test_p`) rejects, so 1 task against 0
  never decides anything. (With ``trials > 1`` it is the interval of the share of tasks ``a``
  wins minus the share ``b`` wins; with one trial that is the completion difference.)
- **Pooled over cells**: the mean of ``d`` over every cell and task. The same tasks recur in
  every cell, so cells are not independent: the interval is a task bootstrap that draws tasks
  with every cell of each, and it counts only when the exact sign test over tasks (each task's
  ``d`` summed over the cells) agrees, since a percentile bootstrap is too narrow when few
  tasks differ.
- **Per factor**: the pooled difference over the design's cells at the factor's low level, at
  its high level, and the effect (high minus low), from the same task bootstrap, each counted
  as significant only where the sign test over tasks agrees too.

Multiple comparisons: a verdict asks "is the ordering significant in *some* cell", so each
cell's interval has confidence ``1 - alpha / K`` over the ``K`` cells of one pair (Bonferroni;
for "some cell" it is Holm's first step); the pooled test is one test at ``alpha``; the factor
intervals have ``1 - alpha / F`` over the ``F`` factors. Pairs and groups are not corrected
against each other: each verdict is its own claim with error at most ``alpha``, and the
report says how many verdicts that allows by chance.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd
from planarena.experiments.analysis.cells import success_bool
from planarena.experiments.analysis.stats import (
    PERCENTILE_METHOD,
    FloatArray,
    derive_seed,
    resampled_sums,
    sign_test_p,
)

ALPHA = 0.05
N_BOOT = 2000
VERDICTS = ("holds", "depends", "flips", "unresolved", "tie")
"""holds: better pooled, no cell significantly the other way; depends: significant in some
cells but not a pooled ordering free of contrary cells; flips: significant both ways in
different cells; unresolved: no cell and not pooled significant; tie: identical outcomes on
every task in every cell."""


@lru_cache(maxsize=1024)
def _log_comb(n: int) -> tuple[FloatArray, FloatArray]:
    """``k = 0..n`` and ``log C(n, k)``, made once per ``n`` (a bisection asks for the same
    ``n`` some 120 times); read-only, so a caller cannot change the cached arrays."""
    k = np.arange(n + 1, dtype=np.float64)
    log_comb = np.array([math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                         for i in range(n + 1)])  # fmt: skip
    k.flags.writeable = log_comb.flags.writeable = False
    return k, log_comb


def _binom_logpmf(n: int, p: float) -> FloatArray:
    k, log_comb = _log_comb(n)
    return log_comb + k * math.log(p) + (n - k) * math.log1p(-p)


def _tail_ge(x: int, n: int, p: float) -> float:
    """P(X >= x), X ~ Binomial(n, p), 0 < p < 1."""
    return float(np.exp(_binom_logpmf(n, p)[x:]).sum())


@lru_cache(maxsize=65536)
def clopper_pearson(x: int, n: int, confidence: float) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval of a binomial proportion from ``x`` of ``n``, by
    bisection on the binomial tails (no special functions needed); (0, 1) when n = 0."""
    if n == 0:
        return (0.0, 1.0)
    half = (1.0 - confidence) / 2.0

    def solve(f: Callable[[float], float]) -> float:  # f increasing in p, root in (0, 1)
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2.0
            lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
        return (lo + hi) / 2.0

    low = 0.0 if x == 0 else solve(lambda p: _tail_ge(x, n, p) - half)
    high = 1.0 if x == n else solve(lambda p: half - (1.0 - _tail_ge(x + 1, n, p)))
    return (low, high)


@lru_cache(maxsize=65536)
def _sign_p(wins_a: int, wins_b: int) -> float:
    return sign_test_p(wins_a, wins_b)


def net_win_interval(wins_a: int, wins_b: int, n: int, confidence: float) -> tuple[float, float]:
    """Exact conditional interval of ``P(a wins a task) - P(b wins it)`` over ``n`` paired
    tasks, ``wins_a`` / ``wins_b`` of which each won (the rest tied): ``m / n * (2 p - 1)``
    over the Clopper-Pearson interval of ``p`` from ``wins_a`` of ``m = wins_a + wins_b``.
    (0, 0) when no task differs (no evidence either way: never significant)."""
    if n == 0:
        return (math.nan, math.nan)
    m = wins_a + wins_b
    if m == 0:
        return (0.0, 0.0)
    lo, hi = clopper_pearson(wins_a, m, confidence)
    return (m / n * (2.0 * lo - 1.0), m / n * (2.0 * hi - 1.0))


def sign_of(low: float, high: float) -> int:
    """+1 if the interval lies above 0, -1 below, 0 if it holds 0 (or is undefined)."""
    if low > 0:
        return 1
    if high < 0:
        return -1
    return 0


def verdict_of(cell_signs: Sequence[int], pooled_sign: int, identical: bool) -> str:
    """The verdict from the pair's significant cells (+1: a better, -1: b better, 0: neither),
    its pooled sign and whether every task came out the same for both in every cell."""
    if identical:
        return "tie"
    up, down = 1 in cell_signs, -1 in cell_signs
    if up and down:
        return "flips"
    if pooled_sign and -pooled_sign not in cell_signs:
        return "holds"
    if up or down:
        return "depends"
    return "unresolved"


@dataclass(frozen=True)
class Settings:
    """How the intervals are drawn: ``alpha``, bootstrap resamples and the seed."""

    alpha: float = ALPHA
    n_boot: int = N_BOOT
    seed: int = 0


@dataclass(frozen=True)
class Group:
    """One env x complexity: each planner's per-task success rate in each cell
    (``rates[planner]`` is tasks x cells, NaN where the task did not run)."""

    key: dict[str, Any]
    cells: list[str]
    rates: dict[str, FloatArray]


def groups_of(
    records: pd.DataFrame, cells: Sequence[str], planners: Sequence[str], keys: Sequence[str]
) -> list[Group]:
    """The records split per ``keys`` (env, complexity), in the order they first appear,
    tasks sorted by their key; planners and cells in the given order."""
    task = [k for k in ("seed", "task_id") if k in records.columns]
    work = records[[*keys, *task, "cell", "planner"]].copy()
    work["_s"] = success_bool(records["success"]).astype(np.float64)
    out = []
    for key, part in work.groupby(list(keys), sort=False):
        rate = part.groupby([*task, "planner", "cell"], sort=True)["_s"].mean()
        wide = rate.unstack("cell").reindex(columns=list(cells))
        rates = {}
        tasks = wide.index.droplevel("planner").unique().sort_values()
        for p in planners:
            if p in wide.index.get_level_values("planner"):
                table = wide.xs(p, level="planner").reindex(tasks)
                rates[p] = table.to_numpy(dtype=np.float64)
        values = key if isinstance(key, tuple) else (key,)
        out.append(Group(dict(zip(keys, values, strict=True)), list(cells), rates))
    return out


def cell_rows(group: Group, a: str, b: str, settings: Settings) -> list[dict[str, Any]]:
    """Per cell: the paired difference of ``a`` and ``b`` with its exact interval at
    ``1 - alpha / K`` (K = the cells), the win counts, the sign test and the sign."""
    ra, rb = group.rates[a], group.rates[b]
    confidence = 1.0 - settings.alpha / max(len(group.cells), 1)
    rows = []
    for c, cell in enumerate(group.cells):
        both = ~(np.isnan(ra[:, c]) | np.isnan(rb[:, c]))
        d = ra[both, c] - rb[both, c]
        n = int(d.size)
        wins_a, wins_b = int((d > 0).sum()), int((d < 0).sum())
        low, high = net_win_interval(wins_a, wins_b, n, confidence)
        rows.append(
            {
                "cell": cell,
                "n": n,
                "rate_a": float(ra[both, c].mean()) if n else math.nan,
                "rate_b": float(rb[both, c].mean()) if n else math.nan,
                "diff": float(d.mean()) if n else math.nan,
                "low": low,
                "high": high,
                "wins_a": wins_a,
                "wins_b": wins_b,
                "p_value": _sign_p(wins_a, wins_b),
                "significant": sign_of(low, high),
            }
        )
    return rows


def bootstrap_cell_sums(d: FloatArray, seed: int, n_boot: int) -> FloatArray:
    """Resampled per-cell sums of the differences (n_boot x cells): tasks drawn with
    replacement, each with all its cells (the same tasks recur in every cell). Summed in
    integers when the differences are whole (one trial), so every later sum is exact and the
    numbers do not depend on the order of adding."""
    rng = np.random.default_rng(seed)
    columns = [d[:, c] for c in range(d.shape[1])]
    return np.concatenate([np.stack(part, axis=1) for part in resampled_sums(rng, columns, n_boot)])


def guarded_signs(
    per_task: FloatArray, boot: FloatArray, confidence: float
) -> tuple[FloatArray, FloatArray, list[int]]:
    """Per column of ``boot`` (resampled means of the same column of ``per_task``, tasks x
    statistics): the percentile interval and its sign, which counts only when the exact sign
    test over the tasks' own values agrees at the same level. A percentile bootstrap is too
    narrow when few tasks differ (4 tasks of 50 that differ one way are all missed by a
    resample with chance 0.016, so its 95 % interval excludes 0 at 4 to 0; the sign test
    needs 6 to 0)."""
    half = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(boot, [half, 100.0 - half], axis=0, method=PERCENTILE_METHOD)
    signs = []
    values = np.round(per_task, 12)  # a task whose weighted cells cancel is a tie, not fuzz
    for j in range(values.shape[1]):
        wins_a, wins_b = int((values[:, j] > 0).sum()), int((values[:, j] < 0).sum())
        sign = sign_of(float(low[j]), float(high[j]))
        agree = _sign_p(wins_a, wins_b) < 1.0 - confidence and sign == (
            1 if wins_a > wins_b else -1
        )
        signs.append(sign if agree else 0)
    return low, high, signs


def pooled_row(d: FloatArray, boot: FloatArray, settings: Settings) -> dict[str, Any]:
    """The pooled difference over every cell and task (``d``: complete tasks x cells), its
    task-bootstrap interval, the exact sign test over tasks (each task's differences summed
    over the cells), and its sign when both agree."""
    if d.shape[0] == 0:
        nan = math.nan
        return {
            "n_tasks": 0,
            "pooled_diff": nan,
            "pooled_low": nan,
            "pooled_high": nan,
            "p_pooled": 1.0,
            "pooled_sign": 0,
        }
    n, cells = d.shape
    per_task = d.sum(axis=1) / cells
    lows, highs, signs = guarded_signs(
        per_task[:, None], (boot.sum(axis=1) / (n * cells))[:, None], 1.0 - settings.alpha
    )
    low, high, sign = float(lows[0]), float(highs[0]), signs[0]
    wins_a, wins_b = int((per_task > 0).sum()), int((per_task < 0).sum())
    return {
        "n_tasks": int(d.shape[0]),
        "pooled_diff": float(d.mean()),
        "pooled_low": low,
        "pooled_high": high,
        "p_pooled": _sign_p(wins_a, wins_b),
        "pooled_sign": sign,
    }


def factor_rows(
    d: FloatArray,
    boot: FloatArray,
    levels: Mapping[str, Sequence[int]],
    settings: Settings,
) -> list[dict[str, Any]]:
    """Per factor: the pair's pooled difference over the cells at its low level (``levels``
    maps a factor to each cell's level: -1 low, +1 high, 0 centre), at its high level, and
    the effect (high - low), each with a task-bootstrap interval at ``1 - alpha / F`` and a
    sign only where the sign test over tasks agrees (:func:`guarded_signs`)."""
    confidence = 1.0 - settings.alpha / max(len(levels), 1)
    labels = ("at_low", "at_high", "effect")
    if not levels:
        return []
    s = np.asarray(list(levels.values())).T  # cells x factors: -1 low, +1 high, 0 centre
    low_cells, high_cells = (s == -1).astype(np.float64), (s == 1).astype(np.float64)
    n_low, n_high = low_cells.sum(axis=0).clip(1), high_cells.sum(axis=0).clip(1)

    def stats(sums: FloatArray, scale: float) -> FloatArray:
        """[at low, at high, effect] per factor, interleaved: whole sums over 0/1 cells
        divided once, so they are exact."""
        at_low = (sums @ low_cells) / (n_low * scale)
        at_high = (sums @ high_cells) / (n_high * scale)
        return np.stack([at_low, at_high, at_high - at_low], axis=-1).reshape(len(sums), -1)

    if d.shape[0]:
        per_task = stats(d, 1.0)
        means = stats(d.sum(axis=0, keepdims=True), float(d.shape[0]))[0]
        low, high, found = guarded_signs(per_task, stats(boot, float(d.shape[0])), confidence)
    else:
        means = low = high = np.full(3 * len(levels), math.nan)
        found = [0] * (3 * len(levels))
    rows = []
    for i, name in enumerate(levels):
        row: dict[str, Any] = {"factor": name}
        for j, label in enumerate(labels):
            k = 3 * i + j
            row[label] = float(means[k])
            row[f"{label}_low"], row[f"{label}_high"] = float(low[k]), float(high[k])
        row["moves"] = found[3 * i + 2] != 0
        row["reverses"] = found[3 * i] * found[3 * i + 1] == -1
        rows.append(row)
    return rows


def analyse(
    groups: Sequence[Group],
    planners: Sequence[str],
    levels: Mapping[str, Sequence[int]],
    settings: Settings,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Every pair of planners in every group: (verdicts, per-cell intervals, per-factor
    effects). A pair's bootstrap is seeded by the run's seed, the group and the pair."""
    verdicts, cells, factors = [], [], []
    for g in groups:
        present = [p for p in planners if p in g.rates]
        for a, b in itertools.combinations(present, 2):
            head = {"planner_a": a, "planner_b": b, **g.key}
            per_cell = cell_rows(g, a, b, settings)
            cells += [{**head, **r} for r in per_cell]
            d = g.rates[a] - g.rates[b]
            d = d[~np.isnan(d).any(axis=1)]  # tasks both ran in every cell
            seed = derive_seed(settings.seed, "sensitivity", *g.key.values(), a, b)
            boot = (
                bootstrap_cell_sums(d, seed, settings.n_boot)
                if d.shape[0]
                else np.empty((0, d.shape[1]))
            )
            pooled = pooled_row(d, boot, settings)
            effects = factor_rows(d, boot, levels, settings)
            factors += [{**head, **r} for r in effects]
            signs = [r["significant"] for r in per_cell]
            identical = all(r["wins_a"] == r["wins_b"] == 0 for r in per_cell)
            verdict = verdict_of(signs, pooled["pooled_sign"], identical)
            verdicts.append(
                {
                    **head,
                    "cells": len(per_cell),
                    **pooled,
                    "cells_a": signs.count(1),
                    "cells_b": signs.count(-1),
                    "verdict": verdict,
                    "leader": _leader(a, b, verdict, pooled["pooled_sign"], signs),
                    **_deciding(effects),
                }
            )
    return pd.DataFrame(verdicts), pd.DataFrame(cells), pd.DataFrame(factors)


def _leader(a: str, b: str, verdict: str, pooled: int, signs: Sequence[int]) -> str:
    """Who is ahead: the pooled leader of an ordering that holds, the side of a pair's
    significant cells when it depends; nobody otherwise."""
    if verdict == "holds":
        return a if pooled > 0 else b
    if verdict == "depends":
        return a if 1 in signs else b
    return ""


def _deciding(effects: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The factor with the largest significant effect on the pair's difference (blank if no
    factor moves it), with that effect and its interval."""
    moved = [e for e in effects if e["moves"]]
    if not moved:
        return {"factor": "", "effect": math.nan, "effect_low": math.nan, "effect_high": math.nan}
    top = max(moved, key=lambda e: abs(e["effect"]))
    return {k: top[k] for k in ("factor", "effect", "effect_low", "effect_high")}
