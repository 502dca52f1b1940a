"""Each finding of the simulator review, as a test that fails if it comes back.

The simulated LLM models a model and a world, never a planner: one belief per decision point
shared by proposer, judge and rollout; draws keyed by the request; the same concurrency
charged alike; faults that make backoff matter; world facts a pre-condition can check.
Bounds below are properties the mechanism implies (a sign, an identity, monotonicity), never
today's numbers.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from conftest import MODELS, episode, make_planner, tasks
from planarena.envs import clock
from planarena.envs.faults import FaultInjector, FaultRule
from planarena.envs.report.env import ReportEnv, ReportWorld
from planarena.experiments.run.episode import simulate
from planarena.planners.base import TaskView
from planarena.planners.llm.base import Budget, EpisodeLLM, Request
from planarena.planners.llm.profiles import SKILLS, SkillProfile
from planarena.planners.llm.protocol import RequestKind
from planarena.planners.llm.sim import SimLLM
from planarena.planners.prompts import plan_system
from planarena.planners.search_support import PartialPlanProblem

ENV = ReportEnv(p_stale_trap=1.0)


def _skill(**fields: Any) -> SkillProfile:
    return SKILLS["perfect"].model_copy(update=fields)


def _problem(task: Any, skill: SkillProfile) -> tuple[PartialPlanProblem, EpisodeLLM]:
    tools = ENV.make_tools(task, rules=[], seed_keys=(0, task.env, task.task_id, 0)).toolbox
    sim = SimLLM(skill, ENV.oracle(task), seed_keys=(0, task.env, task.task_id, 0))
    llm = EpisodeLLM(sim, MODELS)
    view = TaskView(task.task_id, task.goal)
    return PartialPlanProblem(view, tools, llm, branching=3, max_steps=16, judge=True), llm


def _judged_first_step(task: Any, skill: SkillProfile) -> dict[str, float]:
    """The judge's scores of the proposals for the first step, by query."""
    problem, _ = _problem(task, skill)

    async def go() -> dict[str, float]:
        with clock.use_clock(clock.SimClock()):
            actions = await problem.actions(())
        best: dict[str, float] = {}
        for a in actions:  # the best-scored candidate of each query
            query = json.loads(a).get("args", {}).get("query", "done")
            best[query] = max(best.get(query, 0.0), problem.scores[(a,)])
        return best

    return asyncio.run(go())


def test_the_judge_shares_the_proposers_belief_about_a_trap() -> None:
    """Finding 1: a model fooled by a trap proposes it AND rates it above the right step; an
    unfooled one rates the right step higher. Noise-free judge, so the order is exact."""
    for task in tasks("medium", n=4, p_stale_trap=1.0):
        fooled = _judged_first_step(task, _skill(p_trap=1.0))
        sober = _judged_first_step(task, _skill(p_trap=0.0))
        trap_q = next(q for q in fooled if "latest financial results" in q)
        right_q = next(q for q in sober if "annual report" in q)
        assert fooled[trap_q] > fooled.get(right_q, 0.0), fooled
        assert sober[right_q] > sober.get(trap_q, 0.0), sober


def test_judging_degrades_with_context_like_acting() -> None:
    """Finding 1: the judge's noise and the decision error grow with the prompt alike."""
    skill = SKILLS["strong"]
    assert skill.judge_noise(8000) > skill.judge_noise(0)
    ratio_err = skill.error_rate(8000) / skill.error_rate(0)
    assert abs(skill.judge_noise(8000) / skill.judge_noise(0) - ratio_err) < 1e-9


def test_same_prompt_same_answer_whoever_sends_it() -> None:
    """Finding 7: draws are keyed by the request, so two planners sending the same prompt get
    the same text, and the k-th repetition of a prompt is a fresh sample."""
    task = tasks("complex", n=1)[0]
    keys = (0, task.env, task.task_id, 0)
    system = plan_system(ReportWorld(task).catalogue())
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": f"Task: {task.goal}"},
    ]

    async def ask(occurrence: int) -> str:
        sim = SimLLM(SKILLS["weak"], ENV.oracle(task), seed_keys=keys)
        out = await sim.generate(
            messages,
            role="planner",
            model=MODELS["default"],
            request=Request(Request.digest_of(messages), occurrence, kind=RequestKind.PLAN),
        )
        return out.text

    assert asyncio.run(ask(0)) == asyncio.run(ask(0))
    samples = {asyncio.run(ask(k)) for k in range(12)}
    assert len(samples) > 1  # the weak model's repeated samples differ


