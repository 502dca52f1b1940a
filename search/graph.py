"""DAG utilities for plans expressed as dependency graphs."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping

import networkx as nx

__all__ = ["critical_path_length", "topological_layers"]


def _sorted(nodes: Iterable[Hashable]) -> list[Hashable]:
    """Natural order when comparable, else by (type name, repr), for deterministic output."""
    items = list(nodes)
    try:
        return sorted(items)  # type: ignore[type-var]
    except TypeError:
        return sorted(items, key=lambda n: (type(n).__name__, repr(n)))


def topological_layers(graph: nx.DiGraph) -> list[list[Hashable]]:
    """Nodes grouped into generations that can run in parallel; ValueError on a cycle."""
    try:
        return [_sorted(layer) for layer in nx.topological_generations(graph)]
    except nx.NetworkXUnfeasible as exc:
        raise ValueError("graph has a cycle; topological layers are undefined") from exc


def critical_path_length(graph: nx.DiGraph, duration: Mapping[Hashable, float]) -> float:
    """Longest path weight, summing node durations: the makespan with unlimited parallelism.

    Raises ValueError on a cycle and KeyError naming any node without a duration.
    """
    missing = [n for n in graph.nodes if n not in duration]
    if missing:
        raise KeyError(f"no duration for nodes: {_sorted(missing)!r}")
    try:
        order = list(nx.topological_sort(graph))
    except nx.NetworkXUnfeasible as exc:
        raise ValueError("graph has a cycle; critical path is undefined") from exc
    finish: dict[Hashable, float] = {}
    for node in order:
        start = max((finish[p] for p in graph.predecessors(node)), default=0.0)
        finish[node] = start + float(duration[node])
    return max(finish.values(), default=0.0)
