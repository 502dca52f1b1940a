"""Calibration's plumbing: a skill profile file as ``llm.skill``, the CLI end to end on a
simulated run, a real-model run replayed only from its response cache, the held-out split,
and the classification of an answer against the oracle's options (``docs/calibration.md``)."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import BIN
from planarena.experiments.calibrate import extract
from planarena.experiments.calibrate.cli import main
from planarena.experiments.calibrate.observe import CacheMiss, decisions, observe
from planarena.experiments.run.llm_factory import ConfigError, llm_label, skill_profile
from planarena.planners.formats import dumps
from planarena.planners.llm.profiles import SKILLS, SkillProfile


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small simulated run: ReAct and a replanning plan planner on report tasks."""
    run = tmp_path_factory.mktemp("calib") / "run"
    cmd = [
        str(BIN / "planarena"),
        "planner=[react,plan_execute_replan]",
        "env=[report]",
        "n_tasks=4",
        "progress=false",
        "figures=false",
        f"hydra.run.dir={run}",
    ]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600)
    return run


def test_profile_file_is_a_skill(tmp_path: Path) -> None:
    path = tmp_path / "fitted.yaml"
    path.write_text("name: fitted\np_trap: 0.4\np_correct: 0.9\n")
    skill = skill_profile({"skill": str(path)})
    assert (skill.name, skill.p_trap, skill.p_correct) == ("fitted", 0.4, 0.9)
    assert skill.p_persist == SKILLS["strong"].p_persist  # an absent field: the default
    over = skill_profile({"skill": str(path), "skill_overrides": {"p_trap": 0.1}})
    assert over.p_trap == 0.1 and over.p_correct == 0.9  # overrides apply on top
    label = llm_label({"backend": "sim", "skill": str(path)})
    assert label.startswith("sim:fitted@")
    path.write_text("name: fitted\np_trap: 0.3\n")  # an edited file is another model
    assert llm_label({"backend": "sim", "skill": str(path)}) != label


@pytest.mark.parametrize(
    ("content", "key"),
    [("name: x\np_trapp: 0.3\n", "p_trapp"), ("p_trap: 2\n", "p_trap"), ("- 1\n", "mapping")],
)
def test_bad_profile_file_is_one_line_naming_file_and_key(
    tmp_path: Path, content: str, key: str
) -> None:
    path = tmp_path / "bad.yml"
    path.write_text(content)
    with pytest.raises(ConfigError) as err:
        skill_profile({"skill": str(path)})
    message = str(err.value)
    assert "\n" not in message
    assert str(path) in message and key in message


def test_missing_profile_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such profile file"):
        skill_profile({"skill": str(tmp_path / "absent.yaml")})