def test_static_and_replanning_planners_share_their_first_plan_without_faults() -> None:
    """Finding 7, end to end: without faults plan_execute and plan_execute_replan send the
    same first prompt, so every task the static planner completes the replanning one completes
    with the same tokens, calls and latency."""
    for task in tasks("complex", n=12):
        static, _ = episode("plan_execute", task, skill="strong")
        replan, _ = episode("plan_execute_replan", task, skill="strong")
        if static.success:
            assert replan.success
            assert (static.tokens_total, static.llm_calls, static.latency_s) == (
                replan.tokens_total,
                replan.llm_calls,
                replan.latency_s,
            )


def test_missed_signals_and_commitment_hurt_planners_that_rely_on_noticing() -> None:
    """Finding 2: raising p_miss_signal and p_persist raises dead ends and false successes for
    ReAct and DFS (they read every observation themselves), while plan execution with
    code-checked post-conditions is shielded from missed signals: its outcomes do not change
    at all. Only subtle faults ("200 but wrong" nulls), a dead key and stale traps are on."""
    rules = [
        FaultRule(kind="wrong_result", tools=["extract_data"], rate=0.5, max_consecutive=1),
        FaultRule(kind="invalid_api_key", tools=["search_web"], rate=0.5, scope="episode"),
    ]
    pool = tasks("medium", n=24, p_stale_trap=1.0)
    low = _skill(p_miss_signal=0.0, p_persist=0.0, p_trap=0.3)
    high = _skill(p_miss_signal=1.0, p_persist=1.0, p_trap=0.3)

    def bad(planner: str, skill: SkillProfile) -> tuple[int, int]:
        recs = [episode(planner, t, rules=rules, skill=skill, env=ENV)[0] for t in pool]
        wrong = sum(r.failure_mode in ("dead_end", "false_success") for r in recs)
        return wrong, sum(r.success for r in recs)

    for planner in ("react", "dfs"):
        assert bad(planner, high)[0] > bad(planner, low)[0], planner
    # missed signals alone: a plan's code-checked post-conditions flag every subtle result
    # before the replanner reads it, so its outcomes do not change at all
    missing = low.model_copy(update={"p_miss_signal": 1.0})
    assert bad("plan_execute_replan", missing) == bad("plan_execute_replan", low)


def test_post_conditions_a_model_writes_catch_seemingly_successful_calls() -> None:
    """Code-checked post-conditions catch "200 but wrong" results the model might miss: a
    model that writes every check of a step's pool (perfect: ``check_coverage`` 1) catches
    every wrong result that returned."""
    rules = [FaultRule(kind="wrong_result", tools=["extract_data"], rate=0.5, max_consecutive=1)]
    recs = [
        episode("plan_execute_replan", t, rules=rules, skill="perfect")[0]
        for t in tasks("medium", n=8)
    ]
    assert sum(r.postcondition_catches for r in recs) > 0
    assert all(r.wrong_caught == r.wrong_returned for r in recs)
    assert all(r.success for r in recs)  # caught, then re-extracted by a replan


def test_concurrent_llm_calls_are_charged_alike() -> None:
    """Finding 3: BFS's level expansions and ToT's fan-out both overlap in simulated time
    through the one clock-aware gather; switched off, both are charged serially. Tokens and
    outcomes do not depend on the switch."""
    for planner in ("bfs", "tot"):
        for task in tasks("medium", n=3):
            records = [
                simulate(
                    planner,
                    make_planner(planner),
                    ReportEnv(),
                    task,
                    skill=SKILLS["strong"],
                    models=MODELS,
                    concurrent_llm_calls=flag,
                )[0]
                for flag in (True, False)
            ]
            on, off = records
            assert (on.tokens_total, on.success) == (off.tokens_total, off.success)
            assert on.latency_s < off.latency_s, planner


def test_clock_gather_overlaps_branches() -> None:
    async def branch(seconds: float) -> float:
        clock.advance(seconds)
        return seconds

    async def go(concurrent: bool) -> float:
        with clock.use_clock(clock.SimClock()) as c, clock.use_concurrency(concurrent):
            await clock.gather(branch(1.0), branch(2.0))
            return c.now

    assert asyncio.run(go(True)) == 2.0
    assert asyncio.run(go(False)) == 3.0


