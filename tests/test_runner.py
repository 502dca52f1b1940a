"""The `planarena` command end to end: records, determinism, resume, crash isolation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf, open_dict
from planarena.configs import default_choices
from planarena.envs.tools import Toolbox
from planarena.experiments.analysis.metrics import FAILURE_MODES
from planarena.experiments.run.runner import finish, run
from planarena.planners.base import Planner, PlannerResult, TaskView
from planarena.planners.llm.base import EpisodeLLM

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
REQUIRED = [
    "planner",
    "env",
    "complexity",
    "task_id",
    "seed",
    "llm",
    "success",
    "progress",
    "failure_mode",
    "tokens_prompt",
    "tokens_completion",
    "tokens_total",
    "llm_calls",
    "tool_calls",
    "retries",
    "fallbacks",
    "replans",
    "latency_s",
    "cost_usd",
]
MODES = {"none", *FAILURE_MODES}


def cli(tmp: Path, *overrides: str, env: dict[str, str] | None = None) -> str:
    cmd = [
        sys.executable,
        "-m",
        "planarena.experiments.run.runner",
        f"hydra.run.dir={tmp}",
        "progress=false",
        "env=report",  # the default runs every family; these tests count report episodes
        "figures=false",  # ~11 s of CPU per job; tests/test_figures.py covers them
        *overrides,
    ]
    out = subprocess.run(
        cmd,
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=Path(__file__).parents[1],
    )
    return out.stdout


def records(path: Path) -> list[dict]:
    lines = (path / "episodes.jsonl").read_text().splitlines()
    out = []
    for line in lines:
        r = json.loads(line)
        r.pop("wall_s")
        out.append(r)
    return out


def test_cli_writes_records_and_prints_the_table(tmp_path: Path) -> None:
    stdout = cli(tmp_path, "n_tasks=2")
    assert "Completion rate" in stdout and "plan_execute_replan" in stdout
    rows = records(tmp_path)
    # every planner of the default set, three complexities, two tasks
    assert len(rows) == len(default_choices("planner")) * 3 * 2
    for r in rows:
        assert set(REQUIRED) <= set(r)
        assert r["failure_mode"] in MODES and r["failure_mode"] != "harness_error"
        assert (r["failure_mode"] == "none") == r["success"]
    for name in ("summary.md", "summary.csv", "episodes.parquet", "traces.jsonl"):
        assert (tmp_path / name).exists()
    assert len(pd.read_parquet(tmp_path / "episodes.parquet")) == len(rows)
    saved = (tmp_path / ".hydra" / "config.yaml").read_text()
    assert "planner" in saved


def test_same_seed_gives_byte_identical_records_whatever_the_concurrency(tmp_path: Path) -> None:
    cli(tmp_path / "a", "n_tasks=3", "seed=3", "workers=1")
    cli(tmp_path / "b", "n_tasks=3", "seed=3", "concurrency=8", "workers=1")
    cli(tmp_path / "w", "n_tasks=3", "seed=3", "workers=3")  # three processes, one writer
    assert records(tmp_path / "a") == records(tmp_path / "b") == records(tmp_path / "w")
    traces = [(tmp_path / d / "traces.jsonl").read_text() for d in "aw"]
    assert traces[0] == traces[1]
    cli(tmp_path / "c", "n_tasks=3", "seed=4")
    assert records(tmp_path / "a") != records(tmp_path / "c")


def test_secrets_never_reach_outputs(tmp_path: Path) -> None:
    secret = "sk-test-" + "9" * 24
    cli(tmp_path, "n_tasks=1", "complexity=simple", env={"OPENAI_API_KEY": secret})
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


class CrashyPlanner(Planner):
    """A planner with a bug on every other task (our bug, so: harness_error)."""

    name = "crashy"

    async def run(self, task: TaskView, tools: Toolbox, llm: EpisodeLLM) -> PlannerResult:
        if int(task.task_id[-1]) % 2:
            raise KeyError("bug in planner")
        return PlannerResult("nothing", "answered")


def _cfg(tmp: Path, **extra: object):  # noqa: ANN202
    with initialize_config_dir(version_base="1.3", config_dir=str(CONFIGS)):
        cfg = compose(
            config_name="config",
            overrides=[
                "env=report",  # the default runs every family; these tests count report episodes
                "planner=plan_execute",
                "n_tasks=4",
                "complexity=simple",
                "progress=false",
            ],
        )
    with open_dict(cfg):
        for key, value in extra.items():
            OmegaConf.update(cfg, key, value, force_add=True)
    return cfg


def test_a_crashing_planner_is_recorded_and_the_sweep_goes_on(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, **{"planner.crashy": {"_target_": "tests.test_runner.CrashyPlanner"}})
    run(cfg, tmp_path)
    finish(tmp_path, 0, ["plan_execute", "crashy"])
    df = pd.read_json(tmp_path / "episodes.jsonl", lines=True)
    crashy = df[df.planner == "crashy"]
    assert len(crashy) == 4 and (df.planner == "plan_execute").sum() == 4
    assert set(crashy.failure_mode) == {"harness_error", "false_success"}
    assert crashy[crashy.failure_mode == "harness_error"].detail.str.contains("KeyError").all()
    traces = [json.loads(x) for x in (tmp_path / "traces.jsonl").read_text().splitlines()]
    assert any(e["event"] == "harness_error" for t in traces for e in t["events"])


def test_resume_skips_done_episodes_and_survives_a_torn_line(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    run(cfg, tmp_path)
    full = (tmp_path / "episodes.jsonl").read_text().splitlines()
    kept = full[:2]
    (tmp_path / "episodes.jsonl").write_text("\n".join(kept) + "\n" + full[2][:40])
    run(cfg, tmp_path)
    again = (tmp_path / "episodes.jsonl").read_text().splitlines()
    strip = [{k: v for k, v in json.loads(x).items() if k != "wall_s"} for x in again]
    want = [{k: v for k, v in json.loads(x).items() if k != "wall_s"} for x in full]
    assert strip == want


def test_simulate_reproduces_the_cli_record(tmp_path: Path) -> None:
    from planarena.envs.faults import FaultConfig
    from planarena.envs.report.env import ReportEnv
    from planarena.experiments.run.episode import simulate
    from planarena.planners.llm.profiles import SKILLS

    from tests.conftest import make_planner

    cli(tmp_path, "planner=tot", "complexity=medium", "n_tasks=2", "seed=9")
    want = records(tmp_path)
    assert {r.pop("config_id") for r in want} == {
        json.loads((tmp_path / "run.json").read_text())["config_id"]
    }
    rules = FaultConfig(
        **OmegaConf.to_container(OmegaConf.load(CONFIGS / "faults" / "default.yaml"))
    ).rules
    env = ReportEnv()
    tasks = env.generate(2, seed=9, complexity="medium", unreachable_rate=0.05)
    got = []
    for task in tasks:
        record, _ = simulate(
            "tot",
            make_planner("tot"),
            env,
            task,
            skill=SKILLS["strong"],
            rules=rules,
            seed=9,
            faults_label="default",
        )
        got.append(record.model_dump(exclude={"wall_s", "config_id"}))
    assert got == want


def test_the_lazy_job_list_is_the_job_order_and_selects_like_a_list(tmp_path: Path) -> None:
    """Jobs are built from their index on demand; they must be exactly the jobs, in the order,
    that nested loops over env x complexity x planner x task x trial give, and slicing (a
    worker's share) and resume's selection must behave as on a list."""
    from planarena.experiments.run.runner import prepare

    with initialize_config_dir(version_base="1.3", config_dir=str(CONFIGS)):
        cfg = compose(
            config_name="config",
            overrides=[
                "env=[report,pipeline]",
                "planner=[react,plan_execute]",
                "complexity=[simple,complex]",
                "n_tasks=3",
                "trials=2",
            ],
        )
    jobs = prepare(cfg).jobs
    expected = [
        (env, complexity, planner, f"{env}-{complexity}-{i:04d}", trial)
        for env in ("report", "pipeline")
        for complexity in ("simple", "complex")
        for planner in ("react", "plan_execute")
        for i in range(3)
        for trial in range(2)
    ]
    seen = [(j.env_name, j.ref.complexity, j.planner_name, j.ref.task_id, j.trial) for j in jobs]
    assert seen == expected
    assert [j.index for j in jobs] == list(range(len(expected)))
    eager = list(jobs)
    assert list(jobs[1::3]) == eager[1::3] and jobs[-1] == eager[-1]
    assert all(jobs[i].task.task_id == eager[i].ref.task_id for i in (0, 13, 47))
    left = jobs.without(lambda j: j.trial == 1 or j.planner_name == "react")
    assert list(left) == [j for j in eager if j.trial == 0 and j.planner_name != "react"]
    assert list(left[::2]) == [j for j in eager if j.trial == 0 and j.planner_name != "react"][::2]
    assert jobs.without(lambda j: False) is jobs


def test_a_command_ends_after_the_exit_hooks_of_threads_and_of_atexit(tmp_path: Path) -> None:
    """run_and_exit skips the interpreter's teardown, not what Python runs at exit before it:
    the threads' exit hooks (where the joblib launcher's executor stops its workers; skipped,
    a sweep waited 300 s for them) and the atexit handlers, in that order; the command's exit
    status and its output survive."""
    import subprocess
    import sys

    script = tmp_path / "cmd.py"
    log = tmp_path / "log"
    script.write_text(
        "import atexit, sys, threading\n"
        "from planarena.experiments.process import run_and_exit\n"
        f"log = open({str(log)!r}, 'w')\n"
        "threading._register_atexit(lambda: log.write('thread hook\\n'))\n"
        "atexit.register(lambda: (log.write('atexit\\n'), log.close()))\n"
        "def main():\n"
        "    print('done')\n"
        "    return 3\n"
        "run_and_exit(main)\n"
    )
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=root, timeout=60
    )
    assert proc.returncode == 3 and proc.stdout == "done\n", proc.stderr
    assert log.read_text() == "thread hook\natexit\n"


def test_a_rerun_with_nothing_to_do_shows_the_outputs_without_redoing_them(tmp_path: Path) -> None:
    """A completed job run again prints what it printed, and leaves its outputs untouched;
    a removed output, or the same records asked with another figures setting, is made again."""
    args = ("n_tasks=1", "planner=react", "complexity=simple")
    first = cli(tmp_path, *args)
    summary = tmp_path / "summary.csv"
    made = summary.stat().st_mtime_ns
    again = cli(tmp_path, *args)
    assert again.strip() == first.strip() and "Completion rate" in again
    assert summary.stat().st_mtime_ns == made  # shown from the stamp, not recomputed
    (tmp_path / "episodes.parquet").unlink()
    cli(tmp_path, *args)
    assert (tmp_path / "episodes.parquet").exists() and summary.stat().st_mtime_ns > made
    cli(tmp_path, *args, "figures=true")  # the stamp was of figures=false: drawn now
    assert any((tmp_path / "figures").glob("*.png"))
    stamp = tmp_path / ".planarena.outputs.json"  # outputs made by other code (resume=force)
    stamp.write_text(stamp.read_text().replace('"code": {', '"code": {"older": 1, ', 1))
    made = summary.stat().st_mtime_ns
    cli(tmp_path, *args, "figures=true")
    assert summary.stat().st_mtime_ns > made
