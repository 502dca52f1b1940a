"""The rag family: corpus, retrieval trap, oracle, gold plan, every planner, and the second
source article's three silent bugs made loud (each ends in a recorded failure mode, never in a
normal-looking answer)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from planarena.envs import clock
from planarena.envs.rag import SLOTS, RagEnv, RagWorld, nearest_queries, nearest_vague
from planarena.envs.rag import corpus as rag_corpus
from planarena.envs.rag.corpus import DATA_FILE, STATIONS, build_corpus
from planarena.envs.rag.index import corpus
from planarena.envs.tools import PLAN_LOGIC, ToolError
from planarena.experiments.run.episode import EpisodeRecord, run_one
from planarena.planners.base import PlannerResult, PlannerStats
from planarena.planners.executor import STATIC, PlanExecutor
from planarena.planners.llm.base import Completion, EpisodeLLM
from planarena.planners.llm.profiles import SKILLS
from planarena.planners.llm.sim import render_step
from planarena.planners.plan import PlanError, parse_plan

from tests.conftest import ALL_PLANNERS, MODELS, episode, make_planner

ENV = RagEnv()
TOOLS = ["retrieve", "retrieve_conditional", "synthesize"]


def rag_tasks(complexity: str, n: int = 2, seed: int = 0, **kw: Any) -> list:
    return ENV.generate(n, seed=seed, complexity=complexity, **kw)


MEDIUM = next(t for t in rag_tasks("medium", n=8) if t.world["branches"][0]["crag"] is not None)
STATION = MEDIUM.world["branches"][0]["station"]
CRAG = MEDIUM.world["branches"][0]["crag"]
ASK = SLOTS["easiest"]["asks"][0]
FILLED = "{dep_result} " + ASK


def _top(result: dict[str, Any]) -> dict[str, Any]:
    return corpus().by_id[result["documents"][0]["doc_id"]]


def _call(world: RagWorld, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return asyncio.run(world.call(tool, args))


# --------------------------------------------------------------------------- corpus and world


def test_shipped_corpus_is_the_generated_one() -> None:
    shipped = [json.loads(line) for line in DATA_FILE.read_text("utf-8").splitlines()]
    assert shipped == json.loads(json.dumps(build_corpus()))
    assert 150 <= len(shipped) <= 400
    assert len({d["doc_id"] for d in shipped}) == len(shipped)


def test_the_corpus_cli_has_help_and_writes_only_where_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``python -m planarena.envs.rag.corpus --help`` prints usage and writes nothing (it used
    to ignore its arguments and rewrite the shipped file), with no warning (the package's
    ``__init__`` must not import the module ``-m`` runs, or runpy warns); ``--out`` writes
    elsewhere, ``--check`` compares."""
    before = (DATA_FILE.read_bytes(), DATA_FILE.stat().st_mtime_ns)
    repo = Path(__file__).resolve().parents[1]
    for args in (["--help"], ["--bogus"]):
        proc = subprocess.run(
            [sys.executable, "-m", "planarena.envs.rag.corpus", *args],
            capture_output=True,
            text=True,
            cwd=repo,
            timeout=60,
        )
        assert proc.returncode == (0 if args == ["--help"] else 2), proc.stderr
        assert "usage: python -m planarena.envs.rag.corpus" in proc.stdout + proc.stderr
        assert "Warning" not in proc.stderr, proc.stderr
    assert (DATA_FILE.read_bytes(), DATA_FILE.stat().st_mtime_ns) == before
    out = tmp_path / "corpus.jsonl"
    assert rag_corpus.main(["--out", str(out)]) == 0
    assert out.read_bytes() == DATA_FILE.read_bytes()
    assert rag_corpus.main(["--check"]) == 0
    out.write_text("{}\n", encoding="utf-8")
    assert rag_corpus.main(["--check", "--out", str(out)]) == 1
    assert out.read_text(encoding="utf-8") == "{}\n"  # --check writes nothing
    assert (DATA_FILE.read_bytes(), DATA_FILE.stat().st_mtime_ns) == before
    assert "differs" in capsys.readouterr().out


