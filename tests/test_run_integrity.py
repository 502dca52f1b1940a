"""Runs you can trust: run identity, one writer per dir, fail fast, validated input,
crash-safe records files (issue 8). In-process where that shows the behaviour, the CLI where
the exit status and the one-line message are the point."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf, open_dict
from planarena.configs import options
from planarena.envs.tools import Toolbox
from planarena.experiments.records import (
    RecordsError,
    RunDirError,
    RunLock,
    load,
    read_jsonl,
    repair_run_dir,
)
from planarena.experiments.run.llm_factory import ConfigError, llm_label
from planarena.experiments.run.runner import HarnessStop, prepare, run, validate
from planarena.planners.base import Planner, PlannerResult, TaskView
from planarena.planners.llm.base import EpisodeLLM

ROOT = Path(__file__).resolve().parents[1]
RUNNER = [sys.executable, "-m", "planarena.experiments.run.runner"]
CONFIGS = ROOT / "configs"
SMALL = [
    "env=report",  # the default runs every family; these tests count report episodes
    "planner=[react,plan_execute]",
    "n_tasks=3",
    "complexity=simple",
    "progress=false",
]


def cfg_of(*overrides: str, **extra: object) -> DictConfig:
    with initialize_config_dir(version_base="1.3", config_dir=str(CONFIGS)):
        cfg = compose(config_name="config", overrides=[*SMALL, *overrides])
    with open_dict(cfg):
        for key, value in extra.items():
            OmegaConf.update(cfg, key, value, force_add=True)
    return cfg


def cli(
    run_dir: Path | None, *overrides: str, timeout: float = 120, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    where = [f"hydra.run.dir={run_dir}"] if run_dir else []
    cmd = [*RUNNER, *where, *SMALL, *overrides]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def comparable(run_dir: Path) -> list[dict]:
    return [
        {k: v for k, v in json.loads(x).items() if k != "wall_s"}
        for x in lines(run_dir / "episodes.jsonl")
    ]


def trace_keys(run_dir: Path) -> list[tuple[str, str, int]]:
    return [
        (d["planner"], d["task_id"], d["trial"])
        for d in map(json.loads, lines(run_dir / "traces.jsonl"))
    ]


def episode_keys(run_dir: Path) -> list[tuple[str, str, int]]:
    return [(r["planner"], r["task_id"], r["trial"]) for r in comparable(run_dir)]


def one_line_no_traceback(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    errors = [x for x in proc.stderr.splitlines() if x.startswith("planarena:")]
    assert len(errors) == 1, proc.stderr[-2000:]
    return errors[0]


# --------------------------------------------------------------------------- run identity


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted run every crash scenario must end up equal to."""
    out = tmp_path_factory.mktemp("reference")
    run(cfg_of(), out)
    return out


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("seed=5", "seed"),
        ("faults=none", "faults"),
        ("llm.skill=perfect", "llm.skill"),
        ("llm.skill_overrides.p_trap=0.4", "llm.skill_overrides.p_trap"),
        ("n_tasks=2", "n_tasks"),
    ],
)
def test_a_changed_config_in_an_existing_dir_is_refused(
    reference: Path, tmp_path: Path, override: str, key: str
) -> None:
    out = tmp_path / "run"
    out.mkdir()
    for name in ("episodes.jsonl", "traces.jsonl", "run.json"):
        (out / name).write_bytes((reference / name).read_bytes())
    before = (out / "episodes.jsonl").read_bytes()
    with pytest.raises(RunDirError) as err:
        run(cfg_of(override), out)
    message = str(err.value)
    assert key in message and "new hydra.run.dir" in message and "resume=false" in message
    assert (out / "episodes.jsonl").read_bytes() == before  # untouched
    # resume=false starts over in the same dir, keeping the old records aside
    run(cfg_of(override, "resume=false"), out)
    assert (out / "episodes.jsonl.replaced").read_bytes() == before
    new = comparable(out)
    assert len({r["config_id"] for r in new}) == 1 and new != comparable(reference)


