"""The point-estimate figures: ``completion``, ``cost_per_success`` and
``latency_percentiles``, drawn as forest plots.

Each panel (one env x complexity, or one env with complexities pooled) gives every planner a
row: its estimate as the planner's marker and its 95% interval as a line in the planner's line
style, so planners are told apart by name, marker and dash pattern in greyscale as in colour.
Rows never share a position, so no marker hides another. Intervals:

* completion: the summary's (Wilson score, or the task bootstrap when tasks ran several
  trials; :func:`planarena.experiments.analysis.metrics.summarize`);
* latency P50 and P99: the summary's task-bootstrap intervals (P50 filled, P99 open, each
  a little above / below the planner's row);
* cost per success (all of a cell's cost over its successes, the table's ``cost USD per
  success``): the summary has no interval for it, so :func:`cost_per_success_interval`
  computes one here with the same task bootstrap (``stats.resampled_sums``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from planarena.experiments.analysis.cells import success_bool, task_codes
from planarena.experiments.analysis.figures.layout import (
    Facets,
    _cell,
    _check,
    _compact,
    _facets,
    _figure_summary,
    _planner_handles,
    _planner_rows,
    _spare_work,
    _top_legend,
    _xlabel,
    value_axis,
)
from planarena.experiments.analysis.figures.style import (
    DOUBLE_COLUMN_IN,
    PlannerStyle,
    new_figure,
    paper_style,
    planner_styles,
)
from planarena.experiments.analysis.stats import (
    PERCENTILE_METHOD,
    boot_rng,
    resampled_sums,
)

MARKER_SIZE = 4.5
"""Marker size (points) of the estimates."""


def _row_height(n_planners: int, rows_per_planner: float = 1.0) -> float:
    """Inches one env's row of forest panels wants: a planner row 0.13 in (7 pt names
    with a gap), plus the x tick labels."""
    return 0.13 * n_planners * rows_per_planner + 0.32


def _interval(
    ax: Any,
    y: float,
    est: float,
    low: float,
    high: float,
    style: PlannerStyle,
    *,
    filled: bool = True,
) -> None:
    """One estimate: the interval as a line in the planner's style with end ticks, the
    estimate as its marker (black-edged when filled, white inside when open). An interval
    open to the right (``high`` infinite) runs to the panel's edge and ends in an arrow."""
    if math.isfinite(low) and (math.isfinite(high) or math.isinf(high)):
        right = high if math.isfinite(high) else ax.get_xlim()[1]
        ax.plot([low, right], [y, y], color=style.color, ls=style.linestyle, lw=1.0, zorder=2)
        ends = [(low, "|")] + [(right, "|" if math.isfinite(high) else ">")]
        for x, mark in ends:
            ax.plot(
                [x],
                [y],
                color=style.color,
                marker=mark,
                ms=3.0,
                mew=0.8,
                ls="",
                zorder=2,
                clip_on=False,
            )
    if math.isfinite(est):
        ax.plot(
            [est],
            [y],
            marker=style.marker,
            ms=MARKER_SIZE,
            ls="",
            color=style.color,
            markerfacecolor=style.color if filled else "white",
            markeredgecolor="black" if filled else style.color,
            markeredgewidth=0.5 if filled else 1.0,
            zorder=3,
            clip_on=False,
        )


def _note(ax: Any, y: float, text: str) -> None:
    """A word in place of an estimate that does not exist (never a bare number)."""
    ax.annotate(
        text,
        xy=(0.02, y),
        xycoords=("axes fraction", "data"),
        va="center",
        ha="left",
        fontsize=6,
        color="#555555",
    )


def _forest(
    df: pd.DataFrame,
    planner_order: Sequence[str] | None,
    width: float | None,
    *,
    extra_handles: Sequence[Any] = (),
    rows_per_planner: float = 1.0,
) -> Facets:
    width = width or DOUBLE_COLUMN_IN
    planners = list(dict.fromkeys(df["planner"]))
    handles = [*_planner_handles(planners), *extra_handles]
    facets = _facets(
        df,
        planner_order,
        width,
        row_in=_row_height(len(planners), rows_per_planner),
        legend_labels=[h.get_label() for h in handles],
        names_on_y=True,
    )
    _planner_rows(facets, rows_per_planner)
    _top_legend(facets.fig, [*_planner_handles(facets.planners), *extra_handles])
    return facets


