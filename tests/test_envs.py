"""The env contract: seeded tasks, tools behind one interface, faults as a wrapper, grading."""

from __future__ import annotations

import ast
import asyncio
import functools
from pathlib import Path
from typing import Any

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf
from planarena.envs import clock
from planarena.envs.base import COMPLEXITIES, Env
from planarena.envs.faults import FaultConfig, FaultRule
from planarena.envs.report import ReportEnv, ReportOracle, ReportWorld, grade
from planarena.envs.tools import LatencyProfile, ToolError

from tests.conftest import CONFIGS, episode, tasks

# The env config group is the one registry of envs: every env a run can name.
ENV_CONFIGS = sorted(p.stem for p in (CONFIGS / "env").glob("*.yaml"))


def env_from_config(name: str) -> Env:
    """The env ``env=<name>`` runs: its config group yaml, instantiated."""
    return instantiate(OmegaConf.load(CONFIGS / "env" / f"{name}.yaml"))


def run(coro: Any) -> Any:
    async def main() -> Any:
        with clock.use_clock(clock.SimClock()):
            return await coro

    return asyncio.run(main())


@pytest.mark.parametrize("env_name", ENV_CONFIGS)
def test_every_configured_env_is_deterministic(env_name: str) -> None:
    env = env_from_config(env_name)
    for complexity in COMPLEXITIES:
        a = env.generate(3, seed=7, complexity=complexity)
        b = env.generate(3, seed=7, complexity=complexity)
        assert a == b
        assert a != env.generate(3, seed=8, complexity=complexity)
        for task in a:
            first = episode("plan_execute_replan", task, skill="strong", env=env)[0]
            again = episode("plan_execute_replan", task, skill="strong", env=env)[0]
            assert first.model_dump(exclude={"wall_s"}) == again.model_dump(exclude={"wall_s"})


def test_complexities_have_the_documented_shape() -> None:
    """The right plan (from the oracle, not a formula) has the issue's step counts, and
    medium/complex tasks have independent branches (at least 3 at complex)."""
    wanted = {"simple": range(3, 5), "medium": range(5, 9), "complex": range(10, 14)}
    for complexity, steps in wanted.items():
        for task in tasks(complexity, n=20):
            gold = ReportOracle(task).remaining([])
            assert len(gold) in steps, (complexity, len(gold))
            roots = [g for g in gold if not g.deps]  # independent branches start here
            assert len(roots) >= {"simple": 1, "medium": 2, "complex": 3}[complexity]


def test_vague_query_ranks_the_stale_press_release_first() -> None:
    task = tasks("simple", n=1, p_stale_trap=1.0)[0]
    world = ReportWorld(task)
    b = world.branches[0]
    vague = run(world.call("search_web", {"query": f"{b.company} latest financial results"}))
    precise = run(world.call("search_web", {"query": f"{b.company} annual report {b.year}"}))
    assert vague["url"] == b.press_url and precise["url"] == b.report_url
    press = run(world.call("parse_pdf", {"url": b.press_url}))
    assert press["year"] == b.year - 2  # looks right locally, wrong year


def test_world_errors_are_tool_errors_not_crashes() -> None:
    world = ReportWorld(tasks("simple", n=1)[0])
    for name, args, kind in [
        ("nope", {}, "unknown_tool"),
        ("parse_pdf", {"url": "https://x.example/a.pdf"}, "not_found"),
        ("parse_pdf", {}, "bad_args"),
        ("extract_data", {"doc_id": "guess"}, "not_found"),
        ("generate_summary", {"data": [1]}, "bad_args"),
        ("search_web", {"query": 3}, "bad_args"),
    ]:
        with pytest.raises(ToolError) as info:
            run(world.call(name, args))
        assert info.value.kind == kind and not info.value.injected


def test_fault_scopes() -> None:
    task = tasks("simple", n=1)[0]
    env = ReportEnv()
    b = ReportWorld(task).branches[0]
    query = {"query": f"{b.company} annual report {b.year}"}

    def calls(rules: list[FaultRule], tool: str, args: dict[str, Any], n: int) -> list[str]:
        et = env.make_tools(task, rules=rules, seed_keys=(0, task.task_id))
        out = []
        for _ in range(n):
            try:
                run(et.toolbox.call(tool, args))
                out.append("ok")
            except ToolError as err:
                assert err.injected
                out.append(err.kind)
        return out

    burst = FaultRule(kind="http_503", tools=["search_web"], rate=1.0, max_consecutive=2)
    assert calls([burst], "search_web", query, 4) == ["http_503", "http_503", "ok", "http_503"]
    key = FaultRule(kind="invalid_api_key", tools=["search_web"], rate=1.0, scope="episode")
    assert calls([key], "search_web", query, 3) == ["invalid_api_key"] * 3
    assert calls([key], "search_web_backup", query, 1) == ["ok"]
    empty = FaultRule(
        kind="empty_result",
        tools=["search_web", "search_web_backup"],
        rate=1.0,
        scope="args",
        args_key=["query"],
    )
    assert calls([empty], "search_web_backup", query, 2) == ["empty_result"] * 2
    assert calls([], "search_web", query, 1) == ["ok"]