def _outage_rule(rate: float) -> FaultRule:
    return FaultRule(
        kind="http_503",
        tools=["search_web", "parse_pdf", "extract_data", "search_web_backup", "fetch_filing"],
        rate=rate,
        scope="window",
        slot_s=10.0,
        duration_s=3.0,
    )


def test_an_outage_lasts_seconds_not_calls() -> None:
    """Finding 4: inside an outage every call fails, however often it is retried; after the
    outage has passed the same call succeeds."""
    task = tasks("simple", n=1)[0]
    injector = FaultInjector(ReportWorld(task), [_outage_rule(1.0)], seed_keys=(1,))
    rule = injector.rules[0]
    t = next(x / 10 for x in range(0, 600) if injector._in_outage(0, rule, "search_web", x / 10))

    async def call_at(when: float) -> str:
        with clock.use_clock(clock.SimClock(when)):
            try:
                await injector.call("search_web", {"query": f"{task.goal}"})
            except Exception as err:  # noqa: BLE001 - we want the kind
                return getattr(err, "kind", type(err).__name__)
            return "ok"

    assert [asyncio.run(call_at(t)) for _ in range(3)] == ["http_503"] * 3
    later = t + rule.duration_s + 0.01
    while injector._in_outage(0, rule, "search_web", later):
        later += 0.5
    assert asyncio.run(call_at(later)) == "ok"


def test_backoff_beats_immediate_retry_under_outages_and_costs_latency_without() -> None:
    """Finding 4: the seed's exponential backoff outlasts a 3 s outage that immediate retries
    never leave; with only per-call transient faults it gains nothing and adds latency."""
    pool = tasks("medium", n=16)
    # the retry rung alone (no replans; the outage hits tools without a fallback)
    backoff = make_planner("plan_execute_replan", max_replans=0)
    immediate = make_planner("plan_execute_replan", max_replans=0, backoff_s=[0.0])

    def wins(planner: Any, rules: list[FaultRule]) -> tuple[int, float]:
        recs = [episode(planner, t, rules=rules)[0] for t in pool]
        return sum(r.success for r in recs), sum(r.latency_s for r in recs)

    outages = [_outage_rule(0.6).model_copy(update={"tools": ["parse_pdf", "extract_data"]})]
    assert wins(backoff, outages)[0] > wins(immediate, outages)[0]
    transient = [FaultRule(kind="http_503", tools=["parse_pdf"], rate=0.5, max_consecutive=1)]
    (ok_b, lat_b), (ok_i, lat_i) = wins(backoff, transient), wins(immediate, transient)
    assert ok_b == ok_i and lat_b > lat_i


def test_ignoring_retry_after_costs_failed_calls() -> None:
    """Finding 4: a 429 blocks the tool until its retry-after has passed."""
    task = tasks("simple", n=1)[0]
    rule = FaultRule(
        kind="rate_limit_429", tools=["search_web"], rate=1.0, max_consecutive=1, retry_after_s=2
    )
    injector = FaultInjector(ReportWorld(task), [rule], seed_keys=(0,))

    async def go() -> list[str]:
        kinds = []
        with clock.use_clock(clock.SimClock()):
            for wait in (0.0, 0.0, 2.5):
                await clock.sleep(wait)
                try:
                    await injector.call("search_web", {"query": "x annual report"})
                    kinds.append("ok")
                except Exception as err:  # noqa: BLE001
                    kinds.append(getattr(err, "kind", "?"))
        return kinds

    kinds = asyncio.run(go())
    assert kinds[:2] == ["rate_limit_429", "rate_limit_429"]  # the retry inside the window


def test_a_precondition_blocks_a_step_in_a_documented_world_state() -> None:
    """Finding 5: the condition context holds world facts; with the search key invalid,
    ``api_key_valid.search_web`` is false and the step is blocked before any call."""
    rule = FaultRule(kind="invalid_api_key", tools=["search_web"], rate=1.0, scope="episode")
    task = tasks("simple", n=1)[0]
    tools = ENV.make_tools(task, rules=[rule], seed_keys=(0,)).toolbox
    with clock.use_clock(clock.SimClock()):
        facts = tools.facts()
    assert facts["api_key_valid"] == {
        **dict.fromkeys(tools.names(), True),
        "search_web": False,
    }
    record, trace = episode("plan_execute", task, rules=[rule])
    assert record.stop_reason == "precondition_failed"
    assert not any(c["tool"] == "search_web" for c in trace["tool_calls"])


