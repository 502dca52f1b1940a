"""The search tree of a search planner's episode (its ``search_tree`` event), nodes coloured
by value, else score, else visits.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

import networkx as nx
from matplotlib import colormaps
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize


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


def wrap_name(text: str, width: int = 13) -> str:
    """``text`` on lines of at most ``width`` characters, broken after ``_``, ``-`` or a
    space (a longer piece keeps its own line): nothing is cut."""
    pieces = re.findall(r"[^_\- ]*[_\- ]|[^_\- ]+$", text) or [text]
    lines = [""]
    for piece in pieces:
        if lines[-1] and len(lines[-1]) + len(piece.rstrip()) > width:
            lines.append(piece)
        else:
            lines[-1] += piece
    return "\n".join(line.rstrip() for line in lines)


FREE_TEXT_LINES = 2
"""Lines of a free-text action shown under its node (the HTML view has the whole text)."""


def action_label(action: Any, width: int = 13) -> str:
    """Human label for a search node's action, wrapped to ``width`` characters a line.

    Actions are whatever the planner recorded: a plan as JSON (-> ``plan: N steps``), a step
    as JSON (-> its tool), a ReAct turn repr (-> its action) or plain text. Tool names are
    wrapped, never cut; only free text longer than :data:`FREE_TEXT_LINES` lines ends in
    an ellipsis.
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
            return wrap_name(str(parsed["tool"]), width)
    match = _TOOL_IN_REPR.search(text)
    if match:
        return wrap_name(match.group(1), width)
    lines = wrap_name(text, width).split("\n")
    if len(lines) > FREE_TEXT_LINES:
        lines = [*lines[: FREE_TEXT_LINES - 1], lines[FREE_TEXT_LINES - 1][: width - 1] + "\u2026"]
    return "\n".join(lines)


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


def draw_tree(ax: Any, fig: Any, tree: nx.DiGraph, algorithm: str) -> None:
    """Draw the search tree (:func:`search_tree`) into ``ax`` with its colour bar on ``fig``."""
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
