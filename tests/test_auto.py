"""planner=auto: it chooses from what is visible before acting (never the oracle), the same
features always give the same choice, its choice and reason reach the record, and a map it
cannot read stops it with one line."""

from __future__ import annotations

import asyncio
import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import MODELS, make_planner, tasks
from planarena.envs.base import Task
from planarena.envs.oracle import Oracle
from planarena.envs.report.env import ReportEnv
from planarena.experiments.run.episode import run_one, simulate
from planarena.planners.auto import (
    MAP_FORMAT,
    AutoPlanner,
    Features,
    MapError,
    features_of,
    goal_deps,
    goal_items,
    load_map,
)
from planarena.planners.base import Planner, PlannerResult, TaskView
from planarena.planners.llm.base import EpisodeLLM
from planarena.planners.llm.profiles import SKILLS
from planarena.planners.llm.sim import SimLLM

AUTO_FILE = str(Path(inspect.getfile(AutoPlanner)).resolve())


def write_map(path: Path, entries: list[dict[str, Any]], **extra: Any) -> str:
    doc = {
        "format": MAP_FORMAT,
        "version": "test",
        "budget_levels": extra.pop("budget_levels", []),
        "fallback": extra.pop("fallback", "plan_execute_replan"),
        "entries": entries,
        **extra,
    }
    path.write_text(json.dumps(doc), encoding="utf-8")
    load_map.cache_clear()
    return str(path)


class RaisingOracle:
    """An oracle every attribute of which raises."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the oracle was read: {name}")


class GuardedOracle:
    """The real oracle, except that an access made by code in planners/auto.py raises (the
    chosen planner's model, called while auto's frame is further up the stack, still reads
    it); ``reads`` counts the allowed reads."""

    def __init__(self, inner: Oracle) -> None:
        self._inner = inner
        self.reads = 0

    def __getattr__(self, name: str) -> Any:
        caller = inspect.currentframe().f_back  # type: ignore[union-attr]
        if caller is not None and str(Path(caller.f_code.co_filename).resolve()) == AUTO_FILE:
            raise AssertionError(f"auto read the oracle: {name}")
        self.reads += 1
        return getattr(self._inner, name)


class Stub(Planner):
    """Records that it ran; answers nothing."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.ran = 0

    async def run(self, task: TaskView, tools: Any, llm: EpisodeLLM) -> PlannerResult:
        self.ran += 1
        return PlannerResult(None, "gave_up", self.name)


def test_auto_chooses_and_runs_with_an_oracle_that_raises(tmp_path: Path) -> None:
    """Everything auto does itself (features, the map, the choice, the trace event) runs with
    a model whose oracle raises on any access."""
    path = write_map(tmp_path / "m.json", [{"model": None, "budget": "any", "choice": "react"}])
    auto = AutoPlanner(map_path=path)
    auto.planners = {name: Stub(name) for name in auto.planners}
    env = ReportEnv()
    task = tasks("medium", 1)[0]
    tools = env.make_tools(task, rules=[], seed_keys=(0,)).toolbox
    llm = EpisodeLLM(SimLLM(SKILLS["strong"], RaisingOracle(), seed_keys=(0,)), MODELS)  # type: ignore[arg-type]
    result = asyncio.run(auto.run(TaskView(task.task_id, task.goal), tools, llm))
    assert result.detail == "react" and auto.planners["react"].ran == 1  # type: ignore[attr-defined]
    assert llm.trace[-1]["event"] == "auto_choice" and llm.trace[-1]["choice"] == "react"


def test_a_whole_episode_is_unchanged_when_auto_may_not_touch_the_oracle(tmp_path: Path) -> None:
    """The same episode with the model's oracle guarded against any read from auto's code:
    the same record (auto never reached for it), and the chosen planner's own play."""
    path = write_map(tmp_path / "m.json", [], fallback="plan_execute_replan")
    env = ReportEnv()
    task = tasks("complex", 1)[0]
    keys = (0, task.env, task.task_id, 0)

    def play(oracle: Any) -> dict[str, Any]:
        record, _ = asyncio.run(
            run_one(
                planner_name="auto",
                planner=AutoPlanner(map_path=path),
                env=env,
                task=task,
                backend=SimLLM(SKILLS["strong"], oracle, seed_keys=keys),
                llm_label="sim:strong",
                models=MODELS,
            )
        )
        return record.model_dump(exclude={"wall_s"})

    plain = play(env.oracle(task))
    guard = GuardedOracle(env.oracle(task))
    guarded = play(guard)
    assert plain == guarded and guard.reads > 0
    assert plain["auto_choice"] == "plan_execute_replan"
    direct, _ = simulate(
        "auto", make_planner("plan_execute_replan"), env, task, skill=SKILLS["strong"],
        models=MODELS,
    )  # fmt: skip
    same = {"success", "tokens_total", "tool_calls", "latency_s", "failure_mode"}
    assert {k: plain[k] for k in same} == {k: getattr(direct, k) for k in same}


