"""Paper figures (PDF for papers, PNG for a quick look) built from episode records.

Four figures, each a pure function of the episode table (plus the seed that
:func:`experiments.metrics.summarize` uses), so the same records regenerate them
byte for byte:

* ``completion_vs_complexity`` — completion rate per planner and complexity, 95% Wilson bars;
* ``pareto_tokens`` — mean ``tokens_total`` vs completion rate, one point per
  planner x complexity, with the Pareto front (fewer tokens, higher completion) drawn;
* ``latency_cdf`` — empirical CDF of ``latency_s`` (simulated seconds) per planner, with
  P50 and P99 (numpy method 'linear') marked;
* ``failure_modes`` — stacked shares of failure modes per planner
  (:func:`experiments.metrics.failure_distribution`).

Reproducibility: figures are built on bare :class:`~matplotlib.figure.Figure` objects with an
explicit Agg canvas (no pyplot, and no ``matplotlib.use`` that would hijack a notebook's
backend), inside an ``rc_context`` that fixes fonts, sizes and
``svg.hashsalt``, and saved with metadata that removes timestamps and version strings.
Each planner keeps one colour in every figure (:func:`planner_colors`).
"""

from __future__ import annotations

import io
import logging
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from experiments.metrics import (
    COMPLEXITY_ORDER,
    failure_distribution,
    percentile,
    sort_cells,
    summarize,
)

# --------------------------------------------------------------------------- style

OKABE_ITO: tuple[str, ...] = (
    "#E69F00",  # orange
    "#56B4E9",  # sky blue
    "#0072B2",  # blue
    "#009E73",  # bluish green
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
    "#000000",  # black
    "#F0E442",  # yellow
)
"""Okabe & Ito (2008) colour-blind-safe palette, in the order known planners use it."""

KNOWN_PLANNER_COLORS: Mapping[str, str] = {
    "react": OKABE_ITO[0],
    "plan_execute": OKABE_ITO[1],
    "plan_execute_replan": OKABE_ITO[2],
    "tot": OKABE_ITO[3],
    "bfs": OKABE_ITO[4],
    "dfs": OKABE_ITO[5],
    "mcts": OKABE_ITO[6],
    "topo": OKABE_ITO[7],
}
"""Fixed colours for the shipped planners, so a planner looks the same in every paper."""

EXTRA_COLORS: tuple[str, ...] = (
    "#332288",  # indigo
    "#44AA99",  # teal
    "#882255",  # wine
    "#999933",  # olive
    "#88CCEE",  # cyan
    "#AA4499",  # purple
    "#117733",  # green
    "#CC6677",  # rose
    "#DDCC77",  # sand
    "#777777",  # grey
)
"""Paul Tol's colour-blind-safe 'muted' colours, for planners outside the known set."""

MODE_COLORS: Mapping[str, str] = {
    "dead_end": "#332288",
    "gave_up_after_tool_failure": "#88CCEE",
    "precondition_unverified": "#44AA99",
    "plan_logic_error": "#117733",
    "hallucinated_tool_call": "#999933",
    "malformed_output": "#DDCC77",
    "budget_exhausted": "#CC6677",
    "false_success": "#882255",
    "harness_error": "#000000",
    "correctly_reported_unreachable": "#DDDDDD",
}
"""One fixed colour per failure mode (Tol 'muted'), independent of which modes occur."""

MODE_HATCHES: Mapping[str, str] = {
    "dead_end": "",
    "gave_up_after_tool_failure": "//",
    "precondition_unverified": "",
    "plan_logic_error": "\\\\",
    "hallucinated_tool_call": "",
    "malformed_output": "..",
    "budget_exhausted": "",
    "false_success": "xx",
    "harness_error": "",
    "correctly_reported_unreachable": "oo",
}
"""Hatches so neighbouring modes stay distinguishable in greyscale print."""

COMPLEXITY_MARKERS: Mapping[str, str] = {"simple": "o", "medium": "s", "complex": "^"}

SINGLE_COLUMN_IN = 3.4
"""Figure width for one column of a two-column paper (inches)."""
DOUBLE_COLUMN_IN = 7.0
"""Figure width spanning both columns (inches)."""

