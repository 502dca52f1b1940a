"""Tree-of-Thoughts planning: candidate plans, an LLM judge, a beam; then DAG execution.

Level 1 asks for ``beam_width`` candidate plans (concurrently); each deeper level asks for
``branching`` revisions of every kept plan. A judge scores every candidate (a plan that does
not even parse scores 0 without costing a call); the best ``beam_width`` survive each level.
The best plan is executed with parallel layers and the replanning ladder: the seed's
"ToT + Replan + parallel" row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from planarena.envs import clock
from planarena.envs.tools import Toolbox
from planarena.planners.base import Planner, PlannerResult, TaskView
from planarena.planners.executor import LadderPolicy
from planarena.planners.formats import RATE_PLAN, OutputParseError, lenient_json, parse_score
from planarena.planners.llm.base import EpisodeLLM
from planarena.planners.llm.protocol import RequestContext, RequestKind
from planarena.planners.params import Backoff, Count, Times, checked
from planarena.planners.plan import PlanError, parse_plan
from planarena.planners.prompts import plan_system
from planarena.planners.search_support import make_executor, record_tree
from planarena.search import beam_search_async
from pydantic import Field

State = tuple[int, str]  # (level, plan text); the root is (0, "")


def _written_steps(text: str) -> list[Any] | None:
    """The steps of a plan as the model wrote them (read with the one lenient JSON reader
    every parser uses, before any normalization), for a request about that plan."""
    try:
        value = lenient_json(text, [])
    except OutputParseError:
        return None
    steps = value.get("steps") if isinstance(value, dict) else None
    return steps if isinstance(steps, list) else None


class _PlanTree:
    """The ToT problem for ``search.beam_search_async``: states are candidate plans."""

    def __init__(
        self,
        task: TaskView,
        tools: Toolbox,
        llm: EpisodeLLM,
        *,
        beam_width: int,
        branching: int,
        depth: int,
    ) -> None:
        self.task = task
        self.llm = llm
        self.names = tools.names()
        self.system = plan_system(tools.catalogue())
        self.beam_width = beam_width
        self.branching = branching
        self.depth = depth
        self.scores: dict[State, float] = {}

    async def _propose(self, parent: State) -> str:
        improve = None
        if not parent[1]:
            user = f"Task: {self.task.goal}"
        else:
            improve = _written_steps(parent[1])
            user = (
                f"Task: {self.task.goal}\nA candidate plan:\n{parent[1]}\n"
                "Improve this plan: fix wrong tools, missing dependencies or checks."
            )
        return await self.llm.complete(
            [{"role": "system", "content": self.system}, {"role": "user", "content": user}],
            role="planner",
            kind=RequestKind.PLAN,  # a whole plan, a first one or an improved candidate
            context=RequestContext(plan=improve),
        )

    async def _judge(self, text: str) -> float:
        try:
            parse_plan(text, self.names)
        except PlanError:
            return 0.0  # an invalid plan is rejected by the validator, not by the judge
        verdict = await self.llm.complete(
            [
                {"role": "system", "content": "You are a strict reviewer of agent plans."},
                {"role": "user", "content": f"Task: {self.task.goal}\nPlan:\n{text}\n{RATE_PLAN}"},
            ],
            role="evaluator",
            kind=RequestKind.RATE_PLAN,
            context=RequestContext(plan=_written_steps(text) or []),
        )
        try:
            return parse_score(verdict)
        except OutputParseError:
            return 0.0

    async def initial_state(self) -> State:
        return (0, "")

    async def actions(self, state: State) -> Sequence[str]:
        width = self.beam_width if state[0] == 0 else self.branching
        texts = await clock.gather(*(self._propose(state) for _ in range(width)))
        scores = await clock.gather(*(self._judge(t) for t in texts))
        for text, score in zip(texts, scores, strict=True):
            self.scores[(state[0] + 1, text)] = max(
                score, self.scores.get((state[0] + 1, text), 0.0)
            )
        return list(dict.fromkeys(texts))

    async def step(self, state: State, action: str) -> State:
        return (state[0] + 1, action)

    async def score(self, state: State) -> float:
        return self.scores.get(state, 0.0)

    async def is_terminal(self, state: State) -> bool:
        return state[0] >= self.depth

    async def reward(self, state: State) -> float:
        return self.scores.get(state, 0.0)


class ToTPlanner(Planner):
    name = "tot"

    @checked
    def __init__(
        self,
        beam_width: Annotated[int, Field(ge=1, le=10, strict=True)] = 3,
        branching: Count = 2,
        depth: Count = 1,
        parallel: bool = True,
        max_replans: Times = 3,
        backoff_s: Backoff = (0.5, 1.0, 2.0),
    ) -> None:
        self.beam_width = beam_width
        self.branching = branching
        self.depth = depth
        self.policy = LadderPolicy(
            parallel=parallel, max_replans=max_replans, backoff_s=tuple(backoff_s)
        )

    async def run(self, task: TaskView, tools: Toolbox, llm: EpisodeLLM) -> PlannerResult:
        tree = _PlanTree(
            task, tools, llm, beam_width=self.beam_width, branching=self.branching, depth=self.depth
        )
        result = await beam_search_async(
            tree, rng=task.rng("tot"), width=self.beam_width, max_depth=self.depth
        )
        record_tree(llm, result)
        executor = make_executor(self.policy, tools, llm, task)
        if result.best_state is None or not result.best_state[1]:
            return PlannerResult(None, "plan_error", "no candidate plan", executor.stats, llm.trace)
        return await executor.execute_text(result.best_state[1])
