"""One episode end to end: env makes the tools, the planner runs, the env grades, we record.

This is also where a failed episode gets its one failure mode, from the planner's stop reason,
the grader's verdict and the env's call log — never from which planner ran.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from omegaconf import OmegaConf
from planarena.configs import CONFIG_DIR
from planarena.envs import caches, clock
from planarena.envs.base import Env, Grade, Task
from planarena.envs.faults import FaultRule
from planarena.envs.rng import derive_seed
from planarena.envs.tools import PLAN_LOGIC, ToolCallRecord
from planarena.experiments.records.checks import with_check_counts
from planarena.experiments.records.planner_notes import with_planner_notes
from planarena.experiments.records.provenance import DETERMINISTIC, code_source
from planarena.experiments.records.schema import INFRASTRUCTURE_ERROR
from planarena.experiments.run.llm_factory import model_profiles
from planarena.planners.base import Planner, PlannerResult, TaskView
from planarena.planners.formats import PLAN_REVISION
from planarena.planners.llm.base import (
    ROLES,
    Budget,
    BudgetExhausted,
    EndpointError,
    EpisodeLLM,
    JobBudgetExhausted,
    LLMBackend,
    SpendGate,
)
from planarena.planners.llm.profiles import ModelProfile
from planarena.planners.llm.protocol import ProtocolError
from planarena.planners.llm.sim import SimLLM
from planarena.search import use_gather
from pydantic import BaseModel, ConfigDict

# The last failed call acted on a premise that did not hold and was not checked first: a
# guessed argument (nothing by that name, arguments the tool rejects) or a key that a
# pre-condition on ``api_key_valid`` would have shown to be dead.
_PREMISE_ERRORS = frozenset({"not_found", "bad_args", "invalid_api_key"})
_HALLUCINATION_REASONS = frozenset({"unknown_tool", "unknown_fallback"})
# The step stopped on what an earlier result held, not on a tool error: a post-condition
# rejected the result, or a placeholder into it found nothing (the executor's messages).
_RESULT_REJECTED = ("post-condition failed", "missing or null in")


class EpisodeRecord(BaseModel):
    """One line of ``episodes.jsonl``. Field order is the file's key order; a study cell's
    ``cell`` label and parameters follow the fixed keys (extra fields, absent in plain runs)."""

    model_config = ConfigDict(extra="allow")

    planner: str
    env: str
    complexity: str
    task_id: str
    seed: int
    trial: int
    llm: str
    faults: str
    config_id: str
    success: bool
    progress: float
    failure_mode: str
    stop_reason: str
    tokens_prompt: int
    tokens_completion: int
    tokens_total: int
    tokens_planner: int
    tokens_executor: int
    tokens_evaluator: int
    tokens_replanner: int
    tokens_rollout: int
    llm_calls: int
    llm_requests: int  # sent to a server; llm_calls = llm_requests + cache_hits
    cache_hits: int  # replayed from the response cache (stored tokens and time)
    tokenizer: str  # of the tokens_* counts: o200k_base, or server:<model> (the API's usage)
    tokens_o200k: int  # prompt + completion counted with o200k_base, for comparison
    llm_queue_s: float  # wall seconds real LLM requests waited for a concurrency slot
    tool_calls: int
    tool_errors: int
    faults_injected: int
    retries: int
    fallbacks: int
    replans: int
    skipped_steps: int
    backtracks: int
    plan_repairs: int
    postcondition_catches: int
    checked_calls: int
    wrong_returned: int = 0  # set by records.checks (the ground truth of post-conditions)
    wrong_caught: int = 0
    check_false_alarms: int = 0
    exposed_faults: str
    latency_s: float
    cost_usd: float | None  # None: a model with no price entry was called
    detail: str
    wall_s: float


def _stopped_by_trap(result: PlannerResult, grade: Grade) -> bool:
    """The agent opened a trap and then stopped on a result's content (walked into a dead end
    and did not come back), not on a tool error."""
    return grade.trap_touched and any(m in result.detail for m in _RESULT_REJECTED)


def classify(
    result: PlannerResult, grade: Grade, calls: Sequence[ToolCallRecord], task: Task
) -> str:
    """The failure mode of a graded episode ('none' for a success)."""
    if grade.success:
        return "none"
    stop = result.stop
    if stop == "reported_unreachable" and task.unreachable and grade.saw_missing_data:
        return "correctly_reported_unreachable"  # the honest outcome, not a completion
    if stop == "reported_unreachable":  # said so without having established it
        return "dead_end" if _stopped_by_trap(result, grade) else "gave_up_after_tool_failure"
    if stop == "answered":  # a stale figure it was led to (it opened the trap), or just wrong
        return "dead_end" if grade.trap_in_answer and grade.trap_touched else "false_success"
    if stop == "malformed_output":
        return "malformed_output"
    if stop in ("budget", "job_cost_cap"):  # the episode's budget, or the job's cost cap
        return "budget_exhausted"
    if stop == "plan_error":
        if _stopped_by_trap(result, grade):  # e.g. an ended promotion's page has no links
            return "dead_end"
        reason = result.detail.split(":")[0]
        return "hallucinated_tool_call" if reason in _HALLUCINATION_REASONS else "plan_logic_error"
    if stop == "precondition_failed":  # the premise *was* checked, and nothing recovered
        return "gave_up_after_tool_failure"
    failed = [c for c in calls if not c.ok]
    last = failed[-1].error_kind if failed else None
    if "postcondition" in result.detail:  # a result that looked fine locally was wrong
        return "dead_end" if grade.trap_touched else "gave_up_after_tool_failure"
    if last == "unknown_tool":
        return "hallucinated_tool_call"
    if last == PLAN_LOGIC:  # the tool refused a call the plan got wrong (e.g. a {dep_result}
        return "plan_logic_error"  # left unfilled), whatever planner made it
    if last == "not_found" and task.unreachable and grade.saw_missing_data:
        return "gave_up_after_tool_failure"  # the missing data itself: seen, not reported
    if last in _PREMISE_ERRORS:
        return "precondition_unverified"
    if last is None:
        return "dead_end" if grade.trap_touched else "plan_logic_error"
    return "gave_up_after_tool_failure"


_EXPOSURES: OrderedDict[tuple[Any, ...], tuple[Env, Task, Sequence[FaultRule], list[str]]] = (
    OrderedDict()
)
_EXPOSURES_KEPT = 256  # a job's planners run a block of tasks one after another
caches.register(_EXPOSURES.clear)


def _exposure(env: Env, task: Task, rules: Sequence[FaultRule], keys: tuple[Any, ...]) -> list[str]:
    """``env.exposure``, computed once for the planners that run the same task: it is drawn
    from the world alone (the same for every planner), so it is kept per (env, task, rules)
    object and world keys, for the last :data:`_EXPOSURES_KEPT` of them."""
    key = (id(env), id(task), id(rules), keys)
    known = _EXPOSURES.get(key)
    if known is not None and known[0] is env and known[1] is task and known[2] is rules:
        _EXPOSURES.move_to_end(key)
        return list(known[3])
    exposure = env.exposure(task, rules=rules, seed_keys=keys)
    _EXPOSURES[key] = (env, task, rules, list(exposure))  # kept alive: their ids stay theirs
    if len(_EXPOSURES) > _EXPOSURES_KEPT:
        _EXPOSURES.popitem(last=False)
    return exposure


class EpisodeJob(Protocol):
    """What :func:`run_episode` needs of a job: which planner, env, task and trial, and the
    cell of a study (0 in a plain run). :class:`planarena.experiments.run.jobs.Job` is one."""

    planner_name: str
    env_name: str
    trial: int
    cell: int

    @property
    def task(self) -> Task: ...


@dataclass(frozen=True)
class OneJob:
    """A job that is just its fields (one episode from Python)."""

    planner_name: str
    env_name: str
    task: Task
    trial: int = 0
    cell: int = 0


BackendFor = Callable[[Env, Task, tuple[object, ...]], LLMBackend]
"""Makes an episode's LLM backend from its env, task and seed keys (never the planner)."""


