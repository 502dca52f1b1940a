"""Topological execution: for tasks whose dependencies are known, no search is needed.

One plan; its DAG is layered topologically (``search.topological_layers``) and each layer's
steps run concurrently in simulated time, so the episode's latency is the critical path. The
recovery ladder applies as in ``plan_execute_replan``.
"""

from __future__ import annotations

from planarena.planners.params import Backoff, NonNegative, Times, checked
from planarena.planners.plan_execute import PlanExecuteReplanPlanner, PlanFormat


class TopoPlanner(PlanExecuteReplanPlanner):
    name = "topo"

    @checked
    def __init__(
        self,
        parallel: bool = True,
        max_replans: Times = 3,
        backoff_s: Backoff = (0.5, 1.0, 2.0),
        budget_usd: NonNegative = 1.0,
        plan_format: PlanFormat = "json",
    ) -> None:
        super().__init__(
            parallel=parallel,
            max_replans=max_replans,
            backoff_s=backoff_s,
            budget_usd=budget_usd,
            plan_format=plan_format,
        )
