"""analysis.figures: files, colours, Pareto front, and byte-identical output."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from planarena.experiments.analysis.figures import (
    FIGURE_NAMES,
    KNOWN_PLANNER_COLORS,
    OKABE_ITO,
    completion_figure,
    failure_modes_figure,
    latency_cdf_figure,
    pareto_figure,
    pareto_front,
    planner_colors,
    time_to_success_figure,
    write_figures,
)
from planarena.experiments.analysis.figures.style import EXTRA_COLORS


def make_episodes(seed: int = 3) -> pd.DataFrame:
    """Synthetic episodes: a known and an unknown planner, two complexities, some failures."""
    rng = np.random.default_rng(seed)
    rows = []
    for planner in ("react", "zeta_custom", "plan_execute"):
        for complexity in ("complex", "simple"):
            for i in range(6):
                success = bool(rng.random() < 0.6)
                rows.append(
                    {
                        "planner": planner,
                        "env": "report",
                        "complexity": complexity,
                        "task_id": f"t{i}",
                        "seed": 0,
                        "trial": 0,
                        "success": success,
                        "progress": 1.0 if success else 0.3,
                        "failure_mode": "none"
                        if success
                        else ("dead_end", "budget_exhausted", "false_success")[i % 3],
                        "tokens_prompt": int(rng.integers(500, 5000)),
                        "tokens_completion": 100,
                        "tokens_total": 0,
                        "llm_calls": 4,
                        "tool_calls": 5,
                        "retries": 1,
                        "fallbacks": 0,
                        "replans": 0,
                        "faults_injected": i % 2,
                        "latency_s": float(rng.lognormal(2.5, 0.5)),
                        "cost_usd": 0.01,
                    }
                )
    df = pd.DataFrame(rows)
    df["tokens_total"] = df["tokens_prompt"] + df["tokens_completion"]
    return df


def test_write_figures_is_byte_identical_and_timestamp_free(tmp_path: Path) -> None:
    """Two renders of the same records: PDF+PNG of each figure, identical bytes, no dates."""
    df = make_episodes()
    first = write_figures(df, tmp_path / "a", seed=0)
    second = write_figures(df.copy(), tmp_path / "b", seed=0)
    expected = [
        tmp_path / "a" / "figures" / f"{n}.{e}" for n in FIGURE_NAMES for e in ("pdf", "png")
    ]
    assert first == expected
    for a, b in zip(first, second, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name
    for pdf in [p for p in first if p.suffix == ".pdf"]:
        data = pdf.read_bytes()
        assert data.startswith(b"%PDF")
        for key in (b"/CreationDate", b"/ModDate", b"/Producer", b"/Creator"):
            assert key not in data, (pdf.name, key)
        assert b"/Subtype /Type3" not in data  # TrueType (Type 42) fonts, as publishers want
    for png in [p for p in first if p.suffix == ".png"]:
        data = png.read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n")
        assert b"tIME" not in data and b"Software" not in data


def test_known_planners_keep_fixed_colours_and_unknown_ones_take_free_colours() -> None:
    colors = planner_colors(["zeta", "react", "alpha", "mcts"])
    assert colors["react"] == KNOWN_PLANNER_COLORS["react"] == OKABE_ITO[0]
    assert colors["mcts"] == KNOWN_PLANNER_COLORS["mcts"]
    # unknown planners: sorted by name, next free colour (Okabe-Ito is taken by known ones)
    assert colors["alpha"] == EXTRA_COLORS[0] and colors["zeta"] == EXTRA_COLORS[1]
    # stable: the mapping of a planner does not depend on order or on which others exist
    assert planner_colors(["react"])["react"] == colors["react"]
    assert planner_colors(["mcts", "zeta", "alpha"]) == {
        "mcts": colors["mcts"],
        "zeta": colors["zeta"],
        "alpha": colors["alpha"],
    }
    assert len(set(planner_colors([*KNOWN_PLANNER_COLORS, "x", "y"]).values())) == 10


def _legend_colors(fig: object) -> dict[str, str]:
    from matplotlib.colors import to_hex

    out = {}
    for legend in fig.legends:  # type: ignore[attr-defined]
        for handle, text in zip(legend.legend_handles, legend.get_texts(), strict=True):
            out[text.get_text()] = to_hex(handle.get_color())
    return out


def test_each_planner_has_the_same_colour_in_every_figure() -> None:
    df = make_episodes()
    expected = planner_colors(list(dict.fromkeys(df["planner"])))
    for build in (completion_figure, pareto_figure, latency_cdf_figure):
        seen = _legend_colors(build(df))
        assert {p: seen[p] for p in expected} == {p: c.lower() for p, c in expected.items()}
    # failure bars: the strip under each bar is the planner's colour
    fig = failure_modes_figure(df)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    from matplotlib.colors import to_hex
    from matplotlib.patches import Rectangle

    # the failure-mode segments are one patch per mode; the strips are bars (rectangles)
    strips = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_y() < 0]
    assert [to_hex(p.get_facecolor()) for p in strips] == [expected[p].lower() for p in labels]


def test_figures_use_paper_sizes_and_fonts() -> None:
    df = make_episodes()
    fig = completion_figure(df)
    assert fig.get_figwidth() == pytest.approx(3.4)
    sizes = {t.get_fontsize() for t in fig.axes[0].get_xticklabels()}
    assert all(7 <= s <= 9 for s in sizes)
    two_envs = pd.concat([df, df.assign(env="rag")], ignore_index=True)
    assert completion_figure(two_envs).get_figwidth() == pytest.approx(7.0)


def test_pareto_front_keeps_only_non_dominated_points() -> None:
    points = [(100.0, 0.5), (50.0, 0.5), (200.0, 0.9), (300.0, 0.8), (60.0, 0.7), (50.0, 0.4)]
    assert pareto_front(points) == [1, 4, 2]
    assert pareto_front([]) == []


def test_failure_figure_handles_runs_without_failures_and_empty_input_fails() -> None:
    df = make_episodes().assign(success=True, failure_mode="none")
    fig = failure_modes_figure(df)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "no failed episodes" in texts and texts.count("n=0") == 3
    with pytest.raises(ValueError, match="no episodes"):
        failure_modes_figure(df.iloc[0:0])
    # a job with no measured episode (its cost cap cut the first) draws no figure
    assert write_figures(df.iloc[0:0], Path("unused")) == []
    assert not Path("unused").exists()


def _outside(fig: object) -> list[str]:
    """Artists whose window extent leaves the canvas (after the layout engine ran)."""
    from matplotlib.legend import Legend
    from matplotlib.text import Text

    fig.canvas.draw()  # type: ignore[attr-defined]
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    canvas = fig.bbox  # type: ignore[attr-defined]
    bad = []
    artists = [*fig.legends, *fig.texts]  # type: ignore[attr-defined]
    artists += [t for ax in fig.axes for t in ax.texts]  # type: ignore[attr-defined]
    boxes = [(a, a.get_window_extent(renderer)) for a in artists]
    # an axes' tight bbox covers everything it draws: tick labels, title, axis labels
    boxes += [(ax, ax.get_tightbbox(renderer)) for ax in fig.axes]  # type: ignore[attr-defined]
    for artist, box in boxes:
        if isinstance(artist, Text) and not artist.get_text():
            continue
        if box.width == 0 and box.height == 0:
            continue
        tol = 1.0
        if (
            box.x0 < canvas.x0 - tol
            or box.y0 < canvas.y0 - tol
            or box.x1 > canvas.x1 + tol
            or box.y1 > canvas.y1 + tol
        ):
            kind = "legend" if isinstance(artist, Legend) else type(artist).__name__
            bad.append(f"{kind}: {box} outside {canvas}")
    return bad


def eight_planner_episodes() -> pd.DataFrame:
    base = make_episodes()
    frames = [
        base[base.planner == "react"].assign(planner=name)
        for name in ("react", "plan_execute", "plan_execute_replan", "tot", "bfs", "dfs")
    ]
    frames += [base[base.planner == "react"].assign(planner=n) for n in ("mcts", "topo")]
    df = pd.concat(frames, ignore_index=True)
    modes = list(FAILURE_MODES_ALL)
    df["failure_mode"] = [
        "none" if s else modes[i % len(modes)] for i, s in enumerate(df["success"])
    ]
    return df


FAILURE_MODES_ALL = (
    "dead_end",
    "gave_up_after_tool_failure",
    "precondition_unverified",
    "plan_logic_error",
    "hallucinated_tool_call",
    "malformed_output",
    "budget_exhausted",
    "false_success",
    "correctly_reported_unreachable",
)


@pytest.mark.parametrize("width", [3.4, 7.0])
def test_no_artist_leaves_the_canvas_at_column_widths(width: float) -> None:
    from planarena.experiments.analysis.figures import figure_builders

    df = eight_planner_episodes()
    two_envs = pd.concat([df, df.assign(env="rag")], ignore_index=True)
    for frame in (df, two_envs):
        for name, fig in zip(FIGURE_NAMES, figure_builders(frame, width=width), strict=True):
            assert fig.get_figwidth() == pytest.approx(width)
            assert _outside(fig) == [], name


def test_every_planner_has_its_own_marker_and_no_faint_yellow() -> None:
    from matplotlib.colors import to_rgb
    from planarena.experiments.analysis.figures import planner_linestyles, planner_markers

    planners = [*KNOWN_PLANNER_COLORS, "custom_a", "custom_b"]
    markers = planner_markers(planners)
    assert len(set(markers.values())) == len(planners)
    styles = planner_linestyles(list(KNOWN_PLANNER_COLORS))
    assert len({str(v) for v in styles.values()}) == len(KNOWN_PLANNER_COLORS)
    for color in planner_colors(planners).values():
        r, g, b = to_rgb(color)
        luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b
        assert luminance < 0.75, color  # readable on white (Okabe-Ito yellow is 0.85)
    assert "#F0E442" not in planner_colors(planners).values()


def test_pareto_and_latency_have_one_panel_per_complexity() -> None:
    df = make_episodes()
    for build in (pareto_figure, latency_cdf_figure):
        fig = build(df)
        titles = [ax.get_title() for ax in fig.axes]
        assert titles == ["simple", "complex"]


def test_latency_percentile_markers_do_not_overlap() -> None:
    """P50/P99 markers sit on one row per planner under the CDF, never on top of each other."""
    from collections import Counter

    from matplotlib.collections import PathCollection

    df = make_episodes()
    fig = latency_cdf_figure(df)
    for ax in fig.axes:
        # the markers are one collection per panel: a P50 and a P99 on each planner's row
        marks = [c for c in ax.collections if isinstance(c, PathCollection)]
        ys = [round(float(y), 6) for c in marks for _, y in c.get_offsets()]
        rows = Counter(ys)
        assert len(rows) == df["planner"].nunique()
        assert all(y < 0 for y in rows) and set(rows.values()) == {2}


def test_pareto_front_is_computed_per_complexity_panel() -> None:
    df = make_episodes()
    fig = pareto_figure(df)
    for ax in fig.axes:
        # points are one collection per panel, each with its own edge: front points outlined
        points = [
            (tuple(xy), edge[3] > 0)
            for c in ax.collections
            for xy, edge in zip(c.get_offsets(), c.get_edgecolor(), strict=True)
        ]
        front = set(pareto_front([xy for xy, _ in points]))
        assert front, ax.get_title()  # every panel has its own front
        assert [i in front for i in range(len(points))] == [edged for _, edged in points]


def test_failure_segments_stack_each_planners_shares_to_one() -> None:
    """Each mode is one patch of rectangles; per planner the segments stack from 0 to 1."""
    from itertools import pairwise

    from matplotlib.patches import PathPatch

    df = eight_planner_episodes()
    fig = failure_modes_figure(df)
    ax = fig.axes[0]
    heights: dict[float, list[tuple[float, float]]] = {}
    for patch in ax.patches:
        if not isinstance(patch, PathPatch):
            continue
        corners = patch.get_path().vertices.reshape(-1, 5, 2)
        for box in corners:
            (left, low), (right, high) = box.min(axis=0), box.max(axis=0)
            assert right - left == pytest.approx(0.7)
            heights.setdefault(round((left + right) / 2, 6), []).append((low, high))
    assert sorted(heights) == list(range(df["planner"].nunique()))
    for spans in heights.values():
        spans.sort()
        assert spans[0][0] == pytest.approx(0.0) and spans[-1][1] == pytest.approx(1.0)
        assert all(a[1] == pytest.approx(b[0]) for a, b in pairwise(spans))


def test_completion_error_bars_span_the_summary_intervals() -> None:
    """The error bars (one collection per panel) run from each cell's CI low to its CI high,
    one bar and two caps per planner and complexity."""
    from matplotlib.collections import LineCollection, PathCollection
    from planarena.experiments.analysis.figures.layout import _summary

    df = make_episodes()
    summary = _summary(df, 0, None)
    fig = completion_figure(df, summary=summary)
    ax = fig.axes[0]
    (bars,) = [c for c in ax.collections if isinstance(c, LineCollection)]
    spans = sorted((round(s[0][1], 9), round(s[1][1], 9)) for s in bars.get_segments())
    expected = sorted(
        (round(lo, 9), round(hi, 9))
        for lo, hi in zip(summary["completion_ci_low"], summary["completion_ci_high"], strict=True)
    )
    assert spans == expected
    (caps,) = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert len(caps.get_offsets()) == 2 * len(expected)


def long_env_episodes() -> pd.DataFrame:
    """Three envs with long names and all three complexities: the widest panel titles
    ("research: complex") in the tightest grids (three panels a row at single width)."""
    base = make_episodes()
    base = pd.concat(
        [base, base[base["complexity"] == "simple"].assign(complexity="medium")],
        ignore_index=True,
    )
    envs = ("research", "web_nav", "code_gen")
    return pd.concat([base.assign(env=env) for env in envs], ignore_index=True)


def _title_problems(fig: Figure) -> list[str]:
    """Panel titles that leave the figure, leave their panel's column, or overlap another
    title of the same row, measured on the drawn figure."""
    from itertools import pairwise

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    canvas = fig.bbox
    rows: dict[float, list[Axes]] = {}
    for ax in fig.axes:  # spare (hidden) panels too: they still take a column
        rows.setdefault(round(ax.get_window_extent(renderer).y1, 1), []).append(ax)
    bad = []
    tol = 0.5
    for row in rows.values():
        row.sort(key=lambda ax: ax.get_window_extent(renderer).x0)
        places = [ax.get_window_extent(renderer) for ax in row]
        # a column runs from the middle of the gap to the left neighbour to the middle of
        # the gap to the right one (the figure's edge at either end)
        edges = [canvas.x0, *((a.x1 + b.x0) / 2 for a, b in pairwise(places)), canvas.x1]
        titled = []
        for ax, (left, right) in zip(row, pairwise(edges), strict=True):
            text = ax.get_title()
            if not text:
                continue
            box = ax.title.get_window_extent(renderer)
            titled.append((text, box))
            if box.x0 < canvas.x0 - tol or box.x1 > canvas.x1 + tol or box.y1 > canvas.y1 + tol:
                bad.append(f"{text!r} leaves the figure: {box} outside {canvas}")
            if box.x0 < left - tol or box.x1 > right + tol:
                bad.append(f"{text!r} leaves its column [{left:.1f}, {right:.1f}]: {box}")
        for (ta, a), (tb, b) in pairwise(titled):
            if a.x1 > b.x0 - tol:
                bad.append(f"{ta!r} overlaps {tb!r}: {a} / {b}")
    return bad


@pytest.mark.parametrize("width", [3.4, 7.0])
def test_panel_titles_fit_their_columns_with_long_env_names(width: float) -> None:
    """Every figure at single and double width, three long-named envs: no panel title leaves
    the figure or its column, and no two titles of a row overlap. At double width they fit
    as they are, and keep their one line at the paper's title size."""
    from planarena.experiments.analysis.figures import RC, figure_builders

    df = long_env_episodes()
    for name, fig in zip(FIGURE_NAMES, figure_builders(df, width=width), strict=True):
        titles = [ax.title for ax in fig.axes if ax.get_title()]
        assert titles, name
        assert _title_problems(fig) == [], name
        if width == 7.0:
            assert all("\n" not in t.get_text() for t in titles), name
            assert {t.get_fontsize() for t in titles} == {RC["axes.titlesize"]}, name