@dataclass(frozen=True)
class EpisodeContext:
    """Everything the episodes of one cell share, built once from the config: who plays,
    where, with which model, faults and budgets, and the study cell's parameters."""

    planners: Mapping[str, Planner]
    envs: Mapping[str, Env]
    backend_for: BackendFor
    models: Mapping[str, ModelProfile]
    llm_label: str
    faults_label: str
    rules: Sequence[FaultRule]
    seed: int
    budget: Budget | None = None
    config_id: str = ""
    concurrent_llm_calls: bool = True
    redraw_faults: bool = False
    plan_revision: int = PLAN_REVISION  # the plan prompt and reader (planners/formats.py)
    cell: Mapping[str, Any] = field(default_factory=dict)
    """A study cell's label (``cell``) and parameters, written into its records; empty in a
    plain run, whose records then carry no cell keys."""


@dataclass
class _Outcome:
    """How a played episode ended: the planner's result, the grade, the failure mode, and
    the error of an episode that was not the agent's to fail (empty otherwise)."""

    result: PlannerResult
    grade: Grade
    mode: str
    error: str = ""


async def _play(
    ctx: EpisodeContext, job: EpisodeJob, task: Task, episode_tools: Any, llm: EpisodeLLM,
    sim_clock: clock.SimClock, trace: list[dict[str, Any]],
) -> _Outcome:  # fmt: skip
    """The planner on the task, graded. A failure of the LLM endpoint is an
    ``infrastructure_error``; any other exception that is not an agent-level failure is a
    ``harness_error`` (our bug)."""
    env = ctx.envs[job.env_name]
    try:
        with (
            clock.use_clock(sim_clock),
            clock.use_concurrency(ctx.concurrent_llm_calls),
            use_gather(clock.gather),
        ):
            seed = derive_seed(ctx.seed, job.trial, job.planner_name)
            view = TaskView(task.task_id, task.goal, seed)
            try:
                planner = ctx.planners[job.planner_name]
                result = await planner.run(view, episode_tools.toolbox, llm)
            except BudgetExhausted as exc:  # the same clean stop for every planner
                trace.append({"event": "budget_exhausted", "detail": str(exc)})
                stop = "job_cost_cap" if isinstance(exc, JobBudgetExhausted) else "budget"
                result = PlannerResult(None, stop, str(exc))
        grade = env.grade(task, result.answer, episode_tools.calls)
        return _Outcome(result, grade, classify(result, grade, episode_tools.calls, task))
    except EndpointError as exc:  # the LLM endpoint failed, not the agent: measured on resume
        error = str(exc)
        trace.append({"event": INFRASTRUCTURE_ERROR, "error": error})
        grade = Grade(False, 0.0, detail="infrastructure error: not measured")
        return _Outcome(PlannerResult(None, "gave_up", error), grade, INFRASTRUCTURE_ERROR, error)
    except ProtocolError as exc:  # the planner asked what the backend does not model: ours
        source = code_source(ctx.planners[job.planner_name])
        error = (  # first what no cut of the detail may lose: whose code, and no rerun
            f"ProtocolError: planner {job.planner_name} ({source}; {DETERMINISTIC} until it "
            f"is fixed) sent {exc}"
        )
        trace.append(
            {"event": "harness_error", "error": error, "traceback": traceback.format_exc(limit=8)}
        )
        grade = Grade(False, 0.0, detail="harness error")
        return _Outcome(PlannerResult(None, "gave_up", error), grade, "harness_error", error)
    except Exception as exc:  # noqa: BLE001 - any escape here is our bug, recorded loudly
        error = f"{type(exc).__name__}: {exc}"
        trace.append(
            {"event": "harness_error", "error": error, "traceback": traceback.format_exc(limit=8)}
        )
        grade = Grade(False, 0.0, detail="harness error")
        return _Outcome(PlannerResult(None, "gave_up", error), grade, "harness_error", error)


