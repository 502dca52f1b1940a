"""The pieces issue 25's flip conditions need: a static plan rerun from scratch, a text plan
format, and the weak-JSON and reasoning model profiles.

Each test runs real episodes with the simulated LLM (milliseconds each) and asserts a
mechanism: the rerun runs the same plan again and is bounded, a text plan is the same Plan as
its JSON, the malformed-output skill applies per format through the request's context, and a
reasoning model pays for fewer wrong decisions with tokens and time.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from typing import Any

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf
from planarena.envs import clock
from planarena.envs.faults import FaultRule
from planarena.envs.oracle import literal_args
from planarena.envs.report.env import ReportEnv
from planarena.experiments.run.episode import simulate
from planarena.planners.formats import Generated, parse_action_turn
from planarena.planners.llm.base import Budget, EpisodeLLM
from planarena.planners.llm.profiles import SKILLS, ModelProfile, SkillProfile
from planarena.planners.llm.protocol import RequestContext, RequestKind
from planarena.planners.llm.sim import SimLLM
from planarena.planners.plan import Plan, PlanError, parse_plan
from planarena.planners.plan_prose import plan_to_text, render_plan_text, run_on_text
from planarena.planners.prompts import plan_system, react_system

from tests.conftest import CONFIGS, MODELS, make_planner

FAMILIES = ("report", "pipeline")  # the report env and one YAML family
TEXT_PLANNERS = ("plan_execute", "plan_execute_replan", "plan_execute_rerun", "topo", "tot")


def _env(name: str) -> Any:
    return instantiate(OmegaConf.load(CONFIGS / "env" / f"{name}.yaml"))


def _run(
    name: str,
    env: Any,
    task: Any,
    *,
    skill: SkillProfile,
    rules: tuple[FaultRule, ...] = (),
    models: dict[str, ModelProfile] | None = None,
    budget: Budget | None = None,
    **kwargs: Any,
) -> tuple[Any, list[dict[str, Any]]]:
    record, trace = simulate(
        name,
        make_planner(name, **kwargs),
        env,
        task,
        skill=skill,
        rules=rules,
        models=models or MODELS,
        budget=budget,
    )
    return record, trace["events"]


def _sim_plan(env: Any, task: Any, fmt: str, skill: str = "perfect") -> tuple[str, list[str]]:
    """The simulated model's first plan for a task, asked in ``fmt``; and the tool names."""
    tools = env.make_tools(task, rules=(), seed_keys=(0,)).toolbox
    sim = SimLLM(SKILLS[skill], env.oracle(task), seed_keys=(0, task.task_id))
    llm = EpisodeLLM(sim, {"default": ModelProfile(name="m")})

    async def ask() -> str:
        with clock.use_clock(clock.SimClock()):
            return await llm.complete(
                [
                    {"role": "system", "content": plan_system(tools.catalogue(), fmt)},
                    {"role": "user", "content": f"Task: {task.goal}"},
                ],
                role="planner",
                kind=RequestKind.PLAN,
                context=RequestContext(plan_format=fmt),
            )

    return asyncio.run(ask()), tools.names()


# --- every new planner and format: a perfect model in a world without faults ----------------


@pytest.mark.parametrize(
    ("planner", "fmt"),
    [("plan_execute_rerun", "json"), *((p, "text") for p in TEXT_PLANNERS)],
)
def test_a_perfect_model_completes_every_task_with_each_new_planner_and_format(
    planner: str, fmt: str
) -> None:
    for family in FAMILIES:
        env = _env(family)
        for complexity in ("simple", "medium", "complex"):
            for task in env.generate(2, seed=0, complexity=complexity):
                record, _ = _run(planner, env, task, skill=SKILLS["perfect"], plan_format=fmt)
                assert record.success, (planner, fmt, family, task.task_id, record.detail)
                assert record.plan_repairs == 0  # the canonical format needs no repair


# --- the text format: the same Plan, read leniently, never an exception ----------------------


def test_a_text_plan_is_the_same_plan_as_its_json() -> None:
    """The simulator's JSON plan and its text plan parse to the same Plan (no repair); a
    parsed plan written as text reads back to itself; a sloppy text reads to the same steps,
    counted as repaired."""
    for family in ("report", "rag", "pipeline", "web_nav", "code_gen", "research"):
        env = _env(family)
        for task in env.generate(2, seed=0, complexity="complex"):
            json_text, names = _sim_plan(env, task, "json")
            prose, _ = _sim_plan(env, task, "text")
            assert not prose.lstrip().startswith("{")
            from_json = parse_plan(json_text, names)
            from_text = parse_plan(prose, names, plan_format="text")
            assert from_text == from_json and not from_text.repaired
            assert parse_plan(plan_to_text(from_json), names, plan_format="text") == from_json
            steps = [s.model_dump() for s in from_json.steps]
            sloppy = parse_plan(
                render_plan_text(from_json.goal, steps, sloppy=True), names, plan_format="text"
            )
            assert sloppy.steps == from_json.steps and sloppy.repaired


