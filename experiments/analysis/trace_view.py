"""``planarena-trace``: draw one episode of a run for a person to read.

From ``traces.jsonl`` (one trace per episode, written by :mod:`planarena.experiments.run.episode`) it renders:

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
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
from matplotlib import colormaps
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from planarena.experiments.analysis.figures import (
    DOUBLE_COLUMN_IN,
    PDF_METADATA,
    PNG_METADATA,
    figure_png,
    new_figure,
    paper_style,
    quiet_font_subsetting,
)

FORMATS: tuple[str, ...] = ("png", "pdf", "html")

STATUS_COLORS: dict[str, str] = {"ok": "#009E73", "failed": "#D55E00", "not run": "#DDDDDD"}
"""Plan-node fill by outcome (Okabe-Ito green / vermillion, grey for never executed)."""

CALL_OK = "#56B4E9"
CALL_FAILED = "#D55E00"
CALL_INJECTED_OK = "#E69F00"
"""Tool-call bar colours: ok, failed, and injected fault that still returned ok."""

ROLE_COLORS: dict[str, str] = {
    "planner": "#0072B2",
    "executor": "#999999",
    "evaluator": "#CC79A7",
    "replanner": "#882255",
    "rollout": "#DDCC77",
}
"""LLM-lane colours by role (unknown roles are grey)."""

EVENT_MARKERS: dict[str, tuple[str, str]] = {
    "retry": ("v", "#D55E00"),
    "fallback": ("D", "#CC79A7"),
    "plan_rejected": ("X", "#000000"),
    "replan_rejected": ("X", "#882255"),
}
"""Point events drawn on the timeline's event lane (marker, colour)."""


@dataclass
class EpisodeTrace:
    """One trace document plus its episode record (when episodes.jsonl has it)."""

    planner: str
    task_id: str
    trial: int
    grade: str
    events: list[dict[str, Any]]
    tool_calls: list[dict[str, Any]]
    record: dict[str, Any] | None = None
    source: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- loading


def trace_files(run_dir: Path) -> list[Path]:
    """``run_dir/traces.jsonl``, else every job's traces under a sweep dir (sorted)."""
    direct = run_dir / "traces.jsonl"
    if direct.is_file():
        return [direct]
    return sorted(run_dir.rglob("traces.jsonl"))


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                rows.append(json.loads(line))
    return rows


def _find_record(source: Path, doc: dict[str, Any]) -> dict[str, Any] | None:
    episodes = source.parent / "episodes.jsonl"
    if not episodes.is_file():
        return None
    for rec in _read_jsonl(episodes):
        if (rec.get("planner"), rec.get("task_id"), int(rec.get("trial", 0))) == (
            doc["planner"],
            doc["task_id"],
            int(doc.get("trial", 0)),
        ):
            return rec
    return None


def _job_label(trace_file: Path) -> str:
    """`` [job: seed=1 planner=react] (dir)``: a job's overrides, so sweep choices differ."""
    overrides = trace_file.parent / ".hydra" / "overrides.yaml"
    label = ""
    if overrides.is_file():
        import yaml

        items = [
            str(o)
            for o in (yaml.safe_load(overrides.read_text(encoding="utf-8")) or [])
            if not str(o).startswith("hydra.")
        ]
        if items:
            label = f" [job: {' '.join(items)}]"
    return f"{label} ({trace_file.parent})"


