"""``planarena-trace``: draw one episode of a run for a person to read.

From ``traces.jsonl`` (one trace per episode, written by
:mod:`planarena.experiments.run.episode`; the events are described in ``docs/records.md``), it
renders:

* the **plan DAG**: steps of the ``plan`` event and of every ``replan`` event (square nodes),
  edges from ``depends_on``, dashed edges from the failed step that triggered a replan, node
  colour = outcome of the step's last ``step`` event (ok / failed / never run);
* a **timeline** (Gantt-like, simulated seconds): one bar per tool call from ``tool_calls``
  (``t0``/``t1``), overlapping calls on separate lanes so parallelism is visible, failed calls
  and injected faults hatched in other colours; LLM calls (``llm`` events) on their own lane;
  retries, fallbacks and (re)plans as markers;
* the **search tree** of search planners when a ``search_tree`` event exists
  (``nodes: [{node, parent, action, score, visits, ...}]``), coloured by the node's value
  (mean reward: ``value``, or ``value_sum / visits``) when recorded, else by the judge's
  score, else by visits; node size grows with visits.

Output: PNG or PDF (timestamp-free, reproducible), or a self-contained HTML page (inline
base64 PNG plus tables of the episode record, tool calls and events).
"""

from __future__ import annotations

import argparse
import base64
import html
import json
import re
import textwrap
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from planarena.experiments.analysis.figures import (
    DOUBLE_COLUMN_IN,
    PDF_METADATA,
    PNG_METADATA,
    figure_png,
    new_figure,
    paper_style,
    quiet_font_subsetting,
)
from planarena.experiments.analysis.trace_load import EpisodeTrace, load_trace
from planarena.experiments.analysis.trace_plan import draw_plan, layered_positions, plan_graph
from planarena.experiments.analysis.trace_timeline import (
    assign_lanes,
    bar_labels,
    draw_timeline,
    episode_notes,
)
from planarena.experiments.analysis.trace_tree import draw_tree, search_tree, tree_positions

FORMATS: tuple[str, ...] = ("png", "pdf", "html")


def _headline(trace: EpisodeTrace) -> str:
    rec = trace.record or {}
    outcome = "success" if rec.get("success") else rec.get("failure_mode", "?")
    parts = [f"{trace.planner} | {trace.task_id} | trial {trace.trial} | {outcome}"]
    if rec:
        parts.append(
            f"latency {float(rec.get('latency_s', 0.0)):.1f} s | "
            f"tokens {rec.get('tokens_total', '?')} | tool calls {rec.get('tool_calls', '?')}"
        )
    return "\n".join(parts)


NOTE_CHARS = 150
"""Characters of a 6-pt note line across a 7-inch figure (longer notes wrap)."""


def _wrapped_notes(notes: Sequence[str]) -> str:
    return "\n".join(
        textwrap.fill(note, NOTE_CHARS, subsequent_indent="    ", break_on_hyphens=False)
        for note in notes
    )


def render_episode(trace: EpisodeTrace) -> Any:
    """A matplotlib Figure with plan DAG, timeline and (if any) search tree, top to bottom,
    then (if any) notes in words: why steps failed, failed tool calls and their error, the
    tools the LLM invented, and the key of bar labels too long for their bar.

    Panel heights grow with the widest plan layer and the number of parallel lanes, so
    node labels and bars keep a readable size; no label is cut (long ones wrap or take a
    numbered key).
    """
    graph = plan_graph(trace.events)
    tree = search_tree(trace.events)
    pos = layered_positions(graph)
    widest = max(Counter(x for x, _ in pos.values()).values(), default=1)
    calls = trace.tool_calls
    lanes = max(assign_lanes([(float(c["t0"]), float(c["t1"])) for c in calls]), default=0) + 1
    failed = any(d.get("reason") for _, d in graph.nodes(data=True))
    plan_height = max(1.2, (0.65 if failed else 0.55) * widest + 0.5)
    plan_height = plan_height if graph.number_of_nodes() else 0.5
    heights = [plan_height, 1.0 + 0.3 * (lanes + 2)]
    if tree is not None:
        depth = max((-y for _, y in tree_positions(tree).values()), default=0.0)
        heights.append(max(1.6, 0.6 * depth + 1.0))
    timed = [c for c in calls if c.get("t0") is not None and c.get("t1") is not None]
    ends = [float(c["t1"]) for c in timed]
    ends += [float(e["t1"]) for e in trace.events if e.get("event") == "llm" and "t1" in e]
    ends += [float(e["t"]) for e in trace.events if isinstance(e.get("t"), int | float)]
    _, keys = bar_labels(timed, max(ends, default=1.0) or 1.0)
    notes = _wrapped_notes(episode_notes(trace, keys))
    if notes:
        heights.append(0.12 * (notes.count("\n") + 1) + 0.1)
    with paper_style():
        fig = new_figure(DOUBLE_COLUMN_IN, sum(heights) + 0.5)
        axes = fig.subplots(len(heights), 1, height_ratios=heights)
        fig.suptitle(_headline(trace), fontsize=8)
        draw_plan(axes[0], graph, trace.planner)
        draw_timeline(axes[1], trace)
        if tree is not None:
            draw_tree(axes[2], fig, tree, str(tree.graph.get("algorithm", "")))
        if notes:
            axes[-1].set_axis_off()
            axes[-1].set_label("<notes>")
            axes[-1].text(
                0.0, 1.0, notes, va="top", ha="left", fontsize=6, transform=axes[-1].transAxes
            )
    return fig


def _event_details(ev: dict[str, Any]) -> str:
    rest = {k: v for k, v in ev.items() if k not in ("event", "t", "t0", "t1")}
    return json.dumps(rest, sort_keys=True, default=str)


