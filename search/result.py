"""The single result shape shared by every search algorithm (for comparison and plots)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SearchNode", "SearchResult"]


@dataclass(slots=True)
class SearchNode:
    """One explored node; ids are list positions in ``SearchResult.tree``.

    ``score`` is the heuristic for non-terminals and the reward for terminals (the exact
    value dominates, and skips an evaluate call); ``None`` where nothing was evaluated.
    """

    id: int
    parent: int | None
    action: Any
    state: Any
    depth: int
    score: float | None
    visits: int = 0
    value_sum: float = 0.0
    pruned: bool = False
    terminal: bool = False


def _jsonable(value: Any) -> Any:
    """Keep JSON-serialisable values as they are, stringify the rest."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value


@dataclass
class SearchResult:
    """Outcome of one search.

    ``nodes_expanded`` counts nodes whose successors were generated (BFS/DFS/beam) or nodes
    added by an expansion step (MCTS); ``nodes_pruned`` counts nodes generated but
    deliberately not descended into (0 where not applicable).
    """

    algorithm: str
    best_state: Any | None
    best_path: list[Any]
    best_value: float | None
    nodes_expanded: int
    nodes_pruned: int
    tree: list[SearchNode] = field(default_factory=list)

    def tree_records(self) -> list[dict[str, Any]]:
        """Flat JSON-friendly rows of the explored tree, for logging and visualisation."""
        return [
            {
                "node": n.id,
                "parent": n.parent,
                "action": _jsonable(n.action),
                "score": n.score,
                "visits": n.visits,
                # mean backed-up reward (MCTS); None where nothing was backed up
                "value": n.value_sum / n.visits if n.visits else None,
                "depth": n.depth,
                "pruned": n.pruned,
                "terminal": n.terminal,
            }
            for n in self.tree
        ]
