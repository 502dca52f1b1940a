"""``failure_modes``: stacked shares of failure modes per planner."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch, PathPatch
from matplotlib.path import Path as MplPath
from planarena.experiments.analysis.cells import (
    sort_cells,
)
from planarena.experiments.analysis.figures.layout import (
    _check,
    _env_titles,
    _envs,
    _legend_cols,
    _ordered_planners,
    _panel_title,
    _spare_work,
    _width,
)

# --------------------------------------------------------------------------- style
from planarena.experiments.analysis.figures.style import (
    MODE_COLORS,
    MODE_HATCHES,
    RC,
    SINGLE_COLUMN_IN,
    new_figure,
    paper_style,
    planner_colors,
)
from planarena.experiments.analysis.metrics import failure_distribution


def _rectangles(left: np.ndarray, bottom: np.ndarray, width: float, height: np.ndarray) -> MplPath:
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


def _failure_bars(
    ax: Any,
    dist: pd.DataFrame,
    modes: Sequence[str],
    colors: Mapping[str, str],
    *,
    prefix: str = "n=",
    vertical: bool = False,
) -> None:
    """One stacked bar per planner (rows of ``dist``), its colour strip and failure count."""
    x = np.arange(len(dist), dtype=float)
    bottom = np.zeros(len(dist))
    for mode in modes:
        share = dist[mode].fillna(0.0).to_numpy(dtype=float)
        # a mode's segments (none of zero height) as one patch of rectangles: one fill and
        # one hatch tile per mode and panel rather than per segment, the same pixels
        some = share > 0
        if some.any():
            ax.add_patch(
                PathPatch(
                    _rectangles(x[some] - 0.35, bottom[some], 0.7, share[some]),
                    facecolor=MODE_COLORS.get(mode, "#BBBBBB"),
                    hatch=MODE_HATCHES.get(mode, ""),
                    edgecolor="white",
                    linewidth=0.4,
                    label=mode.replace("_", " "),
                )
            )
        bottom += share
    ax.bar(
        x,
        0.035,
        bottom=-0.05,
        width=0.7,
        color=[colors[p] for p in dist["planner"]],
        clip_on=False,
    )
    for xi, n_failed in zip(x, dist["n_failed"].tolist(), strict=True):
        top = 1.0 if n_failed else 0.0
        ax.text(xi, top + 0.02, f"{prefix}{n_failed}", ha="center", va="bottom", fontsize=6)
    if not modes or int(dist["n_failed"].sum()) == 0:
        ax.text(0.5, 0.5, "no failed episodes", transform=ax.transAxes, ha="center")
    if vertical:
        ax.set_xticks(x, list(dist["planner"]), rotation=90, ha="center")
    else:
        ax.set_xticks(x, list(dist["planner"]), rotation=35, ha="right")
    ax.set_xlim(-0.6, len(dist) - 0.4)
    ax.set_ylim(-0.05, 1.1)
    ax.set_yticks([0.0, 0.25, 0.5, 0.75, 1.0])


def failure_modes_figure(
    df: pd.DataFrame,
    *,
    seed: int = 0,
    planner_order: Sequence[str] | None = None,
    width: float | None = None,
) -> Figure:
    """(d) Share of failed episodes per failure mode, one stacked bar per planner, one panel
    per env (envs are not pooled).

    Shares come from :func:`planarena.experiments.analysis.metrics.failure_distribution` (the same
    numbers as the failure table). Only modes that occur are drawn, each with its fixed colour and
    hatch; the strip under each bar is the planner's colour and ``n`` above it counts failures. The
    legend below takes as many columns as fit the width, and the figure grows to hold it.
    """
    del seed
    _check(df)
    with paper_style():
        planners = _ordered_planners(df, planner_order)
        colors = planner_colors(planners)
        envs = _envs(df)
        dist = failure_distribution(df, ("env", "planner"), planner_order=planners)
        dist = sort_cells(dist, ["env", "planner"], planner_order=planners)
        modes = [m for m in dist.columns[3:] if bool((dist[m].fillna(0.0) > 0).any())]
        width = width or _width(len(envs), len(planners))
        labels = [m.replace("_", " ") for m in modes]
        ncols = _legend_cols(width, labels)
        rows = math.ceil(len(modes) / ncols) if modes else 0
        panel_cols = min(len(envs), 3 if width > SINGLE_COLUMN_IN else 2)
        panel_rows = math.ceil(len(envs) / panel_cols)
        spacing = width / panel_cols / max(len(planners), 1)  # inches per bar
        vertical = spacing < 0.22  # planner names upright below narrow panels
        titles = _env_titles(envs, width, panel_cols)
        row_height = 2.3 + (0.8 if vertical else 0.0) + titles.extra_in
        fig = new_figure(width, row_height * panel_rows + 0.1 + 0.17 * rows)
        grid = fig.subplots(panel_rows, panel_cols, sharey=True, squeeze=False)
        axes = list(grid.ravel())
        for spare in axes[len(envs) :]:
            spare.set_axis_off()
        for ax, env in zip(axes, envs, strict=False):
            part = dist[dist["env"] == env].reset_index(drop=True)
            # counts above the bars: "n=12" where there is room, else just "12"
            _failure_bars(
                ax, part, modes, colors, prefix="n=" if spacing > 0.32 else "", vertical=vertical
            )
            _panel_title(ax, env, titles, len(envs))
        if panel_rows > 1:
            fig.supylabel("share of failed episodes", fontsize=RC["axes.labelsize"])
        else:
            grid[0][0].set_ylabel("share of failed episodes")
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
            fig.legend(handles=handles, loc="outside lower center", ncols=ncols, columnspacing=1.0)
        _spare_work(fig)
    return fig
