"""How a planner pair's completion gap changes with task length, measured inside each family.

Pooling every family into length bins confounds length with family: at the same 7 steps
ReAct's lead over replanning can be a few points on one family and thirty on another, so a
"trend" across bins can be a change of families. Here the unit is the family x length cell
(every task of one family with one gold-plan length): each cell's mean paired difference is
one observation, the slope is fitted on length with each family's own mean taken out (a
within-family slope, weighted by the cell's tasks), and its interval resamples cells within
each family. A family whose tasks all have one length says nothing about a trend and is left
out; the table says how many cells and families carried it, and how many families' own
slopes point the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from planarena.experiments.analysis.stats import derive_seed, percentile_interval

if TYPE_CHECKING:
    from planarena.experiments.studies.decision_map_core import Settings

TREND_PAIRS = (
    ("react", "plan_execute_replan"),
    ("tot", "plan_execute_replan"),
    ("plan_execute_replan", "plan_execute"),
)
"""The pairs whose gap the source article says changes with length (its ladder)."""


def family_cells(part: pd.DataFrame, a: str, c: str) -> pd.DataFrame:
    """One row per family x length cell: its tasks and the mean paired difference in
    completion, ``a`` minus ``c`` (each task's success averaged over the rows it has, e.g.
    the grid's fault rates)."""
    two = part[part["planner"].isin([a, c])]
    per = two.pivot_table(
        index=["env", "steps", "task"], columns="planner", values="success", aggfunc="mean"
    )
    if a not in per.columns or c not in per.columns:
        return pd.DataFrame(columns=["env", "steps", "n_tasks", "diff"])
    d = (per[a] - per[c]).dropna().rename("diff").reset_index()
    cells = d.groupby(["env", "steps"], observed=True)["diff"].agg(["size", "mean"])
    return cells.rename(columns={"size": "n_tasks", "mean": "diff"}).reset_index()


Family = tuple[np.ndarray, np.ndarray, np.ndarray]
"""One family's cells as arrays: tasks per cell (the weights), length, mean difference."""


def _families(cells: pd.DataFrame) -> list[Family]:
    """Each family's cells as arrays, families in ``groupby("env")`` order."""
    return [
        (fam["n_tasks"].to_numpy(float), fam["steps"].to_numpy(float), fam["diff"].to_numpy(float))
        for _, fam in cells.groupby("env", observed=True)
    ]


def _slope(families: Sequence[Family]) -> float:
    """:func:`within_slope` of families already as arrays."""
    num = den = 0.0
    for w, x, y in families:
        x_bar, y_bar = (w @ x) / w.sum(), (w @ y) / w.sum()
        num += float(w @ ((x - x_bar) * (y - y_bar)))
        den += float(w @ ((x - x_bar) ** 2))
    return num / den if den > 0 else float("nan")


def within_slope(cells: pd.DataFrame) -> float:
    """The within-family slope of ``diff`` on ``steps`` (per step), cells weighted by their
    tasks; NaN when no family has two lengths."""
    return _slope(_families(cells))


def _resample(families: Sequence[Family], rng: np.random.Generator) -> list[Family]:
    """Cells drawn with replacement within each family (as many as it has), family by family
    in order: the same draws and sums as resampling the table's rows, without the table."""
    out = []
    for w, x, y in families:
        idx = rng.integers(0, len(w), len(w))
        out.append((w[idx], x[idx], y[idx]))
    return out


def trend_row(cells: pd.DataFrame, seed: int, n_boot: int, alpha: float) -> dict[str, Any]:
    """The slope in points per step, its cell-bootstrap interval and what carried it."""
    varied = cells.groupby("env", observed=True)["steps"].transform("nunique") > 1
    cells = cells[varied]
    slope = within_slope(cells)
    if np.isnan(slope):
        return {"slope_pp": slope, "low_pp": slope, "high_pp": slope, "cells": 0}
    rng = np.random.default_rng(seed)
    families = _families(cells)
    boots = np.array([_slope(_resample(families, rng)) for _ in range(n_boot)])
    low, high = percentile_interval(boots[~np.isnan(boots)], 1 - alpha)
    own = [within_slope(f) for _, f in cells.groupby("env", observed=True)]
    return {
        "slope_pp": 100 * slope,
        "low_pp": 100 * low,
        "high_pp": 100 * high,
        "cells": len(cells),
        "families": cells["env"].nunique(),
        "families_same_sign": int(sum(np.sign(v) == np.sign(slope) for v in own)),
        "steps_min": int(cells["steps"].min()),
        "steps_max": int(cells["steps"].max()),
    }


def trend_table(
    data: pd.DataFrame, s: Settings, seed: int = 0, pairs: Sequence[tuple[str, str]] = TREND_PAIRS
) -> pd.DataFrame:
    """Per skill of the grid and pair: :func:`trend_row` over the family x length cells."""
    grid = data[data["dm_kind"] == "grid"]
    rows = []
    for skill, part in grid.groupby("skill", sort=False, observed=True):
        for a, c in pairs:
            cells = family_cells(part, a, c)
            if cells.empty:
                continue
            key = derive_seed(seed, "length_trend", skill, a, c)
            rows.append(
                {"skill": skill, "pair": f"{a}-{c}", **trend_row(cells, key, s.n_boot, s.alpha)}
            )
    return pd.DataFrame(rows)


def slope_text(slope: float, low: float, high: float, *, bold: bool = True) -> str:
    """``+1.80 [+1.11, +3.03]`` (points per step), bold when the interval excludes 0."""
    text = f"{slope:+.2f} [{low:+.2f}, {high:+.2f}]"
    return f"**{text}**" if bold and (low > 0 or high < 0) else text


def markdown(table: pd.DataFrame) -> list[str]:
    """decision_map.md's section on the within-family trend."""
    if table.empty:
        return []
    lines = [
        "",
        "## Length within a family (the family x length cell as the unit)",
        "",
        "Change of the completion gap per extra step of the gold plan, fitted inside each family "
        "(each family's mean taken out, cells weighted by their tasks; fault rates pooled) "
        "[95 % interval resampling cells within families]; bold: the interval excludes 0. A "
        "family with one length carries no trend and is left out.",
        "",
        "| skill | pair | pp per step [95 %] | cells | families (same sign) | steps |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for _, r in table.iterrows():
        if not r["cells"]:
            lines.append(f"| {r['skill']} | {r['pair']} | no family has two lengths | 0 | | |")
            continue
        text = slope_text(r["slope_pp"], r["low_pp"], r["high_pp"])
        lines.append(
            f"| {r['skill']} | {r['pair']} | {text} | {r['cells']} | {r['families']} "
            f"({r['families_same_sign']}) | {r['steps_min']}-{r['steps_max']} |"
        )
    return lines