def _record(
    ctx: EpisodeContext, job: EpisodeJob, task: Task, end: _Outcome, usage: Any,
    episode_tools: Any, exposure: Sequence[str], latency: float, wall0: float,
) -> EpisodeRecord:  # fmt: skip
    """The episode's line of ``episodes.jsonl``, its keys in the file's order."""
    calls = episode_tools.calls
    result, stats = end.result, end.result.stats
    return EpisodeRecord(
        planner=job.planner_name,
        env=task.env,
        complexity=task.complexity,
        task_id=task.task_id,
        seed=ctx.seed,
        trial=job.trial,
        llm=ctx.llm_label,
        faults=ctx.faults_label,
        config_id=ctx.config_id,
        success=end.grade.success,
        progress=round(end.grade.progress, 6),
        failure_mode=end.mode,
        stop_reason=end.mode if end.error else result.stop,
        tokens_prompt=usage.prompt_tokens,
        tokens_completion=usage.completion_tokens,
        tokens_total=usage.prompt_tokens + usage.completion_tokens,
        **{f"tokens_{role}": usage.by_role[role] for role in ROLES},
        llm_calls=usage.calls,
        llm_requests=usage.requests,
        cache_hits=usage.cache_hits,
        tokenizer=usage.tokenizer,
        tokens_o200k=usage.o200k_tokens,
        llm_queue_s=round(usage.queue_s, 6),
        tool_calls=len(calls),
        tool_errors=sum(not c.ok for c in calls),
        faults_injected=episode_tools.faults.injected,
        retries=stats.retries,
        fallbacks=stats.fallbacks,
        replans=stats.replans,
        skipped_steps=stats.skipped_steps,
        backtracks=stats.backtracks,
        plan_repairs=stats.plan_repairs,
        postcondition_catches=stats.postcondition_catches,
        checked_calls=stats.checked_successes,
        exposed_faults="+".join(exposure),
        latency_s=round(latency, 6),
        cost_usd=None if usage.total_cost_usd is None else round(usage.total_cost_usd, 8),
        detail=(end.error or result.detail)[:300],
        wall_s=round(time.perf_counter() - wall0, 6),
        **ctx.cell,  # a study cell's label and parameters, after the fixed keys
    )


