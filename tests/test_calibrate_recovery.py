"""Parameter recovery for the proposer side of calibration: the simulator runs with known,
non-default skills; the run is replayed through the calibration observer and fitted back; every
parameter the fit calls identified must hold its true value inside its bootstrap interval, and
the parameters the run was built to measure must be identified (intervals at 99.5 %:
Bonferroni over the parameters checked together) (``docs/calibration.md``,
"Parameter recovery")."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest
from conftest import BIN
from planarena.experiments.calibrate import fit as calibrate_fit
from planarena.experiments.calibrate import table
from planarena.experiments.calibrate.observe import observe
from planarena.experiments.calibrate.registry import Estimate, FitOptions
from planarena.planners.llm.profiles import SHARED, SKILLS

# Known values, away from the strong defaults (0.97, 4000, 0.25, 0.3, 0.01, 0.05).
TRUE = {
    "p_correct": 0.85,
    "context_scale_tokens": 3000,
    "p_trap": 0.4,
    "p_persist": 0.5,
    "p_malformed": 0.1,
    "p_sloppy_json": 0.2,
}
# Identified at the documented n (the rest may or may not be: then they are only reported).
MUST = ("p_correct", "p_trap", "p_persist", "p_malformed", "p_sloppy_json")
# The documented n: tasks per env x complexity (report and research, 3 complexities: 60
# tasks) for the four planners that send act (react), propose_actions (dfs), propose_steps
# (bfs), plan and revise_plan (plan_execute_replan): about 2,700 decisions.
N_TASKS = 10
# Every identified parameter is checked at once (about ten): each interval at 99.5 % keeps the
# chance that any of them misses by sampling alone at 5 % (Bonferroni), with enough resamples
# (the linearised bootstrap is cheap) to place the 0.25 % tails.
LEVEL = 0.995
BOOT = 1000
PLANNERS = "[react,dfs,bfs,plan_execute_replan]"
# A fresh sample of a prompt asked again can come out as the first answer did: calibration
# counts it as the same answer (a real model's repeat and a coincidence look alike), so the
# estimate sits above the true rate by the coincidence rate (at 0: 0.09 [0.04, 0.14] on the
# larger-n run below, 224 prompts asked again).
SAME_BY_CHANCE = 0.15
FIRST_TASKS = {  # see sim_run: per env, the override that gives its first task set
    "report": "++env.report.branches={simple:[1,1],medium:[2,2],complex:[3,4]}",
    "research": "++env.research.path="
    + str(Path(__file__).parent / "data" / "families" / "research_first_sizes.yaml"),
}


def sim_run(run: Path, n_tasks: int, skill: Mapping[str, float], env: str = "[report,research]",
            planners: str = PLANNERS, extra: tuple[str, ...] = (),
            complexity: str = "[simple,medium,complex]",
            first_tasks: bool = True) -> Path:  # fmt: skip
    """A ``planarena`` run with the simulator at the given skill overrides (default faults);
    ``first_tasks``: on the task set the tests' n was sized on (:data:`FIRST_TASKS`)."""
    pins = [pin for name, pin in FIRST_TASKS.items() if name in env.strip("[]").split(",")]
    cmd = [
        str(BIN / "planarena"),
        f"planner={planners}",
        f"env={env}",
        f"n_tasks={n_tasks}",
        f"complexity={complexity}",
        "progress=false",
        "figures=false",
        # The realizations these tests' n was sized on: the plan prompt of revision 1 and
        # the tasks before lengths varied inside a family. On the current ones some intervals
        # miss (docs/calibration.md, Limits: at revision 2 the larger-n run's w_stop; on the
        # varied lengths p_malformed_action and p_malformed_plan; p_miss_signal's miss was a
        # fit bug, now fixed and tested on them below), which is open work, not chance alone.
        # The fit's code paths are the same (Decision.plan_revision).
        "plan_revision=1",
        *(pins if first_tasks else []),
        *[f"llm.skill_overrides.{k}={v}" for k, v in skill.items()],
        *extra,
        f"hydra.run.dir={run}",
    ]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=900)
    return run


def fitted(run: Path, boot: int = BOOT) -> dict[str, Estimate]:
    """The pooled estimates of the proposer side's fits on every task of the run."""
    frame = table.build(observe(run, split="all"))
    options = FitOptions(boot=boot, seed=0, level=LEVEL)
    out = calibrate_fit.fit_decisions(frame, options) + calibrate_fit._format_fit(frame, options)
    return {e.parameter: e for e in out if e.group == "pooled"}


