"""DFS with pruning and backtracking *during execution* (the seed's web-navigation case).

Like ToolBench's DFSDT: at each point the model proposes several next actions and a judge
scores them; candidates below ``prune_below`` are pruned; the best is executed for real. A
branch whose action fails (a tool error) or that runs out of good candidates is abandoned and
the search goes back to the last open alternative. Failed attempts stay in the model's
context ("do not repeat"), so alternatives can route around a broken source. The search is
``search.dfs_async``; a node's action is executed when the node is expanded.

Under a token budget each point's width is sized from this episode's measured costs
(:class:`~planarena.planners.search_support.TokenLedger`): a point asks for ``branching``
candidates and a judgement only while that leaves enough for a greedy finish (one proposal a
step, at the measured cost and growth, to ``max_depth`` or the expansions ``max_nodes`` has
left); otherwise it asks for the model's single next action and runs it unjudged (ReAct-like;
a failed one is still re-proposed with the failure in view, up to ``max_rethinks``). The first
point is always asked at full width: it measures what a point costs. The tools run during the
search, so no reserve is kept for execution. Without a budget nothing changes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from planarena.envs.tools import Toolbox, ToolError
from planarena.planners.base import Planner, PlannerResult, PlannerStats, TaskView
from planarena.planners.formats import (
    FINISH,
    PROPOSE_ACTIONS,
    RATE_CANDIDATES,
    ActionTurn,
    dumps,
    observation_text,
    parse_candidates,
    parse_scores,
    render_candidates,
)
from planarena.planners.llm.base import EpisodeLLM
from planarena.planners.llm.protocol import Observed, RequestContext, RequestKind
from planarena.planners.params import Count, Ratio, Times, ToolCalling, checked
from planarena.planners.prompts import react_system
from planarena.planners.search_support import TokenLedger, record_tree
from planarena.search import dfs_async

T = TypeVar("T")


@dataclass(eq=False)
class _Node:
    """A path of executed (action, observation) pairs plus the action this node will run."""

    path: tuple[tuple[str, str], ...]
    action: ActionTurn | None
    seen: tuple[Observed, ...] = ()  # the path's calls, as the requests' context states them
    observation: str | None = None
    rethinks: int = 0  # how many times candidates were proposed afresh at this point


# A pseudo-action: "propose again here, now that the earlier candidates failed" (DFSDT's
# diversity step). It is visited after every real candidate of its node.
RETHINK = ActionTurn("", "__rethink__", {})


class _ExecutionTree:
    def __init__(
        self,
        task: TaskView,
        tools: Toolbox,
        llm: EpisodeLLM,
        stats: PlannerStats,
        branching: int,
        accept: float,
        prune_below: float,
        max_rethinks: int,
    ) -> None:
        self.accept = accept
        self.accept_floor = prune_below
        self.max_rethinks = max_rethinks
        self.task = task
        self.tools = tools
        self.llm = llm
        self.stats = stats
        self.branching = branching
        self.system = react_system(tools.catalogue())
        self.failed: list[tuple[str, str]] = []
        self.failed_seen: list[Observed] = []  # the failed attempts, as context
        self.parsed = self.unparseable = 0  # proposals that followed the format, or not
        self.native = False  # offer the tools through the API when proposing
        self.scores: dict[int, float] = {}
        self.ledger: TokenLedger | None = None  # under a token budget: sizes each point's width
        self.max_nodes = 0  # the search's cap on expansions (for the greedy finish's length)
        self.expanded = 0

    def _width(self, depth: int) -> int:
        """``branching`` while the ledger affords a judged point and a greedy finish after it,
        else 1 (always ``branching`` without a budget, or before anything is measured)."""
        ledger = self.ledger
        if ledger is None or not ledger.measured("propose"):
            return self.branching
        wide = ledger.unit("propose", depth) + ledger.unit("judge", depth)
        steps = self.max_nodes - self.expanded
        if ledger.affords(wide, depth + 1, steps):
            return self.branching
        ledger.narrowed += 1
        return 1

    def _messages(self, path: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
        msgs = [
            {"role": "system", "content": self.system},
            {"role": "user", "content": f"Task: {self.task.goal}"},
        ]
        if self.failed:
            msgs.append(
                {"role": "user", "content": "Earlier attempts that failed (do not repeat them):"}
            )
            for action, obs in self.failed:
                msgs += [
                    {"role": "assistant", "content": action},
                    {"role": "user", "content": f"Observation: {obs}"},
                ]
            msgs.append({"role": "user", "content": "The current path:"})
        for action, obs in path:
            msgs += [
                {"role": "assistant", "content": action},
                {"role": "user", "content": f"Observation: {obs}"},
            ]
        return msgs

    async def _measured(self, kind: str, depth: int, call: Awaitable[T]) -> T:
        if self.ledger is None:
            return await call
        return await self.ledger.measure(kind, depth, call)

    async def initial_state(self) -> _Node:
        return _Node((), None)

    async def _execute(self, node: _Node) -> bool:
        """Run the node's action; False if it failed (the branch is abandoned)."""
        turn = node.action
        if turn is None:
            return True
        text = (
            f"Thought: {turn.thought}\nAction: {turn.action}\nAction Input: "
            f"{dumps(turn.action_input)}"
        )
        try:
            result = await self.tools.call(turn.action, turn.action_input)
        except ToolError as err:
            self.failed.append((text, err.observation()))
            self.failed_seen.append(
                Observed(
                    f"failed_{len(self.failed)}",
                    turn.action,
                    turn.action_input,
                    err.observation(),
                    ok=False,
                )
            )
            self.stats.backtracks += 1
            return False
        node.observation = observation_text(result)
        node.path = (*node.path, (text, node.observation))
        node.seen = (
            *node.seen,
            Observed(f"path_{len(node.seen)}", turn.action, turn.action_input, node.observation),
        )
        return True

    def _context(self, node: _Node, **fields: object) -> RequestContext:
        """The request's context: the failed attempts, then the current path (the order the
        prompt shows them in)."""
        return RequestContext(observations=(*self.failed_seen, *node.seen), **fields)  # type: ignore[arg-type]

    async def actions(self, node: _Node) -> Sequence[ActionTurn]:
        if node.action is not None and node.action.action == FINISH:
            return []  # an answer the judge found wanting: a dead leaf, go back
        if not await self._execute(node):
            return []
        self.expanded += 1
        depth = len(node.seen)
        k = self._width(depth)
        messages = self._messages(node.path)  # failed attempts so far are in the context
        text = await self._measured(
            "propose",
            depth,
            self.llm.complete(
                [*messages, {"role": "user", "content": PROPOSE_ACTIONS.format(k=k)}],
                role="planner",
                kind=RequestKind.PROPOSE_ACTIONS,
                context=self._context(node, k=k),
                tools=self.tools.catalogue() if self.native else None,
            ),
        )
        notes: list[str] = []
        candidates = parse_candidates(text, notes)[:k]
        self.stats.plan_repairs += bool(notes)
        if not candidates:
            self.unparseable += 1
            return []
        self.parsed += 1
        if k < self.branching:  # a lone greedy action (under a budget): nothing to judge
            self.scores[id(candidates[0])] = 1.0
            return [*candidates, RETHINK] if node.rethinks < self.max_rethinks else candidates
        listing = render_candidates([(c.thought, c.action, c.action_input) for c in candidates])
        verdict = await self._measured(
            "judge",
            depth,
            self.llm.complete(
                [*messages, {"role": "user", "content": f"{listing}\n{RATE_CANDIDATES}"}],
                role="evaluator",
                kind=RequestKind.RATE_CANDIDATES,
                context=self._context(
                    node, candidates=tuple((c.action, c.action_input) for c in candidates)
                ),
            ),
        )
        scores = parse_scores(verdict, len(candidates))
        best = max(scores)
        for c, s in zip(candidates, scores, strict=True):
            # relative to the best sibling: ``prune_below`` and ``accept`` are ratios, so they
            # mean the same on any judge's scale and were not read off any simulated table
            self.scores[id(c)] = s / best if best > 0 else 0.0
        if node.rethinks < self.max_rethinks:
            return [*candidates, RETHINK]
        return candidates

    async def step(self, node: _Node, action: ActionTurn) -> _Node:
        if action is RETHINK:
            child = _Node(node.path, None, node.seen, rethinks=node.rethinks + 1)
            self.scores[id(child)] = self.accept_floor
            return child
        child = _Node(node.path, action, node.seen)
        self.scores[id(child)] = self.scores.get(id(action), 0.0)
        return child

    async def score(self, node: _Node) -> float:
        return self.scores.get(id(node), 1.0 if node.action is None else 0.0)

    async def is_terminal(self, node: _Node) -> bool:
        """An answer ends the search only if the judge rated it at least ``accept`` times the
        best candidate at its point (1.0: answering is the judge's first choice)."""
        return (
            node.action is not None
            and node.action.action == FINISH
            and await self.score(node) >= self.accept
        )

    async def reward(self, node: _Node) -> float:
        assert node.action is not None
        status = str(node.action.action_input.get("status", "success")).lower()
        ok = status == "success" and node.action.action_input.get("answer")
        return await self.score(node) if ok else 0.0


