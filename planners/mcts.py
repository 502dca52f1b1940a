"""MCTS: UCB1 tree search over partial plans with LLM-imagined rollouts, confirmed by execution.

Rollouts are the model imagining whether a partial plan would succeed: cheap, and optimistic
(the simulated model's ``rollout_optimism``), exactly where false success creeps in. So the
chosen branch only counts once real execution confirms it.

Under a token budget the number of iterations is sized before the search from this episode's
measured costs: the root's proposals are asked first (the search reuses them), then
``iterations`` is cut to what the budget holds after a greedy completion of a line to
``max_steps`` (one proposal a step, at the measured cost and growth) and one replan (the
largest call seen), at one proposal and one rollout an iteration. With no iteration
affordable the plan is the greedy completion from the root. Without a budget nothing changes.
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
    TokenLedger,
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

    async def sized_iterations(self, problem: PartialPlanProblem, ledger: TokenLedger) -> int:
        """The iterations the budget holds (at most ``iterations``): the root's proposals are
        asked and measured first (kept, so the search does not ask again); an iteration is
        predicted at one proposal and one rollout about a one-step plan; what is spent on them
        must leave a greedy completion from one step to ``max_steps``, its final rollout and
        the reserve."""
        await problem.actions(())
        per_iteration = ledger.unit("propose", 1) + ledger.unit("rollout", 1)
        finish = ledger.greedy(1, self.max_steps - 1) + ledger.unit("rollout", self.max_steps)
        slack = ledger.remaining() - finish - ledger.reserve()
        if per_iteration <= 0:
            return self.iterations
        return max(0, min(self.iterations, slack // per_iteration))

    async def run(self, task: TaskView, tools: Toolbox, llm: EpisodeLLM) -> PlannerResult:
        reserve = int(self.policy.replan and self.policy.max_replans > 0)
        ledger = TokenLedger.of(llm, horizon=self.max_steps, reserve_calls=reserve)
        problem = PartialPlanProblem(
            task,
            tools,
            llm,
            branching=self.branching,
            max_steps=self.max_steps,
            judge=False,
            ledger=ledger,
        )
        iterations = self.iterations
        if ledger is not None:
            iterations = await self.sized_iterations(problem, ledger)
        result = await mcts_async(
            problem,
            rng=task.rng("mcts"),
            iterations=iterations,
            c=self.c,
            max_depth=self.max_steps,
        )
        record_tree(llm, result)
        executor = make_executor(self.policy, tools, llm, task)
        names = tools.names()
        text = ""
        lines = trusted_lines(result)[: self.max_lines]
        if ledger is not None and not lines:  # no iteration fitted: the greedy completion
            lines = [()]
        for line in lines:
            state = await problem.complete(line)  # the line, completed greedily
            text = plan_text(task.goal, state)
            try:  # confirm cheaply before paying for execution: a plan must at least validate
                parse_plan(text, names, revision=llm.plan_revision)
            except PlanError as err:
                llm.trace.append({"event": "line_rejected", "reason": err.reason})
                continue
            break
        if never_parsed(problem, executor.stats):
            detail = "no proposal followed the format"
            return PlannerResult(None, "malformed_output", detail, executor.stats, llm.trace)
        return await executor.execute_text(text or plan_text(task.goal, ()))