def test_trap_ranks_first_for_a_vague_query_and_not_for_a_precise_one() -> None:
    world = RagWorld(MEDIUM)
    for station, crag, _, closed, _ in STATIONS:
        vague = _top(world.retrieve(nearest_vague(station)))
        precise = _top(world.retrieve(nearest_queries(station)[0]))
        assert precise["kind"] == "nearest_crag" and precise["facts"]["crag"] == crag
        assert not precise["outdated"]
        if closed is not None:  # the outdated near-duplicate names the closed crag
            assert vague["outdated"] and vague["facts"]["crag"] == closed
            assert world.retrieve(nearest_vague(station))["top_year"] < 2024
    outdated = {(d["crag"], d["kind"]) for d in corpus().docs if d["outdated"]}
    checked = 0
    for _, crag, _, _, _ in STATIONS:
        for s in SLOTS.values():
            for conditional in (False, True):
                precise = _top(world.retrieve(f"{crag} {s['asks'][0]}", conditional=conditional))
                assert (precise["crag"], precise["kind"]) == (crag, s["kind"])
                assert not precise["outdated"]
                if (crag, s["kind"]) in outdated:
                    vague = world.retrieve(f"{crag} {s['vague']}", conditional=conditional)
                    assert _top(vague)["outdated"] and vague["top_year"] < 2024
                    checked += 1
    assert checked >= 6


def test_conditional_query_filled_with_the_json_of_its_dependency() -> None:
    """What the executor sends for `{dep_result} <ask>`: the first result as JSON, then the
    words asked; the condition is the crag that result names first."""
    world = RagWorld(MEDIUM)
    for station, crag, _, _, _ in STATIONS:
        first = world.retrieve(nearest_queries(station)[0])
        dep = json.dumps(first, ensure_ascii=False, separators=(",", ":"))
        for s in SLOTS.values():
            result = world.retrieve(f"{dep} {s['asks'][0]}", conditional=True)
            assert result["condition"] == crag
            assert (_top(result)["crag"], _top(result)["kind"]) == (crag, s["kind"])
            assert not set(d["doc_id"] for d in first["documents"]) & {
                d["doc_id"] for d in result["documents"]
            }


def test_tasks_are_deterministic_and_multi_hop_by_complexity() -> None:
    for complexity, hops in (("simple", 1), ("medium", 2), ("complex", 6)):
        a, b = rag_tasks(complexity, n=5), rag_tasks(complexity, n=5)
        assert a == b
        assert a != rag_tasks(complexity, n=5, seed=1)
        gold = ENV.oracle(a[0]).remaining([])
        retrievals = [g for g in gold if g.tool != "synthesize"]
        assert len(retrievals) == hops and gold[-1].tool == "synthesize"
        conditional = [g for g in gold if g.tool == "retrieve_conditional"]
        assert len(conditional) == {"simple": 0, "medium": 1, "complex": 4}[complexity]
        assert all("{dep_result}" in g.args["query"] and g.deps for g in conditional)


def test_episodes_are_deterministic() -> None:
    task = rag_tasks("complex", n=1)[0]
    runs = [episode("plan_execute_replan", task, env=ENV, skill="weak") for _ in range(2)]
    a, b = (r.model_dump(exclude={"wall_s"}) for r, _ in runs)
    assert a == b


def test_world_facts_for_conditions() -> None:
    tools = ENV.make_tools(MEDIUM, rules=[], seed_keys=(0,))

    async def go() -> tuple[dict[str, Any], dict[str, Any]]:
        with clock.use_clock(clock.SimClock()):
            before = dict(tools.toolbox.facts())
            await tools.toolbox.call("retrieve", {"query": nearest_queries(STATION)[0]})
            return before, dict(tools.toolbox.facts())

    before, after = asyncio.run(go())
    assert before["index_ready"] is True and before["documents_found"] == 0
    assert after["documents_found"] > 0


# --------------------------------------------------------------------------- gold plan