def test_the_text_reader_accepts_the_usual_variants() -> None:
    """Compact clauses on the step's line, function-call arguments, ``Step n:`` headers,
    markdown, bare and single-quoted values: the same steps as the canonical form."""
    canonical = (
        'Goal: "g"\nSteps:\n'
        '1. search_web query="Initech annual report 2023"\n'
        "   - check: result.url != null\n"
        '2. parse_pdf url="{{step_1.result.url}}"\n'
        "   - after: 1\n"
        "   - retries: 2\n"
        "   - fallback: search_web_backup\n"
    )
    variants = (
        "Here is my plan:\nGoal: g\n"
        "1) **search_web**(query='Initech annual report 2023') (check: result.url != null)\n"
        'Step 2: `parse_pdf` url: "{{step_1.result.url}}" (after step 1; retries: 2; '
        "fallback: search_web_backup)\n"
    )
    tools = ["search_web", "search_web_backup", "parse_pdf"]
    want = parse_plan(canonical, tools, plan_format="text")
    assert not want.repaired and [s.id for s in want.steps] == ["step_1", "step_2"]
    got = parse_plan(variants, tools, plan_format="text")
    assert got.steps == want.steps and got.repaired and got.normalizations


def test_bad_text_is_a_plan_error_never_an_exception() -> None:
    env = ReportEnv()
    (task,) = env.generate(1, seed=0, complexity="complex")
    prose, names = _sim_plan(env, task, "text")
    plan = parse_plan(prose, names, plan_format="text")
    steps = [s.model_dump() for s in plan.steps]

    def reason(text: str) -> str:
        with pytest.raises(PlanError) as err:
            parse_plan(text, names, plan_format="text")
        return err.value.reason

    assert reason(run_on_text(plan.goal, steps)) == "malformed_text"
    assert reason("") == "malformed_text"
    assert reason('Goal: "g"\nSteps: none') == "empty_plan"
    assert reason(Generated(prose, "length")) == "malformed_text"  # cut: never accepted
    assert reason(prose.replace("1. search_web", "1. search_everything")) == "unknown_tool"
    assert reason(prose + "\n   - retries: three") == "schema"
    assert (
        reason('1. search_web query="x"\n   - after: 2\n2. search_web query="y"\n   - after: 1')
        == "cyclic_dependency"
    )
    assert reason('1. search_web query="never closed\n') == "malformed_text"
    # random damage: every outcome is a Plan or a PlanError
    rng = random.Random(0)
    alphabet = "\n ()[]{}\"',;:=-.*`#0123456789abc"
    for _ in range(400):
        damaged = list(prose)
        for _ in range(rng.randint(1, 6)):
            if not damaged:
                break
            at = rng.randrange(len(damaged))
            op = rng.random()
            if op < 0.4:
                del damaged[at : at + rng.randint(1, 30)]
            elif op < 0.8:
                damaged.insert(at, rng.choice(alphabet))
            else:
                damaged = damaged[:at]
        with contextlib.suppress(PlanError):
            assert isinstance(parse_plan("".join(damaged), names, plan_format="text"), Plan)


# --- the malformed-output skill applies per format --------------------------------------------


def _malformed(skill: str, fmt: str, tasks: list[Any], env: Any) -> list[bool]:
    return [
        _run("plan_execute", env, t, skill=SKILLS[skill], plan_format=fmt)[0].failure_mode
        == "malformed_output"
        for t in tasks
    ]


def test_a_weak_json_model_breaks_json_plans_not_text_plans() -> None:
    """On the same tasks, the weak-JSON profile's plans fail to parse far more often as JSON
    than as text; the perfect profile shows no difference (it completes every one)."""
    env = ReportEnv()
    tasks = [t for c in ("medium", "complex") for t in env.generate(40, seed=0, complexity=c)]
    as_json = _malformed("weak_json", "json", tasks, env)
    as_text = _malformed("weak_json", "text", tasks, env)
    assert sum(as_json) >= 6 and sum(as_text) * 3 <= sum(as_json), (sum(as_json), sum(as_text))
    for fmt in ("json", "text"):
        records = [
            _run("plan_execute", env, t, skill=SKILLS["perfect"], plan_format=fmt)[0]
            for t in tasks[:20]
        ]
        assert all(r.success and r.failure_mode != "malformed_output" for r in records)