def test_figure_png_is_the_png_save_figure_writes(tmp_path: Path) -> None:
    """A notebook's PNG is drawn as the saved one (layout solved once, then no engine): the
    same bytes at the default resolution, from a new figure or one drawn before, and no
    metadata."""
    import io

    import PIL.Image
    from planarena.experiments.analysis.figures import figure_png, save_figure

    df = long_env_episodes()
    fig = pareto_figure(df, width=3.4)
    saved = save_figure(fig, tmp_path / "pareto")[1].read_bytes()
    assert figure_png(pareto_figure(df, width=3.4)) == saved
    # the same figure again: its layout is solved afresh, not from the last solve
    assert figure_png(fig) == saved
    assert figure_png(fig) == saved
    assert fig.get_layout_engine() is not None  # restored for later draws
    for chunk in (b"tIME", b"tEXt", b"iTXt", b"zTXt"):
        assert chunk not in saved, chunk
    small = PIL.Image.open(io.BytesIO(figure_png(fig, dpi=100)))
    assert small.size == (340, round(fig.get_figheight() * 100))


@pytest.mark.parametrize("width", [3.4, 7.0])
def test_point_markers_stay_inside_their_panels(width: float) -> None:
    """Points at the ends of a panel's data (fewest or most tokens, the slowest P99, the end
    of the last curve) are drawn whole inside the panel, clear of its sides' spines, in the
    narrow three-panel rows at single width too (the rc 5% margin put them under the spine
    there). Measured from each collection's own marker paths, sizes and edges."""
    from matplotlib.collections import PathCollection

    df = long_env_episodes()
    for build in (pareto_figure, latency_cdf_figure, time_to_success_figure):
        fig = build(df, width=width)
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        px_per_pt = fig.dpi / 72.0
        for ax in fig.axes:
            panel = ax.get_window_extent(renderer)
            spine = ax.spines["left"].get_linewidth() / 2 * px_per_pt  # inside the panel
            for points in [c for c in ax.collections if isinstance(c, PathCollection)]:
                xs = ax.transData.transform(points.get_offsets())[:, 0]
                paths = points.get_paths()
                sizes = np.broadcast_to(points.get_sizes(), len(xs))
                edges = np.broadcast_to(points.get_linewidths(), len(xs))
                for i, x in enumerate(xs):
                    box = paths[i % len(paths)].get_extents()
                    reach = max(abs(box.x0), abs(box.x1)) * np.sqrt(sizes[i]) + edges[i] / 2
                    half = reach * px_per_pt
                    where = f"{build.__name__} {ax.get_title()!r} point {i}"
                    assert x - half >= panel.x0 + spine, where
                    assert x + half <= panel.x1 - spine, where
    # a completion rate of 0 or 1 sits on the y limits: its marker is drawn whole
    fig = pareto_figure(df, width=width)
    assert all(not c.get_clip_on() for ax in fig.axes for c in ax.collections)


