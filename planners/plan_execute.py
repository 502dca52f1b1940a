"""Plan-and-Execute: one plan written up front, then executed by the DAG executor.

``PlanExecutePlanner`` is the static variant (a failed step ends the episode);
``PlanExecuteReplanPlanner`` adds the seed article's recovery ladder and replanning.
"""

from __future__ import annotations

from dataclasses import replace

from planarena.envs.tools import Toolbox
from planarena.planners.base import Planner, PlannerResult, PlannerStats, TaskView
from planarena.planners.executor import STATIC, LadderPolicy, PlanExecutor
from planarena.planners.llm.base import EpisodeLLM
from planarena.planners.params import Backoff, NonNegative, Times, checked


class PlanExecutePlanner(Planner):
    """Plan once, execute as written: no retries, no fallback, no replanning."""

    name = "plan_execute"

    @checked
    def __init__(self, parallel: bool = False) -> None:
        self.policy = replace(STATIC, parallel=parallel)

    async def run(self, task: TaskView, tools: Toolbox, llm: EpisodeLLM) -> PlannerResult:
        executor = PlanExecutor(self.policy, tools, llm, task.goal, PlannerStats())
        plan = await executor.first_plan()
        if isinstance(plan, PlannerResult):
            return plan
        return await executor.execute(plan)


class PlanExecuteReplanPlanner(PlanExecutePlanner):
    """Plan once, then recover: retry with backoff, fallback, skip, replan the remainder."""

    name = "plan_execute_replan"

    @checked
    def __init__(
        self,
        parallel: bool = False,
        max_replans: Times = 3,
        backoff_s: Backoff = (0.5, 1.0, 2.0),
        budget_usd: NonNegative = 1.0,
    ) -> None:
        self.policy = LadderPolicy(
            parallel=parallel,
            max_replans=max_replans,
            backoff_s=tuple(backoff_s),
            budget_usd=budget_usd,
        )