def test_an_edited_family_file_is_another_configuration(tmp_path: Path) -> None:
    """env=file keyed the run by the file's path only: after an edit that changes the tasks
    (two items instead of one), the same command resumed and kept the old file's records
    (react 3/3 where the edited file gives 1/3). A comment changes nothing."""
    family = tmp_path / "family.yaml"
    text = (ROOT / "envs/families/examples/stock_check.yaml").read_text()
    family.write_text(text)
    args = ("env=file", f"env.file.path={family}", "planner=react")
    out = tmp_path / "run"
    run(cfg_of(*args), out)
    before = (out / "episodes.jsonl").read_bytes()
    family.write_text(text + "# a comment, the same declaration\n")
    run(cfg_of(*args), out)  # resumes: nothing to run
    assert (out / "episodes.jsonl").read_bytes() == before
    edited = "simple: {layers: [{node: item, width: 2}"
    family.write_text(text.replace("simple: {layers: [{node: item, width: 1}", edited))
    with pytest.raises(RunDirError, match=r"env\.file\.declaration_sha256"):
        run(cfg_of(*args), out)
    assert (out / "episodes.jsonl").read_bytes() == before
    fresh = tmp_path / "fresh"
    run(cfg_of(*args), fresh)
    assert read_jsonl(fresh / "episodes.jsonl") != read_jsonl(out / "episodes.jsonl")


def test_starting_over_keeps_every_earlier_run_and_no_stale_table(tmp_path: Path) -> None:
    """resume=false moved only the records files, each to ``*.replaced``: a second start-over
    overwrote the first one's ``*.replaced`` (seed 0's records lost), and the old run's
    episodes.parquet and summary.* stayed beside the new records until the new job
    finished (after a kill, a notebook loading episodes.parquet read the old config)."""
    from planarena.experiments.run.runner import finish

    out = tmp_path / "run"
    for seed in (0, 1, 2):
        run(cfg_of(f"seed={seed}", "resume=false"), out)
        if seed < 2:
            finish(out, seed, ["react", "plan_execute"], figures=False)
    assert {r["seed"] for r in read_jsonl(out / "episodes.jsonl")} == {2}
    assert {r["seed"] for r in read_jsonl(out / "episodes.jsonl.replaced")} == {0}
    assert {r["seed"] for r in read_jsonl(out / "episodes.jsonl.replaced.2")} == {1}
    assert not (out / "episodes.parquet").exists() and not (out / "summary.md").exists()
    assert (out / "episodes.parquet.replaced.2").exists()
    assert (out / "summary.csv.replaced").exists() and (out / "summary.csv.replaced.2").exists()