def _gold_plan(task: Any) -> list[dict[str, Any]]:
    gold = ENV.oracle(task).remaining([])
    ids = {g.key: f"step_{1 + i}" for i, g in enumerate(gold)}
    return [render_step(g, ids) for g in gold]


def _execute(task: Any, steps: Sequence[dict[str, Any]], policy: Any = STATIC) -> tuple:
    tools = ENV.make_tools(task, rules=[], seed_keys=(0, task.task_id))
    llm = EpisodeLLM(object(), MODELS)  # type: ignore[arg-type] # these plans never replan
    executor = PlanExecutor(policy, tools.toolbox, llm, task.goal, PlannerStats())

    async def go() -> PlannerResult:
        with clock.use_clock(clock.SimClock()):
            return await executor.execute_text(json.dumps({"goal": task.goal, "steps": steps}))

    result = asyncio.run(go())
    return result, ENV.grade(task, result.answer, tools.calls), tools


@pytest.mark.parametrize("complexity", ["simple", "medium", "complex"])
def test_gold_plan_through_the_executor_solves_the_task(complexity: str) -> None:
    for task in rag_tasks(complexity, n=3):
        steps = _gold_plan(task)
        result, grade, tools = _execute(task, steps)
        assert result.stop == "answered" and grade.success, (result.detail, grade.detail)
        filled = [c for c in tools.calls if c.tool == "retrieve_conditional"]
        assert all("{dep_result}" not in c.args["query"] for c in filled)


def test_the_articles_rag_form_plan_solves_a_two_hop_question() -> None:
    """The article's plan shape: step/action/query/depends_on as a bare int/purpose."""
    steps = [
        {"step": 1, "action": "retrieve", "query": nearest_queries(STATION)[0], "purpose": "crag"},
        {
            "step": 2,
            "action": "retrieve_conditional",
            "query": "{dep_result} " + ASK,
            "depends_on": 1,
            "purpose": "its easiest route",
        },
        {
            "step": 3,
            "action": "synthesize",
            "args": {"context": ["{{step_1.result}}", "{{step_2.result}}"]},
            "depends_on": [1, 2],
            "purpose": "answer",
        },
    ]
    result, grade, _ = _execute(MEDIUM, steps)
    assert result.stop == "answered" and grade.success


# --------------------------------------------------------------------------- every planner


@pytest.mark.parametrize("planner", ALL_PLANNERS)
def test_every_planner_completes_with_no_faults_and_a_perfect_model(planner: str) -> None:
    for complexity in ("simple", "medium", "complex"):
        for task in rag_tasks(complexity, n=2):
            record, _ = episode(planner, task, env=ENV, skill="perfect")
            assert record.success and record.failure_mode == "none", (
                planner,
                task.task_id,
                record.detail,
            )


def test_unreachable_question_is_reported_by_a_replanning_planner() -> None:
    task = next(t for t in rag_tasks("medium", n=40, unreachable_rate=0.5) if t.unreachable)
    record, _ = episode("plan_execute_replan", task, env=ENV, skill="perfect")
    assert record.failure_mode == "correctly_reported_unreachable"
    record, _ = episode("react", task, env=ENV, skill="perfect")
    assert record.failure_mode == "correctly_reported_unreachable"


# --------------------------------------------------------------------------- the silent bugs


class Scripted:
    """A model that writes one given plan, whatever it is asked."""

    name = "scripted"

    def __init__(self, plan: dict[str, Any]) -> None:
        self.text = json.dumps(plan)

    async def generate(self, messages: Any, *, role: str, model: Any, request: Any) -> Completion:
        return Completion(text=self.text)


def _scripted_episode(steps: list[dict[str, Any]], task: Any = MEDIUM) -> EpisodeRecord:
    backend = Scripted({"goal": task.goal, "steps": steps})
    record, _ = asyncio.run(
        run_one(
            planner_name="plan_execute",
            planner=make_planner("plan_execute"),
            env=ENV,
            task=task,
            backend=backend,  # type: ignore[arg-type]
            llm_label="scripted",
            models=MODELS,
            rules=[],
            seed=0,
            trial=0,
        )
    )
    return record