def six_env_episodes() -> pd.DataFrame:
    """The default job's six env families, three complexities, eight planners."""
    base = eight_planner_episodes()
    base = pd.concat(
        [base, base[base["complexity"] == "simple"].assign(complexity="medium")],
        ignore_index=True,
    )
    envs = ("code_gen", "pipeline", "rag", "report", "research", "web_nav")
    return pd.concat([base.assign(env=env) for env in envs], ignore_index=True)


def test_every_saved_figure_fits_a_page_and_its_parts_hold_each_env_once(
    tmp_path: Path,
) -> None:
    """Six envs made the one-row-per-env figures 13-18 in tall, twice a paper page; each is
    now saved in parts of whole rows, every part a page or less, together every env once."""
    from PIL import Image
    from planarena.experiments.analysis.figures import GRID_FIGURES, PAGE_HEIGHT_IN, page_parts

    df = six_env_episodes()
    envs = sorted(df["env"].unique())
    paths = write_figures(df, tmp_path, seed=0, processes=1)
    for png in [p for p in paths if p.suffix == ".png"]:
        with Image.open(png) as im:
            height_in = im.size[1] / im.info["dpi"][1]
        assert height_in <= PAGE_HEIGHT_IN + 0.01, (png.name, height_in)
    for name in GRID_FIGURES:
        parts = page_parts(name, df)
        assert len(parts) > 1 and [e for part in parts for e in part] == envs, (name, parts)
        assert max(map(len, parts)) - min(map(len, parts)) <= 1, parts
        stems = sorted(p.stem for p in paths if p.stem.startswith(f"{name}-"))
        assert stems == sorted(f"{name}-{'+'.join(part)}" for part in parts for _ in (0, 1))
    # figures that wrap one panel per env stay whole
    for name in ("completion_vs_complexity", "failure_modes"):
        assert (tmp_path / "figures" / f"{name}.pdf") in paths


def test_a_part_that_draws_one_env_still_names_it_in_its_titles() -> None:
    """The file name says which env; the panels must too, once a figure is cut out of a
    run that holds several (a run of one env needs no env in its titles)."""
    df = six_env_episodes()
    for fig in (
        pareto_figure(df, envs=["rag"]),
        latency_cdf_figure(df, envs=["rag"]),
        time_to_success_figure(df, envs=["rag"]),
    ):
        titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
        assert titles == ["rag: simple", "rag: medium", "rag: complex"], titles
    one = df[df["env"] == "rag"]
    titles = [ax.get_title() for ax in pareto_figure(one).axes if ax.get_title()]
    assert titles == ["simple", "medium", "complex"], titles
    with pytest.raises(ValueError, match="envs to draw"):
        pareto_figure(df, envs=["nope"])
