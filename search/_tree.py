"""Tree bookkeeping and node evaluation shared by the algorithms."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from planarena.search.problem import AsyncProblem, gather_ordered
from planarena.search.result import SearchNode, SearchResult

S = TypeVar("S")
A = TypeVar("A")


class TreeBuilder(Generic[S, A]):
    """Append-only tree whose node ids equal their index (deterministic, cheap lookups)."""

    def __init__(self) -> None:
        self.nodes: list[SearchNode] = []
        self.children: dict[int, list[SearchNode]] = {}

    def add(
        self,
        parent: SearchNode | None,
        action: Any,
        state: S,
        score: float | None,
        terminal: bool,
    ) -> SearchNode:
        node = SearchNode(
            id=len(self.nodes),
            parent=None if parent is None else parent.id,
            action=action,
            state=state,
            depth=0 if parent is None else parent.depth + 1,
            score=score,
            terminal=terminal,
        )
        self.nodes.append(node)
        self.children[node.id] = []
        if parent is not None:
            self.children[parent.id].append(node)
        return node

    async def add_root(self, problem: AsyncProblem[S, A]) -> SearchNode:
        """Root is not heuristically scored (saves an evaluate call); terminals get reward."""
        state = await problem.initial_state()
        terminal = await problem.is_terminal(state)
        score = await problem.reward(state) if terminal else None
        return self.add(None, None, state, score, terminal)

    def path_to(self, node: SearchNode) -> list[Any]:
        actions: list[Any] = []
        cur: SearchNode | None = node
        while cur is not None and cur.parent is not None:
            actions.append(cur.action)
            cur = self.nodes[cur.parent]
        actions.reverse()
        return actions

    def result(
        self,
        algorithm: str,
        best: SearchNode | None,
        best_value: float | None,
        expanded: int,
        pruned: int,
    ) -> SearchResult:
        return SearchResult(
            algorithm=algorithm,
            best_state=None if best is None else best.state,
            best_path=[] if best is None else self.path_to(best),
            best_value=best_value,
            nodes_expanded=expanded,
            nodes_pruned=pruned,
            tree=self.nodes,
        )


async def evaluate_child(
    problem: AsyncProblem[S, A], state: S, action: A, *, with_score: bool = True
) -> tuple[S, float | None, bool]:
    """Apply ``action`` and value the successor: reward if terminal, else heuristic score."""
    child = await problem.step(state, action)
    terminal = await problem.is_terminal(child)
    if terminal:
        return child, await problem.reward(child), True
    return child, (await problem.score(child) if with_score else None), False


async def expand_all(
    problem: AsyncProblem[S, A], tree: TreeBuilder[S, A], parents: list[SearchNode]
) -> list[SearchNode]:
    """Generate and evaluate every child of ``parents`` concurrently; add them in order."""
    action_lists = await gather_ordered(*(problem.actions(p.state) for p in parents))
    pairs = [(p, a) for p, acts in zip(parents, action_lists, strict=True) for a in acts]
    evaluated = await gather_ordered(*(evaluate_child(problem, p.state, a) for p, a in pairs))
    return [
        tree.add(p, a, state, score, terminal)
        for (p, a), (state, score, terminal) in zip(pairs, evaluated, strict=True)
    ]


def by_score_desc(nodes: list[SearchNode]) -> list[SearchNode]:
    """Stable best-first order: ties keep insertion order, so no rng is needed."""
    return sorted(nodes, key=lambda n: -node_value(n))


def best_terminal(nodes: list[SearchNode]) -> SearchNode | None:
    """Highest-reward terminal; the earliest inserted wins ties (so shallower first)."""
    best: SearchNode | None = None
    for n in nodes:
        if n.terminal and (best is None or node_value(n) > node_value(best)):
            best = n
    return best


def node_value(node: SearchNode) -> float:
    """Score with None ranked lowest (only an unscored root can be None)."""
    return node.score if node.score is not None else float("-inf")


def check_non_negative(**values: int | None) -> None:
    for name, value in values.items():
        if value is not None and value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")
