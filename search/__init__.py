"""Pure search algorithms for planners: BFS, DFS, beam search, MCTS, and DAG utilities.

Each algorithm is written once as ``*_async`` over :class:`AsyncProblem`; the plain-named
sync functions wrap a sync :class:`Problem` with :class:`SyncAdapter` and drive it with
:func:`run_sync`. All take an explicit ``random.Random`` and a budget; none import the
rest of the project.
"""

from planarena.search.beam import beam_search, beam_search_async
from planarena.search.bfs import bfs, bfs_async
from planarena.search.dfs import dfs, dfs_async
from planarena.search.graph import critical_path_length, topological_layers
from planarena.search.mcts import mcts, mcts_async, ucb1
from planarena.search.problem import (
    AsyncProblem,
    Problem,
    SyncAdapter,
    gather_ordered,
    run_sync,
    use_gather,
)
from planarena.search.result import SearchNode, SearchResult

__all__ = [
    "AsyncProblem",
    "Problem",
    "SearchNode",
    "SearchResult",
    "SyncAdapter",
    "beam_search",
    "beam_search_async",
    "bfs",
    "bfs_async",
    "critical_path_length",
    "dfs",
    "dfs_async",
    "gather_ordered",
    "use_gather",
    "mcts",
    "mcts_async",
    "run_sync",
    "topological_layers",
    "ucb1",
]
