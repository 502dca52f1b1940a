"""Shared pieces of the search planners: LLM-backed problems for the pure ``search`` package.

``search/`` knows nothing of LLMs; these classes adapt its async problem protocol to LLM calls:
the LLM proposes (role ``planner``), judges (role ``evaluator``) and imagines outcomes (role
``rollout``). Every proposal and judgement is text parsed by the shared parsers; output that
does not parse yields no candidates (and is counted), never a crash.

Under a token budget (``budget.max_tokens_per_episode``) a search sizes itself with a
:class:`TokenLedger`: it measures what its own proposals and judgements cost in this episode and
buys width (more candidates, a judge, more nodes or iterations) only while what is left still
covers finishing a plan greedily to the planner's own depth cap plus a reserve for one replan.
Without a budget the ledger is None and nothing is measured or changed.
"""

from __future__ import annotations

import json
import random
from collections.abc import Awaitable, Sequence
from typing import TypeVar

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
from planarena.planners.llm.tokens import count_text
from planarena.planners.prompts import toolbox_plan_system
from planarena.search import SearchResult

Steps = tuple[str, ...]  # a partial plan: each step as canonical JSON text
T = TypeVar("T")

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


class TokenLedger:
    """What a search may still spend under the episode's token budget, from its own costs.

    Every LLM call the search makes is measured (tokens spent while it ran) under a kind
    (``propose``, ``judge``, ``rollout``) and the depth of the plan it was about. From these:

    - :meth:`unit` predicts a call's cost at a depth: the most expensive one seen at the
      deepest depth measured, plus the measured growth per step (prompts carry the plan so far,
      so they grow as it does); before two depths are measured the growth is the size of a
      proposed step (``step_tokens``) as measured;
    - :meth:`greedy` is what finishing a plan greedily costs: one proposal a step, from a depth
      to the planner's own cap (``horizon`` steps: its ``max_steps``/``max_depth``, the longest
      plan it would build, so the sizing never relies on guessing the task's length);
    - :meth:`reserve` keeps ``reserve_calls`` times the largest call seen for executing the
      chosen plan (a replan writes a plan from the same system prompt and the log);
    - :meth:`affords` says whether ``extra`` tokens of width still leave the greedy finish and
      the reserve covered.

    Width is optional spending; the greedy continuation is not gated (the budget itself stops
    it, as it stops every planner). Calls in flight are counted as ``pending`` at their
    predicted cost, so concurrent branches cannot all spend the same slack.
    """

    def __init__(self, llm: EpisodeLLM, limit: int, *, horizon: int, reserve_calls: int) -> None:
        self.llm = llm
        self.limit = limit
        self.horizon = horizon
        self.reserve_calls = reserve_calls
        self.pending = 0
        self.costs: dict[str, dict[int, int]] = {}  # kind -> depth -> largest cost seen
        self.largest_call = 0
        self.step_tokens = 0  # measured size of one proposed step (growth before two depths)
        self.narrowed = 0  # expansions made narrower than configured to fit the budget
        self.skipped = 0  # expansions not made because they did not fit

    @classmethod
    def of(cls, llm: EpisodeLLM, *, horizon: int, reserve_calls: int) -> TokenLedger | None:
        """The episode's ledger, or None without a token budget (the search is then unsized)."""
        limit = llm.budget.max_tokens
        if limit is None:
            return None
        return cls(llm, limit, horizon=horizon, reserve_calls=reserve_calls)

    def used(self) -> int:
        u = self.llm.usage
        return u.prompt_tokens + u.completion_tokens

    def remaining(self) -> int:
        """Tokens left under the budget, less the predicted cost of calls in flight."""
        return self.limit - self.used() - self.pending

    def measured(self, kind: str) -> bool:
        return bool(self.costs.get(kind))

    async def measure(self, kind: str, depth: int, call: Awaitable[T]) -> T:
        """Await ``call`` (one LLM request), recording what it cost at ``depth``. Concurrent
        calls of a real backend overlap in time, so a cost measured then may include another
        call's tokens: an overestimate, which only makes the sizing more careful."""
        predicted = self.unit(kind, depth) if self.measured(kind) else 0
        self.pending += predicted
        before = self.used()
        try:
            out = await call
        finally:
            self.pending -= predicted
        cost = self.used() - before
        seen = self.costs.setdefault(kind, {})
        seen[depth] = max(seen.get(depth, 0), cost)
        self.largest_call = max(self.largest_call, cost)
        return out

    def unit(self, kind: str, depth: int) -> int:
        """Predicted cost of one ``kind`` call about a plan of ``depth`` steps (a judge or a
        rollout not yet measured is predicted as a proposal: the same prompt, read again)."""
        seen = self.costs.get(kind) or self.costs.get("propose") or {}
        if not seen:
            return 0
        depths = sorted(seen)
        last = depths[-1]
        if len(depths) > 1:
            first = depths[0]
            growth = max(0.0, (seen[last] - seen[first]) / (last - first))
        else:
            growth = float(self.step_tokens)
        return int(seen[last] + growth * max(0, depth - last) + 0.5)

    def greedy(self, depth: int, steps: int) -> int:
        """Predicted cost of ``steps`` proposals from ``depth`` on (a greedy finish)."""
        steps = max(0, min(steps, self.horizon - depth))
        return sum(self.unit("propose", depth + i) for i in range(steps))

    def reserve(self) -> int:
        return self.reserve_calls * self.largest_call

    def affords(self, extra: int, depth: int, steps: int) -> bool:
        """True if ``extra`` tokens now still leave a greedy finish of ``steps`` proposals from
        ``depth`` and the reserve within the budget."""
        return self.remaining() - extra >= self.greedy(depth, steps) + self.reserve()


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
        ledger: TokenLedger | None = None,
    ) -> None:
        self.task = task
        self.ledger = ledger  # under a token budget: measures every call, sizes bfs's width
        self.started: set[int] = set()  # depths with an expansion begun (the first is greedy)
        self.proposed: dict[Steps, list[str]] = {}  # under a budget: each state's candidates
        self.llm = llm
        self.system = toolbox_plan_system(tools, revision=llm.plan_revision)
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

    async def _call(self, kind: str, depth: int, call: Awaitable[T]) -> T:
        """One LLM call, measured by the ledger under a budget."""
        if self.ledger is None:
            return await call
        return await self.ledger.measure(kind, depth, call)

    async def _propose(self, state: Steps, k: int) -> str:
        return await self._call(
            "propose",
            len(state),
            self.llm.complete(
                self._messages(state, PROPOSE_STEPS.format(k=k)),
                role="planner",
                kind=RequestKind.PROPOSE_STEPS,
                context=self._context(state, k=k),
            ),
        )

    def _width(self, state: Steps) -> int:
        """How many candidates this expansion may ask for and judge (bfs under a budget).

        The configured ``branching`` with a judge if the ledger says that width leaves a greedy
        finish to ``max_steps`` and the reserve covered (always for the first expansion, which
        measures what an expansion costs); otherwise 1, without a judge (nothing to choose
        between), for the first expansion begun at this depth (the plan's greedy continuation);
        otherwise 0: the expansion is not made."""
        depth = len(state)
        first = depth not in self.started
        self.started.add(depth)
        ledger = self.ledger
        if ledger is None or not self.judge or not ledger.measured("propose"):
            return self.branching
        wide = ledger.unit("propose", depth) + ledger.unit("judge", depth)
        if ledger.affords(wide, depth + 1, self.max_steps - depth - 1):
            return self.branching
        if first:
            ledger.narrowed += 1
            return 1
        ledger.skipped += 1
        return 0

    async def actions(self, state: Steps) -> Sequence[str]:
        if self._done(state):
            return []  # a plan declared complete but judged poor is a dead leaf
        if state in self.proposed:  # a state asked again (under a budget): the same answer
            return self.proposed[state]
        width = self._width(state)
        if width == 0:
            return []
        text = await self._propose(state, width)
        notes: list[str] = []
        try:
            candidates = parse_step_candidates(text, notes)
        except OutputParseError:
            self.unparseable += 1
            return []
        self.parsed += 1
        self.repairs += bool(notes)
        unique = list(dict.fromkeys(dumps(c) for c in candidates))[:width]
        level = len(state) + 1
        if self.judge and unique and width < self.branching:  # a lone greedy step: no judge
            unique = unique[:1]
            self.level_best[level] = max(self.level_best.get(level, 0.0), 1.0)
            self.scores[(*state, unique[0])] = 1.0
        elif self.judge and unique:
            listing = "\n".join(f"Candidate {i}: {c}" for i, c in enumerate(unique, 1))
            verdict = await self._call(
                "judge",
                len(state),
                self.llm.complete(
                    self._messages(state, f"{listing}\n{RATE_CANDIDATES}"),
                    role="evaluator",
                    kind=RequestKind.RATE_CANDIDATES,
                    context=self._context(state, candidates=tuple(json.loads(c) for c in unique)),
                ),
            )
            scores = parse_scores(verdict, len(unique))
            self.level_best[level] = max([self.level_best.get(level, 0.0), *scores])
            for c, s in zip(unique, scores, strict=True):
                self.scores[(*state, c)] = s
        if self.ledger is not None:
            self.ledger.step_tokens = max(
                self.ledger.step_tokens, max((count_text(c) for c in unique), default=0)
            )
            self.proposed[state] = unique
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
        text = await self._call(
            "rollout",
            len(state),
            self.llm.complete(
                self._messages(state, ROLLOUT),
                role="rollout",
                kind=RequestKind.ROLLOUT,
                context=self._context(state),
            ),
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
            if state in self.proposed:  # proposed already (under a budget): not asked again
                candidates = self.proposed[state]
            else:
                text = await self._propose(state, self.branching)
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
