"""Outage length as a world parameter (issue 24, "Outages where backoff can matter").

A window rule's outage lasts a fixed ``duration_s`` or a lognormal length drawn per outage, keyed
by rule, tool and slot; ``faults.duration_scale`` multiplies every length on the same draws. The
mechanism: a backoff that outlasts an outage turns a failed call into a completed one; when the
outage is shorter than one failed call, or longer than the whole backoff schedule, the backoff
completes nothing more and only adds simulated time.
"""

from __future__ import annotations

import asyncio
import json
import math
import statistics
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from hydra import compose, initialize_config_dir
from planarena.envs import clock
from planarena.envs.faults import (
    DEFAULT_DURATION_S,
    FaultConfig,
    FaultInjector,
    FaultRule,
    with_duration_scale,
)
from planarena.envs.report.env import ReportEnv, ReportWorld
from planarena.experiments.run.llm_factory import ConfigError, validated
from planarena.experiments.run.prepare import prepare
from planarena.planners.base import PlannerStats
from planarena.planners.executor import STATIC, PlanExecutor
from planarena.planners.llm.base import EpisodeLLM

from tests.conftest import MODELS, episode, make_planner, tasks

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
TOOL = "search_web"
TASK = tasks("medium", n=1)[0]
COMPANY, YEAR = TASK.world["branches"][0]["company"], TASK.world["branches"][0]["year"]


def preset(name: str) -> FaultConfig:
    return FaultConfig(**yaml.safe_load((CONFIGS / "faults" / f"{name}.yaml").read_text()))


def outage_rule(**extra: Any) -> FaultRule:
    """An outage on every slot of ``search_web`` (rate 1), lognormal unless told otherwise."""
    spec: dict[str, Any] = {"rate": 1.0, "duration_median_s": 30.0, "duration_sigma": 1.0}
    spec.update(extra)
    return FaultRule(kind="http_503", tools=[TOOL], scope="window", slot_s=60.0, **spec)


def injector_in(toolbox: Any) -> FaultInjector:
    """The fault layer of an env's wrapped toolbox."""
    while not isinstance(toolbox, FaultInjector):
        toolbox = toolbox.inner
    return toolbox


def outages(rule: FaultRule, seed: int = 0, slots: int = 400) -> list[tuple[float, float]]:
    """(start, length) of the outages of the first ``slots`` slots of ``search_web``."""
    injector = FaultInjector(ReportWorld(TASK), [rule], seed_keys=(seed, "outages"))
    found = [injector._outage(0, rule, TOOL, k) for k in range(slots)]
    return [o for o in found if o is not None]


# --- the distribution -----------------------------------------------------------------------


def test_lengths_are_keyed_draws_spanning_seconds_to_minutes() -> None:
    """The default's lengths: the same on every run, different per seed, inside the clip, and
    spread as documented (median 8 s, 90 % within 60 s, some of minutes, some of a second)."""
    rule = preset("default").rules[0]
    assert rule.scope == "window" and rule.duration_median_s is not None
    rule = rule.model_copy(update={"rate": 1.0})
    lengths = [length for _, length in outages(rule, slots=2000)]
    assert lengths == [length for _, length in outages(rule, slots=2000)]
    assert lengths != [length for _, length in outages(rule, seed=1, slots=2000)]
    assert min(lengths) >= rule.duration_min_s and max(lengths) <= rule.duration_max_s
    assert 6.0 < statistics.median(lengths) < 10.5  # the documented median: 8 s
    assert 0.85 < sum(x <= 60.0 for x in lengths) / len(lengths) < 0.95  # 90 % within a minute
    assert any(x >= 120.0 for x in lengths) and any(x <= 2.0 for x in lengths)


def test_a_fixed_length_stays_fixed_and_starts_do_not_depend_on_lengths() -> None:
    """Backward compatible: ``duration_s`` (or nothing: 4 s) is every outage's length, and the
    outage starts are the same draws whatever the length distribution."""
    fixed = outages(outage_rule(duration_median_s=None, duration_s=3.0))
    assert {length for _, length in fixed} == {3.0}
    plain = FaultRule(kind="http_503", tools=[TOOL], rate=1.0, scope="window")
    assert {length for _, length in outages(plain)} == {DEFAULT_DURATION_S}
    drawn = outages(outage_rule())
    assert [s for s, _ in fixed] == [s for s, _ in drawn]
    assert len({length for _, length in drawn}) == len(drawn)  # one draw per outage