def test_output_only_keys_do_not_change_the_run(reference: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    for name in ("episodes.jsonl", "traces.jsonl", "run.json"):
        (out / name).write_bytes((reference / name).read_bytes())
    run(cfg_of("concurrency=4", "progress=true", "write_traces=false", "figures=false"), out)
    assert comparable(out) == comparable(reference)  # nothing rerun, nothing appended


def test_a_skill_override_left_null_is_no_part_of_the_identity() -> None:
    """Null is the profile's own value: listing a new skill field as null (as a simulator
    field added to configs/llm/sim.yaml is) leaves every run's config_id as it was; a value
    set changes it."""
    from planarena.experiments.records.identity import fingerprint

    def cfg(**overrides: object) -> dict[str, object]:
        return {"seed": 0, "llm": {"backend": "sim", "skill_overrides": dict(overrides)}}

    assert fingerprint(cfg(p_trap=None, p_new_habit=None)) == fingerprint(cfg())
    assert fingerprint(cfg(p_trap=0.4, p_new_habit=None)) == fingerprint(cfg(p_trap=0.4))
    assert fingerprint(cfg(p_trap=0.4)) != fingerprint(cfg())


def test_records_carry_the_fingerprint_and_a_labelled_skill(tmp_path: Path) -> None:
    run(cfg_of("llm.skill_overrides.p_trap=0.4"), tmp_path)
    rows = comparable(tmp_path)
    stored = json.loads((tmp_path / "run.json").read_text())
    assert {r["config_id"] for r in rows} == {stored["config_id"]}
    assert stored["config"]["llm"]["skill_overrides"]["p_trap"] == 0.4
    assert "progress" not in stored["config"] and "concurrency" not in stored["config"]
    label = rows[0]["llm"]
    assert label.startswith("sim:strong+") and len(label) == len("sim:strong+") + 6
    assert llm_label({"backend": "sim", "skill": "strong"}) == "sim:strong"
    other = llm_label({"backend": "sim", "skill": "strong", "skill_overrides": {"p_trap": 0.5}})
    assert other != label


class AlwaysCrash(Planner):
    """Our bug in every episode."""

    name = "always_crash"

    async def run(self, task: TaskView, tools: Toolbox, llm: EpisodeLLM) -> PlannerResult:
        raise KeyError("bug in planner")


class CrashOnce(Planner):
    """Crashes while a marker file exists (a bug fixed between two runs)."""

    name = "crash_once"

    async def run(self, task: TaskView, tools: Toolbox, llm: EpisodeLLM) -> PlannerResult:
        if Path(os.environ["PLANARENA_TEST_MARKER"]).exists():
            raise RuntimeError("transient bug")
        return PlannerResult("nothing", "answered")


def test_harness_errors_run_again_on_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "bug"
    marker.touch()
    monkeypatch.setenv("PLANARENA_TEST_MARKER", str(marker))
    spec = {"planner.flaky": {"_target_": "tests.test_run_integrity.CrashOnce"}}
    out = tmp_path / "run"
    run(cfg_of("fail_fast=0", **spec), out)
    first = comparable(out)
    assert sum(r["failure_mode"] == "harness_error" for r in first) == 3
    marker.unlink()
    run(cfg_of("fail_fast=0", **spec), out)
    again = comparable(out)
    assert len(again) == len(first) and not any(r["failure_mode"] == "harness_error" for r in again)
    assert sorted(episode_keys(out)) == sorted(trace_keys(out))  # one trace per episode


def test_the_same_harness_error_in_every_first_episode_stops_the_job(tmp_path: Path) -> None:
    cfg = cfg_of("fail_fast=2")
    cfg.planner = {"crash": {"_target_": "tests.test_run_integrity.AlwaysCrash"}}
    with pytest.raises(HarnessStop, match="KeyError"):
        run(cfg, tmp_path)
    # both recorded, as worker processes record them ("the first 2 failed", 2 saved; the
    # second used to be dropped in one process); harness errors run again on resume
    assert len(lines(tmp_path / "episodes.jsonl")) == 2
    assert len(lines(tmp_path / "traces.jsonl")) == 2


def test_a_job_with_harness_errors_exits_non_zero_with_a_summary(tmp_path: Path) -> None:
    proc = cli(
        tmp_path,
        "+planner.crashy._target_=tests.test_runner.CrashyPlanner",
        "fail_fast=0",
        "figures=false",
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    line = one_line_no_traceback(proc)
    assert "harness_error" in line and "KeyError: 'bug in planner'" in line
    assert json.loads((tmp_path / "status.json").read_text())["status"] == "harness_errors"


# --------------------------------------------------------------------------- one writer


def test_a_second_job_on_a_locked_dir_exits_at_once(reference: Path, tmp_path: Path) -> None:
    with RunLock(tmp_path):
        start = time.monotonic()
        proc = cli(tmp_path)
        took = time.monotonic() - start
        assert proc.returncode == 2
        assert "in use by another planarena job" in one_line_no_traceback(proc)
        assert not (tmp_path / "episodes.jsonl").exists() and not (tmp_path / ".hydra").exists()
        assert took < 30
    with RunLock(tmp_path), pytest.raises(RunDirError, match="in use"):
        run(cfg_of(), tmp_path)
    run(cfg_of(), tmp_path)  # released: the dir is usable again
    assert comparable(tmp_path) == comparable(reference)


@pytest.mark.slow  # ~15 s: two jobs started together
def test_default_run_dirs_do_not_collide(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [*RUNNER, *SMALL, "planner=react", "n_tasks=1"]
    procs = [
        subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    for p in procs:
        assert p.wait(timeout=120) == 0
    dirs = sorted(p.parent for p in tmp_path.glob("results/runs/*/*/episodes.jsonl"))
    assert len(dirs) == 2
    assert all(len(lines(d / "episodes.jsonl")) == 1 for d in dirs)


# --------------------------------------------------------------------------- fail fast


def test_a_dead_endpoint_stops_the_job_within_seconds(tmp_path: Path) -> None:
    import resource

    def cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    start, cpu0 = time.monotonic(), cpu()
    proc = cli(tmp_path, "llm=openai", "llm.base_url=http://127.0.0.1:9/v1", timeout=60)
    took, cpu_s = time.monotonic() - start, cpu() - cpu0
    assert proc.returncode == 3
    line = one_line_no_traceback(proc)
    assert "cannot reach" in line and "127.0.0.1:9" in line
    assert not (tmp_path / "episodes.jsonl").exists()
    # about 3 s on an idle 2-core machine; CPU time, as other jobs may share the cores
    assert cpu_s < 10 and took < 30, (cpu_s, took)


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("llm.skill_overrides.p_trap=1.7", "llm.skill_overrides.p_trap=1.7"),
        ("llm.skill_overrides.p_trap=abc", 'llm.skill_overrides.p_trap="abc"'),
        ("+llm.skill_overrides.p_trapp=0.3", "llm.skill_overrides.p_trapp=0.3: unknown key"),
        ("llm.skill_overrides.context_scale_tokens=0", "context_scale_tokens=0"),
        ("llm.skill=genius", "llm.skill=genius"),
        ("n_tasks=0", "n_tasks=0"),
        ("trials=0", "trials=0"),
        ("concurrency=0", "concurrency=0"),
        ("complexity=hard", 'complexity="hard"'),
        # ran every task twice, then the tables raised a traceback over the duplicates
        ("complexity=[simple,medium,simple]", "names simple more than once"),
        ("budget.max_tokens_per_episode=-5", "budget.max_tokens_per_episode=-5"),
        ("budget.max_llm_calls_per_episode=0", "budget.max_llm_calls_per_episode=0"),
        ("+n_task=3", "n_task=3: unknown key"),
        ("llm.models.default.ttft_s=-1", "llm.models.default.ttft_s=-1"),
        ("workers=0", "workers=0"),
        ("workers=many", 'workers="many"'),
    ],
)
def test_an_invalid_value_is_named_before_any_episode(override: str, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        validate(cfg_of(override))
    assert key in str(err.value) and "\n" not in str(err.value)


LOCAL = ("llm=openai", "llm.base_url=http://127.0.0.1:9/v1")


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        # each of these ran: a hang, every episode a timeout or a harness error, or ignored
        ((*LOCAL, "llm.max_concurrency=0"), "llm.max_concurrency=0"),
        ((*LOCAL, "llm.timeout_s=-1"), "llm.timeout_s=-1"),
        ((*LOCAL, "llm.max_retries=-1"), "llm.max_retries=-1"),
        ((*LOCAL, "llm.temperature=abc"), 'llm.temperature="abc"'),
        ((*LOCAL, "llm.max_tokens=0"), "llm.max_tokens=0"),
        ((*LOCAL, "llm.max_tokens_by_format.plan=-5"), "llm.max_tokens_by_format.plan=-5"),
        (
            (*LOCAL, "+llm.max_tokens_by_format.plann=5"),
            "llm.max_tokens_by_format.plann=5: unknown",
        ),
        ((*LOCAL, "+llm.prices.fake.usd_per_mtok_input=1"), "llm.prices.fake.usd_per_mtok_output"),
        ((*LOCAL, "+llm.temperatur=0.7"), "llm.temperatur=0.7: unknown key"),
        (("+llm.foo=1",), "llm.foo=1: unknown key"),
        (("+llm.role_skills=x",), 'llm.role_skills="x": unknown key'),
    ],
)
def test_an_invalid_llm_value_is_named_before_any_episode(
    overrides: tuple[str, ...], key: str
) -> None:
    with pytest.raises(ConfigError) as err:
        validate(cfg_of(*overrides))
    assert key in str(err.value) and "\n" not in str(err.value), str(err.value)


@pytest.mark.parametrize(
    "args",
    [
        ["+llm.api_key=sk-PLANARENA-TEST-SECRET"],
        ["llm=openai", "llm.api_key_env=sk-PLANARENA-TEST-SECRET"],
        ["-m", "+llm.api_key=sk-PLANARENA-TEST-SECRET", "seed=0,1"],
    ],
)
def test_a_secret_in_the_config_is_refused_unseen(tmp_path: Path, args: list[str]) -> None:
    """``+llm.api_key=...`` ran (the key written to .hydra/config.yaml, run.json, and a
    sweep's multirun.yaml); a key pasted as ``llm.api_key_env`` was echoed in the error."""
    sweep = [f"hydra.sweep.dir={tmp_path / 'sweep'}"] if "-m" in args else []
    proc = cli(tmp_path / "run", *args, *sweep)
    assert proc.returncode == 2
    assert "sk-PLANARENA-TEST-SECRET" not in proc.stdout + proc.stderr
    assert "not shown" in one_line_no_traceback(proc)
    assert not (tmp_path / "run").exists() and not (tmp_path / "sweep").exists()
    with pytest.raises(ConfigError) as err:  # the same check in-process (no command line)
        validate(cfg_of(*[a for a in args if a != "-m" and "seed=" not in a]))
    assert "sk-PLANARENA-TEST-SECRET" not in str(err.value)


def test_worker_processes_are_refused_where_records_would_depend_on_them() -> None:
    """A real LLM's cache and concurrency bound, and the job cost cap's job-order ledger,
    live in one process: more workers are refused by name, not silently ignored."""
    real = cfg_of("llm=openai", "llm.base_url=http://127.0.0.1:9/v1", "workers=2")
    with pytest.raises(ConfigError, match="workers=2: worker processes run the simulated LLM"):
        validate(real)
    with pytest.raises(ConfigError, match="workers=2 with budget.max_cost_usd"):
        validate(cfg_of("workers=2", "budget.max_cost_usd=1.0"))
    validate(cfg_of("llm=openai", "llm.base_url=http://127.0.0.1:9/v1"))  # auto: one process


def test_skill_validation_follows_the_profile_model() -> None:
    from planarena.planners.llm.profiles import SkillProfile

    cfg = cfg_of()
    with open_dict(cfg):
        for field in set(SkillProfile.model_fields) - {"name"}:
            cfg.llm.skill_overrides[field] = 0.5  # every field of the model is accepted
    validate(cfg)


@pytest.mark.parametrize("override", ["+llm.skill_overrides.p_trapp=0.3"])
def test_the_cli_refuses_an_invalid_value_in_one_line(tmp_path: Path, override: str) -> None:
    proc = cli(tmp_path, override)
    assert proc.returncode == 2
    assert override.lstrip("+").split("=")[0] in one_line_no_traceback(proc)
    assert not (tmp_path / "episodes.jsonl").exists()


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("planner=mcts planner.mcts.c=-1", "planner.mcts.c=-1: Input should be greater"),
        ("planner=mcts planner.mcts.iterations=-3", "planner.mcts.iterations=-3"),
        ("planner=tot planner.tot.depth=-1", "planner.tot.depth=-1"),
        ("planner=tot planner.tot.beam_width=abc", 'planner.tot.beam_width="abc"'),
        ("planner=tot planner.tot.beam_width=11", "planner.tot.beam_width=11"),
        ("planner=tot planner.tot.parallel=maybe", 'planner.tot.parallel="maybe"'),
        ("planner=bfs planner.bfs.accept=abc", 'planner.bfs.accept="abc"'),
        ("planner=react planner.react.max_turns=abc", 'planner.react.max_turns="abc"'),
        ("planner=react planner.react.max_turns=0", "planner.react.max_turns=0"),
        ("planner=react planner.react.tool_calling=json", 'planner.react.tool_calling="json"'),
        ("planner=react +planner.react.max_turn=3", "planner.react.max_turn=3: Unexpected"),
        (
            "planner=plan_execute_replan planner.plan_execute_replan.max_replans=-2",
            "planner.plan_execute_replan.max_replans=-2",
        ),
        ("planner=topo planner.topo.backoff_s=[1,-1]", "planner.topo.backoff_s[1]=-1"),
        ("planner=dfs planner.dfs.prune_below=7", "planner.dfs.prune_below=7"),
        ("env.report.p_stale_trap=2", "env.report.p_stale_trap=2: must be a share"),
        ("env=rag env.rag.p_trap=abc", "env.rag.p_trap='abc': must be a share"),
    ],
)
def test_an_invalid_planner_or_env_parameter_is_named_before_any_episode(
    override: str, key: str
) -> None:
    """These ran: every episode a harness error (c=-1, "abc", an empty AssertionError) or a
    silent 0 % table (max_turns=0, prune_below=7), or a share above 1 accepted."""
    with pytest.raises(ConfigError) as err:
        prepare(cfg_of(*override.split()))
    assert key in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_every_shipped_planner_and_env_config_passes_its_checks() -> None:
    planners = f"[{','.join(options('planner'))}]"
    prepared = prepare(cfg_of(f"planner={planners}", "env=[report,rag]"))
    assert list(prepared.planners) == options("planner") and len(prepared.envs) == 2


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["experiment=seed_tabels"], "experiment=seed_tabels: no such experiment config"),
        # past the command-line check (skipped when the search path is extended): the job's own
        (
            ["hydra.searchpath=[file:///nonexistent]", "experiment=seed_tabels"],
            "no such experiment;",
        ),
        (["planner=reactt"], "planner=reactt: no such planner config; choose from auto, bfs"),
        (["planner=[react,foo]"], "planner=foo: no such planner config"),
        (["-m", "planner=react,foo"], "planner=foo: no such planner config"),
        (["env=reprt"], "env=reprt: no such env config"),
        (["faults=medium"], "faults=medium: no such faults config; choose from default"),
        (["llm=foo"], "llm=foo: no such llm config"),
        (["complexity=[]"], "complexity=[]: name at least one of"),
    ],
)
def test_a_mistyped_choice_is_refused_in_one_line(
    tmp_path: Path, args: list[str], expected: str
) -> None:
    """A typo in the optional experiment group ran a different job with exit 0; a typo in
    the other groups printed Hydra's block of text; complexity=[] ended in a traceback."""
    proc = cli(tmp_path / "run", *args)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert expected in one_line_no_traceback(proc)
    assert not (tmp_path / "run" / "episodes.jsonl").exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["n_taks=3"], "n_taks=3: no key 'n_taks'; did you mean n_tasks?"),
        (["planner.react.parallel=true"], "no key 'parallel' in planner.react (keys: max_parse"),
        (["-m", "seed=0,1", "budget.max_tokens=100"], "did you mean max_tokens_per_episode?"),
        (["llm.skill_overrides.p_trapp=0.3"], "no key 'p_trapp' in llm.skill_overrides (with"),
        (["llm.model=gpt-4o"], "no key 'model' in llm (with llm=sim)"),
        (["sensitivity.workers=1"], "no key 'sensitivity'"),  # only an experiment adds it
    ],
)
def test_a_misspelt_key_is_refused_in_one_line_naming_what_it_could_be(
    tmp_path: Path, args: list[str], expected: str
) -> None:
    """An override of a key the config does not have printed Hydra's block of text with
    exit 1 ('Could not override ...', 'Key ... is not in struct', a hint about a stack
    trace); now one line naming the key, the nearest key and the keys there are, exit 2."""
    proc = cli(tmp_path / "run", *args)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert expected in one_line_no_traceback(proc)
    assert not (tmp_path / "run").exists()