def test_fault_rates_are_honoured_and_seeded() -> None:
    task = tasks("simple", n=1)[0]
    env = ReportEnv()
    rule = FaultRule(kind="http_503", tools=["extract_data"], rate=0.3, max_consecutive=1000)
    hits = 0
    for i in range(400):
        et = env.make_tools(task, rules=[rule], seed_keys=(i,))
        try:
            run(et.toolbox.call("extract_data", {"doc_id": "x"}))
        except ToolError as err:
            hits += err.kind == "http_503"
    assert 0.24 < hits / 400 < 0.36


def test_fault_config_rejects_typos() -> None:
    with pytest.raises(ValueError):
        FaultConfig(rules=[{"kind": "http_503", "tools": ["x"], "rate": 1.5}])
    with pytest.raises(ValueError):
        FaultConfig(rules=[{"kind": "http_999", "tools": ["x"], "rate": 0.1}])
    with pytest.raises(ValueError):
        FaultConfig(rules=[{"kind": "http_503", "tools": ["x"], "rate": 0.1, "rat": 1}])


def test_latency_is_heavy_tailed_and_positive() -> None:
    profile = LatencyProfile(1.0, sigma=0.7)
    draws = sorted(profile.draw((i + 0.5) / 1000) for i in range(1000))
    assert draws[0] > 0 and draws[500] == pytest.approx(1.0, rel=0.02)
    assert draws[990] / draws[500] > 4  # heavy right tail


def test_parallel_branches_overlap_in_simulated_time() -> None:
    async def branch(seconds: float) -> float:
        await clock.sleep(seconds)
        return clock.now()

    async def main() -> tuple[list[float], float]:
        with clock.use_clock(clock.SimClock(10.0)) as c:
            ends = await clock.run_parallel([lambda: branch(1.0), lambda: branch(3.0)])
            return ends, c.now

    ends, now = asyncio.run(main())
    assert ends == [11.0, 13.0] and now == 13.0


def test_grader_progress_and_traps() -> None:
    task = tasks("medium", n=1, p_stale_trap=1.0)[0]
    b1, b2 = ReportWorld(task).branches
    line = "{c} FY{y}: revenue {r} B USD; profit {p} B USD"
    full = "\n".join(line.format(c=b.company, y=b.year, r=b.revenue, p=b.profit) for b in (b1, b2))
    assert grade(task, full, []).success
    half = line.format(c=b1.company, y=b1.year, r=b1.revenue, p=b1.profit)
    g = grade(task, half, [])
    assert not g.success and g.progress == 0.5
    stale = (
        half
        + "\n"
        + line.format(c=b2.company, y=b2.stale_year, r=b2.stale_revenue, p=b2.stale_profit)
    )
    g = grade(task, stale, [])
    assert g.trap_in_answer and not g.success
    # every current figure is there, but so is a stale one: the stale-figure rule fails it
    both = (
        full
        + "\n"
        + line.format(c=b2.company, y=b2.stale_year, r=b2.stale_revenue, p=b2.stale_profit)
    )
    g = grade(task, both, [])
    assert g.progress == 1.0 and g.trap_in_answer and not g.success
    assert grade(task, None, []).progress == 0.0


def test_oracle_gold_plan_solves_the_task() -> None:
    """The oracle's plan, written as Plan JSON and run by the executor against the env's tools
    (no faults, no LLM call needed), must satisfy the grader."""
    import json

    from planarena.planners.base import PlannerStats
    from planarena.planners.executor import STATIC, PlanExecutor
    from planarena.planners.llm.base import EpisodeLLM
    from planarena.planners.llm.sim import render_step

    from tests.conftest import MODELS

    env = ReportEnv()
    for task in tasks("complex", n=3):
        gold = ReportOracle(task).remaining([])
        ids = {g.key: f"step_{i + 1}" for i, g in enumerate(gold)}
        plan = json.dumps({"goal": task.goal, "steps": [render_step(g, ids) for g in gold]})
        tools = env.make_tools(task, rules=[], seed_keys=(0, task.task_id))

        async def go(tools: Any = tools, plan: str = plan, goal: str = task.goal) -> Any:
            llm = EpisodeLLM(object(), MODELS)  # type: ignore[arg-type] # never called
            executor = PlanExecutor(STATIC, tools.toolbox, llm, goal, PlannerStats())
            return await executor.execute_text(plan)

        result = run(go())
        assert result.stop == "answered", result.detail
        assert env.grade(task, result.answer, tools.log.records).success