def _fmt_t(value: Any) -> str:
    return f"{float(value):.3f}" if isinstance(value, int | float) else ""


def render_html(trace: EpisodeTrace, png: bytes) -> str:
    """Self-contained page: the figure inline (base64 PNG) and tables; no external assets."""
    esc = html.escape
    img = base64.b64encode(png).decode("ascii")
    rows_rec = "".join(
        f"<tr><th>{esc(str(k))}</th><td>{esc(str(v))}</td></tr>"
        for k, v in (trace.record or {}).items()
    )
    rows_calls = "".join(
        "<tr>"
        + f"<td>{i}</td><td>{esc(str(c.get('tool')))}</td><td>{_fmt_t(c.get('t0'))}</td>"
        + f"<td>{_fmt_t(c.get('t1'))}</td><td>{esc(str(c.get('ok')))}</td>"
        + f"<td>{esc(str(c.get('error_kind') or ''))}</td><td>{esc(str(c.get('injected')))}</td>"
        + f"<td><code>{esc(json.dumps(c.get('args'), sort_keys=True, default=str))}</code></td>"
        + "</tr>"
        for i, c in enumerate(trace.tool_calls)
    )
    rows_events = "".join(
        f'<tr class="ev"><td>{i}</td><td>{esc(str(e.get("event")))}</td>'
        f"<td>{_fmt_t(e.get('t', e.get('t0')))}</td><td>{_fmt_t(e.get('t1'))}</td>"
        f"<td><code>{esc(_event_details(e))}</code></td></tr>"
        for i, e in enumerate(trace.events)
    )
    title = f"{trace.planner} / {trace.task_id} / trial {trace.trial}"
    style = (
        "body{font-family:sans-serif;font-size:13px;margin:1.5em;max-width:1200px}"
        "table{border-collapse:collapse;margin-bottom:1.5em}"
        "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}"
        "code{font-size:11px;white-space:pre-wrap;word-break:break-all}"
        "img{max-width:100%}"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>planarena trace: {esc(title)}</title>\n<style>{style}</style>\n</head>\n<body>\n"
        f"<h1>{esc(title)}</h1>\n<p>grade: {esc(trace.grade)}"
        + (f" &mdash; source: {esc(trace.source.name)}" if trace.source else "")
        + "</p>\n"
        f'<img alt="plan DAG, timeline and search tree" src="data:image/png;base64,{img}">\n'
        "<h2>Episode record</h2>\n<table>" + rows_rec + "</table>\n"
        f"<h2>Tool calls ({len(trace.tool_calls)})</h2>\n<table>"
        "<tr><th>#</th><th>tool</th><th>t0</th><th>t1</th><th>ok</th><th>error</th>"
        "<th>injected</th><th>args</th></tr>" + rows_calls + "</table>\n"
        f"<h2>Events ({len(trace.events)})</h2>\n<table>"
        "<tr><th>#</th><th>event</th><th>t / t0</th><th>t1</th><th>details</th></tr>"
        + rows_events
        + "</table>\n</body>\n</html>\n"
    )


def write_trace_view(trace: EpisodeTrace, out: Path, fmt: str) -> Path:
    """Render ``trace`` to ``out`` as png, pdf or html (byte-identical for the same trace)."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig = render_episode(trace)
    if fmt == "html":
        page = render_html(trace, figure_png(fig, dpi=130))
        with out.open("w", encoding="utf-8", newline="\n") as fh:
            fh.write(page)
        return out
    with paper_style(), quiet_font_subsetting():
        metadata = dict(PDF_METADATA if fmt == "pdf" else PNG_METADATA)
        fig.savefig(out, format=fmt, metadata=metadata)
    return out


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


def default_output(run_dir: Path, trace: EpisodeTrace, fmt: str) -> Path:
    """``RUN_DIR/trace_views/<task>__<planner>__trial<N>.<fmt>``."""
    name = f"{_safe(trace.task_id)}__{_safe(trace.planner)}__trial{trace.trial}.{fmt}"
    return run_dir / "trace_views" / name


def build_parser() -> argparse.ArgumentParser:
    """The ``planarena-trace`` command line."""
    parser = argparse.ArgumentParser(
        prog="planarena-trace",
        description="Render one episode from traces.jsonl: plan DAG, timeline of tool and "
        "LLM calls (faults, retries, parallelism), and the search tree of search planners.",
    )
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    parser.add_argument("task_id", metavar="TASK_ID")
    parser.add_argument("--planner", default=None, help="needed when several planners ran it")
    parser.add_argument("--trial", type=int, default=None, help="needed when trials > 1")
    parser.add_argument("--format", choices=FORMATS, default="png")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="default: <task>__<planner>__trial<N>.<format> in RUN_DIR/trace_views/",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; exit status 2 with a message when the episode cannot be chosen."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        trace = load_trace(args.run_dir, args.task_id, planner=args.planner, trial=args.trial)
    except (FileNotFoundError, LookupError) as exc:
        parser.exit(2, f"planarena-trace: {exc}\n")
    out = args.out or default_output(args.run_dir, trace, args.format)
    write_trace_view(trace, out, args.format)
    print(out)
    return 0


def cli() -> None:
    """The console command: :func:`main`, ended without the interpreter's teardown."""
    from planarena.experiments.process import run_and_exit

    run_and_exit(main)


__all__ = [
    "EpisodeTrace",
    "assign_lanes",
    "default_output",
    "load_trace",
    "cli",
    "main",
    "plan_graph",
    "render_episode",
    "render_html",
    "search_tree",
    "write_trace_view",
]