def test_each_format_reads_its_own_skill_fields() -> None:
    """p_malformed breaks a JSON plan only, p_malformed_text a text plan only; the sloppy
    fields likewise (their plans are repaired, counted)."""
    env = ReportEnv()
    (task,) = env.generate(1, seed=0, complexity="medium")
    perfect = SKILLS["perfect"]

    def outcome(fmt: str, **update: float) -> Plan | str:
        sim = SimLLM(perfect.model_copy(update=update), env.oracle(task), seed_keys=(0, "t"))
        llm = EpisodeLLM(sim, {"default": ModelProfile(name="m")})
        tools = env.make_tools(task, rules=(), seed_keys=(0,)).toolbox

        async def ask() -> str:
            with clock.use_clock(clock.SimClock()):
                return await llm.complete(
                    [{"role": "system", "content": plan_system(tools.catalogue(), fmt)}],
                    role="planner",
                    kind=RequestKind.PLAN,
                    context=RequestContext(plan_format=fmt),
                )

        try:
            return parse_plan(asyncio.run(ask()), tools.names(), plan_format=fmt)
        except PlanError as err:
            return err.reason

    assert outcome("json", p_malformed=1.0) == "malformed_json"
    assert isinstance(outcome("text", p_malformed=1.0), Plan)
    assert outcome("text", p_malformed_text=1.0) == "malformed_text"
    assert isinstance(outcome("json", p_malformed_text=1.0), Plan)
    sloppy_json = outcome("json", p_sloppy_json=1.0)
    sloppy_text = outcome("text", p_sloppy_text=1.0)
    assert isinstance(sloppy_json, Plan) and sloppy_json.repaired
    assert isinstance(sloppy_text, Plan) and sloppy_text.repaired
    assert not outcome("text", p_sloppy_json=1.0).repaired  # type: ignore[union-attr]
    scaled = SKILLS["weak"].scaled(2.0)
    assert scaled.p_malformed_text == 2 * SKILLS["weak"].p_malformed_text
    assert scaled.p_sloppy_text == 2 * SKILLS["weak"].p_sloppy_text


# --- the rerun: the same static plan again, from the start ------------------------------------

FLAKY = (FaultRule(kind="http_503", tools=["search_web"], rate=1.0, max_consecutive=1),)
BROKEN = (FaultRule(kind="invalid_api_key", tools=["search_web"], rate=1.0, scope="episode"),)


def test_a_failed_static_plan_is_rerun_from_the_start_with_the_same_plan() -> None:
    """A search that fails once then works: plan_execute fails, plan_execute_rerun runs the
    same plan again (no new LLM call) and succeeds; with fresh_plan it asks for a plan
    again first; max_reruns=0 is plan_execute."""
    env = ReportEnv()
    perfect = SKILLS["perfect"]
    for task in env.generate(3, seed=0, complexity="simple"):
        static, _ = _run("plan_execute", env, task, skill=perfect, rules=FLAKY)
        assert not static.success and static.failure_mode != "none"
        rerun, events = _run("plan_execute_rerun", env, task, skill=perfect, rules=FLAKY)
        assert rerun.success and rerun.llm_calls == 1  # the same plan: one plan request
        reruns = [e for e in events if e["event"] == "rerun"]
        assert [(e["attempt"], e["after"], e["fresh_plan"]) for e in reruns] == [
            (1, static.stop_reason, False)
        ]
        steps = [e for e in events if e["event"] == "step"]
        assert steps[0]["id"] == steps[1]["id"] == "step_1"  # the second run starts over
        assert steps[1]["t0"] >= reruns[0]["t"] + reruns[0]["wait_s"] == reruns[0]["t"] + 0.5
        fresh, _ = _run(
            "plan_execute_rerun", env, task, skill=perfect, rules=FLAKY, fresh_plan=True
        )
        assert fresh.success and fresh.llm_calls == 2
        none, _ = _run("plan_execute_rerun", env, task, skill=perfect, rules=FLAKY, max_reruns=0)
        assert none.model_dump(exclude={"planner", "wall_s"}) == static.model_dump(
            exclude={"planner", "wall_s"}
        )


def test_a_rerun_forgets_the_failed_run() -> None:
    """A rerun starts from scratch: run in parallel layers, no step of the second run starts
    before the steps it depends on have run again (the first run's results are not reused)."""
    env = ReportEnv()
    flaky_pdf = (FaultRule(kind="http_503", tools=["parse_pdf"], rate=1.0, max_consecutive=1),)
    for task in env.generate(3, seed=0, complexity="simple"):
        record, events = _run(
            "plan_execute_rerun",
            env,
            task,
            skill=SKILLS["perfect"],
            rules=flaky_pdf,
            parallel=True,
        )
        assert record.success
        at = next(i for i, e in enumerate(events) if e["event"] == "rerun")
        second = {e["id"]: e for e in events[at:] if e["event"] == "step"}
        assert second["step_2"]["t0"] >= second["step_1"]["t1"] > events[at]["t"]