@pytest.mark.parametrize(
    "keys", [(), ("a",), ("belief", "0123abcd", "look", "right"), (3, 2.5, None, ("x", 1))]
)
def test_keyed_draws_equal_the_flat_draws_they_speed_up(keys: tuple[object, ...]) -> None:
    """The simulator's hashed-once prefix must give exactly the draws of the flat key tuple,
    or records would change with an optimisation."""
    from planarena.envs.rng import KeyedDraws, derive_rng, derive_seed, uniform01

    prefix = (0, "report", "report-simple-000", 1)
    draws = KeyedDraws(*prefix)
    assert draws.seed(*keys) == derive_seed(*prefix, *keys)
    assert draws.uniform01(*keys) == uniform01(*prefix, *keys)
    assert draws.rng(*keys).random() == derive_rng(*prefix, *keys).random()
    assert KeyedDraws(*prefix, "b").seed() != draws.seed("c")
    for cut in range(len(keys) + 1):  # an extended prefix, hashed once, draws the same
        assert draws.under(*keys[:cut]).seed(*keys[cut:]) == derive_seed(*prefix, *keys)


@pytest.mark.parametrize("name", [n for n in ENV_CONFIGS if n != "file"])
def test_task_i_does_not_depend_on_how_many_are_made(name: str) -> None:
    """A job keeps only which task each episode runs and builds it again when it runs, so
    task i must be the same generated alone, in a chunk, or among the first n."""

    env = env_from_config(name)
    for complexity in ("simple", "complex"):
        kw = {"seed": 4, "complexity": complexity, "unreachable_rate": 0.3}
        first = env.generate(8, **kw)
        assert env.generate(5, start=3, **kw) == first[3:]
        assert env.generate(1, start=6, **kw) == [first[6]]
        # a job names its tasks without generating them: the names must be the tasks' own
        from planarena.experiments.run.jobs import TaskMaker

        maker = TaskMaker({name: env}, seed=4, unreachable_rate=0.3)
        refs = maker.refs(name, complexity, 8)
        assert [(r.env, r.task_id) for r in refs] == [(t.env, t.task_id) for t in first]
        assert [maker.task(r) for r in refs] == first


@pytest.mark.parametrize("name", [n for n in ENV_CONFIGS if n != "file"])
def test_an_episode_only_reads_its_task(name: str) -> None:
    """A job keeps recently built tasks and gives the same task object to every planner that
    runs it, so no episode may change its task (a world that kept state in ``task.world``
    would leak one planner's episode into the next)."""
    import copy

    from planarena.envs.faults import FaultConfig
    from planarena.experiments.run.episode import simulate
    from planarena.planners.llm.profiles import SKILLS

    root = Path(__file__).resolve().parents[1]
    env = env_from_config(name)
    rules = FaultConfig(
        **OmegaConf.to_container(OmegaConf.load(root / "configs/faults/heavy.yaml"))
    ).rules
    for task in env.generate(3, seed=1, complexity="complex", unreachable_rate=0.3):
        before = copy.deepcopy(task)
        for planner in ("react", "plan_execute_replan", "dfs"):
            built = instantiate(OmegaConf.load(root / "configs" / "planner" / f"{planner}.yaml"))
            simulate(planner, built, env, task, skill=SKILLS["weak"], rules=rules, seed=1)
            assert task == before, f"{planner} changed {task.task_id}"


def test_a_call_scoped_fault_is_keyed_by_the_whole_call_whatever_rules_precede_it() -> None:
    """An args-scoped rule keys its draw by a subset of the args; a call-scoped rule after it
    must still key its draw and its burst counter by the whole call (not by that subset)."""
    task = tasks("simple", n=1)[0]
    env = ReportEnv()
    query = f"{ReportWorld(task).branches[0].company} annual report"
    first, second = {"query": query, "page": 1}, {"query": query, "page": 2}
    never = FaultRule(  # applies to the call (so its key is computed) but never hits
        kind="empty_result", tools=["search_web"], rate=1e-300, scope="args", args_key=["query"]
    )
    burst = FaultRule(kind="http_503", tools=["search_web"], rate=1.0, max_consecutive=1)

    def kinds(rules: list[FaultRule]) -> list[str]:
        toolbox = env.make_tools(task, rules=rules, seed_keys=(0, task.task_id)).toolbox
        out = []
        for args in (first, second):
            try:
                run(toolbox.call("search_web", args))
                out.append("ok")
            except ToolError as err:
                out.append(err.kind)
        return out

    # two different calls: each meets its own first fault of the burst
    assert kinds([burst]) == ["http_503", "http_503"]
    assert kinds([never, burst]) == ["http_503", "http_503"]


