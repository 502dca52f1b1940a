"""CPU seconds spent drawing each default figure: build, layout, PDF save and PNG save.

    python -m planarena.experiments.bench.bench_figures runs/.../episodes.parquet \
        [--repeat 3] [--out DIR]

Figures are built and saved exactly as
:func:`planarena.experiments.analysis.figures.write_figures` does (one process, through
:func:`~planarena.experiments.analysis.figures.save_figure`), at both sizes; the time of
saving is split into the PDF, the PNG and the rest (solving the layout). Times are process
CPU seconds (less disturbed than wall time by other work on the machine), the minimum over
``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure
from planarena.experiments.analysis.figures import output as F
from planarena.experiments.records.runs import with_swept_columns


@contextmanager
def _timed_saves(times: dict[str, float]) -> Iterator[None]:
    """Record the CPU time of each ``Figure.savefig`` call under its format, and of
    :func:`planarena.experiments.analysis.figures.output._save_png` (which draws the PNG
    without ``savefig``)."""
    original_savefig, original_png = Figure.savefig, getattr(F, "_save_png", None)

    def add(fmt: str, start: float) -> None:
        times[fmt] = times.get(fmt, 0.0) + time.process_time() - start

    def savefig(self: Figure, fname: Any, *args: Any, **kwargs: Any) -> None:
        start = time.process_time()
        try:
            original_savefig(self, fname, *args, **kwargs)
        finally:
            add(kwargs.get("format") or Path(str(fname)).suffix.lstrip("."), start)

    def save_png(fig: Figure, path: Path) -> None:
        start = time.process_time()
        try:
            original_png(fig, path)  # type: ignore[misc]
        finally:
            add("png", start)

    Figure.savefig = savefig  # type: ignore[method-assign]
    if original_png is not None:  # older figures.py: the PNG went through savefig
        F._save_png = save_png
    try:
        yield
    finally:
        Figure.savefig = original_savefig  # type: ignore[method-assign]
        if original_png is not None:
            F._save_png = original_png


def bench(df: pd.DataFrame, out: Path, repeat: int = 1) -> dict[str, dict[str, float]]:
    """``{figure file: {"build": s, "pdf": s, "png": s, "layout": s}}``, each the minimum over
    ``repeat`` runs (``layout``: the part of ``save_figure`` outside ``savefig``); each figure
    is timed at both of its sizes, as jobs save them."""
    df = with_swept_columns(df)
    summary = F._summary(df, 0, None)
    best: dict[str, dict[str, float]] = {}
    for _ in range(repeat):
        for suffix, width in F.FIGURE_VARIANTS:
            common: dict[str, Any] = {"seed": 0, "planner_order": None, "width": width}
            for name in F.FIGURE_NAMES:
                stem = F.figure_stem(name, suffix)
                start = time.process_time()
                fig = F._build(name, df, None if F.pooled(width) else summary, common)
                times = {"build": time.process_time() - start}
                start = time.process_time()
                with _timed_saves(times):
                    F.save_figure(fig, out / stem)
                # whatever save_figure spends outside savefig (e.g. solving the layout once)
                times["layout"] = time.process_time() - start - times["pdf"] - times["png"]
                row = best.setdefault(stem, dict(times))
                for key, value in times.items():
                    row[key] = min(row.get(key, value), value)
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("episodes", type=Path, help="an episodes.parquet")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="keep the figures here")
    args = parser.parse_args(argv)
    df = pd.read_parquet(args.episodes)
    with tempfile.TemporaryDirectory() as tmp:
        result = bench(df, args.out or Path(tmp), max(1, args.repeat))
    total = 0.0
    for name, row in result.items():
        parts = " ".join(f"{k} {row[k]:.2f}" for k in ("build", "layout", "pdf", "png"))
        parts += f"  = {sum(row.values()):.2f}"
        print(f"{name:26s} {parts}")
        total += sum(row.values())
    print(f"{'total CPU s':26s} {total:.2f}")


if __name__ == "__main__":
    main()
