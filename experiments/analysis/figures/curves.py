"""The grid figures (one row of panels per env, one column per complexity: points of
different complexities are not comparable): the Pareto front of tokens against completion,
the latency CDF with its P50 and P99, and the share of episodes succeeded by simulated time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import (
    FuncFormatter,
    MaxNLocator,
    NullFormatter,
)
from planarena.experiments.analysis.figures.layout import (
    _check,
    _grid,
    _grid_title,
    _keep_inside,
    _marker_reach_in,
    _panel_width_in,
    _planner_handles,
    _points,
    _row_height,
    _spare_work,
    _summary,
    _thousands,
    _top_legend,
)

# --------------------------------------------------------------------------- style
from planarena.experiments.analysis.figures.style import RC, _styles, paper_style
from planarena.experiments.analysis.stats import FloatArray, kaplan_meier, percentile


def _cell_rows(df: pd.DataFrame) -> dict[tuple[str, str, str], np.ndarray]:
    """Row positions (in table order) of each (env, complexity, planner) cell, found in one
    pass rather than by comparing three columns for every panel and planner."""
    groups = df.groupby(["env", "complexity", "planner"], sort=False, observed=True).indices
    return {(str(e), str(c), str(p)): rows for (e, c, p), rows in groups.items()}


def _step_curves(
    ax: Any,
    curves: Sequence[tuple[np.ndarray, np.ndarray]],
    colors: Sequence[str],
    styles: Sequence[Any],
    lw: float = 1.0,
) -> None:
    """Post-step curves (``ax.step(x, y, where="post")`` each) as one collection, each with
    its colour and line style, drawn in order (no artist per curve)."""
    segments = []
    for x, y in curves:
        steps = np.empty((2 * len(x) - 1, 2))
        steps[:, 0] = np.repeat(x, 2)[1:]
        steps[:, 1] = np.repeat(y, 2)[:-1]
        segments.append(steps)
    ax.add_collection(
        LineCollection(segments, colors=list(colors), linestyles=list(styles), linewidths=lw),
        autolim=True,
    )


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of non-dominated points for (cost: lower is better, score: higher is better).

    A point is on the front when no other point has cost <= and score >= with one strict.
    Returned in ascending cost order; exact duplicates are all kept.
    """
    order = sorted(range(len(points)), key=lambda i: (points[i][0], -points[i][1], i))
    front: list[int] = []
    best = -math.inf
    for i in order:
        cost, score = points[i]
        if math.isnan(cost) or math.isnan(score):
            continue
        if score > best:
            front.append(i)
            best = score
        elif front and points[front[-1]] == (cost, score):
            front.append(i)
    return front


def pareto_figure(
    df: pd.DataFrame,
    *,
    seed: int = 0,
    planner_order: Sequence[str] | None = None,
    summary: pd.DataFrame | None = None,
    width: float | None = None,
    envs: Sequence[str] | None = None,
) -> Figure:
    """(b) Success vs cost, one panel per complexity (and env): mean tokens_total (x) against
    completion rate (y), one point per planner (colour and marker), the Pareto front of that
    panel (no other planner uses fewer tokens and completes more) as a grey staircase, its
    points outlined. The x axis turns logarithmic when a panel's token means span over 20x.
    ``envs``: the envs drawn, one row each (default: every env in ``df``).
    """
    _check(df)
    with paper_style():
        summary = _summary(df, seed, planner_order) if summary is None else summary
        planners, envs, levels, fig, axes, titles = _grid(
            df, planner_order, _row_height("pareto_tokens", df), width, envs
        )
        colors, markers, _ = _styles(planners)
        size, edge = 26.0, 0.6
        # a point-size gap between the widest marker and the panel's sides
        reach = _marker_reach_in(markers.values(), size, edge) + 1.0 / 72.0
        panel = _panel_width_in(fig.get_figwidth(), len(levels))
        for r, env in enumerate(envs):
            for c, level in enumerate(levels):
                ax = axes[r][c]
                cells = summary[(summary["env"] == env) & (summary["complexity"] == level)]
                cells = cells.reset_index(drop=True)
                xs = cells["tokens_mean"].to_numpy(dtype=float)
                ys = cells["completion_rate"].to_numpy(dtype=float)
                front = pareto_front(list(zip(xs.tolist(), ys.tolist(), strict=True)))
                if front:
                    ax.step(
                        [xs[i] for i in front],
                        [ys[i] for i in front],
                        where="post",
                        color="#999999",
                        lw=0.8,
                        ls="--",
                        zorder=1,
                    )
                names = [str(p) for p in cells["planner"]]
                _points(
                    ax,
                    xs,
                    ys,
                    [markers[p] for p in names],
                    [colors[p] for p in names],
                    ["black" if i in front else "none" for i in range(len(names))],
                    size=size,
                    linewidth=edge,
                    zorder=3,
                    clip=False,  # completion 0 or 1 sits on the y limits: draw it whole
                )
                _keep_inside(ax, reach, panel)
                positive = xs[xs > 0]
                if positive.size and positive.max() / positive.min() > 20:
                    ax.set_xscale("log")
                    ax.xaxis.set_minor_formatter(NullFormatter())
                    ax.tick_params(axis="x", which="minor", labelbottom=False)
                else:
                    ax.xaxis.set_major_locator(MaxNLocator(3))
                ax.xaxis.set_major_formatter(FuncFormatter(_thousands))
                ax.set_ylim(-0.03, 1.03)
                _grid_title(ax, env, level, titles)
            axes[r][0].set_ylabel("completion rate")
        fig.supxlabel("mean tokens per episode", fontsize=RC["axes.labelsize"])
        handles = _planner_handles(planners, line=False)
        handles.append(Line2D([], [], color="#999999", ls="--", lw=0.8, label="Pareto front"))
        _top_legend(fig, handles)
        _spare_work(fig)
    return fig


