"""MCTS: UCB1 tree search over partial plans with LLM-imagined rollouts, confirmed by execution.

Rollouts are the model imagining whether a partial plan would succeed: cheap, and optimistic
(the simulated model's ``rollout_optimism``), exactly where false success creeps in. So the
chosen branch only counts once real execution confirms it.
"""

from __future__ import annotations

from planarena.envs.tools import Toolbox
from planarena.planners.base import Planner, PlannerResult, TaskView
from planarena.planners.executor import LadderPolicy
from planarena.planners.llm.base import EpisodeLLM
from planarena.planners.params import Count, NonNegative, Times, checked
from planarena.planners.plan import PlanError, parse_plan
from planarena.planners.search_support import (
    PartialPlanProblem,
    make_executor,
    never_parsed,
    plan_text,
    record_tree,
)
from planarena.search import SearchNode, SearchResult, mcts_async


def trusted_lines(result: SearchResult, min_visits: int = 2) -> list[tuple[str, ...]]:
    """Candidate lines, best first: for each child of the root (best mean value first, visits
    breaking ties), follow the best-valued well-visited child until the statistics get thin."""
    children: dict[int | None, list[SearchNode]] = {}
    for node in result.tree:
        children.setdefault(node.parent, []).append(node)

    def key(c: SearchNode) -> tuple[float, int, int]:
        return (c.value_sum / max(c.visits, 1), c.visits, -c.id)

    root = next(n for n in result.tree if n.parent is None)
    lines = []
    for first in sorted(children.get(root.id, []), key=key, reverse=True):
        line, node = [first.action], first
        while True:
            trusted = [c for c in children.get(node.id, []) if c.visits >= min_visits]
            if not trusted:
                break
            node = max(trusted, key=key)
            line.append(node.action)
        lines.append(tuple(line))
    return lines


class MCTSPlanner(Planner):
    name = "mcts"

    @checked
    def __init__(
        self,
        iterations: Count = 16,
        c: NonNegative = 1.4,
        branching: Count = 3,
        max_steps: Count = 16,
        parallel: bool = False,
        replan: bool = True,
        max_replans: Times = 3,
        max_lines: Count = 3,
    ) -> None:
        self.max_lines = max_lines
        self.iterations = iterations
        self.c = c
        self.branching = branching
        self.max_steps = max_steps
        self.policy = LadderPolicy(parallel=parallel, replan=replan, max_replans=max_replans)

    async def run(self, task: TaskView, tools: Toolbox, llm: EpisodeLLM) -> PlannerResult:
        problem = PartialPlanProblem(
            task, tools, llm, branching=self.branching, max_steps=self.max_steps, judge=False
        )
        result = await mcts_async(
            problem,
            rng=task.rng("mcts"),
            iterations=self.iterations,
            c=self.c,
            max_depth=self.max_steps,
        )
        record_tree(llm, result)
        executor = make_executor(self.policy, tools, llm, task)
        names = tools.names()
        text = ""
        for line in trusted_lines(result)[: self.max_lines]:
            state = await problem.complete(line)  # the line, completed greedily
            text = plan_text(task.goal, state)
            try:  # confirm cheaply before paying for execution: a plan must at least validate
                parse_plan(text, names)
            except PlanError as err:
                llm.trace.append({"event": "line_rejected", "reason": err.reason})
                continue
            break
        if never_parsed(problem, executor.stats):
            detail = "no proposal followed the format"
            return PlannerResult(None, "malformed_output", detail, executor.stats, llm.trace)
        return await executor.execute_text(text or plan_text(task.goal, ()))