def test_the_choice_depends_only_on_the_features_it_records(tmp_path: Path) -> None:
    """Tasks of different families and goals with the same recorded features get the same
    choice; and a choice follows its features (a map keyed on items picks by them)."""
    path = write_map(
        tmp_path / "m.json",
        [
            {"model": "strong", "budget": None, "items": "1", "choice": "react"},
            {"model": "strong", "budget": None, "items": "3-4", "deps": False, "choice": "tot"},
            {"model": "strong", "budget": None, "choice": "topo"},
            {"model": None, "budget": 4000, "choice": "plan_execute"},
        ],
        budget_levels=[4000],
    )
    auto = AutoPlanner(map_path=path, model_profile="strong")
    auto.planners = {name: Stub(name) for name in auto.planners}  # the choice, not the play
    seen: dict[str, str] = {}
    from hydra.utils import instantiate
    from omegaconf import OmegaConf
    from planarena.configs import CONFIG_DIR

    for env_name in ("report", "rag", "pipeline", "web_nav", "code_gen", "research"):
        env = instantiate(OmegaConf.load(CONFIG_DIR / "env" / f"{env_name}.yaml"))
        for cx in ("simple", "medium", "complex"):
            for task in env.generate(3, seed=1, complexity=cx):
                tools = env.make_tools(task, rules=[], seed_keys=(0,)).toolbox
                llm = EpisodeLLM(SimLLM(SKILLS["strong"], RaisingOracle(), seed_keys=(0,)), MODELS)  # type: ignore[arg-type]
                asyncio.run(auto.run(TaskView(task.task_id, task.goal, 7), tools, llm))
                event = llm.trace[-1]
                described = features_of(task.goal, tools.names(), None, "strong").describe()
                assert event["reason"].startswith(described + " ->")
                assert seen.setdefault(described, event["choice"]) == event["choice"]
    assert len(set(seen.values())) >= 2  # the features do decide
    f = Features(items=1, deps=False, tools=3, budget=None, model="strong")
    assert auto.choose(f)[0] == "react"
    assert auto.choose(Features(3, False, 3, None, "strong"))[0] == "tot"
    assert auto.choose(Features(3, True, 3, None, "strong"))[0] == "topo"
    assert auto.choose(Features(3, True, 3, 5000, "weak"))[0] == "plan_execute"  # nearest budget
    assert auto.choose(Features(3, True, 3, None, "weak"))[0] == "plan_execute_replan"  # fallback


def test_goal_features_read_structure_not_labels() -> None:
    assert goal_items("Report on the revenue of Acme, Wayne and Massive.") >= 3
    assert goal_items("Navigate to x (listed under A > B > C > D).") == 4
    pipeline = "Run it. Steps:\n- a\n- b (after a)\n- c (after a, b)\n"
    assert goal_items(pipeline) == 3 and goal_deps(pipeline)
    assert not goal_deps("Write a short report on Acme.")


def test_the_record_carries_auto_choice_and_reason(tmp_path: Path) -> None:
    path = write_map(tmp_path / "m.json", [{"model": None, "budget": "any", "choice": "react"}])
    task: Task = tasks("simple", 1)[0]
    record, trace = simulate(
        "auto",
        AutoPlanner(map_path=path),
        ReportEnv(),
        task,
        skill=SKILLS["perfect"],
        models=MODELS,
    )
    assert record.success  # type: ignore[attr-defined]
    dumped = record.model_dump()
    assert list(dumped)[-2:] == ["auto_choice", "auto_reason"]
    assert dumped["auto_choice"] == "react" and "items=" in dumped["auto_reason"]
    assert trace["events"][0]["event"] == "auto_choice"
    other, _ = simulate("react", make_planner("react"), ReportEnv(), task, skill=SKILLS["perfect"])
    assert "auto_choice" not in other.model_dump()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "not JSON"),
        ('{"format": "other"}', "not a decision map"),
        (json.dumps({"format": MAP_FORMAT, "fallback": ""}), "fallback must name a planner"),
        (json.dumps({"format": MAP_FORMAT, "fallback": "react", "entries": [{}]}), "entries"),
    ],
)
def test_a_map_auto_cannot_read_is_refused_with_one_line(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    load_map.cache_clear()
    with pytest.raises(MapError, match=message) as info:
        AutoPlanner(map_path=str(path))
    assert "\n" not in str(info.value)


def test_the_shipped_map_loads_and_names_planners_that_exist() -> None:
    load_map.cache_clear()
    auto = make_planner("auto")
    assert auto.map.entries or auto.map.fallback
    assert set(auto.planners) >= {auto.map.fallback}