def test_duration_scale_multiplies_every_length_on_the_same_draws() -> None:
    rule = outage_rule()
    base = outages(rule)
    scaled_rule = with_duration_scale([rule], 3.0)[0]
    scaled = outages(scaled_rule)
    assert [s for s, _ in scaled] == [s for s, _ in base]
    assert all(math.isclose(b * 3.0, s) for (_, b), (_, s) in zip(base, scaled, strict=True))
    other = FaultRule(kind="timeout", tools=[TOOL], rate=0.5)
    assert with_duration_scale([other], 3.0) == [other]  # only window rules have a length


def test_an_outage_longer_than_its_slot_covers_the_later_slots() -> None:
    """A length of minutes runs over many slots: a call inside it fails however far it is
    from the slot the outage started in."""
    rule = outage_rule(duration_median_s=None, duration_s=200.0, rate=0.5)
    injector = injector_in(ReportEnv().make_tools(TASK, rules=[rule], seed_keys=(0,)).toolbox)
    start, length = next(o for o in (injector._outage(0, rule, TOOL, k) for k in range(50)) if o)
    assert length == 200.0
    for offset in (0.0, 61.0, 130.0, 199.0):  # three slots later still down
        assert not injector.service_up(TOOL, start + offset)


def test_faults_duration_scale_reaches_the_episodes_rules() -> None:
    """``faults.duration_scale`` on the command line (or in a study cell) scales the rules the
    episodes meet, like ``faults.rate_scale``."""
    overrides = [
        "faults=outages",
        "faults.duration_scale=3",
        "planner=plan_execute_replan",
        "env=report",
        "n_tasks=1",
        "complexity=simple",
        "progress=false",
    ]
    with initialize_config_dir(version_base="1.3", config_dir=str(CONFIGS)):
        cfg = compose(config_name="config", overrides=overrides)
    prepared = prepare(cfg)
    (rule,) = prepared.contexts[0].rules
    assert rule.duration_scale == 3.0 and prepared.faults.rules[0].duration_scale == 1.0


# --- bad values -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"duration_s": 3.0}, "rules[0].duration_median_s"),  # both forms
        ({"duration_median_s": 1000.0}, "rules[0].duration_median_s"),  # outside the clip
        ({"duration_max_s": 0.5}, "rules[0].duration_max_s"),  # below the minimum
        ({"duration_sigma": -1.0}, "rules[0].duration_sigma"),
        ({"duration_median_s": float("nan")}, "rules[0].duration_median_s"),
        ({"duration_scale": 0.0}, "rules[0].duration_scale"),
    ],
)
def test_a_bad_length_is_one_line_naming_the_key(change: dict[str, Any], named: str) -> None:
    data = yaml.safe_load((CONFIGS / "faults" / "outages.yaml").read_text())
    data["rules"][0].update(change)
    with pytest.raises(ConfigError) as err:
        validated(FaultConfig, data, "faults")
    assert "\n" not in str(err.value) and f"faults.{named}=" in str(err.value)