def _leaf_overrides(node: Any, prefix: str) -> list[str]:
    """``key.path=1`` for every leaf (keys with a dot, e.g. a model name ``gpt-4.1``, cannot
    be named on a command line: Hydra splits them too)."""
    if isinstance(node, dict) and node:
        return [
            o
            for k, v in node.items()
            if "." not in str(k)
            for o in _leaf_overrides(v, f"{prefix}.{k}")
        ]
    return [f"{prefix}=1"]


def test_every_key_of_the_shipped_configs_passes_the_key_check_and_what_it_refuses_hydra_does() -> (
    None
):
    """The check before composing must never refuse a key the config has: every leaf key of
    the root config, of every planner, env, llm and faults option and of every experiment
    (with its experiment chosen) passes it; and each override it refuses, Hydra's own
    composition refuses too."""
    from hydra.errors import ConfigCompositionException
    from planarena.experiments.run.overrides import CONFIG_DIR, unknown_key_override

    def keys(path: Path) -> dict[str, Any]:
        node = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
        assert isinstance(node, dict)
        return {k: v for k, v in node.items() if k != "defaults" and not k.startswith("_")}

    cases: list[list[str]] = []
    root = keys(CONFIG_DIR / "config.yaml")
    cases += [[o] for k, v in root.items() if k != "hydra" for o in _leaf_overrides(v, k)]
    for group in ("planner", "env"):
        for path in sorted((CONFIG_DIR / group).glob("*.yaml")):
            prefix = f"{group}.{path.stem}"
            cases += [[f"{group}=[{path.stem}]", o] for o in _leaf_overrides(keys(path), prefix)]
    for group in ("llm", "faults"):
        for path in sorted((CONFIG_DIR / group).glob("*.yaml")):
            for k, v in keys(path).items():
                cases += [[f"{group}={path.stem}", o] for o in _leaf_overrides(v, f"{group}.{k}")]
    for path in sorted((CONFIG_DIR / "experiment").glob("*.yaml")):
        for k, v in keys(path).items():
            cases += [[f"experiment={path.stem}", o] for o in _leaf_overrides(v, k)]
    assert len(cases) > 100
    cases += [["hydra/launcher=joblib"], ["-m", "hydra/launcher=submitit_local", "seed=0,1"]]
    cases += [["hydra.job.chdir=false"], ["~budget"], ["++extra=1"], ["planner=[react,bfs]"]]
    refused = [args for args in cases if unknown_key_override(args) is not None]
    assert refused == []
    misspelt = [["n_taks=3"], ["planner.react.parallel=true"], ["llm.model=x"],
                ["env.rag.p_trapp=0.3"], ["budget.max_tokens=3"], ["sensitivity.workers=1"],
                ["llm=openai", "llm.modl=x"]]  # fmt: skip
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        for args in misspelt:
            assert unknown_key_override(args) is not None, args
            with pytest.raises(ConfigCompositionException):
                compose(config_name="config", overrides=args)