def test_cli_writes_a_profile_that_runs(sim_run: Path, tmp_path: Path) -> None:
    out, report = tmp_path / "profile.yaml", tmp_path / "fit.md"
    argv = [str(sim_run), "--out", str(out), "--report", str(report), "--boot", "20",
            "--no-groups", "--split", "all"]  # fmt: skip
    assert main(argv) == 0
    data = yaml.safe_load(out.read_text())
    assert set(data) <= set(SkillProfile.model_fields)
    SkillProfile(**data)
    text = report.read_text()
    assert "Identified:" in text and "Not identified:" in text
    assert "no plan was ever asked as text" in text  # an unidentified field says why
    # the profile is a config: a run with llm.skill=<file> completes
    run = tmp_path / "again"
    cmd = [str(BIN / "planarena"), "planner=[react]", "env=[report]", "n_tasks=1",
           "complexity=[simple]", "progress=false", "figures=false", f"llm.skill={out}",
           f"hydra.run.dir={run}"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert '"llm":"sim:profile@' in (run / "episodes.jsonl").read_text()


def test_split_halves_the_tasks(sim_run: Path) -> None:
    from planarena.experiments.studies.sim_vs_real import held_out

    fit = {d.task_id for d in decisions(sim_run, split="fit")}
    held = {d.task_id for d in decisions(sim_run, split="held_out")}
    assert fit and held and not fit & held
    assert not any(held_out(t) for t in fit) and all(held_out(t) for t in held)
    assert "report-medium-0000" in held and "report-simple-0000" in fit  # index + rank odd


def _real_run(sim_run: Path, tmp_path: Path, cache: Path) -> Path:
    """The sim run's config as a real-model run (OpenAI backend on a closed port) whose
    response cache is ``cache``."""
    run = tmp_path / "real"
    (run / ".hydra").mkdir(parents=True)
    cfg = yaml.safe_load((sim_run / ".hydra" / "config.yaml").read_text())
    cfg["llm"] = {
        "backend": "openai",
        "model": "local-model",
        "base_url": "http://127.0.0.1:9/v1",
        "cache_dir": str(cache),
    }
    (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump(cfg))
    return run


def test_real_run_cache_miss_is_one_line_exit_2(
    sim_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _real_run(sim_run, tmp_path, tmp_path / "empty_cache")
    with pytest.raises(
        CacheMiss, match=r"request 0 \(\w+\) of \w+ on report/simple/report-simple-0000"
    ):
        next(decisions(run, split="all"))
    assert main([str(run), "--out", str(tmp_path / "p.yaml"), "--split", "all"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no cached response" in err
    assert not (tmp_path / "p.yaml").exists()


def test_answers_are_classified_against_the_oracles_options(sim_run: Path) -> None:
    """The right move and the trap, written as a model would, are classified as such at a
    point where both are on offer (whatever the run's model actually answered there)."""
    for d in observe(sim_run, split="all"):
        if d.kind != "act" or d.occurrence or d.context is None:
            continue
        obs = d.view.transcript(d.context.observations or ())
        point = d.view.action_point(obs)
        if "trap" not in point.options or d.view.subtle_keys(obs):
            continue
        for kind in ("right", "trap"):
            tool, args = point.options[kind]
            text = f"Thought: t\nAction: {tool}\nAction Input: {dumps(args)}"
            rows = extract.extract_act(dataclasses.replace(d, text=text))
            choice = next(r for r in rows if r["quantity"] == "choice")
            assert kind in choice["matches"].split(",")
        garbled = extract.extract_act(dataclasses.replace(d, text="Thought: I will"))
        assert [r["outcome"] for r in garbled if r["quantity"] == "malformed"] == [1]
        return
    pytest.fail("no act decision with a trap on offer in the run")


def test_a_real_model_run_replays_from_its_cache_alone(tmp_path: Path) -> None:
    """A run against an OpenAI-compatible server (a scripted one), its server then gone:
    calibration replays every request from the response cache, one decision per LLM call
    the records count, and classifies the answers."""
    import os
    import sys

    from fake_server import serve

    cache, run = tmp_path / "cache", tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update(OPENAI_API_KEY="sk-test", NO_PROXY="127.0.0.1,localhost")
    server = serve()
    srv = next(server)
    cmd = [sys.executable, "-m", "planarena.experiments.run.runner", "llm=openai",
           f"llm.base_url={srv.url}", "llm.model=fake", "planner=[react,plan_execute_replan]",
           "env=report", "complexity=simple", "n_tasks=2", "faults=none", "progress=false",
           "figures=false", f"llm.cache_dir={cache}", f"hydra.run.dir={run}"]  # fmt: skip
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    finally:
        next(server, None)  # the server stops
    assert done.returncode == 0, done.stderr[-2000:]
    records = [yaml.safe_load(x) for x in (run / "episodes.jsonl").read_text().splitlines()]
    replayed = observe(run, split="all")
    assert len(replayed) == sum(r["llm_calls"] for r in records) > 0
    assert {d.error_scale for d in replayed} == {1.0}  # one real model in every role
    rows = extract.extract_act(next(d for d in replayed if d.kind == "act"))
    assert rows and rows[0]["quantity"] == "malformed"


def test_the_roles_error_scale_enters_the_likelihood() -> None:
    """A simulated run scales every error probability by the role's ``error_scale`` (the
    shipped replanner's 1.5): the likelihood applies it, so a trap taken at 1.5 x 0.2 reads
    as the profile's 0.2, and a rate observed at scale 1.5 fits back to the base rate."""
    import numpy as np
    import pandas as pd
    from planarena.experiments.calibrate import fit
    from planarena.experiments.calibrate.registry import FitOptions

    def choices(scale: float) -> fit.Choices:
        row = {"quantity": "choice", "task": "t/simple/t-0", "role": "replanner", "kind": "act",
               "outcome": "trap", "prompt_tokens": 0, "error_scale": scale, "unit": 0,
               "branch": 0, "ctype": "action", "avail": "invented,premise,right,trap",
               "matches": "trap", "n_subtle": 0, "n_missed": 0}  # fmt: skip
        c = fit.choices_of(pd.DataFrame([row]))
        assert c is not None
        return c

    exact = {**fit._from_x(fit._to_x(fit.START)), "p_correct": 1.0}
    at_scale = fit.choice_prob(choices(1.5), {**exact, "p_trap": 0.2})
    plain = fit.choice_prob(choices(1.0), {**exact, "p_trap": 0.3})
    assert np.allclose(at_scale, plain) and np.allclose(plain, 0.3)
    rng = np.random.default_rng(0)
    outcome = (rng.random(4000) < 0.3).astype(int)
    tasks = [f"t{i % 40}" for i in range(4000)]
    rows = pd.DataFrame({"task": tasks, "outcome": outcome, "error_scale": 1.5})
    est = fit.scaled_bernoulli(rows, "p_malformed", FitOptions(boot=50), absent="-")
    assert est.value is not None and abs(est.value - 0.2) < 0.02


def test_a_coordinate_stopped_just_short_of_its_edge_counts_as_on_it() -> None:
    """The optimiser stops near a bound, never on it. A coordinate left free there is stepped
    by every resample's Newton step through the coordinates correlated with it, which once
    put a per-kind ``p_persist`` of 0.93 at an interval of [0, 0.025]."""
    from planarena.experiments.calibrate.fit import LOWER, PARAMS, UPPER, at_edge

    x = (LOWER + UPPER) / 2
    i = PARAMS.index("systematic_share")
    x[i] = UPPER[i] - 4e-8  # where the shipped recording's fit stopped
    g = np.zeros(len(PARAMS))
    g[i] = 37.7  # the likelihood still rises towards the edge
    assert at_edge(x, g)[i]
    g[i] = -37.7  # it falls towards the edge: an interior maximum, stepped as usual
    assert not at_edge(x, g)[i]
    x[i] = LOWER[i] + 4e-8
    assert at_edge(x, g)[i]
    assert not at_edge((LOWER + UPPER) / 2, g).any()


def test_a_flat_direction_spreads_a_large_weight_as_much_as_a_small_one() -> None:
    """The bootstrap's curvature floor is a unit of relative spread: a weight at 100 times its
    pool's unit, where the data barely curve, moves by the same share as one at 1 under the
    same relative gradient. In absolute units the floor held the shipped recording's
    tool-call weights (20 to 100 times the unit) within about 2 %."""
    from planarena.experiments.calibrate.fit import PARAMS, START, _projected_step, _to_x

    i = PARAMS.index("w_other")
    flat = -1e-9 * np.eye(len(PARAMS))
    free = np.zeros(len(PARAMS), dtype=bool)

    def relative_step(at: float) -> float:
        x = _to_x(START)
        x[i] = at
        g = np.zeros(len(PARAMS))
        g[i] = 1e-2 / at  # the same gradient per relative unit of the weight
        return float((_projected_step(x, g, flat, free)[i] - at) / at)

    assert relative_step(100.0) == pytest.approx(relative_step(1.0), rel=1e-6)
    assert relative_step(1.0) > 0


def test_an_interval_no_wider_than_rounding_is_degenerate() -> None:
    """Every resample at the same value but for rounding (the shipped recording's decay and
    base rate, both at the error cap, came out 1e-10 wide) says nothing about the parameter."""
    from planarena.experiments.calibrate.fit import degenerate

    assert degenerate(0.5316108005718679, 0.5316108006031965)
    assert degenerate(230.11421973716202, 230.11421977009417)
    assert degenerate(0.0, 0.0)
    assert not degenerate(0.10, 0.56)
    assert not degenerate(0.0, 0.017)
    assert not degenerate(None, 0.5)


def test_a_plan_is_malformed_when_the_planners_parser_refuses_it(sim_run: Path) -> None:
    """The fit reads a plan as the planner does: JSON with a ``steps`` list whose step has no
    tool (the shipped real model's commonest plan) is malformed output, as the executor
    records it; a plan that parses with a logic error (a dependency on no step) is not, and
    its steps are decisions."""
    for d in observe(sim_run, split="all"):
        if d.kind != "plan" or d.occurrence or d.context is None or d.context.plan is not None:
            continue
        tool = sorted(d.view.tool_names())[0]
        no_tool = dumps({"goal": "g", "steps": [{"id": "step_1", "args": {}}]})
        rows = extract.extract_plan(dataclasses.replace(d, text=no_tool))
        assert [(r["quantity"], r["outcome"]) for r in rows] == [("malformed", 1)]
        step = {"id": "step_1", "tool": tool, "args": {}, "depends_on": ["step_9"]}
        logic = dumps({"goal": "g", "steps": [step]})
        rows = extract.extract_plan(dataclasses.replace(d, text=logic))
        assert [r["outcome"] for r in rows if r["quantity"] == "malformed"] == [0]
        assert any(r["quantity"] == "choice" for r in rows)
        return
    pytest.fail("no fresh plan decision in the run")


def test_a_candidate_step_is_malformed_when_it_cannot_enter_a_plan(tmp_path: Path) -> None:
    """``propose_steps``: a first candidate the plan parser refuses (a whole plan echoed
    back as the step, as the shipped real model answers) is malformed output; a step, or
    the marker that the plan is complete, is not."""
    run = tmp_path / "run"
    cmd = [str(BIN / "planarena"), "planner=[bfs]", "env=[report]", "n_tasks=1",
           "complexity=[simple]", "progress=false", "figures=false",
           f"hydra.run.dir={run}"]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600)
    d = next(d for d in observe(run, split="all") if d.kind == "propose_steps")
    tool = sorted(d.view.tool_names())[0]
    echoed = dumps([{"goal": "g", "steps": [{"id": "step_1", "tool": tool, "args": {}}]}])
    rows = extract.extract_propose_steps(dataclasses.replace(d, text=echoed))
    assert [(r["quantity"], r["outcome"]) for r in rows] == [("malformed", 1)]
    for fine in ([{"id": "step_1", "tool": tool, "args": {}}], [{"done": True}]):
        rows = extract.extract_propose_steps(dataclasses.replace(d, text=dumps(fine)))
        assert [r["outcome"] for r in rows if r["quantity"] == "malformed"] == [0], fine


def test_a_plan_step_is_read_with_its_tool_as_the_parser_reads_it() -> None:
    """A tool written as its signature line (``search_web(query: 'x')``) is that tool to the
    plan parser, so to calibration too: not an invented tool (the shipped 0.5B model wrote a
    quarter of its plan tools so, and they once read as inventions)."""
    from planarena.experiments.calibrate.extract import read_plan

    tools = frozenset({"search_web", "parse_pdf"})
    text = (
        '{"goal": "g", "steps": [{"id": "step_1", "tool": "search_web(query: \'x\')", '
        '"args": {"query": "x"}, "depends_on": []}, {"id": "step_2", "tool": "lookup_all", '
        '"args": {}, "depends_on": []}]}'
    )
    steps, _ = read_plan(text, "json", tools)
    assert steps is not None
    assert [s["tool"] for s in steps] == ["search_web", "lookup_all"]  # an unknown one stays
