"""The figures' look: planner colours, markers and line styles, fonts and sizes (:data:`RC`),
timestamp-free metadata, and the figure names.

Every planner keeps one colour *and* marker (and line style) in every figure, so figures
survive greyscale print.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

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
    "reflexion": "#999933",  # Tol olive
    "plan_execute_rerun": "#44AA99",  # Tol teal
    "auto": "#332288",  # Tol indigo
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
    "reflexion": "h",
    "plan_execute_rerun": ">",
    "auto": "<",
}
"""One marker per shipped planner: with the colour, it survives greyscale print."""


EXTRA_MARKERS: tuple[str, ...] = ("p", "d", "8", "H", "1", "2", "3", "4")


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
    **{name: LINESTYLES[i] for i, name in enumerate(list(KNOWN_PLANNER_MARKERS)[:8])},
    "reflexion": "-.",  # its marker keeps it apart from tot's dash-dot
    "plan_execute_rerun": ":",
    "auto": "--",
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
    "completion",
    "cost_per_success",
    "latency_percentiles",
    "failure_modes",
    "pareto_tokens",
    "time_to_success",
)
"""One file per metric, written by :func:`write_figures` in this order."""


FIGURE_VARIANTS: tuple[tuple[str, float], ...] = (
    ("", DOUBLE_COLUMN_IN),
    ("-1col", SINGLE_COLUMN_IN),
)
"""(file suffix, width in inches) of the two sizes every figure is written in:
``<name>.pdf`` spans both columns, ``<name>-1col.pdf`` fits one."""


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
    """Stable planner -> line style mapping (known planners fixed, others by sorted name).

    Unknown planners step through the styles one further every time the extra markers wrap
    around, so no two planners share a (marker, line style) pair (up to 80 unknown ones).
    """
    unknown = sorted({p for p in planners if p not in KNOWN_PLANNER_LINESTYLES})
    extra = {
        p: LINESTYLES[(i + 1 + i // len(EXTRA_MARKERS)) % len(LINESTYLES)]
        for i, p in enumerate(unknown)
    }
    return {p: KNOWN_PLANNER_LINESTYLES.get(p) or extra[p] for p in dict.fromkeys(planners)}


@dataclass(frozen=True)
class PlannerStyle:
    """How one planner is drawn in every figure: colour, marker and line style together, so
    it stays recognisable in greyscale (marker and dash pattern) as in colour."""

    color: str
    marker: str
    linestyle: Any


def planner_styles(planners: Sequence[str]) -> dict[str, PlannerStyle]:
    """The one place a planner's look is decided; every figure draws through it."""
    colors, markers, styles = _styles(planners)
    return {p: PlannerStyle(colors[p], markers[p], styles[p]) for p in colors}


def _styles(planners: Sequence[str]) -> tuple[dict[str, str], dict[str, str], dict[str, Any]]:
    return planner_colors(planners), planner_markers(planners), planner_linestyles(planners)


def new_figure(width: float, height: float) -> Figure:
    """A pyplot-free Figure on an Agg canvas (no global figure registry, no backend switch)."""
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig
