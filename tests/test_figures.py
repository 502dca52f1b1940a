"""analysis.figures: the file set, sizes, legibility checks on the drawn figures (legend in
the canvas, tick labels apart, log axes with three labelled ticks, one style per planner),
intervals, and byte-identical output."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from planarena.experiments.analysis.figures import (
    BUILDERS,
    DOUBLE_COLUMN_IN,
    FIGURE_NAMES,
    FIGURE_VARIANTS,
    KNOWN_PLANNER_COLORS,
    OKABE_ITO,
    PAGE_HEIGHT_IN,
    SINGLE_COLUMN_IN,
    cost_per_success_interval,
    failure_modes_figure,
    pareto_front,
    planner_colors,
    planner_styles,
    write_figures,
)
from planarena.experiments.analysis.figures.layout import log_axis, spread_points
from planarena.experiments.analysis.figures.style import EXTRA_COLORS, new_figure
from planarena.experiments.analysis.metrics import summarize
from planarena.experiments.analysis.stats import boot_rng

PLANNERS = (
    "react",
    "plan_execute",
    "plan_execute_replan",
    "tot",
    "bfs",
    "dfs",
    "mcts",
    "topo",
)
ENVS = ("code_gen", "pipeline", "rag", "report", "research", "web_nav")


def make_episodes(
    seed: int = 3,
    planners: tuple[str, ...] = PLANNERS,
    envs: tuple[str, ...] = ENVS,
    n_tasks: int = 3,
) -> pd.DataFrame:
    """Synthetic episodes like a default run's: eight planners, six envs, three
    complexities; tokens spanning 500 to 200k (log axes), costs and some failures. topo
    copies plan_execute_replan's outcomes and tokens so their markers coincide."""
    rng = np.random.default_rng(seed)
    rows = []
    scale = {p: 10 ** (2.7 + 2.5 * i / max(len(planners) - 1, 1)) for i, p in enumerate(planners)}
    for env in envs:
        for complexity in ("simple", "medium", "complex"):
            for i in range(n_tasks):
                twin: dict[str, Any] = {}
                for planner in planners:
                    success = bool(rng.random() < 0.6)
                    tokens = int(scale[planner] * rng.uniform(0.7, 1.4))
                    row = {
                        "planner": planner,
                        "env": env,
                        "complexity": complexity,
                        "task_id": f"{env}-{complexity}-{i}",
                        "seed": 0,
                        "trial": 0,
                        "success": success,
                        "progress": 1.0 if success else 0.3,
                        "failure_mode": "none"
                        if success
                        else ("dead_end", "budget_exhausted", "false_success")[i % 3],
                        "tokens_prompt": tokens - 100,
                        "tokens_completion": 100,
                        "tokens_total": tokens,
                        "llm_calls": 4,
                        "tool_calls": 5,
                        "retries": 1,
                        "fallbacks": 0,
                        "replans": 0,
                        "faults_injected": i % 2,
                        "latency_s": float(rng.lognormal(2.5 + 0.3 * (planner == "mcts"), 0.6)),
                        "cost_usd": tokens * 2e-6,
                    }
                    if planner == "plan_execute_replan":
                        twin = row
                    if planner == "topo" and twin:
                        row = {**twin, "planner": "topo"}
                    rows.append(row)
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def episodes() -> pd.DataFrame:
    return make_episodes()


@pytest.fixture(scope="module")
def drawn(episodes: pd.DataFrame) -> dict[tuple[str, float], Figure]:
    """Every figure at both widths, drawn once (``fig.canvas.draw()``) for the checks."""
    summary = summarize(episodes, ("planner", "env", "complexity"))
    figures = {}
    for name in FIGURE_NAMES:
        for _, width in FIGURE_VARIANTS:
            kwargs: dict[str, Any] = {"width": width}
            if name in ("completion", "latency_percentiles", "pareto_tokens"):
                kwargs["summary"] = summary
            fig = BUILDERS[name](episodes, **kwargs)
            fig.canvas.draw()
            figures[(name, width)] = fig
    return figures


ALL = [(n, w) for n in FIGURE_NAMES for _, w in FIGURE_VARIANTS]


# --------------------------------------------------------------------------- the checks


def legend_outside_canvas(fig: Figure) -> list[str]:
    """Legends whose drawn box leaves the figure canvas (a pixel of slack)."""
    renderer = fig.canvas.get_renderer()
    canvas = fig.bbox
    bad = []
    for legend in [*fig.legends, *(a.get_legend() for a in fig.axes if a.get_legend())]:
        box = legend.get_window_extent(renderer)
        if (
            box.x0 < canvas.x0 - 1
            or box.y0 < canvas.y0 - 1
            or box.x1 > canvas.x1 + 1
            or box.y1 > canvas.y1 + 1
        ):
            bad.append(str(box))
    return bad


def texts_outside_canvas(fig: Figure) -> list[str]:
    """Titles, labels and notes whose drawn box leaves the canvas (clipped in the file)."""
    renderer = fig.canvas.get_renderer()
    canvas = fig.bbox
    texts = [*fig.texts, fig._supxlabel, fig._supylabel]
    for ax in fig.axes:
        texts += [ax.title, ax.xaxis.label, ax.yaxis.label, *ax.texts]
        texts += [*ax.get_xticklabels(), *ax.get_yticklabels()]
    bad = []
    for text in texts:
        if text is None or not text.get_visible() or not text.get_text():
            continue
        box = text.get_window_extent(renderer)
        inside_x = canvas.x0 - 1 <= box.x0 and box.x1 <= canvas.x1 + 1
        if not (inside_x and canvas.y0 - 1 <= box.y0 and box.y1 <= canvas.y1 + 1):
            bad.append(text.get_text())
    return bad


def overlapping_tick_labels(fig: Figure) -> list[tuple[str, str]]:
    """Pairs of tick labels of one axis whose drawn text boxes intersect."""
    renderer = fig.canvas.get_renderer()
    pairs = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            labels = [t for t in axis.get_ticklabels() if t.get_visible() and t.get_text()]
            boxes = [t.get_window_extent(renderer) for t in labels]
            for i in range(len(boxes)):
                for j in range(i + 1, len(boxes)):
                    a, b = boxes[i], boxes[j]
                    if a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1:
                        pairs.append((labels[i].get_text(), labels[j].get_text()))
    return pairs


def log_axes_with_few_labels(fig: Figure) -> list[list[str]]:
    """Log axes with fewer than three labelled major ticks in view."""
    bad = []
    for ax in fig.axes:
        for axis, limits in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            if axis.get_scale() != "log":
                continue
            low, high = sorted(limits)
            labels = [
                t.label1.get_text()
                for t in axis.get_major_ticks()
                if t.label1.get_visible()
                and t.label1.get_text()
                and low * (1 - 1e-9) <= t.get_loc() <= high * (1 + 1e-9)
            ]
            if len(labels) < 3:
                bad.append(labels)
    return bad


