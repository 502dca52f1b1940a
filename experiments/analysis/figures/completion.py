"""``completion_vs_complexity``: completion rate per planner and complexity, 95% intervals."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from planarena.experiments.analysis.figures.layout import (
    _check,
    _env_titles,
    _envs,
    _legend_height,
    _ordered_complexities,
    _ordered_planners,
    _panel_title,
    _planner_handles,
    _points,
    _spare_work,
    _summary,
    _top_legend,
    _width,
)

# --------------------------------------------------------------------------- style
from planarena.experiments.analysis.figures.style import (
    RC,
    SINGLE_COLUMN_IN,
    _styles,
    new_figure,
    paper_style,
)


def completion_figure(
    df: pd.DataFrame,
    *,
    seed: int = 0,
    planner_order: Sequence[str] | None = None,
    summary: pd.DataFrame | None = None,
    width: float | None = None,
) -> Figure:
    """(a) Completion rate vs complexity per planner, with the summary's 95% intervals.

    One panel per env; planners are dodged horizontally so their error bars do not hide each
    other, each with its colour and marker.
    """
    _check(df)
    with paper_style():
        summary = _summary(df, seed, planner_order) if summary is None else summary
        planners = _ordered_planners(df, planner_order)
        colors, markers, styles = _styles(planners)
        envs = _envs(df)
        width = width or _width(len(envs), len(planners))
        # at most 3 panels a row at double width (2 at single), so tick labels never collide
        ncols = min(len(envs), 3 if width > SINGLE_COLUMN_IN else 2)
        nrows = math.ceil(len(envs) / ncols)
        titles = _env_titles(envs, width, ncols)
        height = (1.9 + titles.extra_in) * nrows + 0.3 + _legend_height(width, planners)
        fig = new_figure(width, height)
        grid = fig.subplots(nrows, ncols, sharey=True, squeeze=False)
        axes = list(grid.ravel())
        for spare in axes[len(envs) :]:
            spare.set_axis_off()
        axes = axes[: len(envs)]
        dodge = 0.5 / max(len(planners), 1)
        for ax, env in zip(axes, envs, strict=True):
            cells = summary[summary["env"] == env]
            levels = _ordered_complexities(list(cells["complexity"]))
            xpos = {c: i for i, c in enumerate(levels)}
            _completion_lines(ax, cells, xpos, planners, dodge)
            if width / ncols < 1.9:  # narrow panels: slanted labels so they never touch
                ax.set_xticks(range(len(levels)), levels, rotation=25, ha="right")
            else:
                ax.set_xticks(range(len(levels)), levels)
            ax.set_xlim(-0.5, len(levels) - 0.5)
            ax.set_ylim(-0.03, 1.03)
            _panel_title(ax, env, titles, len(envs))
        for row in grid:
            row[0].set_ylabel("completion rate (95% CI)")
        fig.supxlabel("task complexity", fontsize=RC["axes.labelsize"])
        _top_legend(fig, _planner_handles(planners))
        _spare_work(fig)
    return fig


def _completion_lines(
    ax: Any,
    cells: pd.DataFrame,
    xpos: dict[str, int],
    planners: Sequence[str],
    dodge: float,
) -> None:
    """One env's panel: each planner's completion rates with their intervals, dodged."""
    colors, markers, styles = _styles(planners)
    # what ax.errorbar draws, with the bars and caps of all planners as one collection
    # each (below the lines and markers, as errorbar orders them) rather than three
    # artists per planner
    bars, bar_colors, caps_x, caps_y, cap_colors = [], [], [], [], []
    for j, planner in enumerate(planners):
        sub = cells[cells["planner"] == planner]
        if sub.empty:
            continue
        sub = sub.assign(_x=[xpos[c] for c in sub["complexity"]]).sort_values("_x")
        x = sub["_x"].to_numpy(dtype=float) + (j - (len(planners) - 1) / 2) * dodge
        y = sub["completion_rate"].to_numpy(dtype=float)
        # errorbar's arithmetic: y -/+ the distances to the interval's ends
        low = y - (y - sub["completion_ci_low"].to_numpy(dtype=float))
        high = y + (sub["completion_ci_high"].to_numpy(dtype=float) - y)
        bars += [[(xi, lo), (xi, hi)] for xi, lo, hi in zip(x, low, high, strict=True)]
        bar_colors += [colors[planner]] * len(x)
        caps_x += [*x, *x]
        caps_y += [*low, *high]
        cap_colors += [colors[planner]] * (2 * len(x))
        ax.plot(
            x,
            y,
            color=colors[planner],
            marker=markers[planner],
            ls=styles[planner],
            markersize=4,
            lw=0.8,
            label=planner,
            zorder=2.1,
        )
    if bars:
        ax.add_collection(
            LineCollection(bars, colors=bar_colors, linewidths=0.8, zorder=2),
            autolim=True,
        )
        _points(
            ax,
            np.asarray(caps_x, dtype=float),
            np.asarray(caps_y, dtype=float),
            ["_"] * len(caps_x),
            cap_colors,
            cap_colors,
            size=(2 * 2) ** 2,  # errorbar's capsize=2: a cap 2 * capsize wide
            linewidth=float(matplotlib.rcParams["lines.markeredgewidth"]),
            zorder=2,
        )
