"""Tree-of-Thoughts planning: candidate plans, an LLM judge, a beam; then DAG execution.

Level 1 asks for ``beam_width`` candidate plans (concurrently); each deeper level asks for
``branching`` revisions of every kept plan. A judge scores every candidate (a plan that does
not even parse scores 0 without costing a call); the best ``beam_width`` survive each level.
The best plan is executed with parallel layers and the replanning ladder: the seed's
"ToT + Replan + parallel" row.

Under a token budget the tree is sized from this episode's measured costs: the first
candidate plan is asked alone and measured (the search keeps it as its first candidate), then
the beam is the widest (at most ``beam_width``) whose other proposals and the judgements of
all its candidates fit what is left after one replan (the largest call seen); deeper levels
are kept only while a whole level of revisions (the measured proposal plus the plan it
revises, and a judgement each) still fits. A beam of one with no deeper level is the first
plan, executed without a judgement (there is nothing to choose between). Without a budget
nothing changes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Annotated, TypeVar

from planarena.envs import clock
from planarena.envs.tools import Toolbox
from planarena.planners.base import Planner, PlannerResult, TaskView
from planarena.planners.executor import LadderPolicy
from planarena.planners.formats import RATE_PLAN, OutputParseError, parse_score
from planarena.planners.llm.base import EpisodeLLM
from planarena.planners.llm.protocol import RequestContext, RequestKind
from planarena.planners.llm.tokens import count_text
from planarena.planners.params import Backoff, Count, Times, checked
from planarena.planners.plan import PlanError, parse_plan
from planarena.planners.plan_execute import PlanFormat
from planarena.planners.plan_prose import written_steps
from planarena.planners.prompts import toolbox_plan_system
from planarena.planners.search_support import TokenLedger, make_executor, record_tree
from planarena.search import beam_search_async
from pydantic import Field

State = tuple[int, str]  # (level, plan text); the root is (0, "")
T = TypeVar("T")


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
        plan_format: str = "json",
    ) -> None:
        self.task = task
        self.llm = llm
        self.names = tools.names()
        self.plan_format = plan_format
        self.system = toolbox_plan_system(tools, plan_format, revision=llm.plan_revision)
        self.beam_width = beam_width
        self.branching = branching
        self.depth = depth
        self.scores: dict[State, float] = {}
        self.ledger: TokenLedger | None = None  # under a token budget: measures every call
        self.first: str | None = None  # under a budget: the first candidate, asked alone

    async def _measured(self, kind: str, depth: int, call: Awaitable[T]) -> T:
        if self.ledger is None:
            return await call
        return await self.ledger.measure(kind, depth, call)

    async def _propose(self, parent: State) -> str:
        improve = None
        if not parent[1]:
            user = f"Task: {self.task.goal}"
        else:
            improve = written_steps(parent[1], self.plan_format, revision=self.llm.plan_revision)
            user = (
                f"Task: {self.task.goal}\nA candidate plan:\n{parent[1]}\n"
                "Improve this plan: fix wrong tools, missing dependencies or checks."
            )
        return await self._measured(
            "propose",
            parent[0],
            self.llm.complete(
                [{"role": "system", "content": self.system}, {"role": "user", "content": user}],
                role="planner",
                kind=RequestKind.PLAN,  # a whole plan, a first one or an improved candidate
                context=RequestContext(plan=improve, plan_format=self.plan_format),
            ),
        )

    async def _judge(self, text: str) -> float:
        try:
            parse_plan(
                text, self.names, plan_format=self.plan_format, revision=self.llm.plan_revision
            )
        except PlanError:
            return 0.0  # an invalid plan is rejected by the validator, not by the judge
        verdict = await self._measured(
            "judge",
            0,
            self.llm.complete(
                [
                    {"role": "system", "content": "You are a strict reviewer of agent plans."},
                    {
                        "role": "user",
                        "content": f"Task: {self.task.goal}\nPlan:\n{text}\n{RATE_PLAN}",
                    },
                ],
                role="evaluator",
                kind=RequestKind.RATE_PLAN,
                context=RequestContext(
                    plan=written_steps(text, self.plan_format, revision=self.llm.plan_revision)
                    or []
                ),
            ),
        )
        try:
            return parse_score(verdict)
        except OutputParseError:
            return 0.0

    async def initial_state(self) -> State:
        return (0, "")

    async def actions(self, state: State) -> Sequence[str]:
        width = self.beam_width if state[0] == 0 else self.branching
        kept = [self.first] if state[0] == 0 and self.first is not None else []
        asked = await clock.gather(*(self._propose(state) for _ in range(width - len(kept))))
        texts = [*kept, *asked]
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
        plan_format: PlanFormat = "json",
    ) -> None:
        self.beam_width = beam_width
        self.branching = branching
        self.depth = depth
        self.policy = LadderPolicy(
            parallel=parallel,
            max_replans=max_replans,
            backoff_s=tuple(backoff_s),
            plan_format=plan_format,
        )

    async def sized(self, tree: _PlanTree, ledger: TokenLedger) -> tuple[int, int]:
        """(beam, depth) the budget holds: the first candidate is asked alone and measured;
        then the widest beam whose other proposals and every candidate's judgement (a judge
        not yet measured is predicted at a proposal's cost) fit what is left less the reserve,
        and the deeper levels of revisions that still fit after it."""
        tree.ledger = ledger
        tree.first = await tree._propose((0, ""))
        propose, judge = ledger.unit("propose", 0), ledger.unit("judge", 0)
        slack = ledger.remaining() - ledger.reserve()
        beam = 1
        for w in range(2, self.beam_width + 1):
            if (w - 1) * propose + w * judge <= slack:
                beam = w
        slack -= (beam - 1) * propose + (judge * beam if beam > 1 else 0)
        revise = propose + count_text(tree.first) + judge  # a revision reads the plan it revises
        depth = 1
        while depth < self.depth and beam * self.branching * revise <= slack:
            slack -= beam * self.branching * revise
            depth += 1
        return beam, depth

    async def run(self, task: TaskView, tools: Toolbox, llm: EpisodeLLM) -> PlannerResult:
        tree = _PlanTree(
            task,
            tools,
            llm,
            beam_width=self.beam_width,
            branching=self.branching,
            depth=self.depth,
            plan_format=self.policy.plan_format,
        )
        beam, depth = self.beam_width, self.depth
        ledger = TokenLedger.of(llm, horizon=1, reserve_calls=int(self.policy.max_replans > 0))
        if ledger is not None:
            beam, depth = await self.sized(tree, ledger)
            tree.beam_width = beam
            if beam == 1 and depth == 1:  # one candidate: nothing for a judge to choose
                executor = make_executor(self.policy, tools, llm, task)
                return await executor.execute_text(tree.first or "")
        result = await beam_search_async(tree, rng=task.rng("tot"), width=beam, max_depth=depth)
        record_tree(llm, result)
        executor = make_executor(self.policy, tools, llm, task)
        if result.best_state is None or not result.best_state[1]:
            return PlannerResult(None, "plan_error", "no candidate plan", executor.stats, llm.trace)
        return await executor.execute_text(result.best_state[1])
