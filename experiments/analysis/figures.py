"""Paper figures (PDF for papers, PNG for a quick look) built from episode records.

Five figures, each a pure function of the episode table (plus the seed that
:func:`planarena.experiments.analysis.metrics.summarize` uses), so the same records regenerate them
byte for byte:

* ``completion_vs_complexity`` — completion rate per planner and complexity, 95% intervals;
* ``pareto_tokens`` — mean ``tokens_total`` vs completion rate, one panel per complexity
  (points of different complexities are not comparable), each with its own Pareto front;
* ``latency_cdf`` — empirical CDF of ``latency_s`` (simulated seconds) per planner, one panel
  per complexity, with P50 and P99 (numpy method 'linear') on one row per planner below;
* ``failure_modes`` — stacked shares of failure modes per planner
  (:func:`planarena.experiments.analysis.metrics.failure_distribution`);
* ``time_to_success`` — share of episodes succeeded by simulated time t, per complexity.

Every planner has a fixed colour *and* marker (and line style), so figures survive greyscale
print; legends take as many columns as fit and figures grow to hold them, at single
(3.4 in) or double (7 in) column width. Seeds are pooled in a figure; other swept config
values get their own figures (:func:`write_figures`).

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
import multiprocessing
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import matplotlib
import numpy as np
import pandas as pd
import PIL.Image
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.lines import Line2D
from matplotlib.markers import MarkerStyle
from matplotlib.patches import Patch, PathPatch
from matplotlib.path import Path as MplPath
from matplotlib.textpath import TextToPath
from matplotlib.ticker import (
    FixedLocator,
    FuncFormatter,
    Locator,
    MaxNLocator,
    NullFormatter,
    NullLocator,
)
from planarena.experiments.analysis.cells import (
    COMPLEXITY_ORDER,
    DEFAULT_BY,
    sort_cells,
    swept_keys,
)
from planarena.experiments.analysis.metrics import failure_distribution, summarize
from planarena.experiments.analysis.stats import kaplan_meier, percentile
from planarena.experiments.records.runs import with_swept_columns

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
    "bfs": OKABE_ITO[5],
    "dfs": "#882255",  # Tol wine: Okabe-Ito has seven colours that read on white
    "mcts": OKABE_ITO[6],
    "topo": OKABE_ITO[4],
}
"""Fixed colours for the shipped planners, so a planner looks the same in every paper.
Okabe-Ito's yellow is never used (too faint on white); react (orange) and bfs are far apart."""

KNOWN_PLANNER_MARKERS: Mapping[str, str] = {
    "react": "o",
    "plan_execute": "s",
    "plan_execute_replan": "D",
    "tot": "^",
    "bfs": "v",
    "dfs": "P",
    "mcts": "X",
    "topo": "*",
}
"""One marker per shipped planner: with the colour, it survives greyscale print."""
EXTRA_MARKERS: tuple[str, ...] = ("<", ">", "h", "p", "d", "8", "H", "1", "2", "3")

LINESTYLES: tuple[Any, ...] = (
    "-",
    "--",
    ":",
    "-.",
    (0, (5, 1)),
    (0, (3, 1, 1, 1, 1, 1)),
    (0, (1, 2)),
    (0, (6, 2, 1, 2)),
)
"""Line styles given to planners in order (curves stay apart in greyscale too)."""
KNOWN_PLANNER_LINESTYLES: Mapping[str, Any] = {
    name: LINESTYLES[i] for i, name in enumerate(KNOWN_PLANNER_MARKERS)
}

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
    # titles sit just above the axes (where auto-placement puts them when, as here, no axis
    # has ticks on top), without measuring every axis and tick label at each draw to check
    "axes.titley": 1.0,
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
    "time_to_success",
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
    free = [c for c in (*OKABE_ITO[:7], *EXTRA_COLORS) if c not in taken]
    colors = {p: KNOWN_PLANNER_COLORS[p] for p in planners if p in KNOWN_PLANNER_COLORS}
    unknown = sorted({p for p in planners if p not in KNOWN_PLANNER_COLORS})
    for i, name in enumerate(unknown):
        colors[name] = free[i % len(free)]
    return {p: colors[p] for p in dict.fromkeys(planners)}