def test_a_cheaper_model_is_a_weaker_one() -> None:
    """Finding 6: a model profile's error scale multiplies every error probability; perfect
    stays perfect, and the shipped replanner profile is weaker than the planner's."""
    from conftest import CONFIGS
    from omegaconf import OmegaConf

    strong = SKILLS["strong"]
    small = strong.scaled(1.5)
    assert small.p_trap > strong.p_trap and small.p_correct < strong.p_correct
    assert SKILLS["perfect"].scaled(3.0).error_rate(10_000) == 0.0
    sim = OmegaConf.load(CONFIGS / "llm" / "sim.yaml")
    assert sim.models.replanner.error_scale > sim.models.default.get("error_scale", 1.0)


def test_a_revision_conditions_on_the_plan_it_revises() -> None:
    """Finding 8: asked to improve a plan, the model keeps the steps it believes right and
    rewrites the others."""
    task = tasks("medium", n=1)[0]
    keys = (0, task.env, task.task_id, 0)
    sim = SimLLM(SKILLS["perfect"], ENV.oracle(task), seed_keys=keys)
    system = plan_system(ReportWorld(task).catalogue())

    async def ask(user: str) -> dict[str, Any]:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        out = await sim.generate(
            messages,
            role="planner",
            model=MODELS["default"],
            request=Request(Request.digest_of(messages), kind=RequestKind.PLAN),
        )
        return json.loads(out.text)

    right = asyncio.run(ask(f"Task: {task.goal}"))
    broken = json.loads(json.dumps(right))
    broken["steps"][1]["tool"] = "download_report"
    revised = asyncio.run(
        ask(
            f"Task: {task.goal}\nA candidate plan:\n{json.dumps(broken)}\n"
            "Improve this plan: fix wrong tools, missing dependencies or checks."
        )
    )
    assert revised["steps"] == right["steps"]


def test_candidate_menus_come_from_the_belief() -> None:
    """Finding 8: a perfect model's first candidate is always the right move, and an invented
    tool is proposed less often than real alternatives."""
    from planarena.planners.formats import parse_step_candidates

    names = set(ReportWorld(tasks("simple", n=1)[0]).catalogue()[i].name for i in range(6))
    invented = real_alternatives = 0
    for task in tasks("medium", n=20):
        problem, llm = _problem(task, _skill(sample_diversity=1.0))  # k different options

        async def go(p: PartialPlanProblem = problem, m: EpisodeLLM = llm) -> str:
            with clock.use_clock(clock.SimClock()):
                return await m.complete(
                    p._messages((), "Propose 3 different candidate next steps for the plan."),
                    role="planner",
                    kind=RequestKind.PROPOSE_STEPS,
                    context=p._context((), k=3),
                )

        steps = parse_step_candidates(asyncio.run(go()))
        first = steps[0]
        assert first.get("tool") == "search_web" and "annual report" in first["args"]["query"]
        for s in steps[1:]:
            if s.get("tool") in names:
                real_alternatives += 1
            elif not s.get("done"):
                invented += 1
    assert invented < real_alternatives


def test_budget_stops_bfs_without_overshooting_by_more_than_one_call() -> None:
    """Finding 9: one token budget binds every planner; BFS on complex tasks stops as
    budget_exhausted within one call of the budget."""
    for task in tasks("complex", n=3):
        record, trace = simulate(
            "bfs",
            make_planner("bfs"),
            ReportEnv(),
            task,
            skill=SKILLS["strong"],
            models=MODELS,
            budget=Budget(max_tokens=4000),
        )
        assert record.failure_mode == "budget_exhausted", record.detail
        largest = max(
            e["prompt_tokens"] + e["completion_tokens"]
            for e in trace["events"]
            if e["event"] == "llm"
        )
        assert record.tokens_total <= 4000 + largest


def test_failure_modes_need_evidence() -> None:
    """Finding 10: giving up on an unreachable task without having observed the missing
    data is not credited as a correct report; an empty plan is a plan logic error."""
    from planarena.envs.base import Grade
    from planarena.experiments.run.episode import classify
    from planarena.planners.base import PlannerResult

    task = tasks("medium", n=1, unreachable_rate=1.0)[0]
    said = PlannerResult(None, "reported_unreachable", "cannot")
    assert classify(said, Grade(False, 0.0), [], task) == "gave_up_after_tool_failure"
    seen = Grade(False, 0.0, saw_missing_data=True)
    assert classify(said, seen, [], task) == "correctly_reported_unreachable"
    empty = PlannerResult(None, "plan_error", "empty_plan: plan has no steps")
    assert classify(empty, Grade(False, 0.0), [], task) == "plan_logic_error"