def load_trace(
    run_dir: str | Path,
    task_id: str,
    *,
    planner: str | None = None,
    trial: int | None = None,
) -> EpisodeTrace:
    """The one trace matching ``task_id`` (and ``planner``/``trial`` when given).

    Raises ``FileNotFoundError`` without traces, ``LookupError`` when nothing or more than
    one episode matches (the message lists the candidates, so the user can pick one rather
    than silently get the first).
    """
    run_dir = Path(run_dir)
    files = trace_files(run_dir)
    if not files:
        raise FileNotFoundError(f"no traces.jsonl in {run_dir} (was write_traces=false?)")
    matches: list[tuple[Path, dict[str, Any]]] = []
    task_ids: set[str] = set()
    ran: dict[str, set[int]] = {}  # the task's planners and their trials, to suggest
    for f in files:
        for doc in _read_jsonl(f):
            task_ids.add(str(doc.get("task_id")))
            if doc.get("task_id") != task_id:
                continue
            ran.setdefault(str(doc.get("planner")), set()).add(int(doc.get("trial", 0)))
            if planner is not None and doc.get("planner") != planner:
                continue
            if trial is not None and int(doc.get("trial", 0)) != trial:
                continue
            matches.append((f, doc))
    if not matches:
        if task_id not in task_ids:
            known = ", ".join(sorted(task_ids)[:10])
            raise LookupError(f"task {task_id!r} not in {run_dir}; tasks include: {known}")
        asked = " ".join(
            f"--{k} {v}" for k, v in (("planner", planner), ("trial", trial)) if v is not None
        )
        options = "; ".join(
            f"{p} (trial {', '.join(map(str, sorted(t)))})" for p, t in sorted(ran.items())
        )
        raise LookupError(f"no episode of {task_id!r} with {asked}; it ran with: {options}")
    if len(matches) > 1:
        # (one planner and one trial in one job is a single match: no --planner needed)
        jobs = {f for f, _ in matches}
        hint = " (or give that job's dir as RUN_DIR)" if len(jobs) > 1 else ""
        options = "; ".join(
            f"--planner {d['planner']} --trial {d.get('trial', 0)}{_job_label(f)}"
            for f, d in matches
        )
        raise LookupError(f"{len(matches)} episodes match {task_id!r}, pick one{hint}: {options}")
    source, doc = matches[0]
    return EpisodeTrace(
        planner=str(doc["planner"]),
        task_id=str(doc["task_id"]),
        trial=int(doc.get("trial", 0)),
        grade=str(doc.get("grade", "")),
        events=list(doc.get("events", [])),
        tool_calls=list(doc.get("tool_calls", [])),
        record=_find_record(source, doc),
        source=source,
        extra={k: v for k, v in doc.items() if k not in _TRACE_KEYS},
    )


_TRACE_KEYS = frozenset({"planner", "task_id", "trial", "grade", "events", "tool_calls"})


# --------------------------------------------------------------------------- plan DAG


def plan_graph(events: Sequence[dict[str, Any]]) -> nx.DiGraph:
    """Union of all plan versions as a DAG.

    Node key = step id (suffixed ``@vK`` if a later version reuses an id); attributes:
    ``step_id``, ``tool``, ``version`` (0 = first plan, k = k-th plan/replan after it),
    ``status`` (ok / failed / not run, from the step's last ``step`` event), ``retries``,
    ``fallback`` (tool switched to). Edge ``kind`` is ``dep`` (depends_on) or ``replan``
    (from the last failed step before a replan to the roots of the new steps).
    """
    graph = nx.DiGraph()
    current: dict[str, str] = {}
    last_failed: str | None = None
    version = -1
    for ev in events:
        kind = ev.get("event")
        if kind in ("plan", "replan"):
            version += 1
            new_nodes: dict[str, str] = {}
            for step in ev.get("steps", []):
                sid = str(step.get("id"))
                key = sid if sid not in graph else f"{sid}@v{version}"
                graph.add_node(
                    key,
                    step_id=sid,
                    tool=str(step.get("tool", "?")),
                    version=version,
                    replan=kind == "replan",
                    status="not run",
                    retries=0,
                    fallback=None,
                )
                new_nodes[sid] = key
            current.update(new_nodes)
            for step in ev.get("steps", []):
                key = new_nodes[str(step.get("id"))]
                deps = [str(d) for d in step.get("depends_on", []) or []]
                for dep in deps:
                    if dep in current:
                        graph.add_edge(current[dep], key, kind="dep")
                if kind == "replan" and last_failed and not any(d in new_nodes for d in deps):
                    graph.add_edge(last_failed, key, kind="replan")
        elif kind == "step":
            key = current.get(str(ev.get("id")))
            if key is not None:
                ok = bool(ev.get("ok"))
                graph.nodes[key]["status"] = "ok" if ok else "failed"
                if not ok:
                    last_failed = key
        elif kind == "retry":
            key = current.get(str(ev.get("id")))
            if key is not None:
                graph.nodes[key]["retries"] += 1
        elif kind == "fallback":
            key = current.get(str(ev.get("id")))
            if key is not None:
                graph.nodes[key]["fallback"] = str(ev.get("to"))
    return graph