def test_reruns_are_bounded_and_budgets_bind_them() -> None:
    env = ReportEnv()
    (task,) = env.generate(1, seed=0, complexity="simple")
    perfect = SKILLS["perfect"]
    record, events = _run("plan_execute_rerun", env, task, skill=perfect, rules=BROKEN)
    assert not record.success
    assert [e["attempt"] for e in events if e["event"] == "rerun"] == [1, 2]  # max_reruns=2
    capped, events = _run(
        "plan_execute_rerun",
        env,
        task,
        skill=perfect,
        rules=BROKEN,
        fresh_plan=True,
        budget=Budget(max_calls=2),
    )
    assert capped.failure_mode == "budget_exhausted" and capped.llm_calls == 2


# --- the reasoning model: fewer wrong decisions, more tokens and time per call ----------------

REASONING = {
    role: profile.model_copy(update={"reasoning_tokens": 1024}) for role, profile in MODELS.items()
}


def test_a_reasoning_model_spends_more_tokens_and_time_per_call() -> None:
    env = ReportEnv()
    for task in env.generate(3, seed=0, complexity="medium"):
        strong, s_events = _run("react", env, task, skill=SKILLS["strong"])
        reasoning, r_events = _run("react", env, task, skill=SKILLS["reasoning"], models=REASONING)
        s_calls = [e for e in s_events if e["event"] == "llm"]
        r_calls = [e for e in r_events if e["event"] == "llm"]
        assert all(e["reasoning_tokens"] == 1024 for e in r_calls)
        assert not any("reasoning_tokens" in e for e in s_calls)
        per_call = lambda rec: rec.tokens_completion / rec.llm_calls  # noqa: E731
        assert per_call(reasoning) >= per_call(strong) + 1000
        latency = lambda calls: sum(e["t1"] - e["t0"] for e in calls) / len(calls)  # noqa: E731
        decode = 1024 * MODELS["default"].s_per_output_token  # 12.3 s of hidden reasoning
        assert latency(r_calls) >= latency(s_calls) + 0.9 * decode
        assert reasoning.cost_usd / reasoning.llm_calls > strong.cost_usd / strong.llm_calls


def _first_action(env: Any, task: Any, skill: SkillProfile) -> str:
    """The model's first Thought/Action turn on a task (nothing observed yet)."""
    sim = SimLLM(skill, env.oracle(task), seed_keys=(1, task.task_id))
    llm = EpisodeLLM(sim, {"default": ModelProfile(name="m")})
    tools = env.make_tools(task, rules=(), seed_keys=(1,)).toolbox

    async def ask() -> str:
        with clock.use_clock(clock.SimClock()):
            return await llm.complete(
                [
                    {"role": "system", "content": react_system(tools.catalogue())},
                    {"role": "user", "content": f"Task: {task.goal}"},
                ],
                role="executor",
                kind=RequestKind.ACT,
                context=RequestContext(observations=()),
            )

    return asyncio.run(ask())


def test_a_reasoning_model_makes_fewer_wrong_decisions() -> None:
    """The first action of 150 tasks, asked of each profile: the reasoning profile takes a
    wrong one less often than the strong one (the belief draws are the same, the error
    probabilities half)."""
    env = ReportEnv()
    tasks = [t for c in ("medium", "complex") for t in env.generate(75, seed=1, complexity=c)]

    def wrong(skill: SkillProfile) -> int:
        count = 0
        for task in tasks:
            try:
                turn = parse_action_turn(_first_action(env, task, skill))
            except ValueError:
                count += 1
                continue
            right = env.oracle(task).remaining([])[0]
            count += (turn.action, turn.action_input) != (right.tool, literal_args(right.args, []))
        return count

    strong, reasoning = wrong(SKILLS["strong"]), wrong(SKILLS["reasoning"])
    assert reasoning < strong and strong >= 10, (strong, reasoning)


def test_one_override_selects_the_reasoning_model() -> None:
    from planarena.api import compose

    cfg = compose(["llm=sim_reasoning"])
    assert cfg.llm.skill == "reasoning"
    assert {role: m.reasoning_tokens for role, m in cfg.llm.models.items()} == {
        "default": 1024,
        "replanner": 1024,
    }
    plain = compose([])
    assert all("reasoning_tokens" not in m for m in plain.llm.models.values())
