"""Depth-first search with best-first child order and score-threshold pruning."""

from __future__ import annotations

import random
from typing import TypeVar

from planarena.search._tree import (
    TreeBuilder,
    by_score_desc,
    check_non_negative,
    expand_all,
    node_value,
)
from planarena.search.problem import AsyncProblem, Problem, SyncAdapter, run_sync
from planarena.search.result import SearchNode, SearchResult

S = TypeVar("S")
A = TypeVar("A")

__all__ = ["dfs", "dfs_async"]


async def dfs_async(
    problem: AsyncProblem[S, A],
    *,
    rng: random.Random,
    prune_below: float | None,
    max_nodes: int,
    max_depth: int,
    first_solution: bool = True,
) -> SearchResult:
    """Depth-first search visiting children best-score-first.

    Non-terminal children scoring below ``prune_below`` are not descended into (the
    ToT-style "value threshold"); terminals are never pruned since their reward is known.
    Stops at the first terminal visited if ``first_solution``, else returns the
    highest-reward terminal (earliest on ties). ``max_nodes`` caps expansions. ``rng`` is
    unused (deterministic order) but kept for a uniform calling convention.
    """
    del rng
    check_non_negative(max_depth=max_depth, max_nodes=max_nodes)
    tree: TreeBuilder[S, A] = TreeBuilder()
    root = await tree.add_root(problem)
    stack = [root]
    best: SearchNode | None = None
    expanded = pruned = 0
    while stack:
        node = stack.pop()
        if node.terminal:
            if best is None or node_value(node) > node_value(best):
                best = node
            if first_solution:
                break
            continue
        if node.depth >= max_depth or expanded >= max_nodes:
            continue
        expanded += 1
        keep: list[SearchNode] = []
        for child in by_score_desc(await expand_all(problem, tree, [node])):
            if not child.terminal and prune_below is not None and node_value(child) < prune_below:
                child.pruned = True
                pruned += 1
            else:
                keep.append(child)
        stack.extend(reversed(keep))
    return tree.result("dfs", best, None if best is None else best.score, expanded, pruned)


def dfs(
    problem: Problem[S, A],
    *,
    rng: random.Random,
    prune_below: float | None,
    max_nodes: int,
    max_depth: int,
    first_solution: bool = True,
) -> SearchResult:
    """Synchronous :func:`dfs_async`."""
    return run_sync(
        dfs_async(
            SyncAdapter(problem),
            rng=rng,
            prune_below=prune_below,
            max_nodes=max_nodes,
            max_depth=max_depth,
            first_solution=first_solution,
        )
    )