def assert_recovered(estimates: Mapping[str, Estimate], truth: Mapping[str, float]) -> None:
    """Every identified estimate of a profile field holds the run's value (the overrides
    over ``strong``'s defaults, which are known too); the ``MUST`` ones are identified."""
    known = {**SKILLS["strong"].model_dump(), **truth}
    known.update({own: SKILLS["strong"].model_copy(update=truth).resolved(own) for own in SHARED})
    known.update(calibrate_fit.normalised(known))
    for name, e in estimates.items():
        if name not in known or name == "name":
            continue
        value = known[name]
        if not e.identified:
            assert name not in MUST, f"{name} not identified: {e.reason}"
            continue
        if name == "w_unchecked":  # the weights' unit: only their ratios are fitted
            continue
        assert e.lo is not None and e.hi is not None
        low = value + (SAME_BY_CHANCE if name == "p_same_answer" else 0.0)
        assert e.lo <= low and value <= e.hi, (
            f"{name}: true {value} outside [{e.lo:.3f}, {e.hi:.3f}]"
        )


def assert_rate_recovered(
    tmp_path: Path, run: Path, truth: Mapping[str, float], *, absent: str
) -> None:
    """The one rate in ``truth`` is identified in ``run`` and holds its value; a small ReAct
    run, which never meets it, reports it not identified with ``absent`` as the reason."""
    ((name, value),) = truth.items()
    est = fitted(run, boot=200)[name]
    assert est.identified and est.lo is not None and est.hi is not None, est
    low = value + (SAME_BY_CHANCE if name == "p_same_answer" else 0.0)  # see SAME_BY_CHANCE
    assert est.lo <= low and value <= est.hi, (name, est.value, est.lo, est.hi)
    react = sim_run(tmp_path / "react", 2, truth, env="[report]", planners="[react]")
    none = fitted(react, boot=20)[name]
    assert not none.identified and none.reason == absent, none


def test_proposer_parameters_recovered(tmp_path: Path) -> None:
    run = sim_run(tmp_path / "run", N_TASKS, TRUE)
    assert_recovered(fitted(run), TRUE)


@pytest.mark.slow
def test_proposer_parameters_recovered_at_larger_n(tmp_path: Path) -> None:
    """Three times the tasks, and a stronger decay with prompt length (more leverage)."""
    truth = {**TRUE, "context_scale_tokens": 1500, "p_miss_signal": 0.5}
    run = sim_run(tmp_path / "run", 3 * N_TASKS, truth)
    assert_recovered(fitted(run), truth)


@pytest.mark.slow  # a 30-task run and its fit: about a minute
def test_a_missed_sign_is_recovered_on_tasks_of_varied_length(tmp_path: Path) -> None:
    """Seed 1 of the shipped task sizes, where the fit once took p_miss_signal to 0.62
    [0.59, 1.00] (true 0.5): it had offered a wrong tool call to readings that saw the work
    done, where the simulator offers none (``fit._static``), and a w_other of ~1e-6 then
    explained tool calls by readings that missed a sign."""
    truth = {**TRUE, "context_scale_tokens": 1500, "p_miss_signal": 0.5}
    run = sim_run(tmp_path / "run", 30, truth, extra=("seed=1",), first_tasks=False)
    est = fitted(run)
    miss = est["p_miss_signal"]
    assert miss.identified and miss.lo is not None and miss.hi is not None
    assert miss.lo <= 0.5 <= miss.hi, (miss.value, miss.lo, miss.hi)
    share = est["systematic_share"]
    assert share.lo is not None and share.hi is not None
    assert share.lo <= SKILLS["strong"].systematic_share <= share.hi


def test_a_format_with_a_rate_of_its_own_is_recovered(tmp_path: Path) -> None:
    """Candidate steps broken four times as often as every other answer: the fit gives the
    steps format its own rate and the others theirs (each inside its interval)."""
    truth = {"p_malformed": 0.08, "p_malformed_steps": 0.32}
    run = sim_run(
        tmp_path / "run", 8, truth, env="[report,research]",
        planners="[react,bfs,plan_execute_replan]",
    )  # fmt: skip
    est = fitted(run, boot=400)
    for own in ("p_malformed_steps", "p_malformed_action", "p_malformed_plan"):
        assert est[own].identified, (own, est[own].reason)
    assert est["p_malformed_steps"].lo > est["p_malformed_action"].hi  # told apart
    assert_recovered(
        {k: est[k] for k in ("p_malformed_steps", "p_malformed_action", "p_malformed_plan")},
        truth,
    )


def test_a_plan_steps_own_mistake_mix_is_recovered(tmp_path: Path) -> None:
    """Plans cut short ten times as often as a tool call stops early, and a guessed argument
    common in a tool call and rare in a plan: the fit gives each pool its own weights, tells
    the two stop weights apart, and holds each true ratio inside its interval. Every error
    is a belief (``systematic_share`` 1, as the shipped 0.5B model's fit finds): with sampling
    slips a small stop weight of a tool call comes out too large (docs/calibration.md,
    Limits)."""
    truth = {"p_correct": 0.8, "systematic_share": 1.0, "w_stop": 0.3, "w_stop_plan": 3.0,
             "w_premise": 2.0, "w_premise_plan": 0.3}  # fmt: skip
    run = sim_run(
        tmp_path / "run", 12, truth, env="[report,research]",
        planners="[react,bfs,plan_execute_replan]",
    )  # fmt: skip
    est = fitted(run, boot=400)
    assert est["w_stop_plan"].identified, est["w_stop_plan"].reason
    # the small one's interval is wide upwards (0.16..0.64 about a true 0.27 at this n): not
    # identified by the 3x rule, but clear of the plan's
    assert est["w_stop_plan"].lo > est["w_stop"].hi  # told apart
    assert_recovered({k: v for k, v in est.items() if k.startswith("w_")}, truth)


