"""Monte-Carlo tree search with UCB1 selection."""

from __future__ import annotations

import math
import random
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from planarena.search._tree import TreeBuilder, check_non_negative, evaluate_child
from planarena.search.problem import AsyncProblem, Problem, SyncAdapter, run_sync
from planarena.search.result import SearchNode, SearchResult

S = TypeVar("S")
A = TypeVar("A")

__all__ = ["mcts", "mcts_async", "ucb1"]


def ucb1(value_sum: float, visits: int, parent_visits: int, c: float) -> float:
    """UCB1 = mean + c * sqrt(ln(parent_visits) / visits); ``inf`` if unvisited.

    Unvisited children score infinity so each is tried once before any is revisited.
    """
    if visits <= 0:
        return math.inf
    if parent_visits < 1:
        raise ValueError(f"parent_visits must be >= 1 when visits > 0, got {parent_visits}")
    return value_sum / visits + c * math.sqrt(math.log(parent_visits) / visits)


def _mean(node: SearchNode) -> float:
    return node.value_sum / node.visits if node.visits else 0.0


async def _random_playout(
    problem: AsyncProblem[S, A], state: S, rng: random.Random, steps: int
) -> float:
    """Default rollout: uniform random actions until terminal/dead end/depth limit."""
    for _ in range(steps):
        acts = await problem.actions(state)
        if not acts:
            break
        state = await problem.step(state, acts[rng.randrange(len(acts))])
        if await problem.is_terminal(state):
            break
    return await problem.reward(state)


async def mcts_async(
    problem: AsyncProblem[S, A],
    *,
    rng: random.Random,
    iterations: int,
    c: float = 1.4,
    max_depth: int,
) -> SearchResult:
    """UCT: select by :func:`ucb1`, expand one untried action, roll out, back up the value.

    Uses ``problem.rollout(state, rng)`` when defined, else a random playout limited to
    ``max_depth`` total depth; terminal leaves use ``reward`` directly. Nodes are not
    heuristically scored (MCTS does not need it, saving evaluate calls). The answer
    follows the most-visited child from the root down to a terminal or the deepest
    expanded node; ``best_value`` is that node's mean backed-up value.
    """
    check_non_negative(iterations=iterations, max_depth=max_depth)
    if c < 0:
        raise ValueError(f"c must be >= 0, got {c}")
    rollout: Callable[[S, random.Random], Awaitable[float]] | None = getattr(
        problem, "rollout", None
    )
    tree: TreeBuilder[S, A] = TreeBuilder()
    root = await tree.add_root(problem)
    untried: dict[int, list[Any]] = {}
    expanded = 0
    for _ in range(iterations):
        node = root
        path = [root]
        # Selection: descend while the node is fully expanded and has children.
        while not node.terminal and node.depth < max_depth:
            if node.id not in untried:
                untried[node.id] = list(await problem.actions(node.state))
            kids = tree.children[node.id]
            if untried[node.id] or not kids:
                break
            parent_visits = node.visits
            node = max(kids, key=lambda k: ucb1(k.value_sum, k.visits, parent_visits, c))
            path.append(node)
        # Expansion: add one untried action, chosen by the explicit rng.
        pending = untried.get(node.id)
        if not node.terminal and node.depth < max_depth and pending:
            action = pending.pop(rng.randrange(len(pending)))
            state, score, terminal = await evaluate_child(
                problem, node.state, action, with_score=False
            )
            node = tree.add(node, action, state, score, terminal)
            path.append(node)
            expanded += 1
        # Simulation.
        if node.terminal:
            value = node.score if node.score is not None else 0.0
        elif rollout is not None:
            value = float(await rollout(node.state, rng))
        else:
            value = await _random_playout(problem, node.state, rng, max_depth - node.depth)
        # Backpropagation.
        for visited in path:
            visited.visits += 1
            visited.value_sum += value
    best = root
    while not best.terminal and tree.children[best.id]:
        best = max(tree.children[best.id], key=lambda k: (k.visits, _mean(k)))
    best_value = _mean(best) if best.visits else None
    return tree.result("mcts", best, best_value, expanded, 0)


def mcts(
    problem: Problem[S, A],
    *,
    rng: random.Random,
    iterations: int,
    c: float = 1.4,
    max_depth: int,
) -> SearchResult:
    """Synchronous :func:`mcts_async` (a sync ``problem.rollout`` is used if present)."""
    return run_sync(
        mcts_async(SyncAdapter(problem), rng=rng, iterations=iterations, c=c, max_depth=max_depth)
    )
