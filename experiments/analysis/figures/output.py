"""Drawing and saving the figures: PDF and PNG with timestamp-free metadata, one set per
swept configuration value, drawn by forked workers; :func:`write_figures` is the entry.
"""

from __future__ import annotations

import io
import logging
import multiprocessing
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import matplotlib
import pandas as pd
import PIL.Image
from matplotlib.figure import Figure
from planarena.experiments.analysis.cells import (
    DEFAULT_BY,
    swept_keys,
)
from planarena.experiments.analysis.figures.curves import pareto_figure, time_to_success_figure
from planarena.experiments.analysis.figures.failures import failure_modes_figure
from planarena.experiments.analysis.figures.forest import (
    completion_figure,
    cost_per_success_figure,
    latency_percentiles_figure,
)
from planarena.experiments.analysis.figures.layout import _check, _summary, pooled
from planarena.experiments.analysis.figures.style import (
    DOUBLE_COLUMN_IN,
    FIGURE_NAMES,
    FIGURE_VARIANTS,
    PDF_METADATA,
    paper_style,
)

__all__ = [
    "BUILDERS",
    "FIGURE_NAMES",
    "FIGURE_VARIANTS",
    "figure_builders",
    "figure_png",
    "figure_stem",
    "pooled",
    "save_figure",
    "write_figures",
]
from planarena.experiments.records.runs import with_swept_columns


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


# Pillow's default level, 6, took twice as long for a file 7% smaller
PNG_COMPRESS_LEVEL = 3
"""zlib level of the saved PNGs: below Pillow's default, whose smaller files cost much more
time to write."""


def _save_png(fig: Figure, path: Path | IO[bytes], dpi: float | None = None) -> None:
    """The PNG ``savefig`` would write at ``dpi`` (default :rc:`savefig.dpi`), without the
    alpha channel.

    The figure's background is opaque, so RGB holds the same pixels, and three channels at
    :data:`PNG_COMPRESS_LEVEL` encode faster than matplotlib's RGBA at Pillow's default level
    for a file about as small. No metadata but the resolution.
    """
    # measured: half the time of savefig's PNG
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


BUILDERS: dict[str, Callable[..., Figure]] = {
    "completion": completion_figure,
    "cost_per_success": cost_per_success_figure,
    "latency_percentiles": latency_percentiles_figure,
    "failure_modes": failure_modes_figure,
    "pareto_tokens": pareto_figure,
    "time_to_success": time_to_success_figure,
}
"""The function that draws each of :data:`FIGURE_NAMES`."""


TAKES_SUMMARY = ("completion", "latency_percentiles", "pareto_tokens", "time_to_success")
"""Figures that draw the summary's numbers (the others compute theirs from the records)."""


def _build(
    name: str,
    df: pd.DataFrame,
    summary: pd.DataFrame | None,
    common: Mapping[str, Any],
) -> Figure:
    if name not in BUILDERS:
        raise ValueError(f"unknown figure {name!r}; expected one of {FIGURE_NAMES}")
    if name in TAKES_SUMMARY:
        return BUILDERS[name](df, summary=summary, **common)
    return BUILDERS[name](df, **common)


def figure_stem(name: str, suffix: str) -> str:
    """File stem of one size of a figure: ``completion`` (two-column) or
    ``completion-1col`` (one column)."""
    return f"{name}{suffix}"


def figure_builders(
    df: pd.DataFrame,
    *,
    seed: int = 0,
    planner_order: Sequence[str] | None = None,
    summary: pd.DataFrame | None = None,
    width: float | None = None,
) -> list[Figure]:
    """Every figure of :data:`FIGURE_NAMES`, in that order, ``width`` wide (default: two
    columns)."""
    width = width or DOUBLE_COLUMN_IN
    if summary is None and not pooled(width):
        summary = _summary(df, seed, planner_order)
    common: dict[str, Any] = {"seed": seed, "planner_order": planner_order, "width": width}
    return [_build(name, df, summary, common) for name in FIGURE_NAMES]


# The figures a pool of forked workers draws: (file stem, name, records, summary, common), set
# by :func:`write_figures` just before it forks, so the records are inherited rather than
# pickled to every worker.
_PENDING: list[tuple[Path, str, pd.DataFrame, pd.DataFrame | None, dict[str, Any]]] = []


def _draw_pending(i: int) -> list[Path]:
    stem, name, df, summary, common = _PENDING[i]
    return save_figure(_build(name, df, summary, common), stem)


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
    meanwhile: Callable[[], object] | None = None,
) -> list[Path]:
    """Write every figure as PDF and PNG into ``out_dir/figures/``; returns the paths.

    One file per metric (:data:`FIGURE_NAMES`), each at two widths
    (:data:`FIGURE_VARIANTS`): ``<name>.pdf/.png`` two columns wide (7 in, one panel per env
    x complexity) and ``<name>-1col.pdf/.png`` one column wide (3.4 in, complexities
    pooled, see :mod:`~planarena.experiments.analysis.figures.layout`). Every figure holds
    every env, at most a page tall.

    Pass the ``summary`` that :func:`~planarena.experiments.analysis.tables.write_summaries`
    returned to avoid computing (and bootstrapping) it twice; it is used only when it has one
    row per planner x env x complexity. Seeds are pooled in a figure (each seed's tasks are
    other tasks); any other swept config value gets its own set of figures in
    ``figures/<key=value,...>/``, so conditions are never pooled. Identical records give
    identical bytes.

    Figures are drawn by ``processes`` forked workers (default: one per available core, at
    most one per figure): drawing dominates a small job's time and each figure is
    independent. The bytes do not depend on the number of workers. ``meanwhile`` (a job's
    study analysis) runs in this process while they draw, so the cores they leave idle are
    used; the figures are all written before it returns, whether ``meanwhile`` raises or not.

    No measured episode (e.g. a cost cap that cut the first one): no figure, an empty list.
    """
    if df.empty:
        if meanwhile is not None:
            meanwhile()
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
    pending = []
    for fig_dir, sub in parts:
        sub_summary = _summary(sub, seed, planner_order) if summary is None else summary
        for suffix, width in FIGURE_VARIANTS:
            common: dict[str, Any] = {"seed": seed, "planner_order": planner_order, "width": width}
            for name in FIGURE_NAMES:
                stem = fig_dir / figure_stem(name, suffix)
                pending.append((stem, name, sub, None if pooled(width) else sub_summary, common))
    n = _figure_processes(len(pending)) if processes is None else max(1, processes)
    # the PDF backend (with fontTools) is imported on the first PDF save: once here, before
    # the fork, rather than once in every worker (~0.2 CPU s each)
    import matplotlib.backends.backend_pdf  # noqa: F401

    _PENDING[:] = pending
    try:
        if n > 1 and "fork" in multiprocessing.get_all_start_methods():
            with multiprocessing.get_context("fork").Pool(n) as pool:
                drawing = pool.map_async(_draw_pending, range(len(pending)), chunksize=1)
                try:
                    if meanwhile is not None:
                        meanwhile()
                finally:
                    drawn = drawing.get()
        else:
            drawn = [_draw_pending(i) for i in range(len(pending))]
            if meanwhile is not None:
                meanwhile()
    finally:
        _PENDING.clear()
    return [path for paths in drawn for path in paths]