def planner_markers(planners: Sequence[str]) -> dict[str, str]:
    """Stable planner -> marker mapping (known planners fixed, others by sorted name)."""
    unknown = sorted({p for p in planners if p not in KNOWN_PLANNER_MARKERS})
    extra = {p: EXTRA_MARKERS[i % len(EXTRA_MARKERS)] for i, p in enumerate(unknown)}
    return {p: KNOWN_PLANNER_MARKERS.get(p) or extra[p] for p in dict.fromkeys(planners)}


def planner_linestyles(planners: Sequence[str]) -> dict[str, Any]:
    """Stable planner -> line style mapping (known planners fixed, others by sorted name)."""
    unknown = sorted({p for p in planners if p not in KNOWN_PLANNER_LINESTYLES})
    extra = {p: LINESTYLES[(i + 1) % len(LINESTYLES)] for i, p in enumerate(unknown)}
    return {p: KNOWN_PLANNER_LINESTYLES.get(p) or extra[p] for p in dict.fromkeys(planners)}


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
"""More planners than this (or several panels) get a double-column figure by default."""


def _width(n_panels: int, n_planners: int = 1) -> float:
    """Single column unless panels or legend entries would be squeezed below 8 pt legibility."""
    wide = n_panels > 1 or n_planners > WIDE_AFTER_PLANNERS
    return DOUBLE_COLUMN_IN if wide else SINGLE_COLUMN_IN


def _text_width_in(text: str, size: float) -> float:
    """Width of ``text`` (its widest line) in the paper font at ``size`` pt, in inches,
    measured with matplotlib's own text layout (no figure or renderer needed)."""
    font = FontProperties(family=RC["font.family"], size=size)
    widths = [
        TextToPath().get_text_width_height_descent(line, font, ismath=False)[0]
        for line in text.split("\n")
    ]
    return max(widths) / 72.0


def _entry_width_in(label: str, handlelength: float = 1.8) -> float:
    """Width of one legend entry (handle, gaps, label in the legend font) in inches."""
    size = float(RC["legend.fontsize"])
    return _text_width_in(label, size) + size * (handlelength + 0.8 + 1.0) / 72.0