def test_a_wrong_result_is_logged_as_an_injected_call_that_returned_ok() -> None:
    """A "200 but wrong" fault returns normally: the call log still marks it injected, with
    its kind, and the agent gets a plain dict. Drawn for a call the tool itself refuses (a
    not_found), it delivers no fault and is not counted."""
    task = tasks("simple", n=1)[0]
    doc = ReportWorld(task).branches[0].report_doc
    wrong = FaultRule(kind="wrong_result", tools=["extract_data"], rate=1.0, max_consecutive=1000)
    et = ReportEnv().make_tools(task, rules=[wrong], seed_keys=(0, task.task_id))
    result = run(et.toolbox.call("extract_data", {"doc_id": doc}))
    assert type(result) is dict and result["revenue"] is None
    with pytest.raises(ToolError) as info:
        run(et.toolbox.call("extract_data", {"doc_id": "guess"}))
    assert info.value.kind == "not_found" and not info.value.injected
    calls = [(c.ok, c.injected, c.error_kind) for c in et.log.records]
    assert calls == [(True, True, "wrong_result"), (False, False, "not_found")]
    assert et.faults.injected == 1


@functools.cache
def _default_fault_episodes() -> list[tuple[Any, dict[str, Any]]]:
    """Pipeline episodes (react and plan_execute_replan, 10 simple and 10 medium tasks) under
    the default faults, as a default run makes them: (record, trace) pairs."""
    from planarena.experiments.run.episode import simulate
    from planarena.planners.llm.profiles import SKILLS

    root = Path(__file__).resolve().parents[1]
    env = env_from_config("pipeline")
    faults = FaultConfig(
        **OmegaConf.to_container(OmegaConf.load(root / "configs/faults/default.yaml"))
    )
    out = []
    for complexity in ("simple", "medium"):
        for task in env.generate(
            10, seed=0, complexity=complexity, unreachable_rate=faults.unreachable_rate
        ):
            for planner in ("react", "plan_execute_replan"):
                config = OmegaConf.load(root / "configs" / "planner" / f"{planner}.yaml")
                out.append(
                    simulate(
                        planner,
                        instantiate(config),
                        env,
                        task,
                        skill=SKILLS["strong"],
                        rules=faults.rules,
                        faults_label="default",
                    )
                )
    return out


def test_the_trace_marks_every_fault_the_record_counts() -> None:
    """Per episode, the trace's injected tool calls are exactly the record's faults_injected,
    under the default faults, "200 but wrong" results (ok, injected, error_kind
    wrong_result) included; pipeline-medium-0007 also draws a wrong_result for a call that
    ends in the world's own not_found, which is no fault."""
    returned_ok = 0
    for record, trace in _default_fault_episodes():
        injected = [c for c in trace["tool_calls"] if c["injected"]]
        assert len(injected) == record.faults_injected, (record.planner, record.task_id)
        ok = [c["error_kind"] for c in injected if c["ok"]]
        assert set(ok) <= {"wrong_result"}
        returned_ok += len(ok)
    assert returned_ok >= 3  # the default rates do inject wrong results here


def test_time_to_recover_counts_the_faulted_episodes_conditional_recovery_counts(
    tmp_path: Path,
) -> None:
    """summary.md's Time to recover (read from traces.jsonl) and Conditional recovery (from
    the records' faults_injected) count the same faulted episodes in every cell; a cell
    with none is left out of Time to recover."""
    import json

    import pandas as pd
    from planarena.experiments.analysis.metrics import summarize
    from planarena.experiments.analysis.tables import recovery_time_table

    pairs = _default_fault_episodes()
    (tmp_path / "traces.jsonl").write_text(
        "".join(json.dumps(trace, sort_keys=True) + "\n" for _, trace in pairs)
    )
    df = pd.DataFrame([{**r.model_dump(), "run_dir": str(tmp_path)} for r, _ in pairs])
    keys = ["planner", "env", "complexity"]
    conditional = summarize(df).set_index(keys)["n_faulted"]
    recover = recovery_time_table(df).set_index(keys)["n_faulted"]
    assert conditional.sum() > 0 and set(recover.index) <= set(conditional.index)
    assert recover.reindex(conditional.index, fill_value=0).to_dict() == conditional.to_dict()


