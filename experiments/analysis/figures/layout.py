"""Sizes and layout shared by the figures: the env x complexity grid of panels every figure
draws on, legends inside the canvas, axis ticks that never collide (log axes with at least
three labelled ticks), markers spread apart where they would hide each other, and the
per-cell numbers every figure draws (the summary table's).

Every figure is written at two widths (:data:`FIGURE_VARIANTS`). At double-column width
(7 in) the grid has one row per env and one column per complexity. At single-column width
(3.4 in) three columns of panels, each narrower than an inch, cannot hold planner names, eight
markers and their intervals legibly, so the one-column figure **pools the complexities of an
env** (one panel per env, one row each; every number recomputed over the pooled episodes with
the same estimators, its x label saying "complexities pooled"). Heights grow with the number
of envs, rows shrinking to keep a figure within a page (:data:`PAGE_HEIGHT_IN`) down to
:data:`MIN_ROW_IN` a row (past about 10 envs a figure is taller than a page: draw fewer envs).

Everything is measured in inches, so one layout holds for the PDF and the PNG.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.lines import Line2D
from matplotlib.markers import MarkerStyle
from matplotlib.textpath import TextToPath
from matplotlib.ticker import (
    FixedLocator,
    FuncFormatter,
    Locator,
    LogLocator,
    MaxNLocator,
    NullFormatter,
    NullLocator,
)
from planarena.experiments.analysis.cells import COMPLEXITY_ORDER, DEFAULT_BY

# --------------------------------------------------------------------------- style
from planarena.experiments.analysis.figures.style import (
    RC,
    new_figure,
    planner_styles,
)
from planarena.experiments.analysis.metrics import summarize

PAGE_HEIGHT_IN = 9.0
"""Text height of a two-column conference page (NeurIPS, ICML: 9 in): no figure is taller
(up to about 10 envs, see :data:`MIN_ROW_IN`)."""


MIN_ROW_IN = 0.75
"""Smallest height of one env's row of panels (tick labels included) before a figure may
outgrow a page: eight planner rows at 6 pt still apart."""


POOL_BELOW_IN = 5.0
"""Figures narrower than this pool complexities (one panel per env): the one-column size."""


HEADER_IN = 0.22
"""Room for the complexity headers above the top row of panels."""


XLABEL_IN = 0.3
"""Room for the shared x label under the grid."""

XLABEL_POOLED_IN = 0.5
"""Room for it in a one-column figure: it says "complexities pooled" and breaks in two lines."""


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
    """One row of panels per env, sorted by name (matching :func:`sort_cells`)."""
    return sorted(map(str, set(df["env"])))


def pooled(width: float) -> bool:
    """Whether a figure ``width`` inches wide pools complexities (the one-column size)."""
    return width < POOL_BELOW_IN


@dataclass
class Facets:
    """A figure's grid of panels: ``axes[r][c]`` draws env ``envs[r]`` at complexity
    ``levels[c]`` (``levels == [None]`` when complexities are pooled)."""

    fig: Figure
    axes: Any
    envs: list[str]
    levels: list[str | None]
    planners: list[str]
    row_in: float

    def panels(self) -> Iterator[tuple[Any, str, str | None]]:
        """Every panel with its env and complexity, row by row."""
        for r, env in enumerate(self.envs):
            for c, level in enumerate(self.levels):
                yield self.axes[r][c], env, level

    @property
    def panel_width_in(self) -> float:
        """Estimated width of one panel before layout (for tick thinning and jitter)."""
        width = self.fig.get_figwidth()
        left = _planner_label_room(self.planners) if self.names_on_y else 0.45
        return (width - left - 0.3 - 0.12 * (len(self.levels) - 1)) / len(self.levels)

    @property
    def pooled(self) -> bool:
        return self.levels == [None]

    names_on_y: bool = False


def _cell(frame: pd.DataFrame, env: str, level: str | None) -> pd.DataFrame:
    """The rows of ``frame`` (episodes or summary) that one panel draws."""
    keep = frame["env"].astype(str) == env
    if level is not None:
        keep &= frame["complexity"].astype(str) == level
    return frame[keep]


def _facets(
    df: pd.DataFrame,
    planner_order: Sequence[str] | None,
    width: float,
    *,
    row_in: float,
    legend_labels: Sequence[str],
    names_on_y: bool = False,
) -> Facets:
    """The grid of a figure ``width`` wide: one row per env (``row_in`` tall, less when the
    figure would outgrow a page), one column per complexity or one pooled column.

    Complexity headers top the columns; env names label the rows on the right (as a facet
    grid's margin titles), so panels need no titles of their own.
    """
    planners = _ordered_planners(df, planner_order)
    envs = _envs(df)
    levels: list[str | None] = (
        [None] if pooled(width) else list(_ordered_complexities(list(df["complexity"])))
    )
    fixed = _legend_height(width, legend_labels)
    fixed += XLABEL_POOLED_IN if levels == [None] else XLABEL_IN + HEADER_IN
    row = min(row_in, max(MIN_ROW_IN, (PAGE_HEIGHT_IN - fixed - 0.02) / len(envs)))
    fig = new_figure(width, fixed + row * len(envs))
    axes = fig.subplots(len(envs), len(levels), sharey=True, squeeze=False)
    facets = Facets(fig, axes, envs, levels, planners, row, names_on_y)
    for c, level in enumerate(levels):
        if level is not None:
            axes[0][c].set_title(level)
    for r, env in enumerate(envs):
        _row_label(axes[r][-1], env, row)
    return facets


def _row_label(ax: Any, env: str, row_in: float) -> None:
    """The env's name right of its row, rotated; smaller and broken at ``_`` when long."""
    room = row_in - 0.3
    text, size = env, 6.0
    for candidate in (float(RC["axes.labelsize"]), 7.0, 6.0):
        if _text_width_in(env, candidate) <= room:
            size = candidate
            break
    else:
        text = _break_words(env, room, size)
    ax.annotate(
        text,
        xy=(1.0, 0.5),
        xycoords="axes fraction",
        xytext=(4, 0),
        textcoords="offset points",
        rotation=270,
        ha="left",
        va="center",
        fontsize=size,
        annotation_clip=False,
    )


PLANNER_LABEL_PT = 7.0
"""Planner names on the y axis: 7 pt (smaller when a row is too low for them)."""


def _planner_label_room(planners: Sequence[str]) -> float:
    """Inches the planner names take left of the first column."""
    return max((_text_width_in(p, PLANNER_LABEL_PT) for p in planners), default=0.0) + 0.12


def _planner_rows(facets: Facets, rows_per_planner: float = 1.0) -> None:
    """Planner rows on the shared y axis, first planner on top, named on the first column
    in a size that keeps the names apart (a row of the panel per planner)."""
    n = len(facets.planners)
    panel_in = facets.row_in - 0.3  # less the x tick labels
    size = min(PLANNER_LABEL_PT, 72.0 * panel_in / max(n, 1) / 1.3 * rows_per_planner)
    for r in range(len(facets.envs)):
        ax = facets.axes[r][0]
        ax.set_yticks(range(n), facets.planners, fontsize=max(size, 5.0))
        ax.set_ylim(n - 0.5, -0.5)
        ax.tick_params(axis="y", length=0, pad=2)
    for ax, _, _ in facets.panels():
        ax.grid(axis="y", color="#E4E4E4", lw=0.5, zorder=0)
        ax.set_axisbelow(True)


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


def _check(df: pd.DataFrame) -> None:
    if df.empty:
        raise ValueError("no episodes to plot")
    missing = [c for c in ("planner", "env", "complexity", "success") if c not in df.columns]
    if missing:
        raise KeyError(f"episode table is missing columns: {missing}")


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


def _marker_reach_in(markers: Iterable[str], size: float, linewidth: float) -> float:
    """Inches from a point to the far side of its drawn marker (scatter's ``size`` in
    points squared, edge ``linewidth``): the widest of ``markers`` (a diamond reaches 0.7)."""
    reach = 0.0
    for marker in set(markers):
        style = MarkerStyle(marker)
        box = style.get_path().transformed(style.get_transform()).get_extents()
        reach = max(reach, *np.abs([box.x0, box.x1, box.y0, box.y1]))
    return (reach * math.sqrt(size) + linewidth / 2) / 72.0


def _top_legend(fig: Figure, handles: list[Any]) -> None:
    """The shared legend above the panels, inside the canvas, in as many columns as fit."""
    labels = [h.get_label() for h in handles]
    fig.legend(
        handles=handles,
        loc="outside upper center",
        ncols=_legend_cols(fig.get_figwidth(), labels),
        columnspacing=1.0,
        handlelength=2.4,
    )


def _planner_handles(
    planners: Sequence[str], *, line: bool = True, marker: bool = True
) -> list[Any]:
    """One legend entry per planner with its colour, marker and line style."""
    styles = planner_styles(planners)
    return [
        Line2D(
            [],
            [],
            color=styles[p].color,
            marker=styles[p].marker if marker else None,
            markeredgecolor="black",
            markeredgewidth=0.4,
            ls=styles[p].linestyle if line else "",
            lw=1.0,
            label=p,
        )
        for p in planners
    ]


def _compact(value: float, _pos: object = None) -> str:
    """Short tick labels: 1500 -> 1.5k, 2e6 -> 2M, 0.004 -> 0.004 (3 significant digits)."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def _thousands(value: float, _pos: object = None) -> str:
    """Token counts: 1500 -> 1.5k, 20000 -> 20k."""
    return _compact(value)


LOG_STEPS: tuple[tuple[float, ...], ...] = ((1.0,), (1.0, 2.0, 5.0), (1.0, 1.5, 2.0, 3.0, 5.0, 7.0))
"""Mantissas of log-axis ticks, tried coarse to fine until three ticks fall in view."""


def use_log(values: Iterable[float], ratio: float = 20.0) -> bool:
    """A log axis when the positive, finite values span more than ``ratio`` times."""
    v = np.asarray([x for x in values if np.isfinite(x) and x > 0], dtype=np.float64)
    return bool(v.size >= 2 and v.max() / v.min() > ratio)


def _log_candidates(lo: float, hi: float, steps: Sequence[float]) -> list[float]:
    first, last = math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1
    values = [m * 10.0**k for k in range(first, last + 1) for m in steps]
    return [v for v in values if lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9)]


def log_axis(
    ax: Any,
    lo: float,
    hi: float,
    length_in: float,
    formatter: Callable[[float, object], str] = _compact,
    axis: str = "x",
) -> list[float]:
    """A log ``axis`` over [lo, hi] (positive) with at least three labelled ticks that fit
    ``length_in`` inches side by side; returns the ticks.

    Decades when three fit in view, else 1-2-5, else 1-1.5-2-3-5-7; when even those give
    fewer than three, the limits widen to the next ticks. Ticks are thinned (every other
    one, never below three) until their labels fit with a gap. Minor ticks are unlabelled.
    """
    pad = (hi / lo) ** 0.06 if hi > lo else 1.5
    lo, hi = lo / pad, hi * pad
    ticks: list[float] = []
    for steps in LOG_STEPS:
        ticks = _log_candidates(lo, hi, steps)
        if len(ticks) >= 3:
            break
    fine = _log_candidates(lo / 100.0, hi * 100.0, LOG_STEPS[1])
    while len(ticks) < 3:  # widen to the neighbouring 1-2-5 values, above first
        above = [v for v in fine if v > hi * (1 + 1e-9)]
        below = [v for v in fine if v < lo * (1 - 1e-9)]
        if above and (len(ticks) % 2 == 0 or not below):
            hi = above[0]
        else:
            lo = below[-1]
        ticks = _log_candidates(lo, hi, LOG_STEPS[1])
    size = float(RC["xtick.labelsize"] if axis == "x" else RC["ytick.labelsize"])
    per_decade = length_in / math.log10(hi / lo)
    while len(ticks) > 3 and not _labels_fit(ticks, per_decade, formatter, size):
        thinner = ticks[::2] if len(ticks[::2]) >= 3 else [ticks[0], ticks[-1]]
        if len(thinner) < 3:  # keep three: the ends and the middle one
            thinner = [ticks[0], ticks[len(ticks) // 2], ticks[-1]]
        if thinner == ticks:
            break
        ticks = thinner
    set_scale = ax.set_xscale if axis == "x" else ax.set_yscale
    set_lim = ax.set_xlim if axis == "x" else ax.set_ylim
    target = ax.xaxis if axis == "x" else ax.yaxis
    set_scale("log")
    set_lim(lo, hi)
    target.set_major_locator(FixedLocator(ticks))
    target.set_major_formatter(FuncFormatter(formatter))
    target.set_minor_locator(LogLocator(subs=(2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0)))
    target.set_minor_formatter(NullFormatter())
    return ticks


def _labels_fit(
    ticks: Sequence[float],
    per_decade_in: float,
    formatter: Callable[[float, object], str],
    size: float,
) -> bool:
    """Whether neighbouring tick labels of a log axis (``per_decade_in`` inches a decade)
    keep at least 0.1 in between them."""
    widths = [_text_width_in(formatter(t, None), size) for t in ticks]
    for i in range(len(ticks) - 1):
        gap = per_decade_in * math.log10(ticks[i + 1] / ticks[i])
        if gap < (widths[i] + widths[i + 1]) / 2 + 0.1:
            return False
    return True


def linear_axis(
    ax: Any,
    lo: float,
    hi: float,
    formatter: Callable[[float, object], str] = _compact,
    *,
    zero: bool = True,
) -> None:
    """A linear x axis over [lo, hi] (from 0 when ``zero``), at most four labelled ticks."""
    lo = min(lo, 0.0) if zero else lo
    span = (hi - lo) or max(abs(hi), 1.0)
    ax.set_xlim(lo - 0.06 * span if not zero else lo, hi + 0.09 * span)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=3, min_n_ticks=3))
    ax.xaxis.set_major_formatter(FuncFormatter(formatter))


def value_axis(
    ax: Any,
    values: Iterable[float],
    length_in: float,
    formatter: Callable[[float, object], str] = _compact,
) -> None:
    """The x axis of a panel of positive values: log when they span over 20x, else linear
    from 0 (a reader compares bar-like lengths)."""
    v = [x for x in values if np.isfinite(x)]
    if not v:
        ax.set_xlim(0.0, 1.0)
        ax.xaxis.set_major_locator(FixedLocator([]))
        return
    if use_log(v):
        positive = [x for x in v if x > 0]
        log_axis(ax, min(positive), max(positive), length_in, formatter)
    else:
        linear_axis(ax, 0.0, max(max(v), 1e-12), formatter)


def spread_points(
    x_in: np.ndarray, y_in: np.ndarray, reach_in: float
) -> tuple[np.ndarray, np.ndarray]:
    """Positions (inches in a panel) moved apart so no two markers of radius ``reach_in``
    overlap: each group of points closer than a marker's width is laid on a small ring
    around its centre (at most a marker's width away from the true point for a pair).
    Deterministic, order-preserving; isolated points do not move."""
    n = x_in.size
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    gap = 2.0 * reach_in
    for i in range(n):
        for j in range(i + 1, n):
            if np.hypot(x_in[i] - x_in[j], y_in[i] - y_in[j]) < gap:
                parent[root(j)] = root(i)
    xs, ys = x_in.astype(np.float64).copy(), y_in.astype(np.float64).copy()
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(root(i), []).append(i)
    for members in groups.values():
        k = len(members)
        if k < 2:
            continue
        cx, cy = float(np.mean(x_in[members])), float(np.mean(y_in[members]))
        radius = 1.05 * reach_in / math.sin(math.pi / k)
        for m, i in enumerate(members):
            angle = math.pi / 2 + 2 * math.pi * m / k if k > 2 else math.pi * m
            xs[i] = cx + radius * math.cos(angle)
            ys[i] = cy + radius * math.sin(angle)
    return xs, ys


def _summary(
    df: pd.DataFrame, seed: int, planner_order: Sequence[str] | None, pool: bool = False
) -> pd.DataFrame:
    """The same per-cell numbers as summary.csv (so figure and table always agree); seeds
    pooled (their tasks are different tasks); complexities pooled too when ``pool``."""
    by = ("planner", "env") if pool else DEFAULT_BY
    return summarize(df, by, seed=seed, planner_order=planner_order)


def _figure_summary(
    df: pd.DataFrame,
    seed: int,
    planner_order: Sequence[str] | None,
    summary: pd.DataFrame | None,
    width: float,
) -> pd.DataFrame:
    """The summary a figure ``width`` wide draws: the given one (per complexity) unless the
    figure pools complexities."""
    if pooled(width):
        return _summary(df, seed, planner_order, pool=True)
    return _summary(df, seed, planner_order) if summary is None else summary


def _xlabel(fig: Figure, text: str, facets: Facets) -> None:
    """The shared x label, saying when complexities are pooled; broken after its commas
    when it is wider than the figure (a one-column figure)."""
    if facets.pooled:
        text += ", complexities pooled"
    size = float(RC["axes.labelsize"])
    if _text_width_in(text, size) > fig.get_figwidth() - 0.2:
        head, _, tail = text.rpartition(", ")
        text = f"{head},\n{tail}" if head else text
    fig.supxlabel(text, fontsize=size)