def _legend_cols(width: float, labels: Sequence[str] = ()) -> int:
    """As many legend columns as fit in ``width`` (every column as wide as the widest entry)."""
    if not labels:
        return 1
    widest = max(_entry_width_in(str(x)) for x in labels)
    return max(1, min(len(labels), int((width - 0.15) // widest)))


LEGEND_ROW_IN = 0.19
"""Height of one legend row (8 pt text plus spacing) in inches."""


def _legend_height(width: float, labels: Sequence[str]) -> float:
    """Inches a top legend of ``labels`` takes at ``width``, so figures grow to hold it."""
    if not labels:
        return 0.0
    return LEGEND_ROW_IN * math.ceil(len(labels) / _legend_cols(width, labels))


def new_figure(width: float, height: float) -> Figure:
    """A pyplot-free Figure on an Agg canvas (no global figure registry, no backend switch)."""
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


PANEL_LEFT_IN = 0.65
"""Room constrained layout leaves left of the first panel column (y label, tick labels),
a little more than any figure here takes (0.56-0.59 in)."""
PANEL_GAP_IN = 0.2
"""Room between two panel columns (pads, the inner panels' tick marks; 0.16-0.18 in)."""
TITLE_MARGIN_IN = 0.05
"""Slack a title keeps inside its panel, for the renderer's hinting and the estimates."""
TITLE_SIZES_PT: tuple[float, ...] = (float(RC["axes.titlesize"]), 8.0, 7.0)
"""Title font sizes tried in turn: the paper's, then a step or two smaller (7 pt floor)."""
TITLE_BREAKS = ("_", "-", " ")
"""Where a line still too wide at the smallest size may break (after the character)."""


class _Titles:
    """Panel titles as a figure sets them: every panel with the same font size and line
    breaks, so panels look alike (chosen by :func:`_fit_titles`)."""

    def __init__(self, text: Mapping[str, str], size: float, extra_lines: int) -> None:
        self.text = dict(text)
        self.size = size
        self.extra_lines = extra_lines

    @property
    def extra_in(self) -> float:
        """Height the title's extra lines add to a row of panels (figures grow by it, so a
        wrapped title does not squash the plots)."""
        return self.extra_lines * self.size * 1.2 / 72.0  # rc text line spacing 1.2

    def set(self, ax: Any, title: str) -> None:
        """Give ``ax`` its fitted title (the rc size stays implicit, as before fitting)."""
        if self.size == TITLE_SIZES_PT[0]:
            ax.set_title(self.text[title])
        else:
            ax.set_title(self.text[title], fontsize=self.size)


def _panel_width_in(width: float, ncols: int) -> float:
    """Estimated width of one panel of a ``ncols``-column grid (all panels of a constrained
    grid are equally wide), before any layout has run."""
    return (width - PANEL_LEFT_IN - PANEL_GAP_IN * (ncols - 1)) / max(ncols, 1)


def _break_words(line: str, room: float, size: float) -> str:
    """``line`` broken after :data:`TITLE_BREAKS` characters wherever it exceeds ``room``."""
    pieces, word = [], ""
    for char in line:
        word += char
        if char in TITLE_BREAKS:
            pieces.append(word)
            word = ""
    pieces.append(word)
    lines = [""]
    for piece in filter(None, pieces):
        if lines[-1] and _text_width_in(lines[-1] + piece, size) > room:
            lines.append(piece.lstrip())
        else:
            lines[-1] += piece
    return "\n".join(line.rstrip() for line in lines)


def _fit_titles(titles: Sequence[str], width: float, ncols: int) -> _Titles:
    """The first way of setting ``titles`` in which every one fits its panel at ``width``.

    Titles too wide for a panel overlap their neighbours' or leave the figure (a long env
    name at single-column width). In order: as they are at the paper's size (so titles
    that fit look as always); broken after the ``"env:"`` prefix, at that size; the same a
    step or two smaller; as a last resort, lines broken again at ``_``, ``-`` or spaces.
    One choice per figure, so its panels keep one look.
    """
    room = _panel_width_in(width, ncols) - TITLE_MARGIN_IN
    broken = {t: t.replace(": ", ":\n", 1) for t in titles}
    candidates = [({t: t for t in titles}, TITLE_SIZES_PT[0])]
    candidates += [(broken, size) for size in TITLE_SIZES_PT]
    for text, size in candidates:
        if all(_text_width_in(t, size) <= room for t in text.values()):
            break
    else:
        size = TITLE_SIZES_PT[-1]
        text = {
            t: "\n".join(_break_words(line, room, size) for line in b.split("\n"))
            for t, b in broken.items()
        }
    lines = max((t.count("\n") for t in text.values()), default=0)
    return _Titles(text, size, lines)


def _env_titles(envs: Sequence[str], width: float, ncols: int) -> _Titles:
    """Titles of one-panel-per-env figures (none when there is a single env)."""
    return _fit_titles([f"env: {env}" for env in envs] if len(envs) > 1 else [], width, ncols)


def _panel_title(ax: Any, env: str, titles: _Titles, n_envs: int) -> None:
    if n_envs > 1:
        titles.set(ax, f"env: {env}")


def _spare_work(fig: Figure) -> None:
    """Skip work that cannot change the figure's look (same layout, less CPU).

    * Empty axis labels (x labels are the figure's, y labels only on the first column) are
      not placed automatically: placing one measures every tick label of its axis at each
      layout pass and draw, for a label that draws nothing.
    * The top, right and bottom spines are left out of the layout: measuring a spine updates
      all ticks of its axis, and these add nothing to an axes' extent (no ticks on top or on
      the right; the bottom tick marks lie inside the box of the x tick labels below them).
      The left spine stays: inner panels have tick marks there but no labels.
    * Tick locators return only the locations in view (:class:`_InView`).
    * No ligatures in titles, labels, legends and notes: a ligature glyph ("fi" in "precondition
      unverified") is kept in a second subset of the font, so the PDF embeds (and fontTools
      subsets) the whole font twice.
    """
    texts = [*fig.texts, *(t for legend in fig.legends for t in legend.get_texts())]
    for ax in fig.axes:
        texts += [ax.title, ax.xaxis.label, ax.yaxis.label, *ax.texts]
        for axis, coords in ((ax.xaxis, (0.5, -0.1)), (ax.yaxis, (-0.1, 0.5))):
            if not axis.label.get_text():
                axis.set_label_coords(*coords)
        for side in ("top", "right", "bottom"):
            ax.spines[side].set_in_layout(False)
        for axis in (ax.xaxis, ax.yaxis):
            for locator, install in (
                (axis.get_major_locator(), axis.set_major_locator),
                (axis.get_minor_locator(), axis.set_minor_locator),
            ):
                if not isinstance(locator, (NullLocator, FixedLocator, _InView)):
                    install(_InView(locator))
    for text in texts:
        if hasattr(text, "set_fontfeatures"):  # only a matplotlib that shapes text has them
            text.set_fontfeatures(["-liga"])


class _InView(Locator):
    """Another locator's locations, only those in view (the ones the axis draws).

    Linear and log locators return a step or a decade more on either side: ticks the axis
    creates and updates at every layout pass and draw, and never draws (a quarter of the
    ticks of the default figures). Everything else is the wrapped locator's.
    """

    def __init__(self, base: Locator) -> None:
        self.base = base

    def set_axis(self, axis: Any) -> None:
        super().set_axis(axis)
        self.base.set_axis(axis)

    def __call__(self) -> Any:
        locs = np.asarray(self.base(), dtype=np.float64)
        if self.axis is None or locs.size == 0:
            return locs
        # the test the axis applies before drawing a tick, in the scale's coordinates
        scale = self.axis.get_transform()
        low, high = sorted(scale.transform(np.asarray(self.axis.get_view_interval(), float)))
        where = scale.transform(locs)
        slack = (high - low) * 1e-10
        with np.errstate(invalid="ignore"):
            return locs[(where >= low - slack) & (where <= high + slack)]

    def tick_values(self, vmin: float, vmax: float) -> Any:
        return self.base.tick_values(vmin, vmax)

    def view_limits(self, vmin: float, vmax: float) -> Any:
        return self.base.view_limits(vmin, vmax)

    def nonsingular(self, v0: float, v1: float) -> Any:
        return self.base.nonsingular(v0, v1)

    def set_params(self, **kwargs: Any) -> None:
        self.base.set_params(**kwargs)


def _styles(planners: Sequence[str]) -> tuple[dict[str, str], dict[str, str], dict[str, Any]]:
    return planner_colors(planners), planner_markers(planners), planner_linestyles(planners)


def _top_legend(fig: Figure, handles: list[Any]) -> None:
    """The shared legend above the axes, in as many columns as fit the figure's width."""
    labels = [h.get_label() for h in handles]
    fig.legend(
        handles=handles,
        loc="outside upper center",
        ncols=_legend_cols(fig.get_figwidth(), labels),
        columnspacing=1.0,
        handlelength=1.8,
    )


def _planner_handles(
    planners: Sequence[str], *, line: bool = True, marker: bool = True
) -> list[Any]:
    colors, markers, styles = _styles(planners)
    return [
        Line2D(
            [],
            [],
            color=colors[p],
            marker=markers[p] if marker else None,
            ls=styles[p] if line else "",
            label=p,
        )
        for p in planners
    ]


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


PAGE_HEIGHT_IN = 9.0
"""Text height of a two-column conference page (NeurIPS, ICML: 9 in). A figure with one row
of panels per env that would be taller is written in parts of whole rows (see
:func:`page_parts`), so every saved figure fits a page."""

GRID_FIGURES: tuple[str, ...] = ("pareto_tokens", "latency_cdf", "time_to_success")
"""Figures with one row of panels per env (the others wrap one panel per env)."""


def _row_height(name: str, df: pd.DataFrame) -> float:
    """Height of one env's row of panels in a grid figure (inches, before titles)."""
    if name == "latency_cdf":  # room for the P50/P99 rows under each CDF
        return 1.9 + 0.1 * len(df["planner"].unique())
    return 1.9


def _grid_layout(
    df: pd.DataFrame, planner_order: Sequence[str] | None, width: float | None
) -> tuple[list[str], list[str], list[str], float, _Titles, float]:
    """Planners, every env, complexities, the figure's width, the panel titles (fitted over
    every env, so the parts of a split figure look alike) and the legend's height."""
    planners = _ordered_planners(df, planner_order)
    envs = _envs(df)
    levels = _ordered_complexities(list(df["complexity"]))
    width = width or _width(len(levels), len(planners))
    names = [f"{e}: {c}" for e in envs for c in levels] if len(envs) > 1 else levels
    titles = _fit_titles(names, width, len(levels))
    legend = _legend_height(width, [*planners, "Pareto front", "P99 (rows below)"])
    return planners, envs, levels, width, titles, legend


def _grid_height(n_rows: int, height: float, titles: _Titles, legend: float) -> float:
    return (height + titles.extra_in) * n_rows + 0.25 * (n_rows - 1) + legend


def _grid(
    df: pd.DataFrame,
    planner_order: Sequence[str] | None,
    height: float,
    width: float | None,
    envs: Sequence[str] | None = None,
) -> tuple[list[str], list[str], list[str], Figure, Any, _Titles]:
    """Planners, the envs drawn (``envs``, default every env in ``df``), complexities, a grid
    of panels (one row per env, one column per complexity: points of different complexities
    are not comparable) and their titles (:func:`_grid_title`), fitted to the panels' width.
    Titles name the env whenever ``df`` holds several, also in a part that draws one."""
    planners, every_env, levels, width, titles, legend = _grid_layout(df, planner_order, width)
    rows = list(every_env if envs is None else envs)
    unknown = sorted(set(rows) - set(every_env))
    if unknown or not rows:
        raise ValueError(f"envs to draw must be some of {every_env}, got {rows}")
    fig = new_figure(width, _grid_height(len(rows), height, titles, legend))
    axes = fig.subplots(len(rows), len(levels), sharey=True, squeeze=False)
    return planners, rows, levels, fig, axes, titles


def page_parts(
    name: str,
    df: pd.DataFrame,
    *,
    planner_order: Sequence[str] | None = None,
    width: float | None = None,
    page_height: float = PAGE_HEIGHT_IN,
) -> list[list[str]]:
    """The envs of each part figure ``name`` is saved in: all of them in one part when the
    figure fits ``page_height``, else the fewest parts of consecutive envs that each fit (as
    even as possible, larger parts first). Figures that wrap one panel per env: one part."""
    envs = _envs(df)
    if name not in GRID_FIGURES:
        return [envs]
    _, _, _, _, titles, legend = _grid_layout(df, planner_order, width)
    height = _row_height(name, df)
    fits = max(
        (
            n
            for n in range(1, len(envs) + 1)
            if _grid_height(n, height, titles, legend) <= page_height
        ),
        default=1,
    )
    n_parts = math.ceil(len(envs) / fits)
    return [list(map(str, part)) for part in np.array_split(np.array(envs, dtype=object), n_parts)]


def _cell_rows(df: pd.DataFrame) -> dict[tuple[str, str, str], np.ndarray]:
    """Row positions (in table order) of each (env, complexity, planner) cell, found in one
    pass rather than by comparing three columns for every panel and planner."""
    groups = df.groupby(["env", "complexity", "planner"], sort=False, observed=True).indices
    return {(str(e), str(c), str(p)): rows for (e, c, p), rows in groups.items()}


def _points(
    ax: Any,
    x: np.ndarray,
    y: np.ndarray,
    markers: Sequence[str],
    colors: Sequence[str],
    edgecolors: Sequence[str],
    *,
    size: float,
    linewidth: float,
    zorder: float,
    clip: bool = True,
) -> None:
    """Points with a marker and colours each, drawn as one collection: what a ``scatter`` per
    point draws, without an artist (to create, lay out and draw twice) per point. ``size``
    is scatter's ``s`` (points squared); an unfilled marker is edged in its own colour, as
    scatter does. ``clip=False`` draws markers on a panel's edge whole."""
    keep = np.isfinite(x) & np.isfinite(y)
    if not keep.any():
        return
    idx = np.flatnonzero(keep)
    styles = [MarkerStyle(markers[i]) for i in idx]
    edges = [
        edgecolors[i] if style.is_filled() else colors[i]
        for i, style in zip(idx, styles, strict=True)
    ]
    points = ax.scatter(
        x[idx],
        y[idx],
        s=size,
        c=[colors[i] for i in idx],
        edgecolors=edges,
        linewidths=linewidth,
        zorder=zorder,
        clip_on=clip,
    )
    points.set_paths([style.get_path().transformed(style.get_transform()) for style in styles])


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


def _thousands(value: float, _pos: object = None) -> str:
    """Short tick labels for token counts: 1500 -> 1.5k, 20000 -> 20k."""
    if value >= 1000:
        return f"{value / 1000:g}k"
    return f"{value:g}"


def _marker_reach_in(markers: Iterable[str], size: float, linewidth: float) -> float:
    """Inches from a point to the far side of its drawn marker (scatter's ``size`` in
    points squared, edge ``linewidth``): the widest of ``markers`` (a diamond reaches 0.7)."""
    reach = 0.0
    for marker in set(markers):
        style = MarkerStyle(marker)
        box = style.get_path().transformed(style.get_transform()).get_extents()
        reach = max(reach, *np.abs([box.x0, box.x1, box.y0, box.y1]))
    return (reach * math.sqrt(size) + linewidth / 2) / 72.0


def _keep_inside(ax: Any, reach_in: float, length_in: float) -> None:
    """Widen the x margin so points at the ends of the data keep ``reach_in`` inches from
    the panel's sides (the rc 5% is less than a marker in a narrow panel, which the spine
    then cuts in half); panels where the rc margin is enough are left as they are."""
    need = reach_in / max(length_in - 2.0 * reach_in, 1e-6)
    if need > float(matplotlib.rcParams["axes.xmargin"]):
        ax.margins(x=need)


def _grid_title(ax: Any, env: str, complexity: str, titles: _Titles) -> None:
    named = f"{env}: {complexity}"
    titles.set(ax, named if named in titles.text else complexity)


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
    line, so no marker hides another. Percentiles use :func:`planarena.experiments.analysis.metrics.percentile`
    (numpy 'linear'); the seed is unused (no resampling). ``envs``: the envs drawn, one row
    each (default: every env in ``df``).
    """
    del seed  # same signature as the other figures; nothing random here
    _check(df)
    with paper_style():
        planners, envs, levels, fig, axes, titles = _grid(
            df, planner_order, _row_height("latency_cdf", df), width, envs
        )
        colors, _, styles = _styles(planners)
        reach = _marker_reach_in(["o", "^"], 3.5**2, 0.4) + 1.0 / 72.0
        panel = _panel_width_in(fig.get_figwidth(), len(levels))
        cells = _cell_rows(df)
        latency = df["latency_s"].to_numpy(dtype=np.float64)
        for r, env in enumerate(envs):
            for c, level in enumerate(levels):
                ax = axes[r][c]
                # the P50-P99 rows: one collection of lines and one of markers per panel
                curves, drawn = [], []
                spans, span_colors, marks, mark_colors, marks_at = [], [], [], [], []
                for j, planner in enumerate(planners):
                    rows = cells.get((env, level, planner))
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
                        LineCollection(
                            spans, colors=span_colors, linewidths=0.8, capstyle="projecting"
                        ),
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
    episodes censored at their end (:func:`planarena.experiments.analysis.metrics.kaplan_meier`), the time
    distribution had failed episodes gone on; it reaches 1 whenever the last event is a
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

    Shares come from :func:`planarena.experiments.analysis.metrics.failure_distribution` (the same numbers as
    the failure table). Only modes that occur are drawn, each with its fixed colour and hatch;
    the strip under each bar is the planner's colour and ``n`` above it counts failures. The
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


def _summary(df: pd.DataFrame, seed: int, planner_order: Sequence[str] | None) -> pd.DataFrame:
    """The same per-cell numbers as summary.csv (so figure and table always agree); seeds
    pooled (their tasks are different tasks) when a figure covers several."""
    return summarize(df, DEFAULT_BY, seed=seed, planner_order=planner_order)


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
    with paper_style(), quiet_font_subsetting(), _layout_solved_once(fig):
        fig.savefig(paths[0], format="pdf", metadata=dict(PDF_METADATA))
        _save_png(fig, paths[1])
    return paths


PNG_COMPRESS_LEVEL = 3
"""zlib level of the saved PNGs (Pillow's default, 6, takes twice as long, for 7% less)."""


def _save_png(fig: Figure, path: Path | IO[bytes], dpi: float | None = None) -> None:
    """The PNG ``savefig`` would write at ``dpi`` (default :rc:`savefig.dpi`), without the
    alpha channel.

    The figure's background is opaque, so RGB holds the same pixels; encoding three
    channels at :data:`PNG_COMPRESS_LEVEL` takes half the time of matplotlib's RGBA at
    Pillow's default level, for a file about as small. No metadata but the resolution.
    """
    dpi = float(matplotlib.rcParams["savefig.dpi"] if dpi is None else dpi)
    screen_dpi = fig.dpi
    fig.dpi = dpi
    try:
        rgba, size = fig.canvas.print_to_buffer()
    finally:
        fig.dpi = screen_dpi
    image = PIL.Image.frombuffer("RGBA", size, rgba, "raw", "RGBA", 0, 1).convert("RGB")
    image.save(path, format="png", dpi=(dpi, dpi), compress_level=PNG_COMPRESS_LEVEL)


@contextmanager
def _layout_solved_once(fig: Figure) -> Iterator[None]:
    """Solve the figure's layout once, then save without a layout engine.

    Sizes are in inches, so one layout holds for the PDF and the PNG. With any layout engine
    set (even ``"none"``, a placeholder), ``savefig`` first runs a whole draw with rendering
    disabled just to place the axes; without one it draws once. Restores the engine after.

    The solve starts from the panels' grid positions, as in a new figure: it measures tick
    labels (how many, how wide) at the panels' current size, so solving from an earlier
    solve's positions moves panels by a fraction of a pixel. So every save and
    :func:`figure_png` of a figure gives the same bytes, whatever was drawn before.
    """
    engine = fig.get_layout_engine()
    if engine is not None:
        for ax in fig.axes:
            spec = ax.get_subplotspec()
            if spec is not None:
                in_layout = ax.get_in_layout()
                ax.set_position(spec.get_position(fig))  # (this takes it out of the layout)
                ax.set_in_layout(in_layout)
        engine.execute(fig)
    with matplotlib.rc_context(
        {"figure.autolayout": False, "figure.constrained_layout.use": False}
    ):
        fig.set_layout_engine(None)  # None, not "none": no engine at all
    try:
        yield
    finally:
        fig.set_layout_engine(engine)


def figure_png(fig: Figure, dpi: float | None = None) -> bytes:
    """PNG bytes of a figure (for notebooks and HTML pages), metadata-free.

    Drawn as :func:`save_figure` draws its PNG (layout solved once, no layout engine while
    drawing), so a notebook shows what the file holds: at the default ``dpi``
    (:rc:`savefig.dpi` of :data:`RC`) the very same bytes.
    """
    buf = io.BytesIO()
    with paper_style(), _layout_solved_once(fig):
        _save_png(fig, buf, dpi)
    return buf.getvalue()


def _build(
    name: str,
    df: pd.DataFrame,
    summary: pd.DataFrame,
    common: Mapping[str, Any],
    envs: Sequence[str] | None = None,
) -> Figure:
    if name in GRID_FIGURES:
        common = {**common, "envs": envs}
    elif envs is not None and list(envs) != _envs(df):
        raise ValueError(f"{name} draws every env; only {GRID_FIGURES} draw parts")
    if name == "completion_vs_complexity":
        return completion_figure(df, summary=summary, **common)
    if name == "pareto_tokens":
        return pareto_figure(df, summary=summary, **common)
    if name == "latency_cdf":
        return latency_cdf_figure(df, **common)
    if name == "failure_modes":
        return failure_modes_figure(df, **common)
    if name == "time_to_success":
        return time_to_success_figure(df, **common)
    raise ValueError(f"unknown figure {name!r}; expected one of {FIGURE_NAMES}")


def figure_builders(
    df: pd.DataFrame,
    *,
    seed: int = 0,
    planner_order: Sequence[str] | None = None,
    summary: pd.DataFrame | None = None,
    width: float | None = None,
) -> list[Figure]:
    """Every figure of :data:`FIGURE_NAMES`, in that order (``width`` forces one width)."""
    summary = _summary(df, seed, planner_order) if summary is None else summary
    common: dict[str, Any] = {"seed": seed, "planner_order": planner_order, "width": width}
    return [_build(name, df, summary, common) for name in FIGURE_NAMES]


# The figures a pool of forked workers draws: (file stem, name, records, summary, common, envs
# drawn), set by :func:`write_figures` just before it forks, so the records are inherited
# rather than pickled to every worker.
_PENDING: list[tuple[Path, str, pd.DataFrame, pd.DataFrame, dict[str, Any], list[str]]] = []


def _draw_pending(i: int) -> list[Path]:
    stem, name, df, summary, common, envs = _PENDING[i]
    return save_figure(_build(name, df, summary, common, envs), stem)


def part_stem(name: str, envs: Sequence[str], parts: int) -> str:
    """File stem of one part of a figure: ``name`` when it is whole, else
    ``name-<env>+<env>...`` (env names hold no ``-``; a ``+`` is safe in LaTeX paths)."""
    return name if parts == 1 else f"{name}-{'+'.join(envs)}"


def _figure_processes(n_figures: int) -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, n_figures))


def write_figures(
    df: pd.DataFrame,
    out_dir: Path,
    *,
    seed: int = 0,
    planner_order: list[str] | None = None,
    summary: pd.DataFrame | None = None,
    processes: int | None = None,
) -> list[Path]:
    """Write every figure as PDF and PNG into ``out_dir/figures/``; returns the paths.

    Pass the ``summary`` that :func:`~planarena.experiments.analysis.tables.write_summaries` returned to avoid
    computing (and bootstrapping) it twice; it is used only when it has one row per planner x
    env x complexity. Seeds are pooled in a figure (each seed's tasks are other tasks); any
    other swept config value gets its own set of figures in ``figures/<key=value,...>/``, so
    conditions are never pooled. A figure with one row per env that would be taller than a
    page (:data:`PAGE_HEIGHT_IN`) is saved in parts, ``<name>-<env>+<env>...``, each a
    page or less (:func:`page_parts`). Identical records give identical bytes.

    Figures are drawn by ``processes`` forked workers (default: one per available core, at
    most one per figure): drawing dominates a small job's time and each figure is
    independent. The bytes do not depend on the number of workers.

    No measured episode (e.g. a cost cap that cut the first one): no figure, an empty list.
    """
    if df.empty:
        return []
    _check(df)
    df = with_swept_columns(df)
    groups = [k for k in swept_keys(df) if k != "seed"]
    if summary is not None and list(summary.columns[: list(summary.columns).index("n")]) != list(
        DEFAULT_BY
    ):
        summary = None
    parts: list[tuple[Path, pd.DataFrame]] = []
    if groups:
        for key, sub in df.groupby(groups, sort=True, dropna=False):
            key = key if isinstance(key, tuple) else (key,)
            name = ",".join(f"{k}={v}" for k, v in zip(groups, key, strict=True))
            parts.append((Path(out_dir) / "figures" / name.replace("/", "_"), sub))
        summary = None
    else:
        parts.append((Path(out_dir) / "figures", df))
    common: dict[str, Any] = {"seed": seed, "planner_order": planner_order, "width": None}
    pending = []
    for fig_dir, sub in parts:
        sub_summary = _summary(sub, seed, planner_order) if summary is None else summary
        for name in FIGURE_NAMES:
            pages = page_parts(name, sub, planner_order=planner_order)
            for envs in pages:
                stem = fig_dir / part_stem(name, envs, len(pages))
                pending.append((stem, name, sub, sub_summary, common, envs))
    n = _figure_processes(len(pending)) if processes is None else max(1, processes)
    # the PDF backend (with fontTools) is imported on the first PDF save: once here, before
    # the fork, rather than once in every worker (~0.2 CPU s each)
    import matplotlib.backends.backend_pdf  # noqa: F401

    _PENDING[:] = pending
    try:
        if n > 1 and "fork" in multiprocessing.get_all_start_methods():
            with multiprocessing.get_context("fork").Pool(n) as pool:
                drawn = pool.map(_draw_pending, range(len(pending)), chunksize=1)
        else:
            drawn = [_draw_pending(i) for i in range(len(pending))]
    finally:
        _PENDING.clear()
    return [path for paths in drawn for path in paths]


__all__ = [
    "DOUBLE_COLUMN_IN",
    "FIGURE_NAMES",
    "KNOWN_PLANNER_COLORS",
    "GRID_FIGURES",
    "OKABE_ITO",
    "PAGE_HEIGHT_IN",
    "SINGLE_COLUMN_IN",
    "completion_figure",
    "failure_modes_figure",
    "figure_builders",
    "planner_linestyles",
    "planner_markers",
    "time_to_success_figure",
    "figure_png",
    "latency_cdf_figure",
    "pareto_figure",
    "pareto_front",
    "page_parts",
    "part_stem",
    "paper_style",
    "new_figure",
    "planner_colors",
    "quiet_font_subsetting",
    "save_figure",
    "write_figures",
]