def completion_figure(
    df: pd.DataFrame,
    *,
    seed: int = 0,
    planner_order: Sequence[str] | None = None,
    summary: pd.DataFrame | None = None,
    width: float | None = None,
) -> Figure:
    """Completion rate per planner with the summary's 95% interval (Wilson, or the task
    bootstrap with repeated trials), one panel per env x complexity (pooled at one column)."""
    _check(df)
    with paper_style():
        width = width or DOUBLE_COLUMN_IN
        summary = _figure_summary(df, seed, planner_order, summary, width)
        facets = _forest(df, planner_order, width)
        styles = planner_styles(facets.planners)
        for ax, env, level in facets.panels():
            cells = _cell(summary, env, level).set_index("planner")
            ax.set_xlim(-0.04, 1.04)
            ax.set_xticks([0.0, 0.5, 1.0], ["0", "0.5", "1"])
            for j, planner in enumerate(facets.planners):
                if planner not in cells.index:
                    _note(ax, j, "no episodes")
                    continue
                row = cells.loc[planner]
                _interval(
                    ax,
                    j,
                    float(row["completion_rate"]),
                    float(row["completion_ci_low"]),
                    float(row["completion_ci_high"]),
                    styles[planner],
                )
        _xlabel(facets.fig, "completion rate (95% CI)", facets)
        _spare_work(facets.fig)
    return facets.fig