def _trace_doc(
    ctx: EpisodeContext, job: EpisodeJob, task: Task, end: _Outcome, trace: list[dict[str, Any]],
    calls: Sequence[ToolCallRecord],
) -> dict[str, Any]:  # fmt: skip
    """The episode's line of ``traces.jsonl``."""
    return {
        "planner": job.planner_name,
        "task_id": task.task_id,
        "trial": job.trial,
        **({"cell": ctx.cell["cell"]} if ctx.cell else {}),
        "grade": end.grade.detail,
        "events": trace,
        "tool_calls": [
            {
                "tool": c.tool,
                "args": c.args,
                "t0": c.t_start,
                "t1": c.t_end,
                "ok": c.ok,
                "error_kind": c.error_kind,
                "injected": c.injected,
            }
            for c in calls
        ],
    }


async def run_episode(
    ctx: EpisodeContext, job: EpisodeJob, *, cost_gate: SpendGate | None = None
) -> tuple[EpisodeRecord, dict[str, Any]]:
    """The one way an episode runs: ``job``'s planner on its task under ``ctx``, graded and
    recorded by one set of rules for every planner (``cost_gate``: the job's cost cap)."""
    wall0 = time.perf_counter()
    env = ctx.envs[job.env_name]
    task = job.task
    # the LLM stream is keyed by (seed, env, task, trial) and each request: same prompt,
    # same answer, whichever planner sends it
    seed_keys = (ctx.seed, task.env, task.task_id, job.trial)
    # The world (faults, latencies) of a task is the same in every trial unless asked to
    # redraw it: trials then differ only by the model's samples, as when an agent is rerun on
    # the same environment (pass^k). The LLM's draws always include the trial.
    world_keys = (ctx.seed, task.env, task.task_id, *((job.trial,) if ctx.redraw_faults else ()))
    trace: list[dict[str, Any]] = []
    episode_tools = env.make_tools(task, rules=ctx.rules, seed_keys=world_keys)
    backend = ctx.backend_for(env, task, seed_keys)
    llm = EpisodeLLM(
        backend,
        ctx.models,
        trace=trace,
        budget=ctx.budget,
        cost_gate=cost_gate,
        plan_revision=ctx.plan_revision,
    )
    exposure = _exposure(env, task, ctx.rules, world_keys)
    sim_clock = clock.SimClock()
    end = await _play(ctx, job, task, episode_tools, llm, sim_clock, trace)
    record = _record(ctx, job, task, end, llm.usage, episode_tools, exposure, sim_clock.now, wall0)
    record = with_check_counts(record, trace, episode_tools.calls, lambda: env.oracle(task))
    record = with_planner_notes(record, trace)  # planner=auto: auto_choice, auto_reason
    return record, _trace_doc(ctx, job, task, end, trace, episode_tools.calls)


