"""The figures of two quantities per planner: ``pareto_tokens`` (mean tokens against
completion, with its Pareto front) and ``time_to_success`` (share of episodes succeeded by
simulated time t), on the env x complexity grid (complexities pooled at one column).

Where two planners' markers would overlap (equal completion and similar tokens, e.g. topo on
plan_execute_replan), they are spread on a small ring around their common centre, by at most
about a marker's width, their interval bars moving with them; the captions say so. Tied
time-to-success curves are drawn 0.6 pt apart vertically per planner for the same reason.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.transforms import ScaledTranslation
from planarena.experiments.analysis.figures.layout import (
    Facets,
    _cell,
    _check,
    _facets,
    _figure_summary,
    _planner_handles,
    _spare_work,
    _thousands,
    _top_legend,
    _xlabel,
    linear_axis,
    log_axis,
    spread_points,
    use_log,
)
from planarena.experiments.analysis.figures.style import (
    DOUBLE_COLUMN_IN,
    RC,
    PlannerStyle,
    paper_style,
    planner_styles,
)
from planarena.experiments.analysis.stats import kaplan_meier

MARKER_SIZE = 5.0
"""Marker size (points) of the points and curve ends."""


MARKER_REACH_IN = (MARKER_SIZE / 2 + 0.5) / 72.0
"""Radius of a drawn marker with its edge, in inches: closer centres overlap."""


Y_LIMITS = (-0.05, 1.05)


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


def _grid_height(n_planners: int) -> float:
    """Inches one env's row of scatter/curve panels wants (tick labels included)."""
    return 1.25 + 0.0 * n_planners


def _panel_size_in(facets: Facets) -> tuple[float, float]:
    return facets.panel_width_in, max(facets.row_in - 0.3, 0.3)


def _to_fraction(values: np.ndarray, lim: tuple[float, float], log: bool) -> np.ndarray:
    if log:
        return (np.log10(values) - math.log10(lim[0])) / (math.log10(lim[1]) - math.log10(lim[0]))
    return (values - lim[0]) / (lim[1] - lim[0])


def _from_fraction(frac: np.ndarray, lim: tuple[float, float], log: bool) -> np.ndarray:
    if log:
        lo, hi = math.log10(lim[0]), math.log10(lim[1])
        return np.asarray(10.0 ** (lo + frac * (hi - lo)))
    return np.asarray(lim[0] + frac * (lim[1] - lim[0]))


