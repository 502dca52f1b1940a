"""Breadth-first search, optionally beam-limited per level."""

from __future__ import annotations

import random
from typing import TypeVar

from planarena.search._tree import (
    TreeBuilder,
    best_terminal,
    by_score_desc,
    check_non_negative,
    expand_all,
)
from planarena.search.problem import AsyncProblem, Problem, SyncAdapter, run_sync
from planarena.search.result import SearchResult

S = TypeVar("S")
A = TypeVar("A")

__all__ = ["bfs", "bfs_async"]


async def bfs_async(
    problem: AsyncProblem[S, A],
    *,
    rng: random.Random,
    beam_width: int | None = None,
    max_depth: int,
    max_nodes: int,
) -> SearchResult:
    """Level-by-level search returning the shallowest terminal (best reward among those).

    Shallowest-first gives the shortest plan. ``beam_width`` keeps only the top-k
    non-terminal nodes per level by score (stable ties), trading optimality for cost.
    ``max_nodes`` caps expansions. ``rng`` is unused (ties are broken by insertion order)
    but kept so every algorithm has the same calling convention.
    """
    del rng
    check_non_negative(max_depth=max_depth, max_nodes=max_nodes)
    if beam_width is not None and beam_width < 1:
        raise ValueError(f"beam_width must be >= 1, got {beam_width}")
    tree: TreeBuilder[S, A] = TreeBuilder()
    root = await tree.add_root(problem)
    if root.terminal:
        return tree.result("bfs", root, root.score, 0, 0)
    frontier = [root]
    expanded = pruned = 0
    for _ in range(max_depth):
        budget = max_nodes - expanded
        if not frontier or budget <= 0:
            break
        batch = frontier[:budget]
        expanded += len(batch)
        children = await expand_all(problem, tree, batch)
        best = best_terminal(children)
        if best is not None:
            return tree.result("bfs", best, best.score, expanded, pruned)
        frontier = children
        if beam_width is not None and len(frontier) > beam_width:
            ranked = by_score_desc(frontier)
            frontier = ranked[:beam_width]
            for node in ranked[beam_width:]:
                node.pruned = True
            pruned += len(ranked) - beam_width
    return tree.result("bfs", None, None, expanded, pruned)


def bfs(
    problem: Problem[S, A],
    *,
    rng: random.Random,
    beam_width: int | None = None,
    max_depth: int,
    max_nodes: int,
) -> SearchResult:
    """Synchronous :func:`bfs_async`."""
    return run_sync(
        bfs_async(
            SyncAdapter(problem),
            rng=rng,
            beam_width=beam_width,
            max_depth=max_depth,
            max_nodes=max_nodes,
        )
    )
