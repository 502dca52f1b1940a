"""``failure_modes``: each planner's failed episodes split by failure mode."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch, PathPatch
from matplotlib.path import Path as MplPath
from planarena.experiments.analysis.figures.forest import _note
from planarena.experiments.analysis.figures.layout import (
    _cell,
    _check,
    _facets,
    _legend_cols,
    _ordered_planners,
    _planner_rows,
    _spare_work,
    _xlabel,
    pooled,
)
from planarena.experiments.analysis.figures.style import (
    DOUBLE_COLUMN_IN,
    MODE_COLORS,
    MODE_HATCHES,
    paper_style,
)
from planarena.experiments.analysis.metrics import failure_distribution


def _rectangles(
    left: np.ndarray, bottom: np.ndarray, width: np.ndarray | float, height: np.ndarray | float
) -> MplPath:
    """One path of closed rectangles, each drawn as a bar's :class:`Rectangle` is."""
    right, top = left + width, bottom + height
    corners = np.stack(
        [
            np.column_stack([left, bottom]),
            np.column_stack([right, bottom]),
            np.column_stack([right, top]),
            np.column_stack([left, top]),
            np.column_stack([left, bottom]),
        ],
        axis=1,
    )
    codes = [MplPath.MOVETO, MplPath.LINETO, MplPath.LINETO, MplPath.LINETO, MplPath.CLOSEPOLY]
    return MplPath(corners.reshape(-1, 2), codes * len(left))


COUNT_MARGIN = 1.2
"""The x limit of a panel: the bars end at 1, their failed-episode counts stand right of it."""


def _failure_bars(
    ax: Any,
    part: pd.DataFrame,
    planners: Sequence[str],
    modes: Sequence[str],
) -> None:
    """One horizontal stacked bar per planner row (``part`` has a row per planner with
    failures or not): its failed episodes' shares by mode, from 0 to 1. A planner without a
    failed episode says so in words; nothing is drawn left of 0."""
    rows = part.set_index("planner")
    y = np.arange(len(planners), dtype=float)
    known = np.array([p in rows.index for p in planners])
    left = np.zeros(len(planners))
    for mode in modes:
        share = np.array([float(rows.at[p, mode]) if p in rows.index else 0.0 for p in planners])
        share = np.nan_to_num(share, nan=0.0)
        some = share > 0
        if some.any():
            # a mode's segments as one patch of rectangles (one fill and hatch per panel)
            ax.add_patch(
                PathPatch(
                    _rectangles(left[some], y[some] - 0.36, share[some], 0.72),
                    facecolor=MODE_COLORS.get(mode, "#BBBBBB"),
                    hatch=MODE_HATCHES.get(mode, ""),
                    edgecolor="white",
                    linewidth=0.4,
                    label=mode.replace("_", " "),
                )
            )
        left += share
    for j, planner in enumerate(planners):
        if not known[j]:
            _note(ax, j, "no episodes")
        elif (n := int(rows.at[planner, "n_failed"])) == 0:
            _note(ax, j, "none failed")
        else:  # how many failed episodes the shares are of: one failure is not eight
            ax.text(1.03, y[j], f"{n}", va="center", ha="left", fontsize="x-small", color="#333")
    ax.set_xlim(0.0, COUNT_MARGIN)
    ax.set_xticks([0.0, 0.5, 1.0], ["0", "0.5", "1"])
    ax.spines["right"].set_visible(False)


def failure_modes_figure(
    df: pd.DataFrame,
    *,
    seed: int = 0,
    planner_order: Sequence[str] | None = None,
    width: float | None = None,
) -> Figure:
    """Share of each failure mode among a planner's failed episodes, one horizontal stacked
    bar per planner (named on the left, horizontal), one panel per env x complexity (pooled
    at one column).

    Shares come from :func:`planarena.experiments.analysis.metrics.failure_distribution` (the
    failure table's numbers; its ``n_failed`` column, how many failed episodes a bar stands
    for, is printed right of the bar, so one failure is not read as eight). Only modes that
    occur are drawn, each with its fixed colour and hatch (legend above, inside the canvas).
    Bars start at 0 and nothing is drawn below it.
    """
    del seed
    _check(df)
    with paper_style():
        width = width or DOUBLE_COLUMN_IN
        planners = _ordered_planners(df, planner_order)
        pool = pooled(width)
        keys = ("env", "planner") if pool else ("env", "complexity", "planner")
        dist = failure_distribution(df, keys, planner_order=planners)
        modes = [m for m in dist.columns[len(keys) + 1 :] if bool((dist[m].fillna(0.0) > 0).any())]
        labels = [m.replace("_", " ") for m in modes]
        facets = _facets(
            df,
            planner_order,
            width,
            row_in=0.13 * len(planners) + 0.32,
            legend_labels=labels,
            names_on_y=True,
        )
        _planner_rows(facets)
        for ax, env, level in facets.panels():
            _failure_bars(ax, _cell(dist, env, level), facets.planners, modes)
        _xlabel(facets.fig, "share of failed episodes (count at right)", facets)
        if modes:
            handles = [
                Patch(
                    facecolor=MODE_COLORS.get(m, "#BBBBBB"),
                    hatch=MODE_HATCHES.get(m, ""),
                    edgecolor="white",
                    label=m.replace("_", " "),
                )
                for m in modes
            ]
            facets.fig.legend(
                handles=handles,
                loc="outside upper center",
                ncols=_legend_cols(width, labels),
                columnspacing=1.0,
            )
        _spare_work(facets.fig)
    return facets.fig
