"""Tests for the pure search package: small problems with exactly known answers."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import random
from collections.abc import Callable, Sequence

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from planarena.search import (
    SearchResult,
    SyncAdapter,
    beam_search,
    beam_search_async,
    bfs,
    bfs_async,
    critical_path_length,
    dfs,
    dfs_async,
    mcts,
    mcts_async,
    run_sync,
    topological_layers,
    ucb1,
)

# ---------------------------------------------------------------- problems


class PathProblem:
    """Find a simple path from ``start`` to ``goal`` in an undirected graph."""

    def __init__(self, graph: nx.Graph, start: object, goal: object) -> None:
        self.graph, self.start, self.goal = graph, start, goal

    def initial_state(self) -> tuple[object, ...]:
        return (self.start,)

    def actions(self, state: tuple[object, ...]) -> Sequence[object]:
        return sorted((n for n in self.graph[state[-1]] if n not in state), key=repr)

    def step(self, state: tuple[object, ...], action: object) -> tuple[object, ...]:
        return (*state, action)

    def score(self, state: tuple[object, ...]) -> float:
        return 1.0 / len(state)

    def is_terminal(self, state: tuple[object, ...]) -> bool:
        return state[-1] == self.goal

    def reward(self, state: tuple[object, ...]) -> float:
        return 1.0 if state[-1] == self.goal else 0.0


# Depth-3, branching-3 tree; leaf i -> (7 i mod 27) / 26 is a permutation, unique max 1.0.
LEAF = {
    p: ((p[0] * 9 + p[1] * 3 + p[2]) * 7 % 27) / 26 for p in itertools.product(range(3), repeat=3)
}
OPTIMUM = (2, 1, 2)


class TreeProblem:
    """Known-leaf tree; heuristic is the max ("optimistic") or mean of leaves below."""

    def __init__(self, heuristic: str = "max") -> None:
        self.heuristic = heuristic

    def initial_state(self) -> tuple[int, ...]:
        return ()

    def actions(self, state: tuple[int, ...]) -> Sequence[int]:
        return [0, 1, 2] if len(state) < 3 else []

    def step(self, state: tuple[int, ...], action: int) -> tuple[int, ...]:
        return (*state, action)

    def score(self, state: tuple[int, ...]) -> float:
        vals = [v for p, v in LEAF.items() if p[: len(state)] == state]
        return max(vals) if self.heuristic == "max" else sum(vals) / len(vals)

    def is_terminal(self, state: tuple[int, ...]) -> bool:
        return len(state) == 3

    def reward(self, state: tuple[int, ...]) -> float:
        return LEAF[state]


class BanditProblem:
    """Three Bernoulli arms (0.2, 0.5, 0.8) sampled through the search's rng."""

    PROBS = (0.2, 0.5, 0.8)

    def initial_state(self) -> int | None:
        return None

    def actions(self, state: int | None) -> Sequence[int]:
        return [0, 1, 2] if state is None else []

    def step(self, state: int | None, action: int) -> int:
        return action

    def score(self, state: int | None) -> float:
        return 0.5

    def is_terminal(self, state: int | None) -> bool:
        return False

    def reward(self, state: int | None) -> float:
        return 0.0

    def rollout(self, state: int | None, rng: random.Random) -> float:
        assert state is not None
        return 1.0 if rng.random() < self.PROBS[state] else 0.0


class AsyncTreeProblem:
    """Async TreeProblem that really suspends, and tracks concurrent calls."""

    def __init__(self) -> None:
        self.inner = TreeProblem("max")
        self.in_flight = 0
        self.max_in_flight = 0

    async def _yield(self) -> None:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        await asyncio.sleep(0)
        self.in_flight -= 1

    async def initial_state(self) -> tuple[int, ...]:
        await self._yield()
        return self.inner.initial_state()

    async def actions(self, state: tuple[int, ...]) -> Sequence[int]:
        await self._yield()
        return self.inner.actions(state)

    async def step(self, state: tuple[int, ...], action: int) -> tuple[int, ...]:
        await self._yield()
        return self.inner.step(state, action)

    async def score(self, state: tuple[int, ...]) -> float:
        await self._yield()
        return self.inner.score(state)

    async def is_terminal(self, state: tuple[int, ...]) -> bool:
        await self._yield()
        return self.inner.is_terminal(state)

    async def reward(self, state: tuple[int, ...]) -> float:
        await self._yield()
        return self.inner.reward(state)


def replay(problem: TreeProblem | PathProblem, path: list[object]) -> object:
    state = problem.initial_state()
    for action in path:
        state = problem.step(state, action)  # type: ignore[arg-type]
    return state


