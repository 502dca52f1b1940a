"""Paper figures (PDF for papers, PNG for a quick look) built from episode records.

One file per metric, each on a grid of panels (rows: envs, columns: complexities), at two
sizes: ``<name>.pdf/.png`` two columns wide (7 in) and ``<name>-1col.pdf/.png`` one column
wide (3.4 in; complexities pooled per env, as the x label says). Every point estimate has a
95% interval:

* ``completion`` — completion rate per planner (summary's Wilson / task-bootstrap interval);
* ``cost_per_success`` — cost per completed task (task-bootstrap interval computed here);
* ``latency_percentiles`` — P50 and P99 of simulated latency (summary's task bootstrap);
* ``failure_modes`` — each planner's failed episodes split by failure mode
  (:func:`planarena.experiments.analysis.metrics.failure_distribution`);
* ``pareto_tokens`` — mean tokens (x) vs completion (y), intervals on both, Pareto front;
* ``time_to_success`` — share of episodes succeeded by simulated time t.

Every planner has one colour, marker and line style (:func:`planner_styles`), used by every
figure, so figures survive greyscale print; the legend sits above the panels inside the
canvas; log axes carry at least three labelled ticks; markers that would hide each other are
spread apart (said in each figure's docstring). Seeds are pooled in a figure; other swept
config values get their own figures (:func:`write_figures`).

Reproducibility: figures are built on bare :class:`~matplotlib.figure.Figure` objects with an
explicit Agg canvas (no pyplot, and no ``matplotlib.use`` that would hijack a notebook's
backend), inside an ``rc_context`` that fixes fonts, sizes and ``svg.hashsalt``, and saved
with metadata that removes timestamps and version strings.
"""

from planarena.experiments.analysis.figures.curves import (
    pareto_figure,
    pareto_front,
    time_to_success_figure,
)
from planarena.experiments.analysis.figures.failures import failure_modes_figure
from planarena.experiments.analysis.figures.forest import (
    completion_figure,
    cost_per_success_figure,
    cost_per_success_interval,
    latency_percentiles_figure,
)
from planarena.experiments.analysis.figures.layout import MIN_ROW_IN, PAGE_HEIGHT_IN, pooled
from planarena.experiments.analysis.figures.output import (
    BUILDERS,
    figure_builders,
    figure_png,
    figure_stem,
    quiet_font_subsetting,
    save_figure,
    write_figures,
)
from planarena.experiments.analysis.figures.style import (
    DOUBLE_COLUMN_IN,
    FIGURE_NAMES,
    FIGURE_VARIANTS,
    KNOWN_PLANNER_COLORS,
    OKABE_ITO,
    PDF_METADATA,
    PNG_METADATA,
    RC,
    SINGLE_COLUMN_IN,
    PlannerStyle,
    new_figure,
    paper_style,
    planner_colors,
    planner_linestyles,
    planner_markers,
    planner_styles,
)

__all__ = [
    "BUILDERS",
    "DOUBLE_COLUMN_IN",
    "FIGURE_NAMES",
    "FIGURE_VARIANTS",
    "KNOWN_PLANNER_COLORS",
    "MIN_ROW_IN",
    "OKABE_ITO",
    "PAGE_HEIGHT_IN",
    "PDF_METADATA",
    "PNG_METADATA",
    "RC",
    "SINGLE_COLUMN_IN",
    "PlannerStyle",
    "completion_figure",
    "cost_per_success_figure",
    "cost_per_success_interval",
    "failure_modes_figure",
    "figure_builders",
    "figure_png",
    "figure_stem",
    "latency_percentiles_figure",
    "new_figure",
    "paper_style",
    "pareto_figure",
    "pareto_front",
    "planner_colors",
    "planner_linestyles",
    "planner_markers",
    "planner_styles",
    "pooled",
    "quiet_font_subsetting",
    "save_figure",
    "time_to_success_figure",
    "write_figures",
]