async def run_one(
    *,
    planner_name: str,
    planner: Planner,
    env: Env,
    task: Task,
    backend: LLMBackend,
    llm_label: str,
    models: Mapping[str, ModelProfile],
    rules: Sequence[FaultRule] = (),
    seed: int = 0,
    trial: int = 0,
    faults_label: str = "custom",
    budget: Budget | None = None,
    concurrent_llm_calls: bool = True,
    redraw_faults: bool = False,
) -> tuple[EpisodeRecord, dict[str, Any]]:
    """One episode against a given backend (a scripted model, a test server, a simulator
    bound to this task), through :func:`run_episode` like every other."""
    ctx = EpisodeContext(
        planners={planner_name: planner},
        envs={"env": env},
        backend_for=lambda _env, _task, _keys: backend,
        models=models,
        llm_label=llm_label,
        faults_label=faults_label,
        rules=list(rules),
        seed=seed,
        budget=budget,
        concurrent_llm_calls=concurrent_llm_calls,
        redraw_faults=redraw_faults,
    )
    return await run_episode(ctx, OneJob(planner_name, "env", task, trial))


def sim_models() -> dict[str, ModelProfile]:
    """The simulated LLM's default model profiles (``configs/llm/sim.yaml``)."""
    sim_cfg = OmegaConf.to_container(OmegaConf.load(CONFIG_DIR / "llm" / "sim.yaml"))
    return model_profiles(sim_cfg)  # type: ignore[arg-type]


def simulate(
    planner_name: str,
    planner: Planner,
    env: Env,
    task: Task,
    *,
    skill: Any,
    rules: Sequence[FaultRule] = (),
    models: Mapping[str, ModelProfile] | None = None,
    seed: int = 0,
    trial: int = 0,
    faults_label: str = "custom",
    budget: Budget | None = None,
    concurrent_llm_calls: bool = True,
    redraw_faults: bool = False,
) -> tuple[EpisodeRecord, dict[str, Any]]:
    """One episode with the simulated LLM, synchronously (tests, notebooks, benchmarks).

    With the default model profiles (those of ``configs/llm/sim.yaml``) and the same seed and
    faults, the record equals the one ``planarena`` writes for this episode (``wall_s`` aside).
    """
    keys = (seed, task.env, task.task_id, trial)  # never the planner: same prompt, same answer
    episode = run_one(
        planner_name=planner_name,
        planner=planner,
        env=env,
        task=task,
        backend=SimLLM(skill, env.oracle(task), seed_keys=keys),
        llm_label=f"sim:{getattr(skill, 'name', 'custom')}",
        models=sim_models() if models is None else models,
        rules=rules,
        seed=seed,
        trial=trial,
        faults_label=faults_label,
        budget=budget,
        concurrent_llm_calls=concurrent_llm_calls,
        redraw_faults=redraw_faults,
    )
    return asyncio.run(episode)