def _steps(query2: str, depends_on: Any = 1, *, hop: bool = True) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = [
        {"step": 1, "action": "retrieve", "query": nearest_queries(STATION)[0]},
    ]
    context = ["{{step_1.result}}"]
    if hop:
        steps.append(
            {
                "step": 2,
                "action": "retrieve_conditional",
                "query": query2,
                "depends_on": depends_on,
            }
        )
        context.append("{{step_2.result}}")
    steps.append(
        {
            "step": len(steps) + 1,
            "action": "synthesize",
            "args": {"context": context},
            "depends_on": list(range(1, len(steps) + 1)),
        }
    )
    return steps


def _loud(record: EpisodeRecord, mode: str) -> None:
    assert not record.success and record.failure_mode == mode, record.detail
    assert record.stop_reason != "answered"  # no answer at all, let alone a normal-looking one


def test_the_scripted_right_plan_completes() -> None:
    """The control for the bug tests below: the same scaffold with the bug removed."""
    record = _scripted_episode(_steps("{dep_result} " + ASK))
    assert record.success and record.failure_mode == "none"


@pytest.mark.parametrize(
    "query, depends_on",
    [
        ("{dep_results} " + ASK, 1),  # misspelt: a plain str.replace would leave it in place
        ("{previous_result} " + ASK, 1),  # the executor fills no such name
        ("{dep_result} " + ASK, None),  # {dep_result} with nothing to fill it from
    ],
)
def test_bug1_an_unfilled_placeholder_is_a_plan_logic_error(query: str, depends_on: Any) -> None:
    with pytest.raises(PlanError) as err:
        parse_plan(json.dumps({"goal": "g", "steps": _steps(query, depends_on)}), TOOLS)
    assert err.value.reason == "unresolvable_placeholder"
    _loud(_scripted_episode(_steps(query, depends_on)), "plan_logic_error")


def test_bug1_a_placeholder_that_reaches_a_tool_is_refused() -> None:
    """A model acting step by step (no executor to fill it) writes the placeholder itself."""
    world = RagWorld(MEDIUM)
    for tool in ("retrieve", "retrieve_conditional"):
        for query in ("{dep_result} " + ASK, "{{step_1.result}} " + ASK, "{crag} " + ASK):
            with pytest.raises(ToolError) as err:
                _call(world, tool, {"query": query})
            assert err.value.kind == PLAN_LOGIC and not err.value.retryable
            assert "placeholder" in err.value.message


@pytest.mark.parametrize("depends_on", [1, "1", "step_1", "Step 1", [1], ["1"]])
def test_bug2_every_spelling_of_the_dependency_reaches_the_same_result(depends_on: Any) -> None:
    """The article's bug: "step_1" vs 1 as a key, so the dependency's result is undefined. Here
    every spelling normalizes to one id (recorded), and {dep_result} is filled from it."""
    plan = parse_plan(json.dumps({"goal": "g", "steps": _steps(FILLED, depends_on)}), TOOLS)
    assert plan.step("step_2").depends_on == ["step_1"]
    if depends_on != ["1"] and depends_on != [1]:
        assert any("depends_on" in note for note in plan.normalizations)
    record = _scripted_episode(_steps(FILLED, depends_on))
    assert record.success, record.detail


@pytest.mark.parametrize("depends_on", [1.0, True, {"step": 1}, "the first step", [[1]]])
def test_bug2_a_dependency_of_a_wrong_type_is_rejected_never_dropped(depends_on: Any) -> None:
    with pytest.raises(PlanError) as err:
        parse_plan(json.dumps({"goal": "g", "steps": _steps(FILLED, depends_on)}), TOOLS)
    assert err.value.reason == "schema"
    _loud(_scripted_episode(_steps(FILLED, depends_on)), "malformed_output")


