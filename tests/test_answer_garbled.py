"""A final answer the model writes itself with a fact wrong (``p_answer_garbled``): a habit of
small real models, which copy the tools' figures into their own final answer and slip.

The simulated model writes a ReAct ``finish`` (status success) from what it holds; with the
rate, that answer has every figure a decimal place off (``garbled``), so the fact grader finds
the task's facts unstated and the episode ends ``false_success``, on every built-in env. A plan
planner's final answer is the answer tool's own result, never text the model writes: nothing
changes for it. The draw is keyed by the decision point (no request's random stream moves),
and at 0 nothing is drawn: every shipped profile's runs are as before. Calibration counts the
answers that lost the facts the answer tool had returned, and recovers a known rate.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf
from planarena.envs.base import Env
from planarena.envs.grading import Fact, count_carried
from planarena.envs.rng import KeyedDraws
from planarena.planners.llm.profiles import SKILLS, SkillProfile
from planarena.planners.llm.sim_decider import garbled

from tests.conftest import CONFIGS, assert_unchanged_by, episode
from tests.test_calibrate_recovery import fitted, sim_run

ENVS = sorted(p.stem for p in (CONFIGS / "env").glob("*.yaml"))  # every built-in env
WRITERS = ["react", "reflexion", "dfs"]  # planners whose final answer the model writes
PLAN_PLANNERS = ["plan_execute", "plan_execute_replan", "topo", "tot", "bfs", "mcts"]


@cache
def _env(name: str) -> Env:
    return instantiate(OmegaConf.load(CONFIGS / "env" / f"{name}.yaml"))


def _perfect(p: float) -> SkillProfile:
    return SKILLS["perfect"].model_copy(update={"p_answer_garbled": p})


def _tasks(env: Env, n: int = 3) -> Iterator:
    for complexity in ("simple", "medium", "complex"):
        yield from env.generate(n, seed=0, complexity=complexity, unreachable_rate=0.2)


def test_garbled_moves_every_figure_a_decimal_place_or_cuts_the_answer() -> None:
    assert garbled("Acme Corp FY2025: revenue 41.2 B USD; profit 5.3") == (
        "Acme Corp FY2025: revenue 4.12 B USD; profit 0.53"  # FY2025 is no figure: a word
    )
    assert garbled("code_id: c-sort-9054; rows: 1,200; passed: True") == (
        "code_id: c-sort-905.4; rows: 120.0; passed: True"
    )
    assert garbled("Mangrove Arete, graded 0.") == "Mangrove Are"  # no figure but 0: cut
    acme = [Fact("Acme Corp", "revenue", 41.2), Fact("Acme Corp", "profit", 5.3)]
    answer = "Acme Corp revenue 41.2, profit 5.3"
    assert count_carried(answer, acme) == 2 and count_carried(garbled(answer), acme) == 0


@pytest.mark.parametrize("planner", WRITERS)
@pytest.mark.parametrize("env_name", ENVS)
def test_a_garbled_final_answer_fails_every_episode_that_would_succeed(
    planner: str, env_name: str
) -> None:
    """Decisions all right: every episode that succeeds with the answer copied ends
    ``false_success`` with it garbled (its facts wrong, by the env's own grader); an episode
    that reports the goal unreachable writes no answer and is as before."""
    env = _env(env_name)
    succeeded = 0
    for task in _tasks(env):
        copied, _ = episode(planner, task, env=env, skill=_perfect(0.0))
        written, _ = episode(planner, task, env=env, skill=_perfect(1.0))
        if copied.success:
            succeeded += 1
            assert written.failure_mode == "false_success", (task.task_id, written.detail)
            assert written.progress < 1.0, (task.task_id, written.detail)
        else:
            assert written.failure_mode == copied.failure_mode, task.task_id
    assert succeeded >= 5, (planner, env_name)


@pytest.mark.parametrize("planner", PLAN_PLANNERS)
def test_a_plans_answer_is_the_tools_and_keeps_its_facts(planner: str) -> None:
    """A plan planner passes the answer tool's result: the rate changes neither the records
    nor the traces of a weak model, and a perfect model still completes every task."""
    assert_unchanged_by(planner, SKILLS["weak"], {"p_answer_garbled": 1.0})
    env = _env("research")
    for task in env.generate(3, seed=0, complexity="medium"):
        record, _ = episode(planner, task, env=env, skill=_perfect(1.0))
        assert record.success, (planner, task.task_id, record.detail)


@pytest.mark.parametrize("planner", WRITERS)
def test_the_draw_is_keyed_by_the_decision_point(planner: str) -> None:
    """The draw takes nothing from a request's random stream: at a rate under every draw of
    these episodes the weak model's records and traces are as at 0."""
    assert_unchanged_by(planner, SKILLS["weak"], {"p_answer_garbled": 1e-12})


def test_nothing_is_drawn_at_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 0 the mechanism draws nothing (every shipped profile's records stay byte-identical);
    above it, one draw per point where a final answer is on offer."""
    names: list[object] = []
    draw = KeyedDraws.uniform01

    def spy(self: KeyedDraws, *keys: object) -> float:
        names.append(keys[0] if keys else None)
        return draw(self, *keys)

    monkeypatch.setattr(KeyedDraws, "uniform01", spy)
    env = _env("report")
    task = env.generate(1, seed=0, complexity="medium")[0]
    for planner in WRITERS:
        episode(planner, task, env=env, skill=SKILLS["weak"])
    assert names and "answer_garbled" not in names
    episode("react", task, env=env, skill=_perfect(0.5))
    assert "answer_garbled" in names


def test_scaled_makes_a_smaller_model_garble_more() -> None:
    skill = SKILLS["strong"].model_copy(update={"p_answer_garbled": 0.1})
    assert skill.scaled(2.0).p_answer_garbled == pytest.approx(0.2)
    assert skill.scaled(20.0).p_answer_garbled == 1.0
    assert SKILLS["strong"].scaled(3.0).p_answer_garbled == 0.0


ABSENT = "no answer was written after the answer tool had returned the facts"


@pytest.mark.slow  # a sim run over four envs and its fit: about 11 s
def test_a_garbled_answer_rate_recovered(tmp_path: Path) -> None:
    """``p_answer_garbled`` is a rate per final answer the model wrote after the answer tool
    had returned the facts (ReAct on four envs: one answer per task, each its own draw); a
    run of plans, which write none, reports it not identified and says why."""
    truth = {"p_answer_garbled": 0.3}
    envs = "[report,research,pipeline,web_nav]"
    run = sim_run(tmp_path / "run", 8, truth, env=envs, planners="[react]")
    est = fitted(run, boot=200)["p_answer_garbled"]
    assert est.identified and est.lo is not None and est.hi is not None, est
    assert est.lo <= truth["p_answer_garbled"] <= est.hi, (est.value, est.lo, est.hi)
    plans = sim_run(tmp_path / "plans", 2, truth, env="[report]", planners="[plan_execute]")
    none = fitted(plans, boot=20)["p_answer_garbled"]
    assert not none.identified and none.reason == ABSENT, none