RC: Mapping[str, Any] = {
    "font.family": "DejaVu Sans",  # shipped with matplotlib: same glyphs on every machine
    "font.size": 8,
    "axes.titlesize": 9,
    "axes.labelsize": 8,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "legend.fontsize": 8,
    "legend.title_fontsize": 8,
    "legend.frameon": False,
    "axes.linewidth": 0.6,
    "lines.linewidth": 1.2,
    "lines.markersize": 4,
    "xtick.major.width": 0.6,
    "ytick.major.width": 0.6,
    "pdf.fonttype": 42,  # embed TrueType, not Type 3: publishers (IEEE/ACM) reject Type 3
    "ps.fonttype": 42,
    "svg.hashsalt": "planarena",  # fixed ids in SVG output
    "savefig.dpi": 200,  # PNG is the quick look; papers use the vector PDF
    "figure.dpi": 100,
    "hatch.linewidth": 0.5,
}
"""rcParams applied (temporarily) while building and saving every figure."""

PDF_METADATA: Mapping[str, Any] = {
    "CreationDate": None,
    "ModDate": None,
    "Producer": None,
    "Creator": None,
}
PNG_METADATA: Mapping[str, Any] = {"Software": None}

FIGURE_NAMES: tuple[str, ...] = (
    "completion_vs_complexity",
    "pareto_tokens",
    "latency_cdf",
    "failure_modes",
)
"""File stems written by :func:`write_figures`, in output order."""


@contextmanager
def paper_style() -> Iterator[None]:
    """Apply :data:`RC` for the duration of a block without touching global rcParams."""
    with matplotlib.rc_context(dict(RC)):
        yield


def planner_colors(planners: Sequence[str]) -> dict[str, str]:
    """Stable planner -> colour mapping.

    Known planners always get their :data:`KNOWN_PLANNER_COLORS` entry (whether or not the
    others are present), so a planner keeps its colour across figures, runs and papers.
    Unknown planners, sorted by name, take the next free colour of Okabe-Ito then
    :data:`EXTRA_COLORS`; past those the list cycles (more than 18 planners in one figure
    is unreadable anyway).
    """
    taken = set(KNOWN_PLANNER_COLORS.values())
    free = [c for c in (*OKABE_ITO, *EXTRA_COLORS) if c not in taken]
    colors = {p: KNOWN_PLANNER_COLORS[p] for p in planners if p in KNOWN_PLANNER_COLORS}
    unknown = sorted({p for p in planners if p not in KNOWN_PLANNER_COLORS})
    for i, name in enumerate(unknown):
        colors[name] = free[i % len(free)]
    return {p: colors[p] for p in dict.fromkeys(planners)}


# --------------------------------------------------------------------------- helpers


def _ordered_planners(df: pd.DataFrame, planner_order: Sequence[str] | None) -> list[str]:
    """Explicit order first, then the rest by first appearance (as the tables order them)."""
    order = [p for p in (planner_order or []) if p in set(df["planner"])]
    order += [p for p in dict.fromkeys(df["planner"]) if p not in order]
    return order


def _ordered_complexities(values: Sequence[str]) -> list[str]:
    present = set(values)
    extra = sorted(c for c in present if c not in COMPLEXITY_ORDER)
    return [c for c in COMPLEXITY_ORDER if c in present] + extra


def _envs(df: pd.DataFrame) -> list[str]:
    """One panel per env, sorted by name (matching :func:`sort_cells`)."""
    return sorted(map(str, set(df["env"])))


WIDE_AFTER_PLANNERS = 4
"""More planners than this (or several env panels) get a double-column figure."""


def _width(n_panels: int, n_planners: int = 1) -> float:
    """Single column unless panels or legend entries would be squeezed below 8 pt legibility."""
    wide = n_panels > 1 or n_planners > WIDE_AFTER_PLANNERS
    return DOUBLE_COLUMN_IN if wide else SINGLE_COLUMN_IN


def _legend_cols(width: float) -> int:
    return 3 if width <= SINGLE_COLUMN_IN else 5


def new_figure(width: float, height: float) -> Figure:
    """A pyplot-free Figure on an Agg canvas (no global figure registry, no backend switch)."""
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _panel_title(ax: Any, env: str, n_envs: int) -> None:
    if n_envs > 1:
        ax.set_title(f"env: {env}")