STRIP_STEP = 0.075
"""Height (in CDF units) of each planner's P50/P99 row under a latency CDF."""


def latency_cdf_figure(
    df: pd.DataFrame,
    *,
    seed: int = 0,
    planner_order: Sequence[str] | None = None,
    width: float | None = None,
    envs: Sequence[str] | None = None,
) -> Figure:
    """(c) Empirical CDF of episode latency (simulated s), one panel per complexity (and env).

    Under each CDF, one row per planner marks its P50 (circle) and P99 (triangle) joined by a
    line, so no marker hides another. Percentiles use
    :func:`planarena.experiments.analysis.stats.percentile` (numpy 'linear'); the seed is unused
    (no resampling). ``envs``: the envs drawn, one row each (default: every env in ``df``).
    """
    del seed  # same signature as the other figures; nothing random here
    _check(df)
    with paper_style():
        planners, envs, levels, fig, axes, titles = _grid(
            df, planner_order, _row_height("latency_cdf", df), width, envs
        )
        reach = _marker_reach_in(["o", "^"], 3.5**2, 0.4) + 1.0 / 72.0
        panel = _panel_width_in(fig.get_figwidth(), len(levels))
        cells = _cell_rows(df)
        latency = df["latency_s"].to_numpy(dtype=np.float64)
        for r, env in enumerate(envs):
            for c, level in enumerate(levels):
                ax = axes[r][c]
                _latency_panel(
                    ax, latency, [cells.get((env, level, p)) for p in planners], planners
                )
                for q in (0.5, 0.99):
                    ax.axhline(q, color="#BBBBBB", lw=0.5, ls=":", zorder=0)
                ax.axhline(0.0, color="#777777", lw=0.4, zorder=0)
                ax.set_ylim(-STRIP_STEP * (len(planners) + 0.8), 1.03)
                ax.set_yticks([0.0, 0.5, 0.99], ["0", "0.5", "0.99"])
                _keep_inside(ax, reach, panel)  # P99 markers at a panel's right side
                _grid_title(ax, env, level, titles)
            axes[r][0].set_ylabel("share of episodes")
        fig.supxlabel("latency (simulated s)", fontsize=RC["axes.labelsize"])
        handles = _planner_handles(planners, marker=False)
        handles += [
            Line2D([], [], color="#555555", marker="o", ls="", label="P50"),
            Line2D([], [], color="#555555", marker="^", ls="", label="P99 (rows below)"),
        ]
        _top_legend(fig, handles)
        _spare_work(fig)
    return fig