def assert_consistent(result: SearchResult) -> None:
    assert isinstance(result, SearchResult)
    assert result.tree, "tree must contain at least the root"
    roots = [n for n in result.tree if n.parent is None]
    assert len(roots) == 1 and roots[0].id == 0 and roots[0].depth == 0
    for i, node in enumerate(result.tree):
        assert node.id == i
        if node.parent is not None:
            assert 0 <= node.parent < i
            assert result.tree[node.parent].depth + 1 == node.depth
    records = result.tree_records()
    assert [r["node"] for r in records] == list(range(len(result.tree)))
    json.dumps(records)
    assert result.nodes_pruned == sum(n.pruned for n in result.tree)


# ---------------------------------------------------------------- BFS


def _grid_with_walls() -> nx.Graph:
    g = nx.grid_2d_graph(4, 4)
    g.remove_nodes_from([(1, 1), (1, 2), (2, 1)])
    return g


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bfs_finds_shortest_path_on_random_graphs(seed: int) -> None:
    g = nx.gnm_random_graph(12, 16, seed=seed)
    comp = sorted(max(nx.connected_components(g), key=len))
    start, goal = comp[0], comp[-1]
    res = bfs(PathProblem(g, start, goal), rng=random.Random(0), max_depth=12, max_nodes=50_000)
    assert len(res.best_path) == nx.shortest_path_length(g, start, goal)
    assert res.best_state[-1] == goal and res.best_value == 1.0
    assert_consistent(res)


def test_bfs_grid_shortest_and_beam_and_budget() -> None:
    g = _grid_with_walls()
    problem = PathProblem(g, (0, 0), (3, 3))
    res = bfs(problem, rng=random.Random(0), max_depth=20, max_nodes=10_000)
    assert len(res.best_path) == nx.shortest_path_length(g, (0, 0), (3, 3)) == 6
    assert replay(problem, res.best_path) == res.best_state
    assert res.nodes_pruned == 0

    open_grid = PathProblem(nx.grid_2d_graph(4, 4), (0, 0), (3, 3))
    full = bfs(open_grid, rng=random.Random(0), max_depth=20, max_nodes=10_000)
    beamed = bfs(open_grid, rng=random.Random(0), beam_width=2, max_depth=20, max_nodes=10_000)
    assert len(full.best_path) == 6 and full.nodes_pruned == 0
    assert beamed.best_state is not None and beamed.best_state[-1] == (3, 3)
    assert beamed.nodes_pruned > 0 and beamed.nodes_expanded < full.nodes_expanded
    assert_consistent(beamed)

    starved = bfs(problem, rng=random.Random(0), max_depth=20, max_nodes=3)
    assert starved.best_state is None and starved.best_path == [] and starved.best_value is None
    assert starved.nodes_expanded == 3


def test_terminal_root_is_returned_immediately() -> None:
    g = nx.path_graph(2)
    for res in (
        bfs(PathProblem(g, 0, 0), rng=random.Random(0), max_depth=3, max_nodes=10),
        beam_search(PathProblem(g, 0, 0), rng=random.Random(0), width=2, max_depth=3),
        dfs(
            PathProblem(g, 0, 0), rng=random.Random(0), prune_below=None, max_nodes=10, max_depth=3
        ),
    ):
        assert res.best_path == [] and res.best_state == (0,) and res.nodes_expanded == 0


# ---------------------------------------------------------------- beam / DFS


@pytest.mark.parametrize("heuristic", ["max", "mean"])
def test_beam_search_finds_optimum(heuristic: str) -> None:
    res = beam_search(TreeProblem(heuristic), rng=random.Random(0), width=2, max_depth=3)
    assert tuple(res.best_path) == OPTIMUM and res.best_value == 1.0
    assert res.nodes_expanded == 1 + 2 + 2
    assert_consistent(res)


def test_dfs_exhaustive_finds_optimum() -> None:
    res = dfs(
        TreeProblem("mean"),
        rng=random.Random(0),
        prune_below=None,
        max_nodes=100,
        max_depth=3,
        first_solution=False,
    )
    assert tuple(res.best_path) == OPTIMUM and res.best_value == 1.0
    assert res.nodes_expanded == 1 + 3 + 9 and res.nodes_pruned == 0
    assert_consistent(res)


def test_dfs_pruning_expands_fewer_and_still_finds_optimum() -> None:
    kwargs = {"rng": random.Random(0), "max_nodes": 100, "max_depth": 3, "first_solution": False}
    full = dfs(TreeProblem("max"), prune_below=None, **kwargs)  # type: ignore[arg-type]
    pruned = dfs(TreeProblem("max"), prune_below=0.9, **kwargs)  # type: ignore[arg-type]
    assert tuple(full.best_path) == tuple(pruned.best_path) == OPTIMUM
    assert pruned.nodes_expanded < full.nodes_expanded
    assert pruned.nodes_pruned > 0
    assert_consistent(pruned)