def _planner_legend(fig: Figure, planners: Sequence[str], colors: Mapping[str, str]) -> None:
    handles = [Line2D([], [], color=colors[p], marker="o", label=p) for p in planners]
    fig.legend(
        handles=handles,
        loc="outside upper center",
        ncols=min(len(planners), _legend_cols(fig.get_figwidth())),
        handlelength=1.5,
        columnspacing=1.0,
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


def _check(df: pd.DataFrame) -> None:
    if df.empty:
        raise ValueError("no episodes to plot")
    missing = [c for c in ("planner", "env", "complexity", "success") if c not in df.columns]
    if missing:
        raise KeyError(f"episode table is missing columns: {missing}")


# --------------------------------------------------------------------------- figures


def completion_figure(
    df: pd.DataFrame,
    *,
    seed: int = 0,
    planner_order: Sequence[str] | None = None,
    summary: pd.DataFrame | None = None,
) -> Figure:
    """(a) Completion rate vs complexity per planner, with 95% Wilson intervals.

    Planners are dodged horizontally so their error bars do not hide each other.
    """
    _check(df)
    with paper_style():
        summary = _summary(df, seed, planner_order) if summary is None else summary
        planners, colors, envs, fig, axes = _panels(df, planner_order, 2.5)
        dodge = 0.5 / max(len(planners), 1)
        for ax, env in zip(axes, envs, strict=True):
            cells = summary[summary["env"] == env]
            levels = _ordered_complexities(list(cells["complexity"]))
            xpos = {c: i for i, c in enumerate(levels)}
            for j, planner in enumerate(planners):
                sub = cells[cells["planner"] == planner]
                if sub.empty:
                    continue
                sub = sub.assign(_x=[xpos[c] for c in sub["complexity"]]).sort_values("_x")
                x = sub["_x"].to_numpy(dtype=float) + (j - (len(planners) - 1) / 2) * dodge
                y = sub["completion_rate"].to_numpy(dtype=float)
                yerr = np.vstack(
                    [
                        y - sub["completion_ci_low"].to_numpy(dtype=float),
                        sub["completion_ci_high"].to_numpy(dtype=float) - y,
                    ]
                )
                ax.errorbar(
                    x,
                    y,
                    yerr=yerr,
                    color=colors[planner],
                    marker="o",
                    capsize=2,
                    elinewidth=0.8,
                    label=planner,
                )
            ax.set_xticks(range(len(levels)), levels)
            ax.set_xlim(-0.5, len(levels) - 0.5)
            ax.set_ylim(-0.03, 1.03)
            ax.set_xlabel("task complexity")
            _panel_title(ax, env, len(envs))
        axes[0].set_ylabel("completion rate (95% Wilson CI)")
        _planner_legend(fig, planners, colors)
    return fig


def pareto_figure(
    df: pd.DataFrame,
    *,
    seed: int = 0,
    planner_order: Sequence[str] | None = None,
    summary: pd.DataFrame | None = None,
) -> Figure:
    """(b) Success vs cost: mean tokens_total (x) against completion rate (y).

    One point per planner x complexity (colour = planner, marker = complexity); the
    Pareto front (no other point uses fewer tokens and completes more) is drawn as a
    grey staircase. The x axis turns logarithmic when token means span over 20x.
    """
    _check(df)
    with paper_style():
        summary = _summary(df, seed, planner_order) if summary is None else summary
        planners, colors, envs, fig, axes = _panels(df, planner_order, 2.7)
        levels = _ordered_complexities(list(summary["complexity"]))
        extra_markers = iter(("D", "v", "P", "X", "*", "<", ">"))
        markers = {c: COMPLEXITY_MARKERS.get(c) or next(extra_markers, "o") for c in levels}
        for ax, env in zip(axes, envs, strict=True):
            cells = summary[summary["env"] == env].reset_index(drop=True)
            xs = cells["tokens_mean"].to_numpy(dtype=float)
            ys = cells["completion_rate"].to_numpy(dtype=float)
            front = pareto_front(list(zip(xs.tolist(), ys.tolist(), strict=True)))
            if front:
                fx = [xs[i] for i in front]
                fy = [ys[i] for i in front]
                ax.step(fx, fy, where="post", color="#999999", lw=0.8, ls="--", zorder=1)
            for i, rec in enumerate(cells.to_dict("records")):
                ax.scatter(
                    rec["tokens_mean"],
                    rec["completion_rate"],
                    color=colors[rec["planner"]],
                    marker=markers[rec["complexity"]],
                    s=22,
                    edgecolors="black" if i in front else "none",
                    linewidths=0.6,
                    zorder=3,
                )
            positive = xs[xs > 0]
            if positive.size and positive.max() / positive.min() > 20:
                ax.set_xscale("log")
            ax.set_ylim(-0.02, 1.02)
            ax.set_xlabel("mean tokens per episode")
            _panel_title(ax, env, len(envs))
        axes[0].set_ylabel("completion rate")
        handles: list[Any] = [
            Line2D([], [], color=colors[p], marker="o", ls="", label=p) for p in planners
        ]
        handles += [
            Line2D([], [], color="#555555", marker=markers[c], ls="", label=c) for c in levels
        ]
        handles.append(Line2D([], [], color="#999999", ls="--", lw=0.8, label="Pareto front"))
        _top_legend(fig, handles)
    return fig


def latency_cdf_figure(
    df: pd.DataFrame,
    *,
    seed: int = 0,
    planner_order: Sequence[str] | None = None,
) -> Figure:
    """(c) Empirical CDF of episode latency (simulated s) per planner, all complexities.

    P50 (circle) and P99 (triangle) use :func:`experiments.metrics.percentile` (numpy
    'linear'), so they match what a reader recomputes; the seed is unused (no resampling).
    """
    del seed  # same signature as the other figures; nothing random here
    _check(df)
    with paper_style():
        planners, colors, envs, fig, axes = _panels(df, planner_order, 2.5)
        for ax, env in zip(axes, envs, strict=True):
            for planner in planners:
                mask = (df["env"] == env) & (df["planner"] == planner)
                lat = np.sort(df.loc[mask, "latency_s"].to_numpy(dtype=np.float64))
                if lat.size == 0:
                    continue
                ecdf = np.arange(1, lat.size + 1, dtype=np.float64) / lat.size
                color = colors[planner]
                ax.step(
                    np.concatenate([[lat[0]], lat]),
                    np.concatenate([[0.0], ecdf]),
                    where="post",
                    color=color,
                    label=planner,
                )
                for q, marker in ((50, "o"), (99, "^")):
                    value = percentile(lat, q)
                    ax.plot(
                        [value],
                        [q / 100.0],
                        marker=marker,
                        color=color,
                        markeredgecolor="black",
                        markeredgewidth=0.5,
                        ls="",
                        zorder=4,
                    )
            for q in (0.5, 0.99):
                ax.axhline(q, color="#BBBBBB", lw=0.5, ls=":", zorder=0)
            ax.set_ylim(0.0, 1.02)
            ax.set_xlabel("latency (simulated s)")
            _panel_title(ax, env, len(envs))
        axes[0].set_ylabel("share of episodes")
        handles: list[Any] = [Line2D([], [], color=colors[p], label=p) for p in planners]
        handles += [
            Line2D([], [], color="#555555", marker="o", ls="", label="P50"),
            Line2D([], [], color="#555555", marker="^", ls="", label="P99"),
        ]
        _top_legend(fig, handles)
    return fig


def _top_legend(fig: Figure, handles: list[Any]) -> None:
    """The shared legend above the axes, as wide as the figure allows."""
    fig.legend(
        handles=handles,
        loc="outside upper center",
        ncols=_legend_cols(fig.get_figwidth()),
        columnspacing=1.0,
    )


def failure_modes_figure(
    df: pd.DataFrame,
    *,
    seed: int = 0,
    planner_order: Sequence[str] | None = None,
) -> Figure:
    """(d) Share of failed episodes per failure mode, one stacked bar per planner.

    Shares come from :func:`experiments.metrics.failure_distribution` (the same numbers as
    the failure table). Only modes that occur are drawn, each with its fixed colour; the
    strip under each bar is the planner's colour and ``n`` above it counts failures.
    """
    del seed
    _check(df)
    with paper_style():
        planners = _ordered_planners(df, planner_order)
        colors = planner_colors(planners)
        dist = failure_distribution(df, ("planner",), planner_order=planners)
        dist = sort_cells(dist, ["planner"], planner_order=planners)
        modes = [m for m in dist.columns[2:] if bool((dist[m].fillna(0.0) > 0).any())]
        width = _width(1, len(planners))
        fig = new_figure(width, 2.6 + 0.14 * math.ceil(len(modes) / 2))
        ax = fig.subplots()
        x = np.arange(len(dist), dtype=float)
        bottom = np.zeros(len(dist))
        for mode in modes:
            share = dist[mode].fillna(0.0).to_numpy(dtype=float)
            ax.bar(
                x,
                share,
                bottom=bottom,
                width=0.7,
                color=MODE_COLORS.get(mode, "#BBBBBB"),
                hatch=MODE_HATCHES.get(mode, ""),
                edgecolor="white",
                linewidth=0.4,
                label=mode.replace("_", " "),
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
            ax.text(xi, top + 0.02, f"n={n_failed}", ha="center", va="bottom", fontsize=7)
        if not modes:
            ax.text(0.5, 0.5, "no failed episodes", transform=ax.transAxes, ha="center")
        ax.set_xticks(x, list(dist["planner"]), rotation=30, ha="right")
        ax.set_xlim(-0.6, len(dist) - 0.4)
        ax.set_ylim(-0.05, 1.1)
        ax.set_yticks([0.0, 0.25, 0.5, 0.75, 1.0])
        ax.set_ylabel("share of failed episodes")
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
            ncols = 2 if width <= SINGLE_COLUMN_IN else 3
            fig.legend(handles=handles, loc="outside lower center", ncols=ncols, columnspacing=1.0)
    return fig


def _panels(
    df: pd.DataFrame, planner_order: Sequence[str] | None, height: float
) -> tuple[list[str], dict[str, str], list[str], Figure, Any]:
    """Planners in order, their colours, the envs, and one panel per env sharing y."""
    planners = _ordered_planners(df, planner_order)
    envs = _envs(df)
    fig = new_figure(_width(len(envs), len(planners)), height)
    axes = fig.subplots(1, len(envs), sharey=True, squeeze=False)[0]
    return planners, planner_colors(planners), envs, fig, axes


def _summary(df: pd.DataFrame, seed: int, planner_order: Sequence[str] | None) -> pd.DataFrame:
    """The same per-cell numbers as summary.csv (so figure and table always agree)."""
    return summarize(df, seed=seed, planner_order=planner_order)


# --------------------------------------------------------------------------- output


@contextmanager
def quiet_font_subsetting() -> Iterator[None]:
    """fontTools logs every PDF font subset at INFO; under Hydra's INFO root logger that
    floods the console and runner.log, so raise its level while saving, then restore it."""
    logger = logging.getLogger("fontTools")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


def save_figure(fig: Figure, stem: Path) -> list[Path]:
    """Save ``stem.pdf`` and ``stem.png`` with timestamp-free metadata; returns both paths."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(".pdf"), stem.with_suffix(".png")]
    with paper_style(), quiet_font_subsetting():
        fig.savefig(paths[0], format="pdf", metadata=dict(PDF_METADATA))
        fig.savefig(paths[1], format="png", metadata=dict(PNG_METADATA))
    return paths


def figure_png(fig: Figure, dpi: int = 150) -> bytes:
    """PNG bytes of a figure (for notebooks and HTML pages), metadata-free."""
    buf = io.BytesIO()
    with paper_style():
        fig.savefig(buf, format="png", dpi=dpi, metadata=dict(PNG_METADATA))
    return buf.getvalue()


def write_figures(
    df: pd.DataFrame,
    out_dir: Path,
    *,
    seed: int = 0,
    planner_order: list[str] | None = None,
    summary: pd.DataFrame | None = None,
) -> list[Path]:
    """Write the four figures as PDF and PNG into ``out_dir/figures/``; returns the paths.

    Pass the ``summary`` that :func:`~experiments.tables.write_summaries` returned to avoid
    computing (and bootstrapping) it twice.

    ``seed`` and ``planner_order`` are passed to :func:`~experiments.metrics.summarize`
    exactly as :func:`~experiments.tables.write_summaries` uses them, so the plotted
    numbers are those of ``summary.csv``. Identical records give identical bytes.
    """
    _check(df)
    fig_dir = Path(out_dir) / "figures"
    summary = _summary(df, seed, planner_order) if summary is None else summary
    builders = (
        completion_figure(df, seed=seed, planner_order=planner_order, summary=summary),
        pareto_figure(df, seed=seed, planner_order=planner_order, summary=summary),
        latency_cdf_figure(df, seed=seed, planner_order=planner_order),
        failure_modes_figure(df, seed=seed, planner_order=planner_order),
    )
    paths: list[Path] = []
    for name, fig in zip(FIGURE_NAMES, builders, strict=True):
        paths += save_figure(fig, fig_dir / name)
    return paths


__all__ = [
    "DOUBLE_COLUMN_IN",
    "FIGURE_NAMES",
    "KNOWN_PLANNER_COLORS",
    "OKABE_ITO",
    "SINGLE_COLUMN_IN",
    "completion_figure",
    "failure_modes_figure",
    "figure_png",
    "latency_cdf_figure",
    "pareto_figure",
    "pareto_front",
    "paper_style",
    "new_figure",
    "planner_colors",
    "quiet_font_subsetting",
    "save_figure",
    "write_figures",
]
