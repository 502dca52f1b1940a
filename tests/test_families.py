"""Task families declared in YAML (envs/family/, envs/families/*.yaml): every family works
with every planner, deterministically, its gold plan solves its tasks through the executor, a
malformed file is refused with the file, the key and what was expected, and a family copied
into a temporary folder runs end to end through the CLI with no Python change."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from planarena.envs import clock
from planarena.envs.base import COMPLEXITIES
from planarena.envs.family import FAMILIES_DIR, FamilyEnv, FamilyError, load_declaration
from planarena.envs.faults import FaultConfig
from planarena.envs.oracle import Obs

from tests.conftest import ALL_PLANNERS, BIN, CONFIGS, MODELS, episode

FAMILIES = sorted(p.stem for p in FAMILIES_DIR.glob("*.yaml"))
DEFAULT_FAULTS = FaultConfig.model_validate(
    yaml.safe_load((CONFIGS / "faults/default.yaml").read_text())
)


def test_the_built_in_families_exist() -> None:
    assert {"pipeline", "web_nav", "code_gen", "research"} <= set(FAMILIES)
    for name in FAMILIES:
        assert (CONFIGS / "env" / f"{name}.yaml").exists(), f"configs/env/{name}.yaml missing"


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("planner", ALL_PLANNERS)
def test_every_planner_completes_every_family_with_a_perfect_model(
    family: str, planner: str
) -> None:
    env = FamilyEnv(name=family)
    for complexity in ("simple", "complex"):
        task = env.generate(1, seed=3, complexity=complexity)[0]
        record, _ = episode(planner, task, env=env, skill="perfect")  # type: ignore[arg-type]
        assert record.success, (task.task_id, record.failure_mode, record.detail)


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_every_planner_completes_every_complexity(family: str) -> None:
    env = FamilyEnv(name=family)
    for complexity in COMPLEXITIES:
        for task in env.generate(3, seed=0, complexity=complexity):
            for planner in ALL_PLANNERS:
                record, _ = episode(planner, task, env=env, skill="perfect")  # type: ignore[arg-type]
                assert record.success, (task.task_id, planner, record.failure_mode)


@pytest.mark.parametrize("family", FAMILIES)
def test_same_seed_same_records(family: str) -> None:
    env = FamilyEnv(name=family)
    a = env.generate(3, seed=5, complexity="medium", unreachable_rate=0.3)
    assert a == env.generate(3, seed=5, complexity="medium", unreachable_rate=0.3)
    assert a != env.generate(3, seed=6, complexity="medium", unreachable_rate=0.3)
    for planner in ("react", "plan_execute_replan", "dfs"):
        first = episode(planner, a[0], env=env, skill="strong", rules=DEFAULT_FAULTS.rules)  # type: ignore[arg-type]
        again = episode(planner, a[0], env=env, skill="strong", rules=DEFAULT_FAULTS.rules)  # type: ignore[arg-type]
        assert first[0].model_dump(exclude={"wall_s"}) == again[0].model_dump(exclude={"wall_s"})
        assert first[0].failure_mode != "harness_error", first[0].detail


@pytest.mark.parametrize("family", FAMILIES)
def test_the_gold_plan_solves_the_task_through_the_executor(family: str) -> None:
    """The oracle's plan, written as Plan JSON and run by the executor against the family's
    tools (no faults, no LLM call), satisfies the grader."""
    from planarena.planners.base import PlannerStats
    from planarena.planners.executor import STATIC, PlanExecutor
    from planarena.planners.llm.base import EpisodeLLM
    from planarena.planners.llm.sim import render_step

    env = FamilyEnv(name=family)
    for complexity in COMPLEXITIES:
        for task in env.generate(3, seed=1, complexity=complexity):
            gold = env.oracle(task).remaining([])
            ids = {g.key: f"step_{i + 1}" for i, g in enumerate(gold)}
            plan = json.dumps({"goal": task.goal, "steps": [render_step(g, ids) for g in gold]})
            tools = env.make_tools(task, rules=[], seed_keys=(0, task.task_id))

            async def go(tools: Any = tools, plan: str = plan, goal: str = task.goal) -> Any:
                llm = EpisodeLLM(object(), MODELS)  # type: ignore[arg-type] # never called
                executor = PlanExecutor(STATIC, tools.toolbox, llm, goal, PlannerStats())
                with clock.use_clock(clock.SimClock()):
                    return await executor.execute_text(plan)

            result = asyncio.run(go())
            assert result.stop == "answered", (task.task_id, result.detail)
            assert env.grade(task, result.answer, tools.log.records).success, task.task_id


def _call(env: FamilyEnv, task: Any, tool: str, args: dict[str, Any]) -> Any:
    tools = env.make_tools(task, rules=[], seed_keys=(0, task.task_id))

    async def go() -> Any:
        with clock.use_clock(clock.SimClock()):
            return await tools.toolbox.call(tool, args)

    return asyncio.run(go())


def test_a_decoy_is_subtle_and_its_figures_in_the_answer_are_a_dead_end() -> None:
    env = FamilyEnv(name="pipeline")
    task = next(
        t
        for t in env.generate(30, seed=0, complexity="simple")
        if t.world["nodes"][-1]["trap"] is not None
    )
    sink = task.world["nodes"][-1]
    trap = sink["trap"]
    cached = _call(env, task, trap["tool"], {"step": sink["name"]})
    assert cached["partition"] != sink["result"]["partition"]  # the sign a careful read sees
    oracle = env.oracle(task)
    obs = Obs("obs_0", trap["tool"], {"step": sink["name"]}, cached)
    assert oracle.subtle(obs)
    answer = f"step: {sink['name']}; rows: {cached['rows']}"
    grade = env.grade(task, answer, [])
    assert grade.trap_in_answer and not grade.success
    right = f"step: {sink['name']}; rows: {sink['result']['rows']}"
    assert env.grade(task, right, []).success


def test_a_step_before_its_dependencies_fails_and_world_facts_track_progress() -> None:
    env = FamilyEnv(name="pipeline")
    task = env.generate(1, seed=0, complexity="simple")[0]
    first, *_, sink = task.world["nodes"]
    tools = env.make_tools(task, rules=[], seed_keys=(0, task.task_id))

    async def go() -> None:
        with clock.use_clock(clock.SimClock()):
            from planarena.envs.tools import ToolError

            with pytest.raises(ToolError) as err:
                await tools.toolbox.call("run_step", {"step": sink["name"]})
            assert err.value.kind == "not_found" and "upstream not ready" in err.value.message
            assert tools.toolbox.facts()["materialized"][first["slug"]] is False
            await tools.toolbox.call("run_step", {"step": first["name"]})
            assert tools.toolbox.facts()["materialized"][first["slug"]] is True

    asyncio.run(go())


def test_faults_of_the_config_apply_to_the_tools_that_declare_their_kind() -> None:
    env = FamilyEnv(name="web_nav")
    rules = env.rules(DEFAULT_FAULTS.rules)
    by_kind = {r.kind: set(r.tools) for r in rules}
    assert by_kind["invalid_api_key"] == {"open_page"}  # declared there only
    assert by_kind["http_503"] == {"open_page", "open_page_mirror"}
    assert "password_protected" not in by_kind  # no web_nav tool declares it
    research = FamilyEnv(name="research").rules(DEFAULT_FAULTS.rules)
    empty = next(r for r in research if r.kind == "empty_result")
    assert set(empty.tools) == {"search_sources", "search_sources_backup"}  # shared draws
    assert empty.args_key == ["query"]
    from planarena.envs.faults import FaultRule

    twice = [
        FaultRule(kind="http_503", tools=["x"], rate=0.1, scope="window"),
        FaultRule(kind="http_503", tools=["y"], rate=0.9),
        FaultRule(kind="timeout", tools=["open_page"], rate=0.5),
    ]
    mapped = env.rules(twice)
    assert [(r.kind, r.rate, r.scope) for r in mapped] == [
        ("timeout", 0.5, "call"),  # names a web_nav tool: kept as written
        ("http_503", 0.1, "window"),  # the first rule of its kind, once
    ]


def test_an_unreachable_task_is_reported_after_the_missing_page_is_seen() -> None:
    env = FamilyEnv(name="web_nav")
    task = env.generate(1, seed=0, complexity="simple", unreachable_rate=1.0)[0]
    assert task.unreachable
    record, _ = episode("react", task, env=env, skill="perfect")  # type: ignore[arg-type]
    assert record.failure_mode == "correctly_reported_unreachable", record.detail


def test_the_readme_example_is_a_working_family() -> None:
    text = (FAMILIES_DIR.parent / "README.md").read_text()
    block = re.findall(r"```yaml\n(.*?)```", text, re.S)[0]
    example = FAMILIES_DIR / "examples" / "stock_check.yaml"
    assert block in example.read_text()  # the shipped example is the README's, verbatim
    env = FamilyEnv(path=str(example))
    assert env.name == "stock_check"
    task = env.generate(1, seed=0, complexity="medium")[0]
    for planner in ALL_PLANNERS:
        record, _ = episode(planner, task, env=env)  # type: ignore[arg-type]
        assert record.success, (planner, record.failure_mode, record.detail)


def test_env_file_names_the_env_file_unless_renamed() -> None:
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(CONFIGS / "env" / "file.yaml")
    env = instantiate(cfg)
    assert env.name == "file"
    assert env.generate(1, seed=0, complexity="simple")[0].env == "file"
    renamed = FamilyEnv(name="my_shop", path=str(FAMILIES_DIR / "web_nav.yaml"))
    assert renamed.generate(1, seed=0, complexity="simple")[0].task_id.startswith("my_shop-")
    with pytest.raises(FamilyError, match="expected an identifier"):
        FamilyEnv(name="my shop", path=str(FAMILIES_DIR / "web_nav.yaml"))


@pytest.mark.slow
def test_heavy_faults_give_no_harness_error_and_many_failure_modes() -> None:
    heavy = FaultConfig.model_validate(yaml.safe_load((CONFIGS / "faults/heavy.yaml").read_text()))
    modes: set[str] = set()
    for family in FAMILIES:
        env = FamilyEnv(name=family)
        for complexity in COMPLEXITIES:
            for task in env.generate(
                2, seed=0, complexity=complexity, unreachable_rate=heavy.unreachable_rate
            ):
                for planner in ALL_PLANNERS:
                    record, _ = episode(planner, task, env=env, skill="strong", rules=heavy.rules)  # type: ignore[arg-type]
                    assert record.failure_mode != "harness_error", record.detail
                    modes.add(record.failure_mode)
    assert len(modes - {"none"}) >= 6, modes


# ----------------------------------------------------------------------------- malformed files


def _write(tmp_path: Path, name: str, edit: Any) -> Path:
    raw = yaml.safe_load((FAMILIES_DIR / "web_nav.yaml").read_text())
    edit(raw)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@pytest.mark.parametrize(
    ("edit", "key", "expected"),
    [
        (
            lambda r: r["tools"]["open_page"]["latency"].update(median_s="fast"),
            "tools.open_page.latency.median_s",
            "valid number",
        ),
        (
            lambda r: r["templates"]["category"].update(tool="click"),
            "templates.category.ways[0].tool",
            "a declared tool",
        ),
        (lambda r: r["sizes"].pop("complex"), "sizes", "every complexity"),
        (
            lambda r: r["tools"]["open_page"].update(faults=["http_404"]),
            "tools.open_page.faults",
            "http_503",
        ),
        (
            lambda r: r["templates"]["product"]["result"].update(title="{colour}"),
            "templates.product.result.title",
            "unknown variable {colour}",
        ),
        (
            lambda r: r["answer"].update(facts=["price"]),
            "answer.facts",
            "'price' among the result fields",
        ),
        (lambda r: r.pop("goal"), "goal", "Field required"),
        (
            lambda r: r["templates"]["product"]["result"].update(warranty_years={"int": [9, 2]}),
            "templates.product.result.warranty_years",
            "low <= high",
        ),
        (
            lambda r: r["sizes"]["medium"]["layers"][1].update(repeat=[6, 4]),
            "sizes.medium.layers.1",
            "low <= high",
        ),
        (
            lambda r: r["tools"]["open_page"].update(fallback="open_mirror"),
            "tools.open_page.fallback",
            "a declared tool",
        ),
    ],
)
def test_a_malformed_family_names_the_file_the_key_and_what_was_expected(
    tmp_path: Path, edit: Any, key: str, expected: str
) -> None:
    path = _write(tmp_path, "broken.yaml", edit)
    with pytest.raises(FamilyError) as err:
        load_declaration(path)
    text = str(err.value)
    assert str(path) in text and key in text and expected in text, text


def _median_fast(r: dict[str, Any]) -> None:
    r["tools"]["open_page"]["latency"].update(median_s="fast")


def _colour_typo(r: dict[str, Any]) -> None:
    r["templates"]["product"]["result"].update(title="{colour}")


def _no_complex(r: dict[str, Any]) -> None:
    r["sizes"].pop("complex")


def _undeclared_fallback(r: dict[str, Any]) -> None:
    r["tools"]["open_page"].update(fallback="open_mirror")


@pytest.mark.parametrize(
    ("edits", "expected"),
    [
        (  # a field error and a template error
            [_median_fast, _colour_typo],
            [
                ("tools.open_page.latency.median_s", "valid number"),
                ("templates.product.result.title", "unknown variable {colour}"),
            ],
        ),
        (  # two cross-field errors
            [_no_complex, _undeclared_fallback],
            [("sizes", "every complexity"), ("tools.open_page.fallback", "a declared tool")],
        ),
        (  # all four at once
            [_median_fast, _colour_typo, _no_complex, _undeclared_fallback],
            [
                ("tools.open_page.latency.median_s", "valid number"),
                ("templates.product.result.title", "unknown variable {colour}"),
                ("sizes", "every complexity"),
                ("tools.open_page.fallback", "a declared tool"),
            ],
        ),
    ],
)
def test_a_family_with_several_errors_reports_every_one(
    tmp_path: Path, edits: list[Any], expected: list[tuple[str, str]]
) -> None:
    """One message, one line per problem, each naming the file, the key and what was
    expected (the loader used to stop at the first: pydantic's field errors hid the
    cross-field checks and the template dry run)."""
    path = _write(tmp_path, "broken.yaml", lambda r: [edit(r) for edit in edits])
    with pytest.raises(FamilyError) as err:
        load_declaration(path)
    lines = str(err.value).splitlines()
    assert len(lines) == len(expected), lines
    for key, what in expected:
        assert any(line.startswith(f"{path}: {key}: ") and what in line for line in lines), (
            key,
            lines,
        )


def test_a_file_that_is_not_yaml_or_absent_is_refused_by_name(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(FamilyError, match="bad.yaml: not valid YAML"):
        load_declaration(bad)
    with pytest.raises(FamilyError, match="cannot read"):
        load_declaration(tmp_path / "absent.yaml")


def test_a_malformed_file_stops_the_cli_before_any_episode(tmp_path: Path) -> None:
    path = _write(tmp_path, "broken.yaml", lambda r: r["sizes"].pop("medium"))
    out = tmp_path / "run"
    proc = subprocess.run(
        [
            str(BIN / "planarena"),
            "env=file",
            f"env.file.path={path}",
            "n_tasks=1",
            "progress=false",
            f"hydra.run.dir={out}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert f"{path}: sizes" in proc.stderr and "every complexity" in proc.stderr
    assert not (out / "episodes.jsonl").exists()


@pytest.mark.slow
def test_a_family_copied_to_a_tmp_dir_runs_with_every_planner_through_the_cli(
    tmp_path: Path,
) -> None:
    """No Python change: a YAML file named on the command line is an env."""
    raw = (FAMILIES_DIR / "pipeline.yaml").read_text().replace("name: pipeline", "name: my_etl")
    path = tmp_path / "families" / "my_etl.yaml"  # a copy, outside the repository
    path.parent.mkdir()
    path.write_text(raw)
    out = tmp_path / "run"
    cmd = [
        str(BIN / "planarena"),
        "env=file",
        f"env.file.path={path}",
        "n_tasks=1",
        "complexity=[simple,medium]",
        "faults=none",
        "llm.skill=perfect",
        "progress=false",
        "figures=false",
        f"hydra.run.dir={out}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert {r["planner"] for r in records} == set(ALL_PLANNERS)
    assert {r["env"] for r in records} == {"file"}  # the env=file option names the env
    assert all(r["success"] for r in records), [r for r in records if not r["success"]]
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=600)  # resumes
    assert again.returncode == 0, again.stderr
    assert len((out / "episodes.jsonl").read_text().splitlines()) == len(records)
    shutil.rmtree(out)