def test_dfs_first_solution_follows_best_scores() -> None:
    res = dfs(
        TreeProblem("max"), rng=random.Random(0), prune_below=None, max_nodes=100, max_depth=3
    )
    assert tuple(res.best_path) == OPTIMUM and res.nodes_expanded == 3


def test_dfs_respects_budgets() -> None:
    res = dfs(TreeProblem("max"), rng=random.Random(0), prune_below=None, max_nodes=2, max_depth=3)
    assert res.best_state is None and res.nodes_expanded == 2
    shallow = dfs(
        TreeProblem("max"),
        rng=random.Random(0),
        prune_below=None,
        max_nodes=100,
        max_depth=2,
        first_solution=False,
    )
    assert shallow.best_state is None and max(n.depth for n in shallow.tree) == 2


# ---------------------------------------------------------------- MCTS


def test_ucb1_hand_computed() -> None:
    # 3/5 + 1.4 * sqrt(ln 20 / 5) = 0.6 + 1.4 * 0.774047... = 1.683664
    assert ucb1(3.0, 5, 20, 1.4) == pytest.approx(1.683664, abs=1e-4)
    assert ucb1(3.0, 5, 20, 0.0) == pytest.approx(0.6)
    assert ucb1(0.0, 0, 20, 1.4) == math.inf
    assert ucb1(0.0, 0, 0, 1.4) == math.inf


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_mcts_bandit_converges_to_best_arm(seed: int) -> None:
    res = mcts(BanditProblem(), rng=random.Random(seed), iterations=500, max_depth=1)
    assert res.best_path == [2] and res.best_state == 2
    assert res.best_value is not None and 0.65 < res.best_value < 0.95
    root = res.tree[0]
    arms = [n for n in res.tree if n.parent == 0]
    assert root.visits == 500 and sum(a.visits for a in arms) == 500
    assert res.nodes_expanded == 3
    assert_consistent(res)


def test_mcts_default_random_playout_on_tree() -> None:
    res = mcts(TreeProblem(), rng=random.Random(0), iterations=300, max_depth=3)
    assert tuple(res.best_path) == OPTIMUM and res.best_value == pytest.approx(1.0)
    assert res.tree[0].visits == 300
    assert_consistent(res)


def test_mcts_zero_iterations() -> None:
    res = mcts(TreeProblem(), rng=random.Random(0), iterations=0, max_depth=3)
    assert res.best_path == [] and res.best_value is None and len(res.tree) == 1


# ---------------------------------------------------------------- DAG utilities


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(min_value=0, max_value=12),
    data=st.data(),
)
def test_topological_layers_match_networkx(n: int, data: st.DataObject) -> None:
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    mask = data.draw(st.lists(st.booleans(), min_size=len(pairs), max_size=len(pairs)))
    perm = data.draw(st.permutations(list(range(n))))
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from((perm[i], perm[j]) for (i, j), keep in zip(pairs, mask, strict=True) if keep)
    layers = topological_layers(g)
    assert layers == [sorted(layer) for layer in nx.topological_generations(g)]
    level = {v: k for k, layer in enumerate(layers) for v in layer}
    assert sorted(level) == list(range(n))
    assert all(level[u] < level[v] for u, v in g.edges)
    for v, k in level.items():
        assert k == 0 or any(level[u] == k - 1 for u in g.predecessors(v))


def test_topological_layers_cycle_raises() -> None:
    with pytest.raises(ValueError):
        topological_layers(nx.DiGraph([("a", "b"), ("b", "c"), ("c", "a")]))
    with pytest.raises(ValueError):
        topological_layers(nx.DiGraph([("a", "a")]))


def test_topological_layers_mixed_types_are_deterministic() -> None:
    g = nx.DiGraph([("x", 1), ("x", "y")])
    assert topological_layers(g) == [["x"], [1, "y"]]


def test_critical_path_length_hand_example() -> None:
    g = nx.DiGraph([("a", "b"), ("b", "d"), ("a", "c"), ("c", "d")])
    g.add_node("e")
    durations = {"a": 3.0, "b": 2.0, "c": 5.0, "d": 4.0, "e": 1.0}
    assert critical_path_length(g, durations) == pytest.approx(12.0)  # a -> c -> d
    assert critical_path_length(g, {**durations, "e": 20.0}) == pytest.approx(20.0)
    assert critical_path_length(nx.DiGraph(), {}) == 0.0
    with pytest.raises(ValueError):
        critical_path_length(nx.DiGraph([(1, 2), (2, 1)]), {1: 1.0, 2: 1.0})
    with pytest.raises(KeyError):
        critical_path_length(g, {"a": 1.0})


