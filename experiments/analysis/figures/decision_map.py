"""The decision map's heat maps (``experiment=decision_map``): who wins where, by how much.

One panel per model skill; in each, task length (the number of tool calls of a task's shortest
correct solution, binned) across and the fault rate (``faults.rate_scale``) down. A cell is
coloured by the winner's planner colour, its strength by the margin over the runner-up, and
labelled with the winner and the margin, only when the paired interval of that margin excludes
0; a cell no planner wins separably is grey and hatched, labelled ``tie`` with the two leaders,
never coloured by a point estimate. The first source article's thresholds are drawn on top:
ReAct up to 3-5 steps, Plan-and-Execute with replanning beyond 5-8 (dashed lines at 3, 5 and
8 steps). Two figures, completion and cost per completed task, each 7 in and 3.4 in wide.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from planarena.experiments.analysis.figures.output import save_figure
from planarena.experiments.analysis.figures.style import (
    FIGURE_VARIANTS,
    new_figure,
    paper_style,
    planner_colors,
)

SHORT: Mapping[str, str] = {
    "react": "ReAct",
    "reflexion": "Refl",
    "plan_execute": "P&E",
    "plan_execute_replan": "P&E+R",
    "plan_execute_rerun": "P&E+rr",
    "tot": "ToT",
    "bfs": "BFS",
    "dfs": "DFS",
    "mcts": "MCTS",
    "topo": "topo",
}
"""Short labels that fit a heat-map cell."""

TIE_COLOR = "#d9d9d9"
TIE_PAIR_WIDTH = 10
"""The longest "A≈B" a cell holds on one line (characters, at the panel's font)."""
METRICS: Mapping[str, str] = {
    "completion": "completion",
    "cost": "cost per completed task",
}
ARTICLE_EDGES: tuple[tuple[int, str], ...] = ((3, "3"), (5, "5"), (8, "8"))
"""Step counts the article names (ReAct up to 3-5 steps; Plan-and-Execute beyond 5-8)."""


def short(planner: str) -> str:
    return SHORT.get(planner, planner[:6])


def margin_of(row: Mapping[str, Any], metric: str) -> float:
    """The winner's margin: completion points, or the share cheaper than the runner-up."""
    if metric == "completion":
        return float(row.get("completion_diff", math.nan))
    best, second = row.get("cost", math.nan), row.get("cost_second_value", math.nan)
    try:
        return (float(second) - float(best)) / float(second)
    except (TypeError, ZeroDivisionError):
        return math.nan


def edge_position(bins: Sequence[str], steps: int) -> float | None:
    """Where on the x axis (bin centres at 0, 1, ...) the boundary after ``steps`` falls:
    between the bin that ends at ``steps`` and the next; None if no bin ends there."""
    for i, label in enumerate(bins[:-1]):
        top = label.split("-")[-1].lstrip("<=")
        if top.isdigit() and int(top) == steps:
            return i + 0.5
    return None


def decision_figure(
    points: pd.DataFrame,
    metric: str,
    skills: Sequence[str],
    rates: Sequence[float],
    bins: Sequence[str],
    width: float,
) -> Figure:
    """The heat maps of ``metric`` (``completion`` or ``cost``) from the study's points table
    (the grid's cells: one row per skill x fault rate x length bin)."""
    grid = points[points["dm_kind"] == "grid"] if "dm_kind" in points else points
    winners = sorted(
        {
            str(r[f"{metric}_best"])
            for _, r in grid.iterrows()
            if isinstance(r.get(f"{metric}_best"), str) and bool(r.get(f"{metric}_separable"))
        }
    )
    colors = planner_colors(winners)
    one_col = width < 5
    cols = 1 if one_col else 2
    rows = math.ceil(len(skills) / cols)
    height = rows * (1.55 if one_col else 1.75) + 0.75
    with paper_style():
        fig = new_figure(width, height)
        axes = fig.subplots(rows, cols, squeeze=False)
        for i, skill in enumerate(skills):
            ax = axes[i // cols][i % cols]
            part = grid[grid["skill"] == skill]
            _panel(ax, part, metric, rates, bins, colors, one_col)
            ax.set_title(f"skill: {skill}", fontsize=8, pad=23)
            if i % cols == 0:
                ax.set_ylabel("fault rate ×")
            if i // cols == rows - 1 or one_col:
                ax.set_xlabel("steps of the shortest solution", fontsize=7)
        for j in range(len(skills), rows * cols):
            axes[j // cols][j % cols].set_visible(False)
        handles = [Patch(facecolor=colors[p], label=f"{short(p)} = {p}") for p in winners]
        handles.append(
            Patch(facecolor=TIE_COLOR, hatch="///", edgecolor="0.45", label="no separable winner")
        )
        handles.append(
            Patch(facecolor="none", edgecolor="0.2", linestyle="--", label="article's thresholds")
        )
        fig.legend(
            handles=handles,
            loc="outside lower center",
            ncol=2 if one_col else 4,
            fontsize=6.5,
            handlelength=1.6,
            columnspacing=1.0,
        )
        sep = "\n" if one_col else "; "
        fig.suptitle(
            f"Best planner by {METRICS[metric]}{sep}shade: margin over the runner-up", fontsize=8
        )
    return fig


def _panel(
    ax: Any,
    part: pd.DataFrame,
    metric: str,
    rates: Sequence[float],
    bins: Sequence[str],
    colors: Mapping[str, str],
    one_col: bool,
) -> None:
    """One skill's grid: a rectangle per (length bin, fault rate) point."""
    font = 5.0 if one_col else 5.5
    seen = set()
    for _, r in part.iterrows():
        if r["steps_bin"] not in bins or float(r["fault_rate_scale"]) not in rates:
            continue
        x = list(bins).index(r["steps_bin"])
        y = list(rates).index(float(r["fault_rate_scale"]))
        seen.add((x, y))
        best = r.get(f"{metric}_best")
        separable = bool(r.get(f"{metric}_separable")) and isinstance(best, str)
        if separable:
            margin = margin_of(r, metric)
            strength = 0.35 + 0.65 * min(
                1.0, abs(margin) / (0.2 if metric == "completion" else 0.5)
            )
            face = to_rgba(colors[str(best)], strength)
            unit = "pp" if metric == "completion" else "%"
            shown = f"{100 * abs(margin):.0f}"
            label = f"{short(str(best))}\n+{'<1' if shown == '0' else shown}{unit}"
            rect = Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=face, edgecolor="white")
            text_color = "white" if strength > 0.7 and colors[str(best)] in _DARK else "black"
        else:
            second = r.get(f"{metric}_second")
            pair = (
                f"{short(str(best))}≈{short(str(second))}"
                if isinstance(best, str) and isinstance(second, str)
                else "n/a"
            )
            if len(pair) > TIE_PAIR_WIDTH:  # two long names: one a line, or it spills over
                pair = pair.replace("≈", "≈\n")
            more = len(str(r.get(f"{metric}_ties", "") or "").split()) - 1
            label = f"tie\n{pair}" + (
                f"\n+{more} more" if metric == "completion" and more > 0 else ""
            )
            rect = Rectangle(
                (x - 0.5, y - 0.5), 1, 1, facecolor=TIE_COLOR, hatch="///", edgecolor="white"
            )
            text_color = "0.15"
        ax.add_patch(rect)
        size = font * (0.85 if max(len(x) for x in label.split("\n")) > 12 else 1.0)
        ax.text(x, y, label, ha="center", va="center", fontsize=size, color=text_color,
                linespacing=0.95)  # fmt: skip
    for x in range(len(bins)):
        for y in range(len(rates)):
            if (x, y) not in seen:  # no task of this length in the run
                ax.text(x, y, "no tasks", ha="center", va="center", fontsize=font, color="0.5")
    ax.set_xlim(-0.5, len(bins) - 0.5)
    ax.set_ylim(-0.5, len(rates) - 0.5)
    ax.set_xticks(range(len(bins)), list(bins), fontsize=6.5)
    ax.set_yticks(range(len(rates)), [f"{r:g}" for r in rates], fontsize=6.5)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    _thresholds(ax, bins)


_DARK = {"#0072B2", "#000000", "#882255", "#D55E00", "#332288", "#117733", "#AA4499"}


def _thresholds(ax: Any, bins: Sequence[str]) -> None:
    """The article's thresholds: dashed lines at 3, 5 and 8 steps, and which strategy it
    recommends on each side (above the panel)."""
    xs = {label: edge_position(bins, steps) for steps, label in ARTICLE_EDGES}
    for label, x in xs.items():
        if x is None:
            continue
        ax.axvline(x, color="0.15", linestyle="--", linewidth=0.9, zorder=5)
        ax.text(x, 1.0, label, transform=ax.get_xaxis_transform(), ha="center", va="bottom",
                fontsize=5.5, color="0.25")  # fmt: skip
    split = xs.get("5")
    if split is not None:
        where = ax.get_xaxis_transform()
        ax.text((split - 0.5) / 2, 1.13, "article: ReAct ≤3-5", transform=where, ha="center",
                va="bottom", fontsize=5.5, color="0.25", style="italic")  # fmt: skip
        ax.text((split + len(bins) - 0.5) / 2, 1.13, "article: P&E+replan >5-8", transform=where,
                ha="center", va="bottom", fontsize=5.5, color="0.25", style="italic")  # fmt: skip


def write_decision_figures(
    points: pd.DataFrame,
    skills: Sequence[str],
    rates: Sequence[float],
    bins: Sequence[str],
    out_dir: Path,
) -> list[Path]:
    """``decision_map_completion`` and ``decision_map_cost``, each ``.pdf``/``.png`` at 7 in
    and ``-1col`` at 3.4 in."""
    paths: list[Path] = []
    if points.empty:
        return paths
    for metric in METRICS:
        for suffix, width in FIGURE_VARIANTS:
            fig = decision_figure(points, metric, skills, rates, bins, width)
            paths += save_figure(fig, out_dir / f"decision_map_{metric}{suffix}")
    return paths
