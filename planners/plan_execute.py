"""Plan-and-Execute: one plan written up front, then executed by the DAG executor.

``PlanExecutePlanner`` is the static variant (a failed step ends the episode);
``PlanExecuteReplanPlanner`` adds the seed article's recovery ladder and replanning;
``PlanExecuteRerunPlanner`` keeps the plan static and, when a run of it fails, runs it again
from the start (the article's third decision: "a static plan rerun from scratch").
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from planarena.envs import clock
from planarena.envs.tools import Toolbox
from planarena.planners.base import Planner, PlannerResult, PlannerStats, TaskView
from planarena.planners.executor import STATIC, LadderPolicy, PlanExecutor
from planarena.planners.llm.base import EpisodeLLM
from planarena.planners.params import Backoff, NonNegative, Times, checked

PlanFormat = Literal["json", "text"]
"""How a plan is asked for and read: a Plan JSON object, or numbered steps in prose."""


class PlanExecutePlanner(Planner):
    """Plan once, execute as written: no retries, no fallback, no replanning."""

    name = "plan_execute"

    @checked
    def __init__(self, parallel: bool = False, plan_format: PlanFormat = "json") -> None:
        self.policy = replace(STATIC, parallel=parallel, plan_format=plan_format)

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
        plan_format: PlanFormat = "json",
    ) -> None:
        self.policy = LadderPolicy(
            parallel=parallel,
            max_replans=max_replans,
            backoff_s=tuple(backoff_s),
            budget_usd=budget_usd,
            plan_format=plan_format,
        )


class PlanExecuteRerunPlanner(PlanExecutePlanner):
    """A static plan, rerun from the start when a run of it fails, up to ``max_reruns`` times.

    Each run executes the plan as written (no retry, fallback, skip or replan within it); a
    run that ends without an answer is followed by a fresh run from the first step: every
    step's tool is called again, results of the failed run are forgotten (a rerun from
    scratch assumes the task is idempotent, as the article's flip condition does). By
    default the rerun executes *the same plan* and costs no LLM call: the strategy bets that
    the failure was the world's (a transient fault), not the plan's. With ``fresh_plan`` a
    rerun asks for a whole new plan first, the same request as the first one (the simulated
    model answers it with a fresh sample of the same beliefs). A first plan that is rejected
    is rerun only with ``fresh_plan`` (there is no plan to run again). Rerun ``k`` starts after
    ``backoff_s[k - 1]`` seconds (the last value repeats; the seed's retry schedule by
    default, so a rerun is not charged a rate limit a retry would have waited out; ``[0]``
    reruns at once). Every rerun is a ``rerun`` trace event; the budgets bind the reruns like
    any call."""

    name = "plan_execute_rerun"

    @checked
    def __init__(
        self,
        parallel: bool = False,
        max_reruns: Times = 2,
        fresh_plan: bool = False,
        backoff_s: Backoff = (0.5, 1.0, 2.0),
        plan_format: PlanFormat = "json",
    ) -> None:
        super().__init__(parallel=parallel, plan_format=plan_format)
        self.max_reruns = max_reruns
        self.fresh_plan = fresh_plan
        self.backoff_s = tuple(backoff_s) or (0.0,)

    async def run(self, task: TaskView, tools: Toolbox, llm: EpisodeLLM) -> PlannerResult:
        stats = PlannerStats()
        executor = PlanExecutor(self.policy, tools, llm, task.goal, stats)
        plan = await executor.first_plan()
        result = plan if isinstance(plan, PlannerResult) else await executor.execute(plan)
        reruns = 0
        while result.stop != "answered" and reruns < self.max_reruns:
            if isinstance(plan, PlannerResult) and not self.fresh_plan:
                break  # the first plan was rejected: nothing to run again
            reruns += 1
            wait = self.backoff_s[min(reruns, len(self.backoff_s)) - 1]
            llm.trace.append(
                {
                    "event": "rerun",
                    "attempt": reruns,
                    "after": result.stop,
                    "detail": result.detail,
                    "fresh_plan": self.fresh_plan,
                    "wait_s": wait,
                    "t": clock.now(),
                }
            )
            await clock.sleep(wait)
            executor = PlanExecutor(self.policy, tools, llm, task.goal, stats)  # from scratch
            if self.fresh_plan:
                plan = await executor.first_plan()
                if isinstance(plan, PlannerResult):
                    result = plan
                    continue
            assert not isinstance(plan, PlannerResult)
            result = await executor.execute(plan)
        return result