# ---------------------------------------------------------------- cross-cutting

RUNNERS: dict[str, Callable[[int], SearchResult]] = {
    "bfs": lambda s: bfs(
        PathProblem(_grid_with_walls(), (0, 0), (3, 3)),
        rng=random.Random(s),
        beam_width=3,
        max_depth=10,
        max_nodes=500,
    ),
    "dfs": lambda s: dfs(
        TreeProblem("max"),
        rng=random.Random(s),
        prune_below=0.9,
        max_nodes=100,
        max_depth=3,
        first_solution=False,
    ),
    "beam_search": lambda s: beam_search(
        TreeProblem("mean"), rng=random.Random(s), width=2, max_depth=3
    ),
    "mcts": lambda s: mcts(TreeProblem(), rng=random.Random(s), iterations=150, max_depth=3),
    "mcts_bandit": lambda s: mcts(
        BanditProblem(), rng=random.Random(s), iterations=100, max_depth=1
    ),
}


@pytest.mark.parametrize("name", sorted(RUNNERS))
def test_same_seed_same_tree(name: str) -> None:
    a, b = RUNNERS[name](7), RUNNERS[name](7)
    assert a.tree_records() == b.tree_records()
    assert (a.best_path, a.best_value, a.nodes_expanded) == (
        b.best_path,
        b.best_value,
        b.nodes_expanded,
    )
    assert a.algorithm == name.split("_bandit")[0]
    assert_consistent(a)


def test_tree_records_shape_and_stringified_actions() -> None:
    res = mcts(BanditProblem(), rng=random.Random(0), iterations=10, max_depth=1)
    rec = res.tree_records()[0]
    assert set(rec) == {
        "node",
        "parent",
        "action",
        "score",
        "visits",
        "value",
        "depth",
        "pruned",
        "terminal",
    }
    res.tree[0].action = object()
    assert isinstance(res.tree_records()[0]["action"], str)


def test_async_entry_points_match_sync_and_run_concurrently() -> None:
    async def run_all() -> tuple[list[SearchResult], int]:
        prob = AsyncTreeProblem()
        results = [
            await bfs_async(prob, rng=random.Random(1), max_depth=3, max_nodes=100),
            await dfs_async(
                prob,
                rng=random.Random(1),
                prune_below=0.9,
                max_nodes=100,
                max_depth=3,
                first_solution=False,
            ),
            await beam_search_async(prob, rng=random.Random(1), width=2, max_depth=3),
            await mcts_async(prob, rng=random.Random(1), iterations=100, max_depth=3),
        ]
        return results, prob.max_in_flight

    async_results, max_in_flight = asyncio.run(run_all())
    sync_results = [
        bfs(TreeProblem("max"), rng=random.Random(1), max_depth=3, max_nodes=100),
        dfs(
            TreeProblem("max"),
            rng=random.Random(1),
            prune_below=0.9,
            max_nodes=100,
            max_depth=3,
            first_solution=False,
        ),
        beam_search(TreeProblem("max"), rng=random.Random(1), width=2, max_depth=3),
        mcts(TreeProblem("max"), rng=random.Random(1), iterations=100, max_depth=3),
    ]
    for a, s in zip(async_results, sync_results, strict=True):
        assert a.tree_records() == s.tree_records()
        assert tuple(a.best_path) == tuple(s.best_path) == OPTIMUM
    assert max_in_flight > 1  # children were evaluated concurrently


def test_sync_entry_point_works_inside_running_loop() -> None:
    async def inner() -> SearchResult:
        return beam_search(TreeProblem(), rng=random.Random(0), width=2, max_depth=3)

    assert tuple(asyncio.run(inner()).best_path) == OPTIMUM


def test_adapter_wrapping_async_work_fails_loudly_in_sync_driver() -> None:
    with pytest.raises(RuntimeError, match="_async"):
        run_sync(bfs_async(AsyncTreeProblem(), rng=random.Random(0), max_depth=3, max_nodes=9))
    adapter = SyncAdapter(BanditProblem())
    assert adapter.rollout is not None and SyncAdapter(TreeProblem()).rollout is None


def test_invalid_budgets_raise() -> None:
    with pytest.raises(ValueError):
        beam_search(TreeProblem(), rng=random.Random(0), width=0, max_depth=3)
    with pytest.raises(ValueError):
        bfs(TreeProblem(), rng=random.Random(0), beam_width=0, max_depth=3, max_nodes=5)
    with pytest.raises(ValueError):
        mcts(TreeProblem(), rng=random.Random(0), iterations=-1, max_depth=3)
