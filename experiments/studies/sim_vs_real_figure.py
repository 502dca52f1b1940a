"""``sim_vs_real``'s figure: each planner's completion on the held-out tasks, real against sim.

Left (top in one column): one row per planner, ordered by the real model's completion, its
real completion as a filled marker and the simulator's just below as an open one, each with
its Wilson 95 % interval (the simulator's dashed). Right (bottom): tokens per episode, real on
x and sim on y (log scales, bootstrap 95 % intervals), with the diagonal where the simulator is
exact: the planners' spending, which still ranks them when completion cannot (every planner at
0 %), titled with the two rankings' tau. Planners keep their fixed colours and markers
(:mod:`figures.style`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from planarena.experiments.analysis.figures.output import save_figure
from planarena.experiments.analysis.figures.style import (
    FIGURE_VARIANTS,
    new_figure,
    paper_style,
    planner_styles,
)

NAME = "sim_vs_real"


def sim_vs_real_figure(
    table: pd.DataFrame, planners: Sequence[str], width: float, tau: str = ""
) -> Figure:
    """The figure from :func:`sim_vs_real_stats.side_by_side`'s table."""
    real = table[table["source"] == "real"].set_index("planner")
    sim = table[table["source"] == "sim"].set_index("planner")
    order = [p for p in planners if p in real.index and p in sim.index]
    order.sort(key=lambda p: (real.at[p, "completion"], p))  # best at the top
    styles = planner_styles(order)
    one_col = width < 5
    rows = 0.22 * len(order) + 0.9
    height = rows + width * 0.9 if one_col else max(rows, 2.9)
    with paper_style():
        fig = new_figure(width, height)
        if one_col:
            ax_pairs, ax_scatter = fig.subplots(
                2, 1, gridspec_kw={"height_ratios": [rows, width * 0.9]}
            )
        else:
            ax_pairs, ax_scatter = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.25, 1]})
        for y, p in enumerate(order):
            st = styles[p]
            r, s = real.loc[p], sim.loc[p]
            for row, dy, face, dash in ((r, 0.15, st.color, "-"), (s, -0.15, "white", "--")):
                bars = ax_pairs.errorbar(
                    row["completion"],
                    y + dy,
                    xerr=[
                        [row["completion"] - row["completion_lo"]],
                        [row["completion_hi"] - row["completion"]],
                    ],
                    marker=st.marker,
                    markersize=4.5,
                    markerfacecolor=face,
                    markeredgecolor=st.color,
                    color=st.color,
                    elinewidth=0.7,
                    capsize=0,
                    linestyle="none",
                )
                bars[2][0].set_linestyle(dash)  # the simulator's interval dashed: greyscale
            ax_scatter.errorbar(
                r["tokens_mean"],
                s["tokens_mean"],
                xerr=[
                    [max(r["tokens_mean"] - r["tokens_lo"], 0.0)],
                    [max(r["tokens_hi"] - r["tokens_mean"], 0.0)],
                ],
                yerr=[
                    [max(s["tokens_mean"] - s["tokens_lo"], 0.0)],
                    [max(s["tokens_hi"] - s["tokens_mean"], 0.0)],
                ],
                marker=st.marker,
                markersize=4.5,
                color=st.color,
                elinewidth=0.5,
                capsize=0,
                linestyle="none",
                alpha=0.9,
            )
        ax_pairs.set_yticks(range(len(order)), order)
        ax_pairs.set_ylim(-0.6, len(order) - 0.4)
        ax_pairs.set_xlim(-0.02, 1.02)
        ax_pairs.set_xlabel(
            "completion (95 % Wilson)" if one_col else "completion, held-out tasks (95 % Wilson)"
        )
        ax_pairs.grid(axis="x", alpha=0.25, linewidth=0.5)
        ax_pairs.legend(
            handles=[
                Line2D([], [], marker="o", color="0.2", linestyle="none", label="real model"),
                Line2D(
                    [],
                    [],
                    marker="o",
                    markerfacecolor="white",
                    color="0.2",
                    linestyle="none",
                    label="simulator",
                ),
            ],
            loc="lower left",
            bbox_to_anchor=(0.0, 1.0),
            ncol=2,
            fontsize=7,
            handletextpad=0.3,
            borderaxespad=0.2,
        )
        spent = [
            v
            for p in order
            for v in (real.at[p, "tokens_lo"], real.at[p, "tokens_hi"])
            + (sim.at[p, "tokens_lo"], sim.at[p, "tokens_hi"])
            if v == v and v > 0
        ]
        lo, hi = (min(spent) / 1.5, max(spent) * 1.5) if spent else (1.0, 10.0)
        ax_scatter.plot([lo, hi], [lo, hi], color="0.6", linestyle=":", linewidth=0.8, zorder=0)
        ax_scatter.set_xscale("log")
        ax_scatter.set_yscale("log")
        ax_scatter.set_xlim(lo, hi)
        ax_scatter.set_ylim(lo, hi)
        ax_scatter.set_aspect("equal", adjustable="box")
        ax_scatter.set_xlabel("tokens per episode, real model")
        ax_scatter.set_ylabel("tokens per episode, simulator")
        ax_scatter.grid(alpha=0.25, linewidth=0.5)
        if tau:
            ax_scatter.set_title(tau, fontsize=7)
    return fig


def write_sim_vs_real_figures(
    table: pd.DataFrame, planners: Sequence[str], out_dir: Path, *, tau: str = ""
) -> list[Path]:
    """``sim_vs_real.{pdf,png}`` (7 in) and ``sim_vs_real-1col.{pdf,png}`` (3.4 in)."""
    paths: list[Path] = []
    if table.empty:
        return paths
    for suffix, width in FIGURE_VARIANTS:
        paths += save_figure(
            sim_vs_real_figure(table, planners, width, tau), out_dir / f"{NAME}{suffix}"
        )
    return paths