def test_trials_rerun_the_same_world_unless_asked_to_redraw_it() -> None:
    """pass^k reruns an agent on the same environment: by default every trial of a task meets
    the same faults and latencies (a perfect model then repeats itself exactly); with
    ``redraw_faults`` each trial draws its own world."""
    from conftest import CONFIGS
    from omegaconf import OmegaConf
    from planarena.envs.faults import FaultConfig

    faults = FaultConfig(**OmegaConf.load(CONFIGS / "faults" / "heavy.yaml"))  # type: ignore[arg-type]
    pool = tasks("medium", n=10)

    def run(trial: int, redraw: bool) -> list[tuple[float, int, str]]:
        out = []
        for task in pool:
            r, _ = simulate(
                "plan_execute_replan",
                make_planner("plan_execute_replan"),
                ReportEnv(),
                task,
                skill=SKILLS["perfect"],
                rules=faults.rules,
                models=MODELS,
                trial=trial,
                redraw_faults=redraw,
            )
            out.append((r.latency_s, r.faults_injected, r.exposed_faults))
        return out

    assert run(0, False) == run(1, False)
    assert run(0, True) != run(1, True)


def test_a_growing_transcript_gets_the_answers_a_fresh_reading_gives() -> None:
    """The simulator keeps what it read of each observation a request's context carries (a
    ReAct transcript resends the same objects every turn); every answer must equal the one a
    simulator given fresh copies gives, and an observation replaced by a new object with other
    content must be read again."""
    from planarena.envs.tools import ToolError
    from planarena.planners.formats import (
        FINISH,
        OutputParseError,
        observation_text,
        parse_action_turn,
    )
    from planarena.planners.llm.protocol import Observed, RequestContext
    from planarena.planners.prompts import react_system

    async def ask(sim: SimLLM, messages: list[dict[str, str]], seen: list[Observed]) -> str:
        out = await sim.generate(
            messages,
            role="executor",
            model=MODELS["default"],
            request=Request(
                Request.digest_of(messages),
                kind=RequestKind.ACT,
                context=RequestContext(observations=tuple(seen)),
            ),
        )
        return out.text

    def copies(seen: list[Observed]) -> list[Observed]:
        return [Observed(o.id, o.tool, dict(o.args), "" + o.text, o.ok) for o in seen]

    async def run(task: Any) -> int:
        keys = (0, task.env, task.task_id, 0)
        tools = ENV.make_tools(task, rules=[], seed_keys=keys).toolbox
        growing = SimLLM(SKILLS["weak"], ENV.oracle(task), seed_keys=keys)
        messages = [
            {"role": "system", "content": react_system(tools.catalogue())},
            {"role": "user", "content": f"Task: {task.goal}"},
        ]
        seen: list[Observed] = []
        turns = 0
        for _ in range(12):
            text = await ask(growing, messages, seen)
            fresh = SimLLM(SKILLS["weak"], ENV.oracle(task), seed_keys=keys)
            assert text == await ask(fresh, [dict(m) for m in messages], copies(seen))
            turns += 1
            messages.append({"role": "assistant", "content": text})
            try:
                turn = parse_action_turn(text)
            except OutputParseError:
                messages.append({"role": "user", "content": "Observation: ERROR format"})
                continue
            if turn.action == FINISH:
                break
            ok = True
            try:
                observed = observation_text(await tools.call(turn.action, turn.action_input))
            except ToolError as err:
                observed, ok = err.observation(), False
            messages.append({"role": "user", "content": f"Observation: {observed}"})
            seen.append(Observed(str(len(seen)), turn.action, turn.action_input, observed, ok))
        # an earlier observation replaced by a new object with other content: read again
        edited = list(seen)
        if edited:
            o = edited[0]
            edited[0] = Observed(o.id, o.tool, o.args, "ERROR not_found: nothing here", False)
        fresh = SimLLM(SKILLS["weak"], ENV.oracle(task), seed_keys=keys)
        assert await ask(growing, messages, edited) == await ask(fresh, messages, edited)
        return turns

    with clock.use_clock(clock.SimClock()):
        assert sum(asyncio.run(run(task)) for task in tasks("complex", n=4)) > 8