def cost_per_success_interval(
    cost: np.ndarray,
    success: np.ndarray,
    tasks: np.ndarray,
    *,
    rng: np.random.Generator,
    n_boot: int = 1000,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """(estimate, low, high) of all cost over successes, by the task bootstrap.

    Resamples draw tasks with replacement (``stats.resampled_sums``, as every task-bootstrap
    interval of the summary); a resample without a success has an infinite cost per success
    and counts as such, so when more than ``(1 - confidence) / 2`` of them have none the
    upper end is infinite (the records cannot bound it). No success at all: all NaN.
    """
    n_success = int(success.sum())
    if n_success == 0:
        return (math.nan, math.nan, math.nan)
    est = float(cost.sum() / n_success)
    codes = np.unique(tasks, return_inverse=True)[1].reshape(-1)
    cost_sums = np.bincount(codes, weights=cost.astype(np.float64))
    succ_sums = np.bincount(codes, weights=success.astype(np.float64))
    parts = []
    for num, den in resampled_sums(rng, [cost_sums, succ_sums], n_boot):
        ratio = np.full(num.shape, np.inf)
        np.divide(num, den, out=ratio, where=den > 0)
        parts.append(ratio)
    stats = np.sort(np.concatenate(parts))
    alpha = 1.0 - confidence
    return (est, _type7(stats, alpha / 2), _type7(stats, 1 - alpha / 2))


def _type7(ordered: np.ndarray, p: float) -> float:
    """numpy's 'linear' (type 7) percentile of sorted values that may end in +inf: infinite
    as soon as the interpolation touches an infinite value (numpy would give NaN there)."""
    assert PERCENTILE_METHOD == "linear"  # the summary's method, which this follows
    h = (ordered.size - 1) * p
    lo = math.floor(h)
    hi = min(lo + 1, ordered.size - 1)
    frac = h - lo
    if math.isinf(ordered[lo]) or (frac > 0 and math.isinf(ordered[hi])):
        return math.inf
    return float(ordered[lo] + frac * (ordered[hi] - ordered[lo]))


def _cost_cells(
    df: pd.DataFrame, seed: int, pool: bool
) -> dict[tuple[str, str | None, str], tuple[float, float, float]]:
    """Cost per success with its interval for every (env, complexity or None, planner)."""
    keys = ["env", "planner"] if pool else ["env", "complexity", "planner"]
    task_cols = [k for k in ("seed", "task_id") if k in df.columns]
    out: dict[tuple[str, str | None, str], tuple[float, float, float]] = {}
    for key, sub in df.groupby(keys, sort=False, observed=True):
        parts = [str(k) for k in key]
        env, level, planner = (parts[0], None, parts[1]) if pool else tuple(parts)
        tasks = task_codes(sub, task_cols) if task_cols else np.arange(len(sub))
        out[(env, level, planner)] = cost_per_success_interval(
            sub["cost_usd"].to_numpy(dtype=np.float64),
            success_bool(sub["success"]),
            tasks,
            rng=boot_rng(seed, *parts, "cost_per_success"),
        )
    return out


def _usd(value: float, _pos: object = None) -> str:
    """Dollar tick labels, three significant digits: $0.0012, $0.5, $12."""
    return f"${_compact(value)}"


def cost_per_success_figure(
    df: pd.DataFrame,
    *,
    seed: int = 0,
    planner_order: Sequence[str] | None = None,
    width: float | None = None,
) -> Figure:
    """Cost per completed task (all of a cell's ``cost_usd``, failures included, over its
        successes) with a 95% task-bootstrap interval (:func:`cost_per_success_interval`); an
        interval whose resamples often have no success runs open to the right (arrow). Planners
        without a success say so. One x axis for every panel (log when the figure's values span
    over 20x, else linear from 0), so panels compare at a glance."""
    _check(df)
    with paper_style():
        width = width or DOUBLE_COLUMN_IN
        facets = _forest(df, planner_order, width)
        styles = planner_styles(facets.planners)
        cells = _cost_cells(df, seed, facets.pooled)
        values = [v for c in cells.values() for v in c]  # one scale for every panel
        for ax, env, level in facets.panels():
            here = {p: cells.get((env, level, p)) for p in facets.planners}
            value_axis(ax, values, facets.panel_width_in, _usd)
            for j, planner in enumerate(facets.planners):
                cell = here[planner]
                if cell is None:
                    _note(ax, j, "no episodes")
                elif not math.isfinite(cell[0]):
                    _note(ax, j, "no task completed")
                else:
                    _interval(ax, j, *cell, styles[planner])
        _xlabel(facets.fig, "cost per completed task, USD (95% CI)", facets)
        _spare_work(facets.fig)
    return facets.fig


P_OFFSET = 0.2
"""How far above (P50) and below (P99) its row a planner's percentile sits, in rows."""


def latency_percentiles_figure(
    df: pd.DataFrame,
    *,
    seed: int = 0,
    planner_order: Sequence[str] | None = None,
    summary: pd.DataFrame | None = None,
    width: float | None = None,
) -> Figure:
    """P50 (filled marker, a little above the row) and P99 (open marker, a little below) of
    episode latency in simulated seconds per planner, each with the summary's 95%
    task-bootstrap interval in the planner's line style. One x axis for every panel (log when
    the figure's values span over 20x)."""
    _check(df)
    with paper_style():
        width = width or DOUBLE_COLUMN_IN
        summary = _figure_summary(df, seed, planner_order, summary, width)
        keys = [
            Line2D(
                [],
                [],
                color="#555555",
                marker="o",
                ls="",
                mec="black",
                mew=0.5,
                label="P50 (filled)",
            ),
            Line2D(
                [], [], color="#555555", marker="o", ls="", mfc="white", mew=1.0, label="P99 (open)"
            ),
        ]
        facets = _forest(df, planner_order, width, extra_handles=keys, rows_per_planner=1.3)
        styles = planner_styles(facets.planners)
        cols = [f"latency_p{q}{s}" for q in (50, 99) for s in ("", "_ci_low", "_ci_high")]
        shown = [_cell(summary, env, level) for _, env, level in facets.panels()]
        values = [v for c in shown for v in c[cols].to_numpy().ravel().tolist()]
        for ax, env, level in facets.panels():
            cells = _cell(summary, env, level).set_index("planner")
            value_axis(ax, values, facets.panel_width_in)  # one scale for every panel
            for j, planner in enumerate(facets.planners):
                if planner not in cells.index:
                    _note(ax, j, "no episodes")
                    continue
                row = cells.loc[planner]
                for q, dy, filled in ((50, -P_OFFSET, True), (99, P_OFFSET, False)):
                    _interval(
                        ax,
                        j + dy,
                        float(row[f"latency_p{q}"]),
                        float(row[f"latency_p{q}_ci_low"]),
                        float(row[f"latency_p{q}_ci_high"]),
                        styles[planner],
                        filled=filled,
                    )
        _xlabel(facets.fig, "latency, simulated s (95% CI)", facets)
        _spare_work(facets.fig)
    return facets.fig


__all__ = [
    "completion_figure",
    "cost_per_success_figure",
    "cost_per_success_interval",
    "latency_percentiles_figure",
    "new_figure",
]