# --------------------------------------------------------------------------- crash safety


def test_torn_lines_in_both_files_are_repaired(reference: Path, tmp_path: Path) -> None:
    episodes, traces = lines(reference / "episodes.jsonl"), lines(reference / "traces.jsonl")
    (tmp_path / "run.json").write_bytes((reference / "run.json").read_bytes())
    # killed while writing the trace of episode 3: a torn trace line, no episode line
    (tmp_path / "episodes.jsonl").write_text("".join(x + "\n" for x in episodes[:3]))
    (tmp_path / "traces.jsonl").write_text("".join(x + "\n" for x in traces[:3]) + traces[3][:50])
    run(cfg_of(), tmp_path)
    assert comparable(tmp_path) == comparable(reference)
    assert trace_keys(tmp_path) == episode_keys(tmp_path)
    # a torn episode line after its complete trace, and a glued trace from an old bug
    (tmp_path / "episodes.jsonl").write_text("".join(x + "\n" for x in episodes[:2]) + '{"pla')
    (tmp_path / "traces.jsonl").write_text(
        traces[0] + "\n" + traces[1][:30] + traces[1] + "\n" + traces[1] + "\n" + traces[2] + "\n"
    )
    run(cfg_of(), tmp_path)
    assert comparable(tmp_path) == comparable(reference)
    assert trace_keys(tmp_path) == episode_keys(tmp_path)