def test_bug2_a_dependency_on_the_wrong_step_is_loud() -> None:
    """The type is right but the id is not the crag's step: {dep_result} is filled with a
    result that names no crag, and the conditional retrieval refuses it."""
    steps = _steps("{dep_result} " + ASK, 2)
    steps.insert(1, {"step": 2, "action": "retrieve", "query": "climbing grades for beginners"})
    steps[2] = {**steps[2], "step": 3}
    steps[3] = {
        "step": 4,
        "action": "synthesize",
        "args": {"context": ["{{step_1.result}}", "{{step_3.result}}"]},
        "depends_on": [1, 3],
    }
    record = _scripted_episode(steps)
    _loud(record, "plan_logic_error")
    assert "names no crag" in record.detail


def test_bug3_a_skipped_conditional_retrieval_never_yields_an_answer() -> None:
    """No second hop: the synthesis lacks the route and says so instead of answering."""
    record = _scripted_episode(_steps("", hop=False))
    _loud(record, "plan_logic_error")
    assert "easiest route" in record.detail


def test_bug3_a_conditional_step_skipped_by_the_ladder_is_loud() -> None:
    """A failed conditional step that nothing depends on is skipped by the recovery ladder;
    the synthesis that then lacks its context refuses instead of answering."""
    from dataclasses import replace

    steps = _steps("{dep_result} " + ASK, 1)
    steps[2] = {**steps[2], "args": {"context": ["{{step_1.result}}"]}, "depends_on": [1]}
    steps[1] = {**steps[1], "query": ASK, "depends_on": None}  # names no crag: it fails
    result, grade, tools = _execute(MEDIUM, steps, replace(STATIC, skip_independent=True))
    assert [e["id"] for e in result.trace if e["event"] == "skip"] == ["step_2"]
    assert result.stop == "plan_error" and result.answer is None and not grade.success
    assert tools.calls[-1].tool == "synthesize" and tools.calls[-1].error_kind == PLAN_LOGIC


def test_bug3_the_replanner_recovers_the_missing_hop() -> None:
    """Loud means recoverable: given a first plan with no second hop, a replanning planner
    reads the synthesis' refusal and adds the conditional retrieval (the replan is the
    simulated model's)."""
    from planarena.planners.llm.sim import SimLLM

    keys = (0, MEDIUM.env, MEDIUM.task_id, 0)
    sim = SimLLM(SKILLS["perfect"], ENV.oracle(MEDIUM), seed_keys=keys)
    first = json.dumps({"goal": MEDIUM.goal, "steps": _steps("", hop=False)})
    asked: list[str] = []

    class BadFirstPlan:
        name = "bad-first-plan"

        async def generate(self, messages: Any, *, role: str, model: Any, request: Any) -> Any:
            asked.append(role)
            if len(asked) == 1:
                return Completion(text=first)
            return await sim.generate(messages, role=role, model=model, request=request)

    record, trace = asyncio.run(
        run_one(
            planner_name="plan_execute_replan",
            planner=make_planner("plan_execute_replan"),
            env=ENV,
            task=MEDIUM,
            backend=BadFirstPlan(),  # type: ignore[arg-type]
            llm_label="scripted+sim",
            models=MODELS,
            rules=[],
            seed=0,
            trial=0,
        )
    )
    assert record.success and record.replans >= 1, record.detail
    tools = [c["tool"] for c in trace["tool_calls"]]
    assert tools == ["retrieve", "synthesize", "retrieve_conditional", "synthesize"]
    assert trace["tool_calls"][1]["error_kind"] == PLAN_LOGIC


def test_the_articles_bare_synthesize_step_is_refused_not_answered_from_nothing() -> None:
    """The article's synthesize step names no inputs (its executor passed every result);
    here a synthesis with no context wired in is the plan's mistake, and says so."""
    steps = _steps(FILLED, 1)
    steps[2] = {"step": 3, "action": "synthesize", "depends_on": [1, 2], "purpose": "answer"}
    record = _scripted_episode(steps)
    _loud(record, "plan_logic_error")
    assert "no context" in record.detail
