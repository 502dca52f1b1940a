"""Gold steps' check pools: what a careful model could check, never what the faults corrupt.

A pool (``GoldStep.checks``) is derived from what the task needs of a step's result; the
simulated model writes some of its checks into a plan. These tests walk every registered env's
oracle along its gold path (and its traps) and check that each pool holds the task's own
post-conditions, parses, holds on a right result, and does not move when the fault
configuration does.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf
from planarena.envs import clock
from planarena.envs.base import COMPLEXITIES, Env, Task
from planarena.envs.family import FamilyEnv
from planarena.envs.family.oracle import FamilyOracle
from planarena.envs.family.schema import FamilyDecl
from planarena.envs.oracle import (
    REPORT_UNREACHABLE,
    SUBMIT_ANSWER,
    GoldStep,
    Obs,
    Oracle,
    check_pool,
    literal_args,
)
from planarena.envs.tools import ToolError
from planarena.planners.conditions import ConditionError, evaluate_condition

from tests.conftest import CONFIGS

ENV_CONFIGS = sorted(p.stem for p in (CONFIGS / "env").glob("*.yaml"))
PSEUDO = (REPORT_UNREACHABLE, SUBMIT_ANSWER)


def env_from_config(name: str) -> Env:
    return instantiate(OmegaConf.load(CONFIGS / "env" / f"{name}.yaml"))


def every_step(steps: list[GoldStep]) -> Iterator[GoldStep]:
    """The steps, their traps and their trap plans (recursively)."""
    for g in steps:
        yield g
        if g.trap is not None:
            yield from every_step([g.trap])
        if g.trap_plan:
            yield from every_step(g.trap_plan)


def walk(
    env: Env, task: Task, *, take_traps: bool, max_steps: int = 60
) -> Iterator[tuple[list[Obs], list[GoldStep], Obs | None]]:
    """Follow the oracle: each turn yields (observations so far, the remaining steps, the
    observation of the first step once made: the right call, or its trap when asked)."""
    oracle = env.oracle(task)
    tools = env.make_tools(task, rules=[], seed_keys=(0, task.env, task.task_id))

    async def call(name: str, args: dict[str, Any]) -> tuple[Any, str | None]:
        with clock.use_clock(clock.SimClock()):
            try:
                return await tools.toolbox.call(name, args), None
            except ToolError as err:
                return err.observation(), err.kind

    observations: list[Obs] = []
    for i in range(max_steps):
        steps = oracle.remaining(observations)
        if not steps or steps[0].tool in PSEUDO:
            yield list(observations), steps, None
            return
        g = steps[0].trap if take_traps and steps[0].trap is not None else steps[0]
        args = literal_args(g.args, observations)
        result, error = asyncio.run(call(g.tool, args))
        obs = Obs(f"o{i}", g.tool, args, result, error)
        yield list(observations), steps, obs
        observations.append(obs)


def gold_steps(env: Env, n: int = 2) -> Iterator[tuple[Task, Oracle, list[Obs], list[GoldStep]]]:
    """(task, oracle, observations, remaining steps) along gold and trap walks."""
    for complexity in COMPLEXITIES:
        for i, task in enumerate(env.generate(n, seed=3, complexity=complexity)):
            for observations, steps, _ in walk(env, task, take_traps=bool(i % 2)):
                yield task, env.oracle(task), observations, steps


@pytest.mark.parametrize("env_name", ENV_CONFIGS)
def test_every_task_post_condition_is_in_the_pool_and_every_check_parses(env_name: str) -> None:
    env = env_from_config(env_name)
    seen = 0
    for _, _, _, steps in gold_steps(env):
        for g in every_step(steps):
            if g.tool in PSEUDO:
                assert g.checks == [] and g.post == []
                continue
            seen += 1
            assert g.checks, f"{g.key} ({g.tool}) has an empty pool"
            assert set(g.post) <= set(g.checks), (g.key, g.post, g.checks)
            assert len(set(g.checks)) == len(g.checks), g.checks
            for check in g.checks:
                # parses and evaluates to a bool on an empty and on a null result
                for result in ({}, None):
                    assert isinstance(evaluate_condition(check, {"result": result}), bool)
    assert seen > 10


@pytest.mark.parametrize("env_name", ENV_CONFIGS)
def test_a_right_result_passes_its_whole_pool(env_name: str) -> None:
    """No check of a pool rejects the result of the right call without faults: a pool holds
    no false alarm of its own."""
    env = env_from_config(env_name)
    checked = 0
    for complexity in COMPLEXITIES:
        for task in env.generate(2, seed=3, complexity=complexity):
            for _, steps, obs in walk(env, task, take_traps=False):
                if obs is None or obs.error is not None:
                    continue
                for check in steps[0].checks:
                    assert evaluate_condition(check, {"result": obs.result}), (
                        task.task_id,
                        steps[0].key,
                        check,
                        json.dumps(obs.result)[:300],
                    )
                    checked += 1
    assert checked > 10


@pytest.mark.parametrize("env_name", ENV_CONFIGS)
def test_every_null_field_of_a_pool_is_caught_by_it(env_name: str) -> None:
    """Nulling a field the pool names fails the pool; the pool is about the result the
    step really returns (its fields exist in a right result)."""
    env = env_from_config(env_name)
    for complexity in COMPLEXITIES:
        task = env.generate(1, seed=3, complexity=complexity)[0]
        for _, steps, obs in walk(env, task, take_traps=False):
            if obs is None or obs.error is not None or not isinstance(obs.result, dict):
                continue
            for check in steps[0].checks:
                field = check.split()[0].removeprefix("result.").split(".")[0]
                assert field in obs.result, (steps[0].key, check, sorted(obs.result))
                nulled = {**obs.result, field: None}
                fails = not all(evaluate_condition(c, {"result": nulled}) for c in steps[0].checks)
                assert fails, (steps[0].key, field, steps[0].checks)


def refaulted(decl: FamilyDecl, how: str) -> FamilyDecl:
    """``decl`` with every ``wrong_result`` corrupting other fields (``other``), or with no
    fault declared at all (``none``)."""
    tools = {}
    for name, tool in decl.tools.items():
        faults = dict(tool.faults)
        if how == "none":
            faults = {}
        elif "wrong_result" in faults:
            old = set(faults["wrong_result"].corrupt_fields or decl.answer.facts)
            fields = [f for f in ("zzz_missing", "title", "doc_id", "status") if f not in old]
            faults["wrong_result"] = faults["wrong_result"].model_copy(
                update={"corrupt_fields": fields}
            )
        tools[name] = tool.model_copy(update={"faults": faults})
    return decl.model_copy(update={"tools": tools})


def pools(steps: list[GoldStep]) -> list[tuple[str, str, list[str]]]:
    return [(g.key, g.tool, list(g.checks)) for g in every_step(steps)]


@pytest.mark.parametrize("env_name", ENV_CONFIGS)
def test_no_pool_reads_the_fault_configuration(env_name: str) -> None:
    """A family oracle can read its declaration's faults (which field a "200 but wrong"
    nulls); its pools are the same when every tool corrupts other fields, or declares no
    fault. The other envs' oracles are built from the task alone, whose world holds no
    fault configuration."""
    env = env_from_config(env_name)
    params = list(inspect.signature(env.oracle).parameters)
    assert params == ["task"], params
    if not isinstance(env, FamilyEnv):
        for complexity in COMPLEXITIES:
            for task in env.generate(2, seed=3, complexity=complexity):
                world = json.dumps(task.world, default=str)
                assert "corrupt" not in world and "fault" not in world
        return
    compared = 0
    for task, oracle, observations, steps in gold_steps(env):
        assert isinstance(oracle, FamilyOracle)
        for how in ("other", "none"):
            other = FamilyOracle(refaulted(env.decl, how), task)
            # the same observations read by an oracle of the same task under other faults
            other_steps = other.remaining(observations)
            assert pools(other_steps) == pools(steps), (task.task_id, how)
            compared += 1
    assert compared > 5


def test_the_report_pool_covers_both_figures_whichever_a_fault_nulls() -> None:
    """The report's extract pool checks revenue and profit (the answer's facts) and the
    year, one check per field; the gold post names only revenue."""
    env = env_from_config("report")
    task = env.generate(1, seed=0, complexity="simple")[0]
    extract = next(
        g for _, steps, _ in walk(env, task, take_traps=False) for g in steps
        if g.tool == "extract_data"
    )  # fmt: skip
    year = next(c for c in extract.checks if c.startswith("result.year == "))
    assert extract.checks == ["result.revenue != null", "result.profit != null", year]
    assert extract.post == ["result.revenue != null", year]


def test_a_field_a_task_condition_compares_gets_no_null_check() -> None:
    assert check_pool(["year", "doc_id"], ["result.year == 2023"]) == [
        "result.doc_id != null",
        "result.year == 2023",
    ]
    assert check_pool(["count"], ["result.count > 0"]) == ["result.count > 0"]
    # a comparison that a null passes (``!= 5``) or a null test covers nothing
    assert check_pool(["x"], ["result.x != 5"]) == ["result.x != null", "result.x != 5"]
    assert check_pool(["x"], ["result.x == null"]) == ["result.x != null", "result.x == null"]
    with pytest.raises(ConditionError):
        evaluate_condition("result.x !=", {"result": {}})