@pytest.mark.parametrize("step", ["truncate", "replace"])
@pytest.mark.parametrize("when", ["before", "after"])
def test_a_kill_during_repair_then_a_rerun_equals_an_uninterrupted_run(
    reference: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str, when: str
) -> None:
    episodes, traces = lines(reference / "episodes.jsonl"), lines(reference / "traces.jsonl")
    (tmp_path / "run.json").write_bytes((reference / "run.json").read_bytes())
    second = episodes[1]
    if step == "replace":  # a harness error to drop: a new file renamed over the old one
        second = json.dumps(json.loads(second) | {"failure_mode": "harness_error", "detail": "X"})
    (tmp_path / "episodes.jsonl").write_text(
        episodes[0] + "\n" + second + "\n" + episodes[2] + "\n" + episodes[3][:20]
    )
    (tmp_path / "traces.jsonl").write_text("".join(x + "\n" for x in traces[:4]) + traces[4][:9])

    class Killed(BaseException):
        pass

    real = getattr(os, step)

    def dies(*args: object) -> None:
        if when == "after":
            real(*args)
        raise Killed

    monkeypatch.setattr(os, step, dies)
    with pytest.raises(Killed):
        repair_run_dir(tmp_path)
    monkeypatch.setattr(os, step, real)
    for path in (tmp_path / "episodes.jsonl", tmp_path / "traces.jsonl"):
        assert path.stat().st_size > 0  # never emptied
    run(cfg_of(), tmp_path)
    got, want = comparable(tmp_path), comparable(reference)
    assert sorted(got, key=json.dumps) == sorted(want, key=json.dumps)  # the rerun one is last
    assert sorted(trace_keys(tmp_path)) == sorted(episode_keys(tmp_path))
    assert len(trace_keys(tmp_path)) == len(set(trace_keys(tmp_path)))