class DFSPlanner(Planner):
    name = "dfs"

    @checked
    def __init__(
        self,
        branching: Count = 3,
        prune_below: Ratio = 0.5,
        max_nodes: Count = 40,
        max_depth: Count = 30,
        accept: Ratio = 1.0,
        max_rethinks: Times = 2,
        tool_calling: ToolCalling = "text",
    ) -> None:
        self.tool_calling = tool_calling  # native: candidates as the API's parallel tool calls
        self.accept = accept
        self.max_rethinks = max_rethinks
        self.branching = branching
        self.prune_below = prune_below
        self.max_nodes = max_nodes
        self.max_depth = max_depth

    async def run(self, task: TaskView, tools: Toolbox, llm: EpisodeLLM) -> PlannerResult:
        stats = PlannerStats()
        tree = _ExecutionTree(
            task,
            tools,
            llm,
            stats,
            self.branching,
            self.accept,
            self.prune_below,
            self.max_rethinks,
        )
        tree.native = self.tool_calling == "native"
        tree.ledger = TokenLedger.of(llm, horizon=self.max_depth, reserve_calls=0)
        tree.max_nodes = self.max_nodes
        result = await dfs_async(
            tree,
            rng=task.rng("dfs"),
            prune_below=self.prune_below,
            max_nodes=self.max_nodes,
            max_depth=self.max_depth,
            first_solution=True,
        )
        record_tree(llm, result)
        node = result.best_state
        if tree.parsed == 0 and tree.unparseable:  # the model never kept the format
            detail = "no proposal followed the format"
            return PlannerResult(None, "malformed_output", detail, stats, llm.trace)
        if node is None or node.action is None:
            if result.nodes_expanded >= self.max_nodes:
                return PlannerResult(
                    None,
                    "budget",
                    f"no answer within {self.max_nodes} expansions",
                    stats,
                    llm.trace,
                )
            return PlannerResult(
                None, "gave_up", "every branch failed or was pruned", stats, llm.trace
            )
        answer = str(node.action.action_input.get("answer", "") or "")
        if result.best_value and answer:
            return PlannerResult(answer, "answered", "", stats, llm.trace)
        status = str(node.action.action_input.get("status", "success")).lower()
        stop = "reported_unreachable" if status == "failure" else "gave_up"
        return PlannerResult(None, stop, answer or "model gave up", stats, llm.trace)
