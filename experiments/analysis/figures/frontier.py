"""The compute-frontier figure: completion against mean tokens per episode, one frontier per
planner (``experiment=compute_frontier``).

Each planner's settings are drawn as small open markers; its Pareto-efficient settings as
filled markers with their intervals (completion: Wilson; tokens: bootstrap over tasks), joined
by a staircase in the planner's line style: the completion attainable at a mean spend of at
most x tokens (from its cheapest to its dearest efficient setting). Dotted verticals mark the
token levels the leaders table reads; the legend sits inside the canvas at the upper left
(cheap and excellent: the corner no planner reaches in a benchmark worth running). One panel per
complexity; written 7 in and 3.4 in wide like every figure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from planarena.experiments.analysis.figures.output import save_figure
from planarena.experiments.analysis.figures.style import (
    FIGURE_VARIANTS,
    paper_style,
    planner_styles,
)


def frontier_figure(
    points: pd.DataFrame, planners: Sequence[str], levels: Sequence[int], width: float
) -> Figure:
    """The figure from :func:`planarena.experiments.studies.compute_frontier.point_table`."""
    from planarena.experiments.analysis.figures.style import new_figure

    complexities = list(dict.fromkeys(points["complexity"])) or ["all"]
    order = [p for p in planners if p in set(points["planner"])]
    order += sorted(set(points["planner"]) - set(order))
    styles = planner_styles(order)
    one_col = width < 5
    cols = 1 if one_col else min(len(complexities), 2)
    rows = math.ceil(len(complexities) / cols)
    height = (2.9 if one_col else 3.1) * rows + (0.9 if one_col else 0.0)
    with paper_style():
        fig = new_figure(width, height)
        axes = fig.subplots(rows, cols, squeeze=False, sharey=True)
        xmin = max(100.0, float(points["tokens_lo"].min()) * 0.8) if len(points) else 100.0
        xmax = float(points["tokens_hi"].max()) * 1.25 if len(points) else 1e5
        for i, complexity in enumerate(complexities):
            ax = axes[i // cols][i % cols]
            part = points[points["complexity"] == complexity]
            for planner in order:
                _draw_planner(ax, part[part["planner"] == planner], styles[planner])
            for level in levels:  # labelled above the axes, clear of the points and legend
                ax.axvline(level, color="0.55", linestyle=":", linewidth=0.8, zorder=0)
                ax.text(
                    level,
                    1.0,
                    f"{level / 1000:g}k",
                    transform=ax.get_xaxis_transform(),
                    ha="center",
                    va="bottom",
                    fontsize=7,
                    color="0.35",
                )
            ax.set_xscale("log")
            ax.set_xlim(xmin, xmax)
            ax.set_ylim(-0.03, 1.03)
            ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0])
            ax.grid(alpha=0.25, linewidth=0.5)
            ax.set_xlabel("mean tokens per episode (log)")
            if i % cols == 0:
                ax.set_ylabel(
                    f"completion ({complexity})" if len(complexities) > 1 else "completion"
                )
            elif len(complexities) > 1:
                ax.set_title(complexity, fontsize=8)
        for j in range(len(complexities), rows * cols):
            axes[j // cols][j % cols].set_visible(False)
        handles, labels = axes[0][0].get_legend_handles_labels()
        axes[0][0].legend(
            handles,
            labels,
            loc="upper left",
            ncol=2 if one_col else 3,
            fontsize=6.5 if one_col else 7,
            handlelength=2.2,
            columnspacing=0.8,
            borderaxespad=0.3,
        )
    return fig


def _draw_planner(ax: object, part: pd.DataFrame, style: object) -> None:
    """One planner: its settings (open markers), its frontier (filled, with intervals, as a
    staircase from its cheapest to its dearest efficient setting)."""
    if part.empty:
        return
    planner = str(part["planner"].iloc[0])
    color, marker, line = style.color, style.marker, style.linestyle  # type: ignore[attr-defined]
    off = part[~part["frontier"]]
    ax.plot(  # type: ignore[attr-defined]
        off["tokens_mean"],
        off["completion"],
        linestyle="none",
        marker=marker,
        markersize=3.5,
        markerfacecolor="none",
        markeredgecolor=color,
        markeredgewidth=0.6,
        alpha=0.6,
    )
    on = part[part["frontier"]].sort_values("tokens_mean")
    xs, ys = on["tokens_mean"], on["completion"]
    ax.step(xs, ys, where="post", color=color, linestyle=line, linewidth=1.1)  # type: ignore[attr-defined]
    ax.errorbar(  # type: ignore[attr-defined]
        on["tokens_mean"],
        on["completion"],
        xerr=[on["tokens_mean"] - on["tokens_lo"], on["tokens_hi"] - on["tokens_mean"]],
        yerr=[on["completion"] - on["completion_lo"], on["completion_hi"] - on["completion"]],
        linestyle="none",
        marker=marker,
        markersize=4.5,
        color=color,
        elinewidth=0.6,
        capsize=0,
        alpha=0.9,
    )
    ax.plot([], [], color=color, linestyle=line, marker=marker, markersize=4.5, label=planner)  # type: ignore[attr-defined]


def write_frontier_figures(
    points: pd.DataFrame, planners: Sequence[str], levels: Sequence[int], out_dir: Path
) -> list[Path]:
    """``compute_frontier.{pdf,png}`` (7 in) and ``compute_frontier-1col.{pdf,png}`` (3.4 in)."""
    paths: list[Path] = []
    if points.empty:
        return paths
    for suffix, width in FIGURE_VARIANTS:
        fig = frontier_figure(points, planners, levels, width)
        paths += save_figure(fig, out_dir / f"compute_frontier{suffix}")
    return paths