@pytest.mark.slow  # ~15 s: an uninterrupted job, then two killed jobs and their reruns
def test_kill_9_at_any_instant_then_rerun_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    args = ["planner=[react,plan_execute_replan]", "n_tasks=30", "figures=false"]
    full = tmp_path / "full"
    assert cli(full, *args).returncode == 0
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for i, written in enumerate((1, 40)):  # killed right after its first record, and mid-run
        out = tmp_path / f"killed{i}"
        cmd = [*RUNNER, f"hydra.run.dir={out}", *SMALL, *args]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.DEVNULL)
        episodes, deadline = out / "episodes.jsonl", time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if episodes.exists() and episodes.read_bytes().count(b"\n") >= written:
                break
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert cli(out, *args).returncode == 0
        assert comparable(out) == comparable(full)
        assert trace_keys(out) == episode_keys(out)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_worker_processes_die_with_a_killed_job(tmp_path: Path) -> None:
    """Orphaned workers would hold the run dir's lock and compute for nobody."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [*RUNNER, f"hydra.run.dir={tmp_path}", *SMALL]
    cmd += ["planner=react", "n_tasks=2000", "workers=2", "figures=false"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.DEVNULL)
    episodes, deadline = tmp_path / "episodes.jsonl", time.monotonic() + 60
    while time.monotonic() < deadline and not (episodes.exists() and episodes.stat().st_size):
        time.sleep(0.02)
    children_file = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    workers = [int(c) for c in children_file.read_text().split()]
    assert len(workers) == 2
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(w) for w in workers):
        time.sleep(0.05)
    assert not any(_alive(w) for w in workers)


def test_ctrl_c_ends_with_one_line_and_a_resumable_dir(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [
        sys.executable,
        "-m",
        "planarena.experiments.run.runner",
        f"hydra.run.dir={tmp_path}",
        *SMALL,
        "n_tasks=5000",  # long enough that the interrupt lands mid-run (200 ran out in <1 s)
        "planner=react",
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # a test run started in the background inherits SIGINT ignored, and Python then
        # never raises KeyboardInterrupt: give the job the default a terminal gives it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        episodes = tmp_path / "episodes.jsonl"
        if episodes.exists() and episodes.stat().st_size > 0:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err
    line = next(x for x in err.splitlines() if x.startswith("planarena:"))
    saved = len(lines(tmp_path / "episodes.jsonl"))
    assert f"{saved} episode(s) saved" in line and "resume" in line
    assert saved < 5000  # the interrupt stopped the job (workers: it once ran every episode)
    assert trace_keys(tmp_path) == episode_keys(tmp_path)


# --------------------------------------------------------------------------- readers


def test_readers_name_the_file_and_line(
    reference: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = lines(reference / "episodes.jsonl")
    path = tmp_path / "episodes.jsonl"
    path.write_text(good[0] + "\n" + good[1] + "\n" + good[2][:30])
    assert len(read_jsonl(path)) == 2  # a torn last line: skipped, with a warning
    assert "episodes.jsonl:3: skipped a torn last line" in capsys.readouterr().err
    path.write_text(good[0] + "\nnot json\n" + good[1] + "\n")
    with pytest.raises(RecordsError, match=r"episodes.jsonl:2: not a JSON record"):
        load(tmp_path)
    path.write_text(good[0] + '\n{"foo": 1}\n')
    with pytest.raises(RecordsError, match=r"episodes.jsonl:2: record lacks the key"):
        load(tmp_path)
    from planarena.experiments.analysis.report import load_runs  # what planarena-report reads with

    with pytest.raises(RecordsError, match=r"episodes.jsonl:2: record lacks the key"):
        load_runs([tmp_path])


def test_records_load_the_same_in_chunks(reference: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pandas as pd
    from planarena.experiments.records import store as records

    whole = records.load_records(reference / "episodes.jsonl")
    monkeypatch.setattr(records, "CHUNK_ROWS", 2)  # bounded memory for large runs
    pd.testing.assert_frame_equal(records.load_records(reference / "episodes.jsonl"), whole)


def test_a_dir_without_records_takes_any_config(tmp_path: Path) -> None:
    from planarena.experiments.records.identity import claim_identity

    first = claim_identity(tmp_path, {"seed": 0}, resume=True)
    (tmp_path / "episodes.jsonl").write_text("")  # killed before its first episode
    second = claim_identity(tmp_path, {"seed": 1}, resume=True)
    assert first != second
    assert json.loads((tmp_path / "run.json").read_text())["config_id"] == second


def test_an_unreachable_endpoint_stops_the_job(reference: Path) -> None:
    from planarena.experiments.run.episode import EpisodeRecord
    from planarena.experiments.run.llm_factory import InfrastructureError
    from planarena.experiments.run.loop import FailFast

    row = json.loads(lines(reference / "episodes.jsonl")[0])
    ok = EpisodeRecord(**row)
    error = EpisodeRecord(**(row | {"failure_mode": "harness_error", "detail": "KeyError: 'x'"}))
    dead = EpisodeRecord(
        **(
            row
            | {
                "failure_mode": "infrastructure_error",
                "detail": "APIConnectionError: refused",
                "llm_requests": 0,  # not one request of it answered
            }
        )
    )
    guard = FailFast(first_n=3)
    guard.check(ok)
    guard.check(error)  # after a clean episode, one bug is recorded, not fatal
    guard.check(dead), guard.check(dead)  # it answered before: flaky, each rerun on resume
    with pytest.raises(InfrastructureError, match="APIConnectionError"):
        guard.check(dead)  # first_n in a row: the endpoint went away mid-run
    with pytest.raises(InfrastructureError, match="APIConnectionError"):
        FailFast(first_n=3).check(dead)  # it never answered: gone
    reached = FailFast(first_n=3, answered=True)  # the preflight's GET /models was answered
    reached.check(dead), reached.check(dead)  # a faulty server's first replies: flaky
    with pytest.raises(InfrastructureError, match="APIConnectionError"):
        reached.check(dead)
    guard = FailFast(first_n=3)
    guard.check(error)
    guard.check(error)
    with pytest.raises(HarnessStop, match="first 3 episodes"):
        guard.check(error)