def layered_positions(graph: nx.DiGraph) -> dict[str, tuple[float, float]]:
    """Left-to-right layers by longest path from a root; rows by insertion order.

    Deterministic (no force-directed layout). Falls back to one row per node if the graph
    has a cycle, which the plan parser should have rejected.
    """
    if not nx.is_directed_acyclic_graph(graph):
        return {n: (float(i), 0.0) for i, n in enumerate(graph.nodes)}
    layer: dict[str, int] = {}
    for node in nx.topological_sort(graph):
        preds = list(graph.predecessors(node))
        layer[node] = 1 + max(layer[p] for p in preds) if preds else 0
    rows: dict[int, list[str]] = {}
    for node in graph.nodes:  # insertion order keeps plan order within a layer
        rows.setdefault(layer[node], []).append(node)
    pos: dict[str, tuple[float, float]] = {}
    for x, members in rows.items():
        for i, node in enumerate(members):
            pos[node] = (float(x), (len(members) - 1) / 2.0 - i)
    return pos


def _draw_plan(ax: Any, graph: nx.DiGraph, planner: str) -> None:
    ax.set_title("plan DAG (squares: replanned steps)", loc="left")
    ax.set_axis_off()
    if graph.number_of_nodes() == 0:
        ax.text(
            0.5,
            0.5,
            f"no plan/replan events in this trace ({planner} chooses actions step by step)",
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
        return
    pos = layered_positions(graph)
    many = graph.number_of_nodes() > 30
    for replan, shape in ((False, "o"), (True, "s")):
        nodes = [n for n, d in graph.nodes(data=True) if d["replan"] == replan]
        if nodes:
            nx.draw_networkx_nodes(
                graph,
                pos,
                nodelist=nodes,
                node_shape=shape,
                node_color=[STATUS_COLORS[graph.nodes[n]["status"]] for n in nodes],
                edgecolors="black",
                linewidths=0.5,
                node_size=120 if many else 260,
                ax=ax,
            )
    for kind, style in (("dep", "solid"), ("replan", "dashed")):
        edges = [(u, v) for u, v, d in graph.edges(data=True) if d["kind"] == kind]
        if edges:
            nx.draw_networkx_edges(
                graph,
                pos,
                edgelist=edges,
                style=style,
                width=0.7,
                arrowsize=7,
                node_size=120 if many else 260,
                edge_color="#555555",
                ax=ax,
            )
    for node, (x, y) in pos.items():
        data = graph.nodes[node]
        label = f"{data['step_id']}\n{data['tool']}"
        if data["retries"]:
            label += f"\nretry x{data['retries']}"
        if data["fallback"]:
            label += f"\nfallback: {data['fallback']}"
        # on a white ground above the edges (an edge into a node crossed its label); every
        # ground is drawn below every label, so no ground hides a neighbour's text
        where = {"ha": "center", "va": "top", "fontsize": 5 if many else 6}
        ground = {"facecolor": "white", "edgecolor": "none", "alpha": 0.85, "pad": 0.5}
        ax.text(x, y - 0.22, label, **where, alpha=0.0, zorder=2.5, bbox=ground)
        ax.text(x, y - 0.22, label, **where, zorder=3)
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    ax.set_xlim(min(xs) - 0.6, max(xs) + 0.6)
    ax.set_ylim(min(ys) - 0.9, max(ys) + 0.4)
    handles = [
        Patch(facecolor=c, edgecolor="black", linewidth=0.5, label=s)
        for s, c in STATUS_COLORS.items()
    ]
    handles.append(Line2D([], [], color="#555555", ls="--", lw=0.7, label="replan after failure"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=5.5)


# --------------------------------------------------------------------------- timeline


def assign_lanes(intervals: Sequence[tuple[float, float]]) -> list[int]:
    """Greedy interval partitioning: each interval takes the lowest lane free at its start.

    Sequential calls share lane 0; calls that overlap in simulated time land on separate
    lanes, so the number of lanes is the peak parallelism.
    """
    order = sorted(range(len(intervals)), key=lambda i: (intervals[i][0], intervals[i][1], i))
    lane_end: list[float] = []
    lanes = [0] * len(intervals)
    eps = 1e-9
    for i in order:
        t0, t1 = intervals[i]
        for lane, end in enumerate(lane_end):
            if end <= t0 + eps:
                lanes[i] = lane
                lane_end[lane] = t1
                break
        else:
            lanes[i] = len(lane_end)
            lane_end.append(t1)
    return lanes


_CHARS_PER_AXIS = 130
"""About how many 5-pt characters fit across the timeline axis of a 7-inch figure."""


def _fit_label(text: str, fraction: float) -> str:
    """The tool name shortened to fit a bar of ``fraction`` of the axis ('' if too narrow)."""
    room = int(fraction * _CHARS_PER_AXIS) - 1
    if room >= len(text):
        return text
    return text[: room - 1] + "." if room >= 4 else ""


def _call_style(call: dict[str, Any]) -> tuple[str, str]:
    ok = bool(call.get("ok"))
    injected = bool(call.get("injected"))
    if not ok:
        return CALL_FAILED, "xxxx" if injected else "////"
    return (CALL_INJECTED_OK, "xxxx") if injected else (CALL_OK, "")


def _draw_timeline(ax: Any, trace: EpisodeTrace) -> None:
    calls = [c for c in trace.tool_calls if c.get("t0") is not None and c.get("t1") is not None]
    llm = [e for e in trace.events if e.get("event") == "llm" and "t0" in e and "t1" in e]
    lanes = assign_lanes([(float(c["t0"]), float(c["t1"])) for c in calls])
    n_lanes = max(lanes, default=-1) + 1
    ends = [float(c["t1"]) for c in calls] + [float(e["t1"]) for e in llm]
    ends += [float(e["t"]) for e in trace.events if isinstance(e.get("t"), int | float)]
    span = max(ends, default=1.0) or 1.0
    # rows from the top: LLM lane, tool lanes, event lane
    llm_y = n_lanes + 1
    event_y = 0
    for e in llm:
        t0, t1 = float(e["t0"]), float(e["t1"])
        ax.barh(
            llm_y,
            t1 - t0,
            left=t0,
            height=0.6,
            color=ROLE_COLORS.get(str(e.get("role")), "#BBBBBB"),
            edgecolor="none",
        )
    for call, lane in zip(calls, lanes, strict=True):
        t0, t1 = float(call["t0"]), float(call["t1"])
        color, hatch = _call_style(call)
        y = n_lanes - lane
        ax.barh(
            y,
            max(t1 - t0, span * 0.002),
            left=t0,
            height=0.6,
            color=color,
            hatch=hatch,
            edgecolor="black",
            linewidth=0.3,
        )
        label = _fit_label(str(call.get("tool", "")), (t1 - t0) / span)
        if label:
            ax.text((t0 + t1) / 2, y, label, ha="center", va="center", fontsize=5, clip_on=True)
    for e in trace.events:
        kind = e.get("event")
        t = e.get("t")
        if not isinstance(t, int | float):
            continue
        if kind in ("plan", "replan"):
            ax.axvline(
                float(t),
                color="#0072B2" if kind == "plan" else "#882255",
                ls="--",
                lw=0.7,
                zorder=0,
            )
        elif kind in EVENT_MARKERS:
            marker, color = EVENT_MARKERS[kind]
            ax.plot([float(t)], [event_y], marker=marker, color=color, ls="", markersize=4)
    ticks = [llm_y, *range(n_lanes, 0, -1), event_y]
    labels = ["LLM", *(f"tools {i + 1}" for i in range(n_lanes)), "events"]
    ax.set_yticks(ticks, labels)
    ax.set_ylim(event_y - 0.7, llm_y + 0.7)
    ax.set_xlim(0.0, span * 1.01)
    ax.set_xlabel("simulated seconds")
    ax.set_title("timeline (overlapping bars on separate lanes ran in parallel)", loc="left")
    handles: list[Any] = [
        Patch(facecolor=CALL_OK, edgecolor="black", linewidth=0.3, label="tool ok"),
        Patch(
            facecolor=CALL_FAILED,
            hatch="////",
            edgecolor="black",
            linewidth=0.3,
            label="tool failed",
        ),
        Patch(
            facecolor=CALL_FAILED,
            hatch="xxxx",
            edgecolor="black",
            linewidth=0.3,
            label="injected fault",
        ),
        Patch(
            facecolor=CALL_INJECTED_OK,
            hatch="xxxx",
            edgecolor="black",
            linewidth=0.3,
            label="injected, returned ok",
        ),
    ]
    roles = sorted({str(e.get("role")) for e in llm})
    handles += [Patch(facecolor=ROLE_COLORS.get(r, "#BBBBBB"), label=f"LLM {r}") for r in roles]
    present = {e.get("event") for e in trace.events if isinstance(e.get("t"), int | float)}
    handles += [
        Line2D([], [], marker=m, color=c, ls="", markersize=4, label=k.replace("_", " "))
        for k, (m, c) in EVENT_MARKERS.items()
        if k in present
    ]
    handles += [
        Line2D([], [], color=c, ls="--", lw=0.7, label=k)
        for k, c in (("plan", "#0072B2"), ("replan", "#882255"))
        if k in present
    ]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=5.5)


# --------------------------------------------------------------------------- search tree


def search_tree(events: Sequence[dict[str, Any]]) -> nx.DiGraph | None:
    """The last ``search_tree`` event as a tree (``None`` when the planner did not search).

    Graph attributes: ``algorithm`` and ``searches`` (how many trees the episode logged, e.g.
    one per replan; only the last is drawn).
    """
    trees = [e for e in events if e.get("event") == "search_tree" and e.get("nodes")]
    if not trees:
        return None
    tree = nx.DiGraph(algorithm=str(trees[-1].get("algorithm") or ""), searches=len(trees))
    for node in trees[-1]["nodes"]:
        key = str(node.get("node"))
        tree.add_node(key, **{k: v for k, v in node.items() if k != "node"})
    for node in trees[-1]["nodes"]:
        parent = node.get("parent")
        if parent is not None and str(parent) in tree:
            tree.add_edge(str(parent), str(node.get("node")))
    return tree


def tree_positions(tree: nx.DiGraph) -> dict[str, tuple[float, float]]:
    """Tidy top-down layout: leaves at consecutive x in DFS order, parents centred above."""
    pos: dict[str, tuple[float, float]] = {}
    next_x = [0.0]

    def place(node: str, depth: int) -> float:
        children = list(tree.successors(node))
        if not children:
            x = next_x[0]
            next_x[0] += 1.0
        else:
            xs = [place(c, depth + 1) for c in children]
            x = (xs[0] + xs[-1]) / 2.0
        pos[node] = (x, -float(depth))
        return x

    roots = [n for n in tree.nodes if tree.in_degree(n) == 0] or list(tree.nodes)[:1]
    for root in roots:
        place(root, 0)
    return pos


_TOOL_IN_REPR = re.compile(r"""action=['"]([^'"]+)['"]""")


def action_label(action: Any, width: int = 13) -> str:
    """Short human label for a search node's action.

    Actions are whatever the planner recorded: a plan as JSON (-> ``plan: N steps``), a step
    as JSON (-> its tool), a ReAct turn repr (-> its action) or plain text (truncated).
    """
    if action is None:
        return "root"
    text = str(action).strip()
    body = text.strip("`").removeprefix("json").strip()
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        if parsed.get("done") is True:
            return "done"
        if isinstance(parsed.get("steps"), list):
            return f"plan: {len(parsed['steps'])} steps"
        if "tool" in parsed:
            return str(parsed["tool"])[:width]
    match = _TOOL_IN_REPR.search(text)
    if match:
        return match.group(1)[:width]
    return text if len(text) <= width else text[: width - 1] + "."


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def node_value(data: dict[str, Any]) -> float | None:
    """A node's value (mean reward): ``value`` when recorded, else ``value_sum / visits``."""
    value = _finite(data.get("value"))
    if value is not None:
        return value
    total, visits = _finite(data.get("value_sum")), _finite(data.get("visits"))
    if total is not None and visits:
        return total / visits
    return None


def tree_colour_key(tree: nx.DiGraph) -> str:
    """What colours a tree's nodes: ``value`` (MCTS mean reward) when any node has one, else
    ``score`` (the judge's heuristic) when any node has one, else ``visits``."""
    data = [tree.nodes[n] for n in tree.nodes]
    if any(node_value(d) is not None for d in data):
        return "value"
    if any(_finite(d.get("score")) is not None for d in data):
        return "score"
    return "visits"


def _draw_tree(ax: Any, fig: Any, tree: nx.DiGraph, algorithm: str) -> None:
    pos = tree_positions(tree)
    nodes = list(tree.nodes)
    key = tree_colour_key(tree)
    if key == "value":
        raw = [node_value(tree.nodes[n]) for n in nodes]
    else:
        raw = [_finite(tree.nodes[n].get(key)) for n in nodes]
    numeric = [v for v in raw if v is not None]
    if key == "visits":
        norm: Normalize = Normalize(0.0, max([1.0, *numeric]))
    else:  # values and scores are usually in [0, 1]; widen to cover them all
        norm = Normalize(min([0.0, *numeric]), max([1.0, *numeric]))
    cmap = colormaps["viridis"]
    colors = [cmap(norm(v)) if v is not None else "#DDDDDD" for v in raw]
    visits = [_finite(tree.nodes[n].get("visits")) or 0.0 for n in nodes]
    small = tree.number_of_nodes() <= 40
    base = 140 if small else 25
    top = max(visits) if visits else 0.0
    # node area grows with visits (MCTS), so the most explored lines stand out
    sizes = [base * (0.5 + 1.5 * (v / top) ** 0.5) if top > 0 else base for v in visits]
    nx.draw_networkx_edges(tree, pos, ax=ax, width=0.5, arrows=False, edge_color="#777777")
    for pruned in (False, True):
        subset = [i for i, n in enumerate(nodes) if bool(tree.nodes[n].get("pruned")) == pruned]
        if subset:
            nx.draw_networkx_nodes(
                tree,
                pos,
                nodelist=[nodes[i] for i in subset],
                ax=ax,
                node_color=[colors[i] for i in subset],
                node_size=[sizes[i] for i in subset],
                edgecolors="#D55E00" if pruned else "black",
                linewidths=0.9 if pruned else 0.4,
                node_shape="s" if pruned else "o",
            )
    if small:
        for node, (x, y) in pos.items():
            data = tree.nodes[node]
            stats = []
            value = node_value(data)
            score = _finite(data.get("score"))
            if value is not None:
                stats.append(f"v={value:.2f}")
            elif score is not None:
                stats.append(f"s={score:.2f}")
            if data.get("visits"):
                stats.append(f"n={data['visits']}")
            text = "\n".join([action_label(data.get("action")), " ".join(stats)]).strip()
            ax.text(x, y - 0.18, text, ha="center", va="top", fontsize=5)
    ax.set_axis_off()
    title = f"search tree: {algorithm}, " if algorithm else "search tree: "
    if tree.graph.get("searches", 1) > 1:
        title += f"last of {tree.graph['searches']} searches, "
    meaning = {"value": "value (mean reward)", "score": "score", "visits": "visits"}[key]
    size_note = ", size = visits" if top > 0 else ""
    ax.set_title(
        title
        + f"{tree.number_of_nodes()} nodes, colour = {meaning}{size_note}, "
        + "orange squares = pruned",
        loc="left",
    )
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    ax.set_xlim(min(xs) - 0.7, max(xs) + 0.7)
    ax.set_ylim(min(ys) - 0.8, 0.4)
    fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=ax, label=meaning, shrink=0.8)