def test_write_figures_writes_one_file_per_metric_at_two_widths(tmp_path: Path) -> None:
    # a smaller grid than the module's: the files and their bytes, not the layout, are checked
    episodes = make_episodes(planners=PLANNERS[:3], envs=ENVS[:2], n_tasks=2)
    first = write_figures(episodes, tmp_path / "a", processes=1)
    names = sorted(p.name for p in first)
    expected = sorted(
        f"{n}{suffix}.{ext}"
        for n in FIGURE_NAMES
        for suffix, _ in FIGURE_VARIANTS
        for ext in ("pdf", "png")
    )
    assert names == expected
    assert "completion.png" in names and "completion-1col.pdf" in names
    assert not [n for n in names if "+" in n]  # no env-pair parts any more
    second = write_figures(episodes, tmp_path / "b", processes=2)
    for a, b in zip(sorted(first), sorted(second), strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name
    pdf = (tmp_path / "a" / "figures" / "completion.pdf").read_bytes()
    assert b"CreationDate" not in pdf and b"Matplotlib" not in pdf


@pytest.mark.parametrize("processes", [1, 2])
def test_work_meanwhile_runs_once_and_every_figure_is_written_even_when_it_fails(
    tmp_path: Path, processes: int
) -> None:
    """A study's analysis runs while the figures are drawn (write_figures' ``meanwhile``):
    it runs once, in this process, and its failure is raised only once every figure is
    written, each the same bytes as without it."""
    episodes = make_episodes(planners=PLANNERS[:2], envs=ENVS[:1], n_tasks=2)
    alone = write_figures(episodes, tmp_path / "alone", processes=processes)
    pid, calls = os.getpid(), []

    def analysis() -> None:
        calls.append(os.getpid())
        raise RuntimeError("the analysis failed")

    with pytest.raises(RuntimeError, match="analysis failed"):
        write_figures(episodes, tmp_path / "with", processes=processes, meanwhile=analysis)
    assert calls == [pid]
    for path in alone:
        twin = tmp_path / "with" / "figures" / path.name
        assert twin.read_bytes() == path.read_bytes(), path.name


@pytest.mark.parametrize(("name", "width"), ALL)
def test_sizes_are_column_widths_and_a_page_tall_at_most(
    drawn: dict[tuple[str, float], Figure], name: str, width: float
) -> None:
    w, h = drawn[(name, width)].get_size_inches()
    # the paper sizes as numbers, not the constants (a changed constant must fail here)
    assert w == pytest.approx(width) and round(width, 6) in (3.4, 7.0)
    assert sorted(round(v, 6) for _, v in FIGURE_VARIANTS) == [3.4, 7.0]
    assert h <= PAGE_HEIGHT_IN + 1e-9


def test_heights_grow_with_the_envs() -> None:
    few = BUILDERS["completion"](make_episodes(envs=ENVS[:2]))
    many = BUILDERS["completion"](make_episodes(envs=ENVS))
    assert few.get_figheight() < many.get_figheight() <= PAGE_HEIGHT_IN


@pytest.mark.parametrize(("name", "width"), ALL)
def test_legend_lies_inside_the_canvas(
    drawn: dict[tuple[str, float], Figure], name: str, width: float
) -> None:
    fig = drawn[(name, width)]
    assert fig.legends, "every figure has a legend"
    assert legend_outside_canvas(fig) == []


@pytest.mark.parametrize(("name", "width"), ALL)
def test_no_text_is_cut_by_the_canvas_edge(
    drawn: dict[tuple[str, float], Figure], name: str, width: float
) -> None:
    assert texts_outside_canvas(drawn[(name, width)]) == []


@pytest.mark.parametrize(("name", "width"), ALL)
def test_tick_labels_of_an_axis_never_overlap(
    drawn: dict[tuple[str, float], Figure], name: str, width: float
) -> None:
    assert overlapping_tick_labels(drawn[(name, width)]) == []


@pytest.mark.parametrize(("name", "width"), ALL)
def test_every_log_axis_has_three_labelled_ticks(
    drawn: dict[tuple[str, float], Figure], name: str, width: float
) -> None:
    assert log_axes_with_few_labels(drawn[(name, width)]) == []


def test_the_runs_with_wide_spans_do_use_log_axes(
    drawn: dict[tuple[str, float], Figure],
) -> None:
    for name in ("pareto_tokens", "cost_per_success"):
        fig = drawn[(name, DOUBLE_COLUMN_IN)]
        assert any(ax.get_xscale() == "log" for ax in fig.axes), name


@pytest.mark.parametrize("span", [(1000.0, 1800.0), (0.0031, 0.0045), (50.0, 2e6), (7.0, 7.0)])
def test_log_axis_ticks_at_least_three_even_on_a_narrow_span(span: tuple[float, float]) -> None:
    fig = new_figure(1.8, 1.0)  # a panel about as wide as a two-column grid's
    ax = fig.add_subplot()
    ticks = log_axis(ax, *span, length_in=ax.get_position().width * 1.8)
    fig.canvas.draw()
    assert len(ticks) >= 3
    assert log_axes_with_few_labels(fig) == []
    assert overlapping_tick_labels(fig) == []


def test_every_planner_has_a_distinct_marker_and_line_style_pair() -> None:
    names = [*PLANNERS, *(f"custom_{i}" for i in range(30))]
    styles = planner_styles(names)
    pairs = [(s.marker, str(s.linestyle)) for s in styles.values()]
    assert len(set(pairs)) == len(names)
    assert len({styles[p].marker for p in PLANNERS}) == len(PLANNERS)
    assert len({str(styles[p].linestyle) for p in PLANNERS}) == len(PLANNERS)


def _drawn_styles(fig: Figure) -> dict[str, tuple[str, str]]:
    """Legend entries: label -> (marker, line style) as drawn in the legend."""
    out = {}
    for legend in fig.legends:
        for handle, text in zip(legend.legend_handles, legend.get_texts(), strict=True):
            if hasattr(handle, "get_marker"):
                out[text.get_text()] = (str(handle.get_marker()), str(handle.get_linestyle()))
    return out


@pytest.mark.parametrize("name", [n for n in FIGURE_NAMES if n != "failure_modes"])
def test_every_figure_draws_each_planner_with_its_one_style(
    drawn: dict[tuple[str, float], Figure], name: str
) -> None:
    styles = planner_styles(PLANNERS)
    for width in (DOUBLE_COLUMN_IN, SINGLE_COLUMN_IN):
        legend = _drawn_styles(drawn[(name, width)])
        assert set(PLANNERS) <= set(legend)
        seen = {legend[p] for p in PLANNERS}
        assert len(seen) == len(PLANNERS), "two planners look alike in greyscale"
        for p in PLANNERS:
            assert legend[p][0] == styles[p].marker


def test_latency_rows_tell_p50_from_p99_and_planners_apart(
    drawn: dict[tuple[str, float], Figure],
) -> None:
    fig = drawn[("latency_percentiles", DOUBLE_COLUMN_IN)]
    labels = set(_drawn_styles(fig))
    assert {"P50 (filled)", "P99 (open)"} <= labels
    ax = fig.axes[0]
    marks = [line for line in ax.get_lines() if line.get_marker() not in ("None", "|", ">")]
    # each planner: a filled and an open marker of its own shape
    for planner, style in planner_styles(PLANNERS).items():
        mine = [m for m in marks if m.get_marker() == style.marker]
        faces = {str(m.get_markerfacecolor()) for m in mine}
        assert len(mine) == 2 and "white" in faces, planner


def test_failure_shares_carry_how_many_failures_they_are_of() -> None:
    """One failed episode draws a full bar, as eight do: the count printed beside each bar
    is the planner's failed episodes in that cell, so the two cannot be mistaken."""
    df = make_episodes(planners=("a", "b", "c"), envs=("report",), n_tasks=9)
    df = df[df["complexity"] == "simple"].reset_index(drop=True)
    task = df["task_id"].str.rsplit("-", n=1).str[1].astype(int)
    failed = ((df["planner"] == "a") & (task == 0)) | ((df["planner"] == "b") & (task < 8))
    df["success"] = ~failed
    df["failure_mode"] = np.where(failed, "dead_end", "none")
    fig = failure_modes_figure(df, planner_order=["a", "b", "c"], width=DOUBLE_COLUMN_IN)
    (ax,) = [a for a in fig.axes if a.texts]
    by_row = {round(t.get_position()[1]): t.get_text() for t in ax.texts}
    assert by_row == {0: "1", 1: "8", 2: "none failed"}


def test_no_tick_reads_0_99_and_no_failure_bar_goes_below_zero(
    drawn: dict[tuple[str, float], Figure],
) -> None:
    for fig in drawn.values():
        for ax in fig.axes:
            texts = [t.get_text() for t in [*ax.get_xticklabels(), *ax.get_yticklabels()]]
            assert "0.99" not in texts
    for width in (DOUBLE_COLUMN_IN, SINGLE_COLUMN_IN):
        fig = drawn[("failure_modes", width)]
        for ax in fig.axes:
            assert ax.get_xlim()[0] >= 0.0
            for patch in ax.patches:
                assert patch.get_path().vertices[:, 0].min() >= -1e-12
            # each bar's count of failed episodes stands right of it (x > 1), never on a bar
            counts = [t for t in ax.texts if t.get_text().strip().isdigit()]
            assert all(t.get_position()[0] > 1.0 for t in counts)
            assert ax.get_xlim()[1] > 1.0  # room for them inside the panel
            for label in ax.get_xticklabels() + ax.get_yticklabels():
                assert label.get_rotation() == 0.0


def test_one_column_figures_say_that_complexities_are_pooled(
    drawn: dict[tuple[str, float], Figure],
) -> None:
    for name in FIGURE_NAMES:
        narrow, wide = drawn[(name, SINGLE_COLUMN_IN)], drawn[(name, DOUBLE_COLUMN_IN)]
        assert "complexities pooled" in narrow._supxlabel.get_text()
        assert "pooled" not in wide._supxlabel.get_text()
        assert len(wide.axes) == 3 * len(ENVS) and len(narrow.axes) == len(ENVS)


def test_completion_intervals_are_the_summarys(
    drawn: dict[tuple[str, float], Figure], episodes: pd.DataFrame
) -> None:
    summary = summarize(episodes, ("planner", "env", "complexity"))
    fig = drawn[("completion", DOUBLE_COLUMN_IN)]
    ax = fig.axes[0]  # code_gen, simple
    row = summary[(summary["env"] == "code_gen") & (summary["complexity"] == "simple")]
    spans = sorted(
        tuple(np.round(line.get_xdata(), 9))
        for line in ax.get_lines()
        if len(line.get_xdata()) == 2 and line.get_linestyle() != "None"
    )
    expected = sorted(
        (round(lo, 9), round(hi, 9))
        for lo, hi in zip(row["completion_ci_low"], row["completion_ci_high"], strict=True)
        if hi > lo
    )
    assert [s for s in spans if s[1] > s[0]] == expected


def test_pareto_points_have_intervals_on_both_axes_and_none_hides_another(
    drawn: dict[tuple[str, float], Figure],
) -> None:
    fig = drawn[("pareto_tokens", DOUBLE_COLUMN_IN)]
    for ax in fig.axes:
        bars = [line for line in ax.get_lines() if len(line.get_xdata()) == 2]
        across = [b for b in bars if b.get_ydata()[0] == b.get_ydata()[1]]
        up = [b for b in bars if b.get_xdata()[0] == b.get_xdata()[1]]
        assert across and up
        marks = [
            line
            for line in ax.get_lines()
            if len(line.get_xdata()) == 1 and line.get_marker() not in (None, "None", "")
        ]
        assert len(marks) == len(PLANNERS)
        at = np.array([ax.transData.transform((m.get_xdata()[0], m.get_ydata()[0])) for m in marks])
        size_px = 5.0 / 72.0 * fig.dpi
        for i in range(len(at)):
            for j in range(i + 1, len(at)):
                assert np.hypot(*(at[i] - at[j])) >= size_px * 0.99


def test_spread_points_moves_only_colliding_markers() -> None:
    x = np.array([1.0, 1.0, 1.0, 3.0])
    y = np.array([0.5, 0.5, 0.5, 0.5])
    sx, sy = spread_points(x, y, 0.05)
    assert (sx[3], sy[3]) == (3.0, 0.5)
    for i in range(3):
        for j in range(i + 1, 3):
            assert math.hypot(sx[i] - sx[j], sy[i] - sy[j]) >= 0.1 - 1e-12
        assert math.hypot(sx[i] - 1.0, sy[i] - 0.5) <= 0.1


def test_cost_per_success_interval_is_a_task_bootstrap_open_when_successes_are_rare() -> None:
    cost = np.full(10, 0.01)
    tasks = np.arange(10)
    always = cost_per_success_interval(cost, np.ones(10, bool), tasks, rng=boot_rng(0, "a"))
    assert always == pytest.approx((0.01, 0.01, 0.01))
    once = np.zeros(10, bool)
    once[3] = True
    est, low, high = cost_per_success_interval(cost, once, tasks, rng=boot_rng(0, "b"))
    assert est == pytest.approx(0.1) and low <= est and high == math.inf
    none = cost_per_success_interval(cost, np.zeros(10, bool), tasks, rng=boot_rng(0, "c"))
    assert all(math.isnan(v) for v in none)


def test_known_planners_keep_fixed_colours_and_no_faint_yellow() -> None:
    assert planner_colors(["topo", "react"]) == {
        "topo": KNOWN_PLANNER_COLORS["topo"],
        "react": KNOWN_PLANNER_COLORS["react"],
    }
    new = planner_colors(["zeta", "alpha", "react"])
    assert new["react"] == KNOWN_PLANNER_COLORS["react"]
    assert new["alpha"] != new["zeta"]
    assert OKABE_ITO[7] not in new.values() and set(new.values()) <= {
        *OKABE_ITO,
        *EXTRA_COLORS,
    }


def test_pareto_front_keeps_only_non_dominated_points() -> None:
    pts = [(100.0, 0.5), (200.0, 0.9), (150.0, 0.4), (300.0, 0.9), (50.0, 0.1)]
    assert pareto_front(pts) == [4, 0, 1]
    assert pareto_front([(1.0, 1.0), (1.0, 1.0)]) == [0, 1]


def test_failure_figure_handles_runs_without_failures_and_empty_input_fails() -> None:
    df = make_episodes(envs=("rag",))
    df["success"] = True
    df["failure_mode"] = "none"
    fig = BUILDERS["failure_modes"](df)
    fig.canvas.draw()
    assert any("none failed" in t.get_text() for ax in fig.axes for t in ax.texts)
    with pytest.raises(ValueError):
        BUILDERS["failure_modes"](df.iloc[0:0])


# --------------------------------------------------------------------------- sabotage aids
# The checks above are plain functions so that each can be shown to fail on a broken figure.


def _sabotaged(build: Callable[[Figure], None]) -> Figure:
    fig = BUILDERS["completion"](make_episodes(envs=("rag",)), width=DOUBLE_COLUMN_IN)
    build(fig)
    fig.canvas.draw()
    return fig


def test_the_checks_catch_the_breaks_they_are_for() -> None:
    def outside(fig: Figure) -> None:
        fig.legends[0].set_bbox_to_anchor((1.3, 1.0), transform=fig.transFigure)

    assert legend_outside_canvas(_sabotaged(outside))

    def crowded(fig: Figure) -> None:
        ticks = np.linspace(0, 1, 40)
        fig.axes[0].set_xticks(ticks, [f"{t:.2f}" for t in ticks])

    assert overlapping_tick_labels(_sabotaged(crowded))

    def one_tick(fig: Figure) -> None:
        ax = fig.axes[0]
        ax.set_xscale("log")
        ax.set_xlim(2000, 30000)
        ax.set_xticks([10000])

    assert log_axes_with_few_labels(_sabotaged(one_tick))

    def long_label(fig: Figure) -> None:
        fig.supxlabel("a label far too long for the figure " * 4)

    assert texts_outside_canvas(_sabotaged(long_label))


def test_every_shipped_planner_looks_the_same_in_every_figure() -> None:
    """A shipped planner's colour, marker and line style are fixed, not given by which other
    planners share the figure; the shipped set's (marker, line style) pairs are all distinct
    and no unknown planner can take a shipped marker."""
    from planarena.experiments.analysis.figures.style import (
        EXTRA_MARKERS,
        KNOWN_PLANNER_COLORS,
        KNOWN_PLANNER_LINESTYLES,
        KNOWN_PLANNER_MARKERS,
        planner_styles,
    )

    shipped = sorted(
        p.stem for p in (Path(__file__).parents[1] / "configs" / "planner").glob("*.yaml")
    )
    for table in (KNOWN_PLANNER_COLORS, KNOWN_PLANNER_MARKERS, KNOWN_PLANNER_LINESTYLES):
        assert set(shipped) <= set(table)
    alone = {p: planner_styles([p])[p] for p in shipped}
    assert planner_styles(shipped) == alone
    pairs = {(s.marker, str(s.linestyle)) for s in alone.values()}
    assert len(pairs) == len(shipped)
    assert not set(EXTRA_MARKERS) & set(KNOWN_PLANNER_MARKERS.values())


def test_a_one_planner_one_env_run_draws_every_figure_with_room_for_its_labels() -> None:
    """The smallest grid (one row, one planner) still has room for its legend, ticks and a
    two-line x label: no layout collapse, nothing cut by the canvas."""
    import warnings

    small = make_episodes(planners=("react",), envs=("report",), n_tasks=3)
    summary = summarize(small, ("planner", "env", "complexity"))
    for name in FIGURE_NAMES:
        for _, width in FIGURE_VARIANTS:
            kwargs: dict[str, Any] = {"width": width}
            if name in ("completion", "latency_percentiles", "pareto_tokens"):
                kwargs["summary"] = summary
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # "axes sizes collapsed to zero"
                fig = BUILDERS[name](small, **kwargs)
                fig.set_layout_engine("constrained")
                fig.canvas.draw()
            assert texts_outside_canvas(fig) == [], (name, width)
