"""The DAG executor: runs a Plan's steps, checks conditions, and applies the recovery ladder.

The ladder is the seed article's replanner decision tree, each rung switchable by policy:
retry a transient failure with exponential backoff (0.5 s, 1 s, 2 s; at most the step's
``retry_limit``), then the step's ``fallback`` tool, then skip a step nothing depends on, else
ask the LLM to replan *only the steps after the failure* (at most ``max_replans``), else stop.
Steps run in plan order, or with ``parallel`` every ready step at once in simulated time.
No LLM tokens are spent on a step that succeeds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import networkx as nx
from planarena.envs import clock
from planarena.envs.tools import PLAN_LOGIC, Toolbox, ToolError
from planarena.planners.base import PlannerResult, PlannerStats, StopReason
from planarena.planners.conditions import ConditionError, evaluate_condition
from planarena.planners.formats import POSTCONDITION_NOTE, dumps, observation_text, step_line
from planarena.planners.llm.base import EpisodeLLM
from planarena.planners.llm.protocol import Observed, RequestContext, RequestKind
from planarena.planners.plan import Plan, PlanError, PlanStep, parse_plan, resolve_args
from planarena.planners.prompts import REPLAN_USER, toolbox_plan_system
from planarena.search import topological_layers

_STEP_NUMBER = re.compile(r"step_(\d+)")

# An empty plan parses: it is a plan with a logic error (nothing to run), not malformed output.
MALFORMED_REASONS = frozenset(
    {"malformed_json", "malformed_text", "too_large", "too_deep", "schema"}
)


@dataclass(frozen=True)
class LadderPolicy:
    """Which rungs of the recovery ladder a strategy uses."""

    retry: bool = True
    backoff_s: tuple[float, ...] = (0.5, 1.0, 2.0)
    honor_retry_after: bool = True
    fallback: bool = True
    skip_independent: bool = True
    replan: bool = True
    max_replans: int = 3
    parallel: bool = False
    budget_usd: float = 1.0  # feeds the ``remaining_budget_usd`` condition variable
    plan_format: str = "json"  # how plans are asked for and read: json | text (plan_prose)


STATIC = LadderPolicy(retry=False, fallback=False, skip_independent=False, replan=False)


@dataclass
class StepOutcome:
    step: PlanStep
    ok: bool
    result: Any = None
    failure: str = ""  # precondition | postcondition | tool_error | unresolved_input | condition
    error_kind: str | None = None
    message: str = ""


def answer_text(result: Any) -> str:
    """The final answer carried by a result: its summary/answer/text field, else its JSON."""
    if isinstance(result, dict):
        for key in ("summary", "answer", "text"):
            if isinstance(result.get(key), str):
                return result[key]
    return result if isinstance(result, str) else dumps(result)


class PlanExecutor:
    """Executes plans for one episode, replanning through the LLM when the policy allows."""

    def __init__(
        self, policy: LadderPolicy, tools: Toolbox, llm: EpisodeLLM, goal: str, stats: PlannerStats
    ) -> None:
        self.policy = policy
        self.tools = tools
        self.llm = llm
        self.goal = goal
        self.stats = stats
        self.trace = llm.trace
        self.names = tools.names()
        self.results: dict[str, Any] = {}
        self.status: dict[str, str] = {}
        self.log: list[str] = []
        self.seen: list[Observed] = []  # the log's entries as data: a replan request's context
        self.revision: int = llm.plan_revision  # the plan prompt and reader (PLAN_REVISIONS)

    def _system(self, plan_format: str) -> str:
        """The plan prompt of this episode's revision, naming the world's condition facts."""
        return toolbox_plan_system(self.tools, plan_format, revision=self.revision)

    def _next_id(self, pending: list[PlanStep]) -> str:
        """The step id after every id the replan prompt shows, run, failed or pending (a
        replan's new steps start there: reusing an id that ran is refused)."""
        ids = [*self.status, *(s.id for s in pending)]
        numbers = [int(m.group(1)) for m in map(_STEP_NUMBER.fullmatch, ids) if m]
        return f"step_{max(numbers, default=0) + 1}"

    # --- planning ------------------------------------------------------------------------

    async def first_plan(self) -> Plan | PlannerResult:
        """Ask for a plan; a replanning strategy may ask again after a rejected one."""
        fmt = self.policy.plan_format
        messages = [
            {"role": "system", "content": self._system(fmt)},
            {"role": "user", "content": f"Task: {self.goal}"},
        ]
        attempts = 1 + (self.policy.max_replans if self.policy.replan else 0)
        error: PlanError | None = None
        for attempt in range(attempts):
            if attempt:
                self.stats.replans += 1
                messages = [
                    *messages[:2],
                    {
                        "role": "user",
                        "content": f"Task: {self.goal}\nYour previous plan was rejected: {error}. "
                        "Write a corrected plan.",
                    },
                ]
            text = await self.llm.complete(
                messages,
                role="planner",
                kind=RequestKind.PLAN,
                context=RequestContext(plan_format=fmt),
            )
            try:
                plan = parse_plan(text, self.names, plan_format=fmt, revision=self.revision)
            except PlanError as err:
                error = err
                self.trace.append(
                    {
                        "event": "plan_rejected",
                        "reason": err.reason,
                        "message": str(err),
                        "t": clock.now(),
                    }
                )
                continue
            self._note_plan(plan, "plan")
            return plan
        assert error is not None
        return self._plan_failure(error)

    async def execute_text(self, text: str) -> PlannerResult:
        """Validate a plan found some other way (a search) like any plan, then run it; a
        rejected plan is a plan failure."""
        try:
            plan = parse_plan(
                text, self.names, plan_format=self.policy.plan_format, revision=self.revision
            )
        except PlanError as err:
            self.trace.append(
                {
                    "event": "plan_rejected",
                    "reason": err.reason,
                    "message": str(err),
                    "t": clock.now(),
                }
            )
            return self._plan_failure(err)
        self._note_plan(plan, "plan")
        return await self.execute(plan)

    def _note_plan(self, plan: Plan, kind: str) -> None:
        self.stats.plan_repairs += int(plan.repaired)
        self.trace.append(
            {
                "event": kind,
                "t": clock.now(),
                "repaired": plan.repaired,
                "normalizations": plan.normalizations,
                "steps": [
                    {"id": s.id, "tool": s.tool, "depends_on": s.depends_on} for s in plan.steps
                ],
            }
        )

    def _plan_failure(self, err: PlanError) -> PlannerResult:
        stop: StopReason = "malformed_output" if err.reason in MALFORMED_REASONS else "plan_error"
        return PlannerResult(None, stop, err.reason, self.stats, self.trace)

    async def _replan(
        self, failed: StepOutcome, pending: list[PlanStep]
    ) -> Plan | PlanError | None:
        """A revised remainder; a PlanError if rejected; None if the model says the goal is
        out of reach (the replan prompt asks for a plan with no steps then)."""
        self.stats.replans += 1
        prompt = REPLAN_USER.render(
            goal=self.goal,
            log=self.log,
            failed=f"{failed.step.id} {failed.step.tool}: {failed.failure} {failed.message}",
            pending=[f"- {s.id} {s.tool} {dumps(s.args)}" for s in pending],
            next_id=self._next_id(pending) if self.revision >= 2 else None,
        )
        fmt = self.policy.plan_format
        messages = [
            {"role": "system", "content": self._system(fmt)},
            {"role": "user", "content": prompt},
        ]
        context = RequestContext(
            observations=tuple(self.seen),
            failed_step=failed.step.id,
            pending=tuple(s.id for s in pending),
            plan_format=fmt,
        )
        text = await self.llm.complete(
            messages, role="replanner", kind=RequestKind.REVISE_PLAN, context=context
        )
        done = [sid for sid, st in self.status.items() if st == "success"]
        try:
            plan = parse_plan(
                text, self.names, completed=done, plan_format=fmt, revision=self.revision
            )
            clash = sorted({s.id for s in plan.steps} & set(self.status))
            if clash:
                raise PlanError("duplicate_id", f"replan reuses executed step id(s) {clash}")
        except PlanError as err:
            if err.reason == "empty_plan":
                self.trace.append({"event": "replan_unreachable", "t": clock.now()})
                return None
            self.trace.append(
                {
                    "event": "replan_rejected",
                    "reason": err.reason,
                    "message": str(err),
                    "t": clock.now(),
                }
            )
            return err
        self._note_plan(plan, "replan")
        return plan

    # --- execution -------------------------------------------------------------------------

    def _context(self, result: Any = None) -> dict[str, Any]:
        ctx: dict[str, Any] = {
            sid: {"status": st, "result": self.results.get(sid)} for sid, st in self.status.items()
        }
        facts = self.tools.facts()
        ctx.update(
            {
                **facts,
                "remaining_budget_usd": self.policy.budget_usd - self.llm.usage.cost_usd,
                "context": {
                    "documents": [
                        r for r in self.results.values() if isinstance(r, dict) and "doc_id" in r
                    ]
                },
                "result": result,
            }
        )
        return ctx

    def _check(self, conditions: list[str], result: Any) -> tuple[bool, str, bool]:
        """(all hold, the first failing condition, whether it was an invalid condition)."""
        ctx = self._context(result)
        for cond in conditions:
            try:
                if not evaluate_condition(cond, ctx):
                    return False, cond, False
            except ConditionError as err:
                return False, f"{cond} ({err})", True
        return True, "", False

    async def run_step(self, step: PlanStep) -> StepOutcome:
        t0 = clock.now()
        outcome = await self._run_step(step)
        self.trace.append(
            {
                "event": "step",
                "id": step.id,
                "tool": step.tool,
                "t0": t0,
                "t1": clock.now(),
                "ok": outcome.ok,
                "failure": outcome.failure,
                "error_kind": outcome.error_kind,
            }
        )
        return outcome

    async def _run_step(self, step: PlanStep) -> StepOutcome:
        """The ladder for one step: its pre-conditions, its inputs, its call (retried, then
        its fallback) and its post-conditions."""
        tool, blocked = self._pre_check(step)
        if blocked is not None:
            return blocked
        try:
            args = resolve_args(step, self.results)
        except PlanError as err:
            return StepOutcome(step, False, failure="unresolved_input", message=str(err))
        return await self._call(step, tool, args)

    def _pre_check(self, step: PlanStep) -> tuple[str, StepOutcome | None]:
        """(the tool to call, the outcome when a pre-condition blocks the step)."""
        tool, policy = step.tool, self.policy
        ok, cond, invalid = self._check(step.pre_conditions, None)
        if not ok and not invalid and policy.fallback and step.fallback and tool in cond:
            # a pre-condition about the step's own tool (its key, its service) failed: the
            # fallback tool is the rung for that, checked by the same conditions renamed
            renamed = [c.replace(f".{tool} ", f".{step.fallback} ") for c in step.pre_conditions]
            ok, cond, invalid = self._check(renamed, None)
            if ok:
                self.trace.append(
                    {
                        "event": "fallback",
                        "id": step.id,
                        "from": tool,
                        "to": step.fallback,
                        "reason": "precondition",
                        "t": clock.now(),
                    }
                )
                self.stats.fallbacks += 1
                tool = step.fallback
        if not ok:
            if not invalid:  # what the replanner reads: the step was blocked, and why
                blocked = f"ERROR precondition: {cond} does not hold (checked before calling)"
                self._log(step.id, tool, step.args, blocked, False)
            return tool, StepOutcome(
                step,
                False,
                failure="condition" if invalid else "precondition",
                message=f"pre-condition failed: {cond}",
            )
        return tool, None

    async def _call(self, step: PlanStep, tool: str, args: dict[str, Any]) -> StepOutcome:
        """Call the tool, retrying a transient failure and then switching to the fallback as
        the policy allows; a returned result is checked by :meth:`_post_check`."""
        tries, policy = 0, self.policy
        while True:
            try:
                result = await self.tools.call(tool, args)
            except ToolError as err:
                self._log(step.id, tool, args, err.observation(), False)
                if policy.retry and err.retryable and tries < step.retry_limit:
                    wait = policy.backoff_s[min(tries, len(policy.backoff_s) - 1)]
                    if policy.honor_retry_after and err.retry_after:
                        wait = max(wait, err.retry_after)
                    self.trace.append(
                        {
                            "event": "retry",
                            "id": step.id,
                            "tool": tool,
                            "error_kind": err.kind,
                            "wait_s": wait,
                            "t": clock.now(),
                        }
                    )
                    await clock.sleep(wait)
                    tries += 1
                    self.stats.retries += 1
                    continue
                if policy.fallback and step.fallback and tool != step.fallback:
                    self.trace.append(
                        {
                            "event": "fallback",
                            "id": step.id,
                            "from": tool,
                            "to": step.fallback,
                            "t": clock.now(),
                        }
                    )
                    tool, tries = step.fallback, 0
                    self.stats.fallbacks += 1
                    continue
                return StepOutcome(
                    step,
                    False,
                    failure="tool_error",
                    error_kind=err.kind,
                    message=err.observation(),
                )
            return self._post_check(step, tool, args, result)

    def _log(
        self, step_id: str, tool: str, args: Any, text: str, ok: bool, *, note: str = ""
    ) -> None:
        """One entry of the execution log a replanner reads: a line of its prompt, and the
        same as data for the request's context (``note``: a check rejected the result)."""
        self.log.append(step_line(step_id, tool, args, text + note, ok))
        args = args if isinstance(args, dict) else {}
        self.seen.append(Observed(step_id, tool, args, text, ok, rejected_by_check=bool(note)))

    def _post_check(
        self, step: PlanStep, tool: str, args: dict[str, Any], result: Any
    ) -> StepOutcome:
        """The step's outcome once its tool returned: a result its post-conditions reject
        is a failed step."""
        ok, cond, invalid = self._check(step.post_conditions, result)
        # the replanner reads a rejected result as what it is: a failed step
        returned = observation_text(result)
        note = "" if ok else f"{POSTCONDITION_NOTE}{cond})"
        self._log(step.id, tool, args, returned, ok, note=note)
        self.stats.checked_successes += 1
        if not ok:
            self.stats.postcondition_catches += int(not invalid)
            return StepOutcome(
                step,
                False,
                result,
                "condition" if invalid else "postcondition",
                message=f"post-condition failed: {cond}",
            )
        return StepOutcome(step, True, result)

    @staticmethod
    def _first_layer(pending: list[PlanStep], ready: list[PlanStep]) -> list[PlanStep]:
        """The first topological layer of what remains: every step whose inputs are ready."""
        graph = nx.DiGraph()
        ids = {s.id for s in pending}
        graph.add_nodes_from(ids)
        graph.add_edges_from((d, s.id) for s in pending for d in s.depends_on if d in ids)
        layer = set(topological_layers(graph)[0])
        return [s for s in ready if s.id in layer]

    async def execute(self, plan: Plan) -> PlannerResult:
        pending = list(plan.steps)
        final = plan.steps[-1].id  # the step that produces the answer is never skipped
        last_ok: str | None = None
        while pending:
            done = {sid for sid, st in self.status.items() if st in ("success", "skipped")}
            ready = [s for s in pending if all(d in done for d in s.depends_on)]
            if not ready:
                return PlannerResult(
                    None, "plan_error", "plan_logic_error: no runnable step", self.stats, self.trace
                )
            batch = self._first_layer(pending, ready) if self.policy.parallel else ready[:1]
            outcomes = await clock.run_parallel([lambda s=s: self.run_step(s) for s in batch])
            for outcome in outcomes:
                pending.remove(outcome.step)
            failures = []
            for outcome in outcomes:
                sid = outcome.step.id
                if outcome.ok:
                    self.status[sid] = "success"
                    self.results[sid] = outcome.result
                    last_ok = sid
                else:
                    self.status[sid] = "failed"
                    failures.append(outcome)
            for failed in failures:
                needed = any(failed.step.id in s.depends_on for s in pending)
                if self.policy.skip_independent and not needed and failed.step.id != final:
                    self.status[failed.step.id] = "skipped"
                    self.stats.skipped_steps += 1
                    self.trace.append({"event": "skip", "id": failed.step.id, "t": clock.now()})
                    continue
                if self.policy.replan and self.stats.replans < self.policy.max_replans:
                    new = await self._replan(failed, pending)
                    while isinstance(new, PlanError) and (
                        self.stats.replans < self.policy.max_replans
                    ):
                        new = await self._replan(failed, pending)
                    if isinstance(new, PlanError):
                        return self._plan_failure(new)
                    if new is None or not new.steps:
                        return PlannerResult(
                            None, "reported_unreachable", failed.message, self.stats, self.trace
                        )
                    pending = list(new.steps)
                    final = new.steps[-1].id
                    break
                stop: StopReason = (
                    "precondition_failed" if failed.failure == "precondition" else "tool_failure"
                )
                if failed.failure in ("condition", "unresolved_input") or (
                    failed.error_kind == PLAN_LOGIC  # the tool says the plan is wrong
                ):
                    stop = "plan_error"
                return PlannerResult(
                    None,
                    stop,
                    f"{failed.failure}: {failed.error_kind or ''} {failed.message}".strip(),
                    self.stats,
                    self.trace,
                )
        if last_ok is None:
            return PlannerResult(None, "gave_up", "no step succeeded", self.stats, self.trace)
        return PlannerResult(
            answer_text(self.results[last_ok]), "answered", "", self.stats, self.trace
        )
