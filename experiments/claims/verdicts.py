"""A claim's verdict over the assumption space, from a screening design's paired differences.

Input: ``d`` (tasks x cells), the paired difference ``a - b`` of one claim on each task of its
population in each cell of a two-level design (the centre cell included, sign 0), and the
design's sign table (cells x factors). Every number comes from a task bootstrap that draws
tasks with all their cells, since the same tasks recur in every cell.

- **Effects.** A factor's main effect is the mean difference at its high level minus at its
  low level (the design is orthogonal: each is a contrast of cell means). It *decides* the
  claim when its interval, at ``1 - alpha / F`` over the ``F`` factors (the bootstrap's
  standard error times the normal quantile: a percentile that far out is a resample's
  extreme), excludes 0.
- **The claim over the space.** The fitted difference at a point ``x`` of the cube of the
  deciding factors (``-1`` low .. ``+1`` high, the others at their middle) is the mean over
  the design's corner cells plus half of each deciding effect times ``x``. Its bootstrap
  interval at ``1 - alpha`` is checked at seeded uniform points of that cube: the share where
  the lower end is above the threshold is where the claim *holds*; where the upper end is
  below it, where it *fails*.
- **Verdicts.** ``holds throughout`` (holds at 99 % of the space or more), ``fails`` (fails at
  99 % or more), ``holds where ...`` (holds somewhere: the boundary is given in the deciding
  assumptions' own units, one at a time, the others at their middle), ``unresolved at this
  n`` (neither).
A screening design aliases main effects with interactions (resolution III when factors are
many): a boundary is where confirmatory runs should look, not a confirmed threshold.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt
from planarena.experiments.analysis.stats import derive_seed

FloatArray = npt.NDArray[np.float64]
HOLDS, HOLDS_WHERE, FAILS, UNRESOLVED = (
    "holds throughout",
    "holds where",
    "fails",
    "unresolved at this n",
)
VERDICTS = (HOLDS, HOLDS_WHERE, FAILS, UNRESOLVED)
SPACE_POINTS = 2000
"""Uniform points of the deciding factors' cube the shares are read at."""
MAX_DECIDING = 6
"""At most this many deciding factors span the cube (the largest effects)."""


@dataclass(frozen=True)
class Axis:
    """One factor of the design: its name and its low and high levels in its own units."""

    name: str
    low: float
    high: float
    integer: bool = False

    def at(self, x: float) -> float:
        """The level at ``x`` in ``[-1, 1]`` (linear between low and high)."""
        value = self.low + (x + 1.0) / 2.0 * (self.high - self.low)
        return float(round(value)) if self.integer else value


@dataclass
class Verdict:
    """A claim's verdict, its numbers and the assumptions that decide it."""

    verdict: str
    n_tasks: int
    pooled: float
    pooled_low: float
    pooled_high: float
    share_holds: float
    share_fails: float
    effects: list[dict[str, Any]] = field(default_factory=list)
    conditions: list[str] = field(default_factory=list)

    def deciding(self) -> list[str]:
        return [e["factor"] for e in self.effects if e["decides"]][:3]


def _percentile(values: FloatArray, q: float, axis: int = 0) -> FloatArray:
    return np.percentile(values, 100.0 * q, axis=axis)


