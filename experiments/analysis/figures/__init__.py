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

from planarena.experiments.analysis.figures.completion import completion_figure
from planarena.experiments.analysis.figures.curves import (
    latency_cdf_figure,
    pareto_figure,
    pareto_front,
    time_to_success_figure,
)
from planarena.experiments.analysis.figures.failures import failure_modes_figure
from planarena.experiments.analysis.figures.layout import GRID_FIGURES, PAGE_HEIGHT_IN, page_parts
from planarena.experiments.analysis.figures.output import (
    figure_builders,
    figure_png,
    part_stem,
    quiet_font_subsetting,
    save_figure,
    write_figures,
)
from planarena.experiments.analysis.figures.style import (
    DOUBLE_COLUMN_IN,
    FIGURE_NAMES,
    KNOWN_PLANNER_COLORS,
    OKABE_ITO,
    PDF_METADATA,
    PNG_METADATA,
    RC,
    SINGLE_COLUMN_IN,
    new_figure,
    paper_style,
    planner_colors,
    planner_linestyles,
    planner_markers,
)

__all__ = [
    "DOUBLE_COLUMN_IN",
    "FIGURE_NAMES",
    "GRID_FIGURES",
    "KNOWN_PLANNER_COLORS",
    "OKABE_ITO",
    "PAGE_HEIGHT_IN",
    "PDF_METADATA",
    "PNG_METADATA",
    "RC",
    "SINGLE_COLUMN_IN",
    "completion_figure",
    "failure_modes_figure",
    "figure_builders",
    "figure_png",
    "latency_cdf_figure",
    "new_figure",
    "page_parts",
    "paper_style",
    "pareto_figure",
    "pareto_front",
    "part_stem",
    "planner_colors",
    "planner_linestyles",
    "planner_markers",
    "quiet_font_subsetting",
    "save_figure",
    "time_to_success_figure",
    "write_figures",
]
