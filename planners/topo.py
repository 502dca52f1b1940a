"""Topological execution: for tasks whose dependencies are known, no search is needed.

One plan; its DAG is layered topologically (``search.topological_layers``) and each layer's
steps run concurrently in simulated time, so the episode's latency is the critical path. The
recovery ladder applies as in ``plan_execute_replan``.
"""

from __future__ import annotations

from planners.plan_execute import PlanExecuteReplanPlanner


class TopoPlanner(PlanExecuteReplanPlanner):
    name = "topo"

    def __init__(
        self,
        parallel: bool = True,
        max_replans: int = 3,
        backoff_s: tuple[float, ...] = (0.5, 1.0, 2.0),
        budget_usd: float = 1.0,
    ) -> None:
        super().__init__(
            parallel=parallel, max_replans=max_replans, backoff_s=backoff_s, budget_usd=budget_usd
        )