def task_weights(n_tasks: int, n_boot: int, seed: int) -> FloatArray:
    """Multinomial task counts, one row per resample (tasks drawn with all their cells)."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(n_tasks, np.full(n_tasks, 1.0 / n_tasks), size=n_boot).astype(float)


def judge(
    d: FloatArray,
    signs: FloatArray,
    axes: Sequence[Axis],
    *,
    threshold: float = 0.0,
    alpha: float = 0.05,
    n_boot: int = 1000,
    seed: int = 0,
) -> Verdict:
    """The verdict of a claim ``a - b > threshold`` from ``d`` (tasks x cells; NaN where a
    task did not run in a cell) and ``signs`` (cells x factors: -1, +1, 0 at the centre)."""
    keep = ~np.isnan(d).any(axis=1)
    d = d[keep]
    n = d.shape[0]
    if n == 0:
        return Verdict(UNRESOLVED, 0, math.nan, math.nan, math.nan, 0.0, 0.0)
    corner = (signs != 0).all(axis=1)
    runs = int(corner.sum())
    weights = task_weights(n, n_boot, derive_seed(seed, "claims-boot"))
    cell_means = d.mean(axis=0)  # per cell
    boot_cells = weights @ d / n  # resamples x cells
    contrast = signs[corner] * (2.0 / runs)  # corner cells x factors
    effects = cell_means[corner] @ contrast
    boot_effects = boot_cells[:, corner] @ contrast
    base = float(cell_means[corner].mean())
    boot_base = boot_cells[:, corner].mean(axis=1)
    pooled = float(cell_means.mean())
    boot_pooled = boot_cells.mean(axis=1)
    lo_p, hi_p = _percentile(boot_pooled, alpha / 2), _percentile(boot_pooled, 1 - alpha / 2)
    k = len(axes)
    # at alpha / (2k) a percentile of a thousand resamples is about their extreme, far too
    # narrow: the effects' intervals take the bootstrap's standard error and a normal quantile
    z = NormalDist().inv_cdf(1.0 - alpha / (2 * k))
    se = boot_effects.std(axis=0, ddof=1)
    lo_e, hi_e = effects - z * se, effects + z * se
    rows = []
    for j, axis in enumerate(axes):
        decides = bool(lo_e[j] > 0 or hi_e[j] < 0)
        rows.append(
            {
                "factor": axis.name,
                "effect": float(effects[j]),
                "low": float(lo_e[j]),
                "high": float(hi_e[j]),
                "decides": decides,
            }
        )
    order = sorted(range(k), key=lambda j: (not rows[j]["decides"], -abs(rows[j]["effect"])))
    rows = [rows[j] for j in order]
    chosen = [j for j in order if rows[order.index(j)]["decides"]][:MAX_DECIDING]
    rng = np.random.default_rng(derive_seed(seed, "claims-space"))
    x = rng.uniform(-1.0, 1.0, size=(SPACE_POINTS, len(chosen)))
    fitted = boot_base[:, None] + boot_effects[:, chosen] @ (x.T / 2.0)  # resamples x points
    low_x = _percentile(fitted, alpha / 2)
    high_x = _percentile(fitted, 1 - alpha / 2)
    share_holds = float((low_x > threshold).mean())
    share_fails = float((high_x < threshold).mean())
    if share_holds >= 0.99:
        verdict = HOLDS
    elif share_fails >= 0.99:
        verdict = FAILS
    elif share_holds > 0:
        verdict = HOLDS_WHERE
    else:
        verdict = UNRESOLVED
    conditions: list[str] = []
    if verdict == HOLDS_WHERE:
        conditions = _conditions(base, effects, chosen, axes, threshold) or _exceptions(
            boot_base, boot_effects, chosen, axes, threshold, alpha
        )
    return Verdict(
        verdict,
        n,
        pooled,
        float(lo_p),
        float(hi_p),
        share_holds,
        share_fails,
        rows,
        conditions,
    )


def _conditions(
    base: float,
    effects: FloatArray,
    chosen: Sequence[int],
    axes: Sequence[Axis],
    threshold: float,
) -> list[str]:
    """Where the fitted difference crosses the threshold along each deciding factor alone
    (the others at their middle), in that factor's units: ``max_replans <= 4``."""
    out = []
    for j in chosen:
        e = float(effects[j])
        if e == 0:
            continue
        x = 2.0 * (threshold - base) / e  # base + e / 2 * x = threshold
        axis = axes[j]
        if x <= -1.0 or x >= 1.0:  # it does not turn the claim alone within its range
            continue
        value = axis.at(x)
        rising = (e > 0) == (axis.high > axis.low)
        shown = f"{value:g}" if axis.integer else f"{value:.3g}"
        out.append(f"{axis.name} {'>=' if rising else '<='} {shown}")
    return out


def _exceptions(
    boot_base: FloatArray,
    boot_effects: FloatArray,
    chosen: Sequence[int],
    axes: Sequence[Axis],
    threshold: float,
    alpha: float,
) -> list[str]:
    """Where no one assumption turns the claim alone: the corners of the (up to) three
    largest deciding assumptions, the others at their middle, where it does not hold,
    written ``except where p_malformed = 0.17 and p_prose_condition = 0``."""
    top = list(chosen[:3])
    out = []
    for corner in itertools.product((-1.0, 1.0), repeat=len(top)):
        fitted = boot_base + boot_effects[:, top] @ (np.array(corner) / 2.0)
        if _percentile(fitted, alpha / 2) > threshold:
            continue
        levels = [f"{axes[j].name} = {axes[j].at(x):g}" for j, x in zip(top, corner, strict=True)]
        out.append("except where " + " and ".join(levels))
    return out or ["no one assumption turns it alone (see the deciding effects)"]