def _spread(
    ax: Any, xs: np.ndarray, ys: np.ndarray, size_in: tuple[float, float], xlog: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Data positions at which to draw markers so none hides another (see the module doc);
    the axis limits must be set."""
    xlim, ylim = ax.get_xlim(), ax.get_ylim()
    fx = _to_fraction(xs, xlim, xlog) * size_in[0]
    fy = _to_fraction(ys, ylim, False) * size_in[1]
    sx, sy = spread_points(fx, fy, MARKER_REACH_IN)
    return _from_fraction(sx / size_in[0], xlim, xlog), _from_fraction(sy / size_in[1], ylim, False)


def _point(
    ax: Any,
    x: float,
    y: float,
    xerr: tuple[float, float] | None,
    yerr: tuple[float, float],
    style: PlannerStyle,
    edge: str,
) -> None:
    """A planner's marker at (x, y) (its spread position) with interval bars in the
    planner's line style, across (``xerr``) and up (``yerr``) where finite."""
    if xerr is not None and all(math.isfinite(v) for v in xerr):
        ax.plot(list(xerr), [y, y], color=style.color, ls=style.linestyle, lw=0.9, zorder=2)
    if all(math.isfinite(v) for v in yerr):
        ax.plot([x, x], list(yerr), color=style.color, ls=style.linestyle, lw=0.9, zorder=2)
    ax.plot(
        [x],
        [y],
        marker=style.marker,
        ms=MARKER_SIZE,
        ls="",
        color=style.color,
        markeredgecolor=edge,
        markeredgewidth=0.6,
        zorder=3,
        clip_on=False,
    )


def pareto_figure(
    df: pd.DataFrame,
    *,
    seed: int = 0,
    planner_order: Sequence[str] | None = None,
    summary: pd.DataFrame | None = None,
    width: float | None = None,
) -> Figure:
    """Success vs cost per env x complexity panel (pooled at one column): mean
    ``tokens_total`` (x, task-bootstrap 95% interval) against completion rate (y, Wilson or
    task-bootstrap 95% interval), one point per planner (colour, marker; interval bars in its
    line style). The panel's Pareto front (no other planner uses fewer tokens and completes
    more) is a grey staircase through the true positions, its points edged in black.
    Overlapping markers are spread apart (module doc). Log x (with at least three labelled
    ticks) when a panel's token means span over 20x.
    """
    # Long on purpose: one panel's points, both intervals, the spread of coinciding markers
    # and the front are drawn together because each needs the others' positions.
    _check(df)
    with paper_style():
        width = width or DOUBLE_COLUMN_IN
        summary = _figure_summary(df, seed, planner_order, summary, width)
        planners = list(dict.fromkeys(df["planner"]))
        handles = _planner_handles(planners)
        front_key = Line2D([], [], color="#999999", ls="--", lw=0.8, label="Pareto front")
        facets = _facets(
            df,
            planner_order,
            width,
            row_in=_grid_height(len(planners)),
            legend_labels=[*(h.get_label() for h in handles), "Pareto front"],
        )
        styles = planner_styles(facets.planners)
        size_in = _panel_size_in(facets)
        for ax, env, level in facets.panels():
            cells = _cell(summary, env, level).reset_index(drop=True)
            xs = cells["tokens_mean"].to_numpy(dtype=float)
            ys = cells["completion_rate"].to_numpy(dtype=float)
            x_lo = cells["tokens_mean_ci_low"].to_numpy(dtype=float)
            x_hi = cells["tokens_mean_ci_high"].to_numpy(dtype=float)
            y_lo = cells["completion_ci_low"].to_numpy(dtype=float)
            y_hi = cells["completion_ci_high"].to_numpy(dtype=float)
            span = [*xs, *x_lo, *x_hi]
            xlog = use_log(xs)
            if xlog:
                positive = [v for v in span if np.isfinite(v) and v > 0]
                log_axis(ax, min(positive), max(positive), size_in[0], _thousands)
            else:
                finite = [v for v in span if np.isfinite(v)] or [0.0, 1.0]
                linear_axis(ax, min(finite), max(finite), _thousands, zero=False)
            ax.set_ylim(*Y_LIMITS)
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
            px, py = _spread(ax, xs, ys, size_in, xlog)
            for i, planner in enumerate(str(p) for p in cells["planner"]):
                shift_x, shift_y = px[i] / xs[i] if xlog else px[i] - xs[i], py[i] - ys[i]
                xerr = (
                    (x_lo[i] * shift_x, x_hi[i] * shift_x)
                    if xlog
                    else (x_lo[i] + shift_x, x_hi[i] + shift_x)
                )
                _point(
                    ax,
                    float(px[i]),
                    float(py[i]),
                    xerr,
                    (y_lo[i] + shift_y, y_hi[i] + shift_y),
                    styles[planner],
                    "black" if i in front else "white",
                )
            ax.set_ylim(*Y_LIMITS)
            ax.set_yticks([0.0, 0.5, 1.0], ["0", "0.5", "1"])
        for r in range(len(facets.envs)):
            facets.axes[r][0].set_ylabel("completion")
        _xlabel(facets.fig, "mean tokens per episode (95% CIs)", facets)
        _top_legend(facets.fig, [*_planner_handles(facets.planners), front_key])
        _spare_work(facets.fig)
    return facets.fig


CURVE_OFFSET_PT = 0.6
"""Vertical display offset between consecutive planners' time-to-success curves (points),
so tied curves stay visible side by side."""


def time_to_success_figure(
    df: pd.DataFrame,
    *,
    seed: int = 0,
    planner_order: Sequence[str] | None = None,
    summary: pd.DataFrame | None = None,
    width: float | None = None,
    estimator: str = "incidence",
) -> Figure:
    """Time to success per planner (colour, line style), one panel per env x complexity
    (pooled at one column).

    ``estimator="incidence"`` (default): the share of *all* episodes that had succeeded by
    simulated time t (a failure is a competing event that never turns into a success), so
    each curve ends at the completion rate; the planner's marker ends it, with the
    summary's 95% completion interval as a vertical bar in its line style. ``"km"``:
    Kaplan-Meier ``1 - S(t)`` with failed episodes censored at their end
    (:func:`planarena.experiments.analysis.stats.kaplan_meier`), the time distribution had
    failed episodes gone on (no interval drawn: it is not a completion rate). Curves are
    drawn :data:`CURVE_OFFSET_PT` apart per planner and end markers spread where they would
    overlap (module doc).
    """
    # Long on purpose: the curves, their end markers and intervals and the 0.6 pt offsets that
    # keep tied curves visible share one pass over the panels.
    if estimator not in ("incidence", "km"):
        raise ValueError(f"estimator must be 'incidence' or 'km', got {estimator!r}")
    _check(df)
    with paper_style():
        width = width or DOUBLE_COLUMN_IN
        summary = _figure_summary(df, seed, planner_order, summary, width)
        planners = list(dict.fromkeys(df["planner"]))
        handles = _planner_handles(planners)
        facets = _facets(
            df,
            planner_order,
            width,
            row_in=_grid_height(len(planners)),
            legend_labels=[h.get_label() for h in handles],
        )
        styles = planner_styles(facets.planners)
        size_in = _panel_size_in(facets)
        n = len(facets.planners)
        for ax, env, level in facets.panels():
            cells = _cell(df, env, level)
            sums = _cell(summary, env, level).set_index("planner")
            ends: list[tuple[str, float, float]] = []
            top = float(cells["latency_s"].max()) if len(cells) else 1.0
            linear_axis(ax, 0.0, top, zero=True)
            ax.set_ylim(*Y_LIMITS)
            for j, planner in enumerate(facets.planners):
                sub = cells[cells["planner"] == planner]
                if sub.empty:
                    continue
                success = sub["success"].to_numpy(dtype=bool)
                latency = sub["latency_s"].to_numpy(dtype=np.float64)
                if estimator == "km":
                    times, surv = kaplan_meier(latency, success)
                    curve = 1.0 - surv
                else:
                    times = np.sort(latency[success])
                    curve = np.arange(1, times.size + 1) / latency.size
                xs = np.concatenate([[0.0], times, [latency.max()]])
                ys = np.concatenate([[0.0], curve, [curve[-1] if curve.size else 0.0]])
                shift = ScaledTranslation(
                    0.0, (j - (n - 1) / 2) * CURVE_OFFSET_PT / 72.0, facets.fig.dpi_scale_trans
                )
                style = styles[planner]
                ax.step(
                    xs,
                    ys,
                    where="post",
                    color=style.color,
                    ls=style.linestyle,
                    lw=1.0,
                    transform=ax.transData + shift,
                    zorder=2,
                )
                ends.append((planner, float(xs[-1]), float(ys[-1])))
            if ends:
                ex = np.array([e[1] for e in ends])
                ey = np.array([e[2] for e in ends])
                px, py = _spread(ax, ex, ey, size_in, False)
                for (planner, _, y_true), x, y in zip(ends, px, py, strict=True):
                    yerr = (math.nan, math.nan)
                    if estimator == "incidence" and planner in sums.index:
                        shift_y = y - y_true
                        yerr = (
                            float(sums.at[planner, "completion_ci_low"]) + shift_y,
                            float(sums.at[planner, "completion_ci_high"]) + shift_y,
                        )
                    _point(ax, float(x), float(y), None, yerr, styles[planner], "black")
            ax.set_yticks([0.0, 0.5, 1.0], ["0", "0.5", "1"])
        label = "share succeeded" if estimator == "incidence" else "1 - S(t), KM"
        for r in range(len(facets.envs)):
            facets.axes[r][0].set_ylabel(label)
        xlabel = "simulated s" if estimator == "incidence" else "simulated s (failures censored)"
        if estimator == "incidence":
            xlabel += ", marker: completion (95% CI)"
        _xlabel(facets.fig, xlabel, facets)
        _top_legend(facets.fig, _planner_handles(facets.planners))
        _spare_work(facets.fig)
    return facets.fig


__all__ = ["RC", "pareto_figure", "pareto_front", "time_to_success_figure"]