def _latency_panel(
    ax: Any,
    latency: FloatArray,
    cell_rows: Sequence[np.ndarray | None],
    planners: Sequence[str],
) -> None:
    """One panel of :func:`latency_cdf_figure`: each planner's CDF over its rows of the cell
    (``cell_rows``, None for a planner without episodes there) and its P50-P99 row below."""
    colors, _, styles = _styles(planners)
    # the P50-P99 rows: one collection of lines and one of markers per panel
    curves, drawn = [], []
    spans, span_colors, marks, mark_colors, marks_at = [], [], [], [], []
    for j, (planner, rows) in enumerate(zip(planners, cell_rows, strict=True)):
        if rows is None:
            continue
        lat = np.sort(latency[rows])
        ecdf = np.arange(1, lat.size + 1, dtype=np.float64) / lat.size
        color = colors[planner]
        curves.append((np.concatenate([[lat[0]], lat]), np.concatenate([[0.0], ecdf])))
        drawn.append(planner)
        y = -STRIP_STEP * (j + 1)
        p50, p99 = percentile(lat, 50), percentile(lat, 99)
        spans.append([(p50, y), (p99, y)])
        span_colors.append(color)
        marks += ["o", "^"]
        mark_colors += [color, color]
        marks_at += [(p50, y), (p99, y)]
    if drawn:
        _step_curves(ax, curves, [colors[p] for p in drawn], [styles[p] for p in drawn])
    if spans:
        ax.add_collection(
            LineCollection(spans, colors=span_colors, linewidths=0.8, capstyle="projecting"),
            autolim=True,
        ).set_zorder(3)
        at = np.asarray(marks_at, dtype=np.float64)
        _points(
            ax,
            at[:, 0],
            at[:, 1],
            marks,
            mark_colors,
            ["black"] * len(marks),
            size=3.5**2,
            linewidth=0.4,
            zorder=4,
        )


def time_to_success_figure(
    df: pd.DataFrame,
    *,
    seed: int = 0,
    planner_order: Sequence[str] | None = None,
    width: float | None = None,
    envs: Sequence[str] | None = None,
    estimator: str = "incidence",
) -> Figure:
    """(e) Time to success per planner (colour, line style), one panel per complexity (and env).

    ``estimator="incidence"`` (default): the share of *all* episodes that had succeeded by
    simulated time t (a failure is a competing event that never turns into a success), so
    each curve ends at the completion rate. ``"km"``: Kaplan-Meier ``1 - S(t)`` with failed
    episodes censored at their end (:func:`planarena.experiments.analysis.stats.kaplan_meier`),
    the time distribution had failed episodes gone on; it reaches 1 whenever the last event is a
    success, so it must not be read as a completion rate (summary.csv gives its median).
    A marker ends each curve. ``envs``: the envs drawn, one row each (default: every env).
    """
    if estimator not in ("incidence", "km"):
        raise ValueError(f"estimator must be 'incidence' or 'km', got {estimator!r}")
    del seed
    _check(df)
    with paper_style():
        planners, envs, levels, fig, axes, titles = _grid(
            df, planner_order, _row_height("time_to_success", df), width, envs
        )
        colors, markers, styles = _styles(planners)
        edge = float(matplotlib.rcParams["lines.markeredgewidth"])
        reach = _marker_reach_in(markers.values(), 3.5**2, edge) + 1.0 / 72.0
        panel = _panel_width_in(fig.get_figwidth(), len(levels))
        cells = _cell_rows(df)
        all_success = df["success"].to_numpy(dtype=bool)
        all_latency = df["latency_s"].to_numpy(dtype=np.float64)
        for r, env in enumerate(envs):
            for c, level in enumerate(levels):
                ax = axes[r][c]
                curves, drawn = [], []
                for planner in planners:
                    rows = cells.get((env, level, planner))
                    if rows is None:
                        continue
                    success = all_success[rows]
                    latency = all_latency[rows]
                    if estimator == "km":
                        times, surv = kaplan_meier(latency, success)
                        curve = 1.0 - surv
                    else:
                        times = np.sort(latency[success])
                        curve = np.arange(1, times.size + 1) / latency.size
                    xs = np.concatenate([[0.0], times, [latency.max()]])
                    ys = np.concatenate([[0.0], curve, [curve[-1] if curve.size else 0.0]])
                    curves.append((xs, ys))
                    drawn.append(planner)
                if drawn:
                    _step_curves(ax, curves, [colors[p] for p in drawn], [styles[p] for p in drawn])
                    # a marker ends each curve (all above the curves, in planner order)
                    _points(
                        ax,
                        np.array([xs[-1] for xs, _ in curves]),
                        np.array([ys[-1] for _, ys in curves]),
                        [markers[p] for p in drawn],
                        [colors[p] for p in drawn],
                        [colors[p] for p in drawn],
                        size=3.5**2,
                        linewidth=edge,
                        zorder=2,
                    )
                ax.set_ylim(-0.03, 1.03)
                _keep_inside(ax, reach, panel)  # the markers that end the curves
                _grid_title(ax, env, level, titles)
            axes[r][0].set_ylabel(
                "share of episodes succeeded" if estimator == "incidence" else "1 - S(t), KM"
            )
        xlabel = "simulated s" if estimator == "incidence" else "simulated s (failures censored)"
        fig.supxlabel(xlabel, fontsize=RC["axes.labelsize"])
        _top_legend(fig, _planner_handles(planners))
        _spare_work(fig)
    return fig