# --------------------------------------------------------------------------- figure / html


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


def render_episode(trace: EpisodeTrace) -> Any:
    """A matplotlib Figure with plan DAG, timeline and (if any) search tree, top to bottom.

    Panel heights grow with the widest plan layer and the number of parallel lanes, so
    node labels and bars keep a readable size.
    """
    graph = plan_graph(trace.events)
    tree = search_tree(trace.events)
    pos = layered_positions(graph)
    widest = max(Counter(x for x, _ in pos.values()).values(), default=1)
    calls = trace.tool_calls
    lanes = max(assign_lanes([(float(c["t0"]), float(c["t1"])) for c in calls]), default=0) + 1
    plan_height = max(1.2, 0.55 * widest + 0.5) if graph.number_of_nodes() else 0.5
    heights = [plan_height, 1.0 + 0.3 * (lanes + 2)]
    if tree is not None:
        depth = max((-y for _, y in tree_positions(tree).values()), default=0.0)
        heights.append(max(1.6, 0.6 * depth + 1.0))
    with paper_style():
        fig = new_figure(DOUBLE_COLUMN_IN, sum(heights) + 0.5)
        axes = fig.subplots(len(heights), 1, height_ratios=heights)
        fig.suptitle(_headline(trace), fontsize=8)
        _draw_plan(axes[0], graph, trace.planner)
        _draw_timeline(axes[1], trace)
        if tree is not None:
            _draw_tree(axes[2], fig, tree, str(tree.graph.get("algorithm", "")))
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


if __name__ == "__main__":
    raise SystemExit(main())


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
