"""BFS: breadth-first search over partial plans with a beam (the seed's 3–5 step scenario)."""

from __future__ import annotations

from planarena.envs.tools import Toolbox
from planarena.planners.base import Planner, PlannerResult, TaskView
from planarena.planners.executor import LadderPolicy
from planarena.planners.llm.base import EpisodeLLM
from planarena.planners.params import Count, Ratio, Times, checked
from planarena.planners.search_support import (
    PartialPlanProblem,
    TokenLedger,
    make_executor,
    never_parsed,
    plan_text,
    record_tree,
)
from planarena.search import bfs_async


class BFSPlanner(Planner):
    """Level by level: every kept partial plan proposes ``branching`` next steps, the judge
    scores them, the best ``beam_width`` survive; the shallowest complete plan is executed
    (with the recovery ladder).

    Under a token budget the width of each expansion is sized from this episode's measured
    costs (:class:`~planarena.planners.search_support.TokenLedger`): an expansion asks for
    ``branching`` candidates and a judgement only while that leaves enough for a greedy finish
    to ``max_steps`` (one proposal a step, at the measured cost and growth) plus one replan
    (the largest call seen). Otherwise the best kept plan of the level is extended by the
    model's single proposal, unjudged, and the rest of the level is not expanded. Without a
    budget nothing is measured and the search is the configured one."""

    name = "bfs"

    @checked
    def __init__(
        self,
        beam_width: Count = 3,
        branching: Count = 3,
        max_steps: Count = 16,
        max_nodes: Count = 80,
        parallel: bool = False,
        replan: bool = True,
        max_replans: Times = 3,
        accept: Ratio = 1.0,
    ) -> None:
        self.accept = accept
        self.beam_width = beam_width
        self.branching = branching
        self.max_steps = max_steps
        self.max_nodes = max_nodes
        self.policy = LadderPolicy(parallel=parallel, replan=replan, max_replans=max_replans)

    async def run(self, task: TaskView, tools: Toolbox, llm: EpisodeLLM) -> PlannerResult:
        reserve = int(self.policy.replan and self.policy.max_replans > 0)
        problem = PartialPlanProblem(
            task,
            tools,
            llm,
            branching=self.branching,
            max_steps=self.max_steps,
            judge=True,
            accept=self.accept,
            ledger=TokenLedger.of(llm, horizon=self.max_steps, reserve_calls=reserve),
        )
        result = await bfs_async(
            problem,
            rng=task.rng("bfs"),
            beam_width=self.beam_width,
            max_depth=self.max_steps,
            max_nodes=self.max_nodes,
        )
        record_tree(llm, result)
        executor = make_executor(self.policy, tools, llm, task)
        if never_parsed(problem, executor.stats):
            detail = "no proposal followed the format"
            return PlannerResult(None, "malformed_output", detail, executor.stats, llm.trace)
        if result.best_state is None:
            return PlannerResult(
                None, "budget", "search found no complete plan", executor.stats, llm.trace
            )
        return await executor.execute_text(plan_text(task.goal, result.best_state))