@pytest.mark.parametrize("name", [n for n in ENV_CONFIGS if n != "file"])
def test_an_episode_does_not_depend_on_the_episodes_run_before_it(name: str) -> None:
    """Worlds, oracles, fault exposures and parsed plans are kept for the planners that run
    the same task: a planner's record must be the same whichever episodes ran before it
    (every planner in one order, then in the reverse order, then each alone on a new env)."""
    from planarena.envs.faults import FaultConfig
    from planarena.experiments.run.episode import simulate
    from planarena.planners.llm.profiles import SKILLS

    root = Path(__file__).resolve().parents[1]

    rules = FaultConfig(
        **OmegaConf.to_container(OmegaConf.load(root / "configs/faults/heavy.yaml"))
    ).rules
    names = sorted(p.stem for p in (root / "configs" / "planner").glob("*.yaml"))
    planners = {
        p: instantiate(OmegaConf.load(root / "configs/planner" / f"{p}.yaml")) for p in names
    }

    def records(env: Any, order: list[str], task: Any) -> dict[str, Any]:
        out = {}
        for p in order:
            record, trace = simulate(p, planners[p], env, task, skill=SKILLS["weak"], rules=rules)
            out[p] = (record.model_dump(exclude={"wall_s"}), trace)
        return out

    env = env_from_config(name)
    for task in env.generate(2, seed=5, complexity="complex", unreachable_rate=0.3):
        forward = records(env, names, task)
        assert records(env, names[::-1], task) == forward
        for p in names[:3]:
            fresh = env_from_config(name)
            (alone,) = fresh.generate(
                1,
                seed=5,
                complexity="complex",
                unreachable_rate=0.3,
                start=int(task.task_id.rsplit("-", 1)[1]),
            )
            assert records(fresh, [p], alone)[p] == forward[p]


# --------------------------------------------------------------------------- envs' imports

ENVS_DIR = Path(__file__).resolve().parents[1] / "envs"


def _envs_imports() -> dict[str, list[tuple[str, int, bool]]]:
    """Every ``planarena`` import of every envs module: (imported module, line, whether it is
    inside a function). ``from pkg import name`` counts as an import of ``pkg.name`` when that
    is a module of envs, else of ``pkg``; an import under ``if TYPE_CHECKING`` counts (such an
    import is how a cycle used to be hidden)."""

    def module_of(path: Path) -> str:
        parts = ["planarena", "envs", *path.relative_to(ENVS_DIR).with_suffix("").parts]
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    files = {module_of(p): p for p in sorted(ENVS_DIR.rglob("*.py"))}
    out = {}
    for name, path in files.items():
        found = _imports_in(ast.parse(path.read_text(encoding="utf-8")), set(files))
        out[name] = [f for f in found if f[0].startswith("planarena.")]
    return out


def _imports_in(tree: ast.AST, modules: set[str]) -> list[tuple[str, int, bool]]:
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                found.extend((a.name, child.lineno, inner) for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module:
                assert child.level == 0, f"line {child.lineno}: a relative import"
                for a in child.names:
                    target = f"{child.module}.{a.name}"
                    found.append(
                        (target if target in modules else child.module, child.lineno, inner)
                    )
            visit(child, inner)

    visit(tree, False)
    return found


def test_envs_imports_form_no_cycle_and_none_hides_in_a_function() -> None:
    """No envs module imports one that imports it back (directly or around a loop), none
    imports a planarena module inside a function (the way a cycle gets hidden), and envs
    imports nothing of the planners or the experiments (they build on envs, not the reverse)."""
    imports = _envs_imports()
    for module, found in imports.items():
        for target, line, in_function in found:
            where = f"{module} line {line}: {target}"
            assert not in_function, f"{where} is imported inside a function"
            assert not target.startswith(("planarena.planners", "planarena.experiments")), where
    graph = {m: sorted({t for t, _, _ in found if t in imports}) for m, found in imports.items()}
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for target in graph[module]:
            assert state.get(target) != "open", f"import cycle: {' -> '.join([*path, target])}"
            if target not in state:
                visit(target, [*path, target])
        state[module] = "done"

    for module in graph:
        if module not in state:
            visit(module, [module])
    assert "planarena.envs.family.env" in graph and graph["planarena.envs.report.oracle"]