def test_a_bad_duration_scale_on_the_command_line_exits_2_with_one_line(tmp_path: Path) -> None:
    planarena = Path(sys.executable).parent / "planarena"
    proc = subprocess.run(
        [
            str(planarena),
            "faults=outages",
            "faults.duration_scale=-1",
            "n_tasks=1",
            f"hydra.run.dir={tmp_path / 'run'}",
            "progress=false",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "faults.duration_scale=-1" in lines[0]


# --- the mechanism --------------------------------------------------------------------------

SEARCH = {
    "id": "step_1",
    "tool": TOOL,
    "args": {"query": f"{COMPANY} annual report {YEAR}"},
    "depends_on": [],
    "retry_limit": 3,
}
NO_WAIT, WAIT = (0.0, 0.0, 0.0), (2.0, 8.0, 32.0)


def call_inside_an_outage(
    rule: FaultRule, backoff: tuple[float, ...], seed: int
) -> tuple[bool, float]:
    """(completed, simulated seconds taken) of one search call made just after an outage of
    ``search_web`` began, retried by the ladder's retry rung alone (no fallback, no replan)."""
    tools = ReportEnv().make_tools(TASK, rules=[rule], seed_keys=(seed, TASK.task_id))
    injector = injector_in(tools.toolbox)
    start = next(o for o in (injector._outage(0, rule, TOOL, k) for k in range(100)) if o)[0]
    policy = replace(STATIC, retry=True, backoff_s=backoff)
    llm = EpisodeLLM(object(), MODELS)  # type: ignore[arg-type] # this plan never replans
    executor = PlanExecutor(policy, tools.toolbox, llm, TASK.goal, PlannerStats())
    plan = json.dumps({"goal": TASK.goal, "steps": [SEARCH]})

    async def go() -> tuple[bool, float]:
        with clock.use_clock(clock.SimClock(start + 0.01)) as c:
            result = await executor.execute_text(plan)
            return result.stop == "answered", c.now - start - 0.01

    return asyncio.run(go())


def paired(rule: FaultRule, seeds: range = range(40)) -> dict[tuple[float, ...], list[Any]]:
    return {b: [call_inside_an_outage(rule, b, s) for s in seeds] for b in (NO_WAIT, WAIT)}


def test_backoff_that_outlasts_the_outage_completes_more_calls() -> None:
    """Long outages (median 30 s, rare: one slot in five): waiting 2, 8, 32 s outlasts most of
    them, immediate retries stay inside; paired on the same seeds, never worse."""
    runs = paired(outage_rule(rate=0.2))
    waited = [ok for ok, _ in runs[WAIT]]
    immediate = [ok for ok, _ in runs[NO_WAIT]]
    assert sum(waited) > sum(immediate) + 10
    assert all(w or not i for w, i in zip(waited, immediate, strict=True))


@pytest.mark.parametrize(
    "rule",
    [
        # blips shorter than one failed call (0.2 s): the immediate retry is already outside
        outage_rule(duration_median_s=0.08, duration_min_s=0.05, duration_max_s=0.15),
        # outages of an hour: no retry of the schedule (42 s in all) gets outside
        outage_rule(duration_median_s=3600.0, duration_max_s=7200.0, duration_min_s=1800.0),
    ],
    ids=["shorter-than-a-call", "longer-than-the-schedule"],
)
def test_backoff_only_adds_time_when_outages_are_shorter_or_far_longer(rule: FaultRule) -> None:
    runs = paired(rule.model_copy(update={"rate": 0.2}))
    assert [ok for ok, _ in runs[WAIT]] == [ok for ok, _ in runs[NO_WAIT]]
    assert all(w > i for (_, w), (_, i) in zip(runs[WAIT], runs[NO_WAIT], strict=True))


def test_the_outages_preset_pays_a_long_backoff_and_its_hour_long_scale_does_not() -> None:
    """Whole episodes, paired by task: under the ``outages`` preset plan_execute_replan
    completes clearly more with backoff 2, 8, 32 s than with none; with every outage 10x as
    long (median 5 minutes) the same backoff gains less than that and takes longer."""
    pool = tasks("complex", n=40)

    def run(backoff: tuple[float, ...], scale: float) -> tuple[int, float]:
        planner = make_planner("plan_execute_replan", backoff_s=list(backoff))
        rules = with_duration_scale(preset("outages").rules, scale)
        recs = [episode(planner, t, rules=rules, skill="strong")[0] for t in pool]
        return sum(r.success for r in recs), sum(r.latency_s for r in recs)

    (ok_wait, _), (ok_none, _) = run(WAIT, 1.0), run(NO_WAIT, 1.0)
    gain = ok_wait - ok_none
    assert gain > 3
    (ok_wait, t_wait), (ok_none, t_none) = run(WAIT, 10.0), run(NO_WAIT, 10.0)
    assert abs(ok_wait - ok_none) < gain and t_wait > t_none
