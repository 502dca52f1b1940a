"""Shared pieces of the search planners: LLM-backed problems for the pure ``search`` package.

``search/`` knows nothing of LLMs; these classes adapt its async problem protocol to LLM calls:
the LLM proposes (role ``planner``), judges (role ``evaluator``) and imagines outcomes (role
``rollout``). Every proposal and judgement is text parsed by the shared parsers; output that
does not parse yields no candidates (and is counted), never a crash.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence

from planarena.envs import clock
from planarena.envs.jsontext import encoder
from planarena.envs.tools import Toolbox
from planarena.planners.base import PlannerStats, TaskView
from planarena.planners.executor import LadderPolicy, PlanExecutor
from planarena.planners.formats import (
    PROPOSE_STEPS,
    RATE_CANDIDATES,
    ROLLOUT,
    OutputParseError,
    dumps,
    parse_outcome,
    parse_scores,
    parse_step_candidates,
)
from planarena.planners.llm.base import EpisodeLLM
from planarena.planners.llm.protocol import RequestContext, RequestKind
from planarena.planners.prompts import plan_system
from planarena.search import SearchResult

Steps = tuple[str, ...]  # a partial plan: each step as canonical JSON text

_PLAN_JSON = encoder()  # json.dumps(...), built once


def record_tree(llm: EpisodeLLM, result: SearchResult) -> None:
    """Keep the explored tree in the episode trace (for the trace view and analysis)."""
    llm.trace.append(
        {
            "event": "search_tree",
            "algorithm": result.algorithm,
            "nodes_expanded": result.nodes_expanded,
            "nodes_pruned": result.nodes_pruned,
            "t": clock.now(),
            "nodes": result.tree_records(),
        }
    )


class PartialPlanProblem:
    """Build a plan step by step: the LLM proposes next steps, judges them, imagines rollouts.

    A state is the tuple of steps so far; a state ending in ``{"done": true}`` (or at
    ``max_steps``) is terminal. Scores from one judge call per expansion are cached per state.
    """

    def __init__(
        self,
        task: TaskView,
        tools: Toolbox,
        llm: EpisodeLLM,
        *,
        branching: int,
        max_steps: int,
        judge: bool,
        accept: float = 1.0,
    ) -> None:
        self.task = task
        self.llm = llm
        self.system = plan_system(tools.catalogue())
        self.branching = branching
        self.max_steps = max_steps
        self.judge = judge
        self.accept = accept
        self.level_best: dict[int, float] = {}  # the best score given at each depth
        self.scores: dict[Steps, float] = {(): 1.0}
        self.unparseable = 0
        self.parsed = 0  # proposals that parsed (none at all: the model never kept the format)
        self.repairs = 0  # proposals accepted only after a lenient repair

    def _messages(self, state: Steps, instruction: str) -> list[dict[str, str]]:
        so_far = "[" + ", ".join(state) + "]"
        return [
            {"role": "system", "content": self.system},
            {
                "role": "user",
                "content": f"Task: {self.task.goal}\nPlan so far: {so_far}\n{instruction}",
            },
        ]

    def _context(self, state: Steps, **fields: object) -> RequestContext:
        """The request's context: the partial plan so far (and what else the request names)."""
        return RequestContext(plan=tuple(json.loads(s) for s in state), **fields)  # type: ignore[arg-type]

    async def initial_state(self) -> Steps:
        return ()

    def _done(self, state: Steps) -> bool:
        return bool(state) and (
            json.loads(state[-1]).get("done") is True or len(state) >= self.max_steps
        )

    async def actions(self, state: Steps) -> Sequence[str]:
        if self._done(state):
            return []  # a plan declared complete but judged poor is a dead leaf
        text = await self.llm.complete(
            self._messages(state, PROPOSE_STEPS.format(k=self.branching)),
            role="planner",
            kind=RequestKind.PROPOSE_STEPS,
            context=self._context(state, k=self.branching),
        )
        notes: list[str] = []
        try:
            candidates = parse_step_candidates(text, notes)
        except OutputParseError:
            self.unparseable += 1
            return []
        self.parsed += 1
        self.repairs += bool(notes)
        unique = list(dict.fromkeys(dumps(c) for c in candidates))[: self.branching]
        if self.judge and unique:
            listing = "\n".join(f"Candidate {i}: {c}" for i, c in enumerate(unique, 1))
            verdict = await self.llm.complete(
                self._messages(state, f"{listing}\n{RATE_CANDIDATES}"),
                role="evaluator",
                kind=RequestKind.RATE_CANDIDATES,
                context=self._context(state, candidates=tuple(json.loads(c) for c in unique)),
            )
            scores = parse_scores(verdict, len(unique))
            level = len(state) + 1
            self.level_best[level] = max([self.level_best.get(level, 0.0), *scores])
            for c, s in zip(unique, scores, strict=True):
                self.scores[(*state, c)] = s
        return unique

    async def step(self, state: Steps, action: str) -> Steps:
        return (*state, action)

    async def score(self, state: Steps) -> float:
        return self.scores.get(state, 0.5)

    async def is_terminal(self, state: Steps) -> bool:
        """With a judge, a complete plan is a solution if its score is at least ``accept``
        times the best score the judge gave any candidate at the same depth (1.0: no
        candidate at that depth is judged better). Relative, so the threshold means the same
        whatever scale a judge uses, and was not read off any simulated table; a level's
        candidates are all scored before any is tested. Without a judge (MCTS) a complete
        plan stays a leaf valued by fresh rollouts on every visit, so one lucky imagined
        success does not fix its value for good."""
        if not self.judge or not self._done(state):
            return False
        best = self.level_best.get(len(state), 0.0)
        return best > 0 and self.scores.get(state, 0.0) >= self.accept * best

    async def reward(self, state: Steps) -> float:
        if not self.judge and state not in self.scores:
            self.scores[state] = await self.rollout(state, random.Random(0))
        return self.scores.get(state, 0.5)

    async def rollout(self, state: Steps, rng: random.Random) -> float:
        del rng  # the imagined outcome is the model's, drawn in the LLM
        text = await self.llm.complete(
            self._messages(state, ROLLOUT),
            role="rollout",
            kind=RequestKind.ROLLOUT,
            context=self._context(state),
        )
        try:
            return 1.0 if parse_outcome(text) else 0.0
        except OutputParseError:
            self.unparseable += 1
            return 0.0

    async def complete(self, state: Steps) -> Steps:
        """Extend a partial plan with the model's proposals until it is complete.

        Proposals are taken in the model's order; a "plan complete" proposal is accepted only
        if an imagined rollout says the plan would work (optimistic models accept too early).
        """
        while not self._done(state):
            text = await self.llm.complete(
                self._messages(state, PROPOSE_STEPS.format(k=self.branching)),
                role="planner",
                kind=RequestKind.PROPOSE_STEPS,
                context=self._context(state, k=self.branching),
            )
            notes: list[str] = []
            try:
                candidates = [dumps(c) for c in parse_step_candidates(text, notes)]
                self.parsed += 1
                self.repairs += bool(notes)
            except OutputParseError:
                self.unparseable += 1
                candidates = []
            chosen = None
            for candidate in candidates:
                if json.loads(candidate).get("done") is True and not await self.rollout(
                    (*state, candidate), random.Random(0)
                ):
                    continue
                chosen = candidate
                break
            if chosen is None:
                break
            state = (*state, chosen)
        return state


def plan_text(goal: str, state: Steps) -> str:
    """The Plan JSON of a partial plan (its ``done`` marker dropped)."""
    steps = [json.loads(s) for s in state]
    return _PLAN_JSON({"goal": goal, "steps": [s for s in steps if not s.get("done")]})


def never_parsed(problem: PartialPlanProblem, stats: PlannerStats) -> bool:
    """Carry the proposals' repairs into ``stats``; True if no proposal ever parsed, which
    every planner reports the same way: ``malformed_output``."""
    stats.plan_repairs += problem.repairs
    return problem.parsed == 0 and problem.unparseable > 0


def make_executor(
    policy: LadderPolicy, tools: Toolbox, llm: EpisodeLLM, task: TaskView
) -> PlanExecutor:
    return PlanExecutor(policy, tools, llm, task.goal, PlannerStats())
