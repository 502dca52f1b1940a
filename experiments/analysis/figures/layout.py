"""Sizes and layout shared by the figures: widths, legends, panel titles that fit, grids of
panels (one row per env), how a figure taller than a page is cut into parts, and the
per-cell numbers every figure draws (the summary table's).

Everything is measured in inches, so one layout holds for the PDF and the PNG.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.lines import Line2D
from matplotlib.markers import MarkerStyle
from matplotlib.textpath import TextToPath
from matplotlib.ticker import (
    FixedLocator,
    Locator,
    NullLocator,
)
from planarena.experiments.analysis.cells import (
    COMPLEXITY_ORDER,
    DEFAULT_BY,
)

# --------------------------------------------------------------------------- style
from planarena.experiments.analysis.figures.style import (
    DOUBLE_COLUMN_IN,
    RC,
    SINGLE_COLUMN_IN,
    _styles,
    new_figure,
)
from planarena.experiments.analysis.metrics import summarize


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


def _check(df: pd.DataFrame) -> None:
    if df.empty:
        raise ValueError("no episodes to plot")
    missing = [c for c in ("planner", "env", "complexity", "success") if c not in df.columns]
    if missing:
        raise KeyError(f"episode table is missing columns: {missing}")


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


def _summary(df: pd.DataFrame, seed: int, planner_order: Sequence[str] | None) -> pd.DataFrame:
    """The same per-cell numbers as summary.csv (so figure and table always agree); seeds
    pooled (their tasks are different tasks) when a figure covers several."""
    return summarize(df, DEFAULT_BY, seed=seed, planner_order=planner_order)
