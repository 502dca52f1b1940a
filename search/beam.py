"""Beam search: fixed-width frontier per depth, best terminal by reward."""

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
from planarena.search.result import SearchNode, SearchResult

S = TypeVar("S")
A = TypeVar("A")

__all__ = ["beam_search", "beam_search_async"]


async def beam_search_async(
    problem: AsyncProblem[S, A],
    *,
    rng: random.Random,
    width: int,
    max_depth: int,
) -> SearchResult:
    """Keep the top ``width`` non-terminal states per depth by score (stable ties).

    Terminals are set aside rather than occupying beam slots, and the highest-reward one
    over all depths is returned (earliest, i.e. shallowest, on ties). Cost is bounded by
    ``width * max_depth`` expansions. ``rng`` is unused but kept for a uniform signature.
    """
    del rng
    check_non_negative(max_depth=max_depth)
    if width < 1:
        raise ValueError(f"width must be >= 1, got {width}")
    tree: TreeBuilder[S, A] = TreeBuilder()
    root = await tree.add_root(problem)
    if root.terminal:
        return tree.result("beam_search", root, root.score, 0, 0)
    frontier = [root]
    terminals: list[SearchNode] = []
    expanded = pruned = 0
    for _ in range(max_depth):
        if not frontier:
            break
        expanded += len(frontier)
        children = await expand_all(problem, tree, frontier)
        terminals.extend(c for c in children if c.terminal)
        ranked = by_score_desc([c for c in children if not c.terminal])
        frontier = ranked[:width]
        for node in ranked[width:]:
            node.pruned = True
        pruned += max(0, len(ranked) - width)
    best = best_terminal(terminals)
    return tree.result("beam_search", best, None if best is None else best.score, expanded, pruned)


def beam_search(
    problem: Problem[S, A],
    *,
    rng: random.Random,
    width: int,
    max_depth: int,
) -> SearchResult:
    """Synchronous :func:`beam_search_async`."""
    return run_sync(
        beam_search_async(SyncAdapter(problem), rng=rng, width=width, max_depth=max_depth)
    )