def test_no_trap_on_offer_is_not_identified(tmp_path: Path) -> None:
    """A run with no trap ever on offer (simple report tasks without the stale trap) reports
    p_trap as not identified and says why; a run with no text plan says so too."""
    run = sim_run(
        tmp_path / "run", 6, {}, env="[report]", planners="[react]", complexity="[simple]",
        extra=("env.report.p_stale_trap=0.0",),
    )  # fmt: skip
    est = fitted(run, boot=50)
    assert not est["p_trap"].identified
    assert est["p_trap"].reason == "no trap was ever on offer"
    assert not est["p_malformed_text"].identified
    assert "text" in est["p_malformed_text"].reason


def test_conditions_in_words_recovered(tmp_path: Path) -> None:
    """``p_prose_condition`` is a rate per written condition, from every freshly written
    plan (a whole plan, a replan); a run with none written says so."""
    truth = {"p_prose_condition": 0.2}
    run = sim_run(tmp_path / "run", 6, truth, env="[report]", planners="[plan_execute_replan]")
    assert_rate_recovered(tmp_path, run, truth, absent="no written plan step carried a condition")


def test_a_replan_numbered_from_one_again_recovered(tmp_path: Path) -> None:
    """``p_restart_ids`` is a rate per plan written after a step ran (heavy faults make the
    replans); a run that writes none after anything ran says so."""
    truth = {"p_restart_ids": 0.3}
    run = sim_run(tmp_path / "run", 8, truth, env="[report]", planners="[plan_execute_replan,topo]",
                  extra=("faults=heavy",))  # fmt: skip
    assert_rate_recovered(tmp_path, run, truth, absent="no plan was written after a step had run")


def test_a_broken_format_that_persists_and_a_replans_own_rate_recovered(tmp_path: Path) -> None:
    """First plans broken half the time and replans rarely, every format broken again as it
    was last with chance 0.6: the fit gives the replan its own rate and finds the
    persistence, pooled and per format."""
    truth = {"p_malformed": 0.3, "p_malformed_plan": 0.5, "p_malformed_replan": 0.05,
             "malformed_persistence": 0.6}  # fmt: skip
    run = sim_run(tmp_path / "run", 8, truth, env="[report]",
                  planners="[react,plan_execute_replan,topo]", extra=("faults=heavy",))  # fmt: skip
    est = fitted(run, boot=400)
    truth["malformed_persistence_action"] = truth["malformed_persistence_plan"] = 0.6
    names = ("malformed_persistence", "malformed_persistence_action", "p_malformed_plan",
             "p_malformed_replan")  # fmt: skip
    for name in names:
        e = est[name]
        assert e.identified and e.lo is not None and e.hi is not None, e
        assert e.lo <= truth[name] <= e.hi, (name, e.value, e.lo, e.hi)
    plan = est["malformed_persistence_plan"]  # 54 answers after a plan: wide, but holds it
    assert plan.lo is not None and plan.hi is not None and plan.lo <= 0.6 <= plan.hi
    assert est["p_malformed_replan"].hi < est["p_malformed_plan"].lo  # told apart


def test_a_wrong_call_that_runs_recovered(tmp_path: Path) -> None:
    """A model whose confused beliefs mostly call another tool of the env (a wrong call that
    runs), more often in a plan step than in a tool call: each weight's interval holds its
    true value and is clear of 0 (at this n about 0.6..2.3 and 1.0..4.9, so a 3x rule need
    not call them identified), and every identified weight holds its own."""
    truth = {"p_correct": 0.7, "systematic_share": 1.0, "w_other": 2.0, "w_other_plan": 4.0}
    run = sim_run(
        tmp_path / "run", 10, truth, env="[report,research]",
        planners="[react,bfs,plan_execute_replan]",
    )  # fmt: skip
    est = fitted(run, boot=400)
    for name in ("w_other", "w_other_plan"):
        e = est[name]
        assert e.lo is not None and e.hi is not None, (name, e.reason)
        assert 0.5 < e.lo <= truth[name] <= e.hi, (name, e.value, e.lo, e.hi)
    assert_recovered({k: v for k, v in est.items() if k.startswith("w_")}, truth)


def test_the_same_answer_to_a_prompt_asked_again_recovered(tmp_path: Path) -> None:
    """``p_same_answer`` is a rate per prompt asked again in an episode (ToT asks for its
    candidate plans with one prompt); a run that never repeats a prompt says so."""
    truth = {"p_same_answer": 0.6}
    run = sim_run(tmp_path / "run", 4, truth, env="[report]", planners="[tot]")
    assert_rate_recovered(tmp_path, run, truth, absent="no prompt was asked twice")
