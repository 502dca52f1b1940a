"""The plan DAG of an episode: the steps of its ``plan`` and ``replan`` events, their
``depends_on`` edges, each step coloured by its last outcome.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import networkx as nx
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

STATUS_COLORS: dict[str, str] = {"ok": "#009E73", "failed": "#D55E00", "not run": "#DDDDDD"}
"""Plan-node fill by outcome (Okabe-Ito green / vermillion, grey for never executed)."""


def plan_graph(events: Sequence[dict[str, Any]]) -> nx.DiGraph:
    """Union of all plan versions as a DAG.

        Node key = step id (suffixed ``@vK`` if a later version reuses an id); attributes:
        ``step_id``, ``tool``, ``version`` (0 = first plan, k = k-th plan/replan after it),
        ``status`` (ok / failed / not run, from the step's last ``step`` event), ``retries``,
        ``fallback`` (tool switched to), ``reason`` (why a failed step failed: the step event's
    ``failure``, else its ``error_kind``). Edge ``kind`` is ``dep`` (depends_on) or ``replan``
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
                    reason=None,
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
                graph.nodes[key]["reason"] = (
                    None if ok else str(ev.get("failure") or ev.get("error_kind") or "?")
                )
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


def draw_plan(ax: Any, graph: nx.DiGraph, planner: str) -> None:
    """Draw the plan DAG (:func:`plan_graph`) into ``ax``, steps coloured by outcome."""
    ax.set_title("plan DAG (squares: replanned steps)", loc="left")
    ax.set_axis_off()
    if graph.number_of_nodes() == 0:
        ax.text(
            0.5,
            0.5,
            f"no plan or replan event in this trace of {planner}: the timeline alone",
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
        if data.get("reason"):
            label += f"\nfailed: {data['reason']}"
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
