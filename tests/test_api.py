"""The public Python API (``import planarena``): cheap to import from anywhere, a job run from
Python equals the command's, one episode equals its line in the command's records, the
registries, and docs/python-api.md's examples as written. Slow: the packaging maps every
folder under the one import name ``planarena`` (a non-editable install into a target dir)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pandas as pd
import pytest

import planarena

ROOT = Path(__file__).resolve().parents[1]
EPISODES = "episodes.jsonl"
DOC = ROOT / "docs" / "python-api.md"
SMALL = [
    "planner=[react,plan_execute]",
    "env=report",
    "n_tasks=2",
    "complexity=medium",
    "seed=15",  # its task 0 is unreachable: episode() must draw tasks as the command
    "progress=false",
    "figures=false",
]
HEAVY = ("hydra", "omegaconf", "pandas", "numpy", "pydantic", "planarena.api")


def python(code: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "MPLBACKEND": "Agg", **env},
    )


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def command_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The command's own run of ``SMALL``."""
    out = tmp_path_factory.mktemp("command")
    cmd = [sys.executable, "-m", "planarena.experiments.run.runner", *SMALL]
    done = subprocess.run(
        [*cmd, f"hydra.run.dir={out}"], capture_output=True, text=True, timeout=300, cwd=out
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def test_import_is_cheap_from_anywhere() -> None:
    """``import planarena`` from any working dir gives the version and loads neither Hydra,
    pandas nor any planner: the API is imported on first use."""
    code = (
        "import sys, planarena\n"
        "print(planarena.__version__)\n"
        f"print(sorted(m for m in sys.modules if m.startswith({HEAVY!r})))\n"
        "print(sorted(set(dir(planarena)) & set(planarena.__all__)) == sorted(planarena.__all__))"
    )
    done = python(code, Path("/"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == [version("planarena"), "[]", "True"]
    assert planarena.__version__ == version("planarena")


def test_the_public_names() -> None:
    assert set(planarena.__all__) == {
        "RunError",
        "__version__",
        "compose",
        "env_names",
        "episode",
        "load",
        "options",
        "planner_names",
        "run",
        "study_names",
    }
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        planarena.nope  # noqa: B018


def test_the_registries_list_the_built_in_options() -> None:
    built_in = {"react", "plan_execute", "plan_execute_replan", "tot", "bfs", "dfs", "mcts"}
    assert built_in | {"topo"} <= set(planarena.planner_names())
    assert {"report", "rag", "pipeline", "web_nav", "code_gen", "research", "file"} <= set(
        planarena.env_names()
    )
    assert {"scenarios", "sensitivity", "budget_curves", "seed_tables"} <= set(
        planarena.study_names()
    )
    assert planarena.options("faults") == ["default", "heavy", "none", "outages"]
    assert "robustness" in planarena.options("experiment")


def test_run_returns_the_dir_and_the_records_the_command_writes(
    command_run: Path, tmp_path: Path
) -> None:
    """The same overrides from Python: the same records (``wall_s`` aside), the same run
    identity, the same files, and the records as a frame."""
    run_dir, df = planarena.run(SMALL, run_dir=tmp_path / "api")
    assert run_dir == tmp_path / "api"
    assert isinstance(df, pd.DataFrame) and len(df) == 4
    assert sorted(zip(df["planner"], df["task_id"], strict=True)) == [
        (p, f"report-medium-000{i}") for p in ("plan_execute", "react") for i in (0, 1)
    ]
    strip = [{k: v for k, v in r.items() if k != "wall_s"} for r in lines(run_dir / EPISODES)]
    want = [{k: v for k, v in r.items() if k != "wall_s"} for r in lines(command_run / EPISODES)]
    assert strip == want
    identity = json.loads((run_dir / "run.json").read_text())["config_id"]
    assert identity == json.loads((command_run / "run.json").read_text())["config_id"]
    for name in ("traces.jsonl", "episodes.parquet", "summary.md", ".hydra/overrides.yaml"):
        assert (run_dir / name).exists(), name
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "ok" and status["overrides"] == SMALL


def test_run_refuses_what_the_command_refuses(tmp_path: Path) -> None:
    for args, status, line in [
        (["n_taks=3"], 2, "planarena: n_taks=3: no key 'n_taks'; did you mean n_tasks?"),
        (["planner=reactt"], 2, "planarena: planner=reactt: no such planner config"),
        (["-m", "seed=0,1"], 2, "-m: flags are the command's"),
        (["llm.skill=superb"], 2, "llm.skill=superb: unknown skill"),
    ]:
        with pytest.raises(planarena.RunError) as caught:
            planarena.run(args, run_dir=tmp_path / "refused")
        assert caught.value.exit_status == status
        assert line in str(caught.value) and "\n" not in str(caught.value)
    assert not (tmp_path / "refused").exists()
    with pytest.raises(TypeError):
        planarena.run(["n_tasks=1"], config=planarena.compose())


def test_run_takes_a_composed_and_changed_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``config=`` runs as given; without a run dir, the command's default dir under the
    working dir."""
    cfg = planarena.compose(["planner=react", "env=report", "progress=false", "figures=false"])
    assert "hydra" not in cfg
    cfg.n_tasks, cfg.complexity = 1, "simple"
    monkeypatch.chdir(tmp_path)
    run_dir, df = planarena.run(config=cfg)
    assert run_dir.parts[:2] == ("results", "runs") and (tmp_path / run_dir).is_dir()
    assert list(df["task_id"]) == ["report-simple-0000"] and list(df["planner"]) == ["react"]


def test_load_reads_several_runs(command_run: Path, tmp_path: Path) -> None:
    other, _ = planarena.run([*(a for a in SMALL if a != "seed=15"), "seed=5"], run_dir=tmp_path)
    both = planarena.load([command_run, other])
    assert len(both) == 8 and both["run_dir"].nunique() == 2
    assert set(both["seed"]) == {15, 5}
    assert len(planarena.load(str(command_run), columns=["planner", "success"])) == 4
    with pytest.raises(FileNotFoundError, match="no episodes.jsonl under"):
        planarena.load(tmp_path / "nothing")


@pytest.mark.parametrize("task", [0, 1])
@pytest.mark.parametrize("planner", ["react", "plan_execute"])
def test_an_episode_equals_the_commands_record_and_trace(
    command_run: Path, planner: str, task: int
) -> None:
    record, trace = planarena.episode(
        planner, "report", complexity="medium", task=task, seed=15, faults="default"
    )
    task_id = f"report-medium-000{task}"
    (want,) = [
        r
        for r in lines(command_run / "episodes.jsonl")
        if r["planner"] == planner and r["task_id"] == task_id
    ]
    for r in (record, want):
        del r["wall_s"], r["config_id"]
    assert record == want
    (want_trace,) = [
        t
        for t in lines(command_run / "traces.jsonl")
        if t["planner"] == planner and t["task_id"] == task_id
    ]
    assert json.loads(json.dumps(trace)) == want_trace


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", page.read_text(), flags=re.M | re.S)


def test_the_python_api_page_runs_as_written(tmp_path: Path) -> None:
    """docs/python-api.md's blocks, one after another as one script, from an empty dir."""
    blocks = python_blocks(DOC)
    assert len(blocks) >= 5
    done = python("\n".join(blocks), tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert (tmp_path / "runs" / "api_first" / "episodes.jsonl").is_file()


# --------------------------------------------------------------------------- packaging


@pytest.mark.slow
def test_a_non_editable_install_has_one_import_name(tmp_path: Path) -> None:
    """``pip install --target`` of the repository: its only top-level import name is
    ``planarena`` (search, envs, planners, experiments and configs under it, with their data
    files), and it runs a job from any working dir without the checkout."""
    site = tmp_path / "site"
    # from a copy without the checkout's build/ and egg-info: stale files there (the config
    # groups) made an install look whole that a fresh clone's would not be
    source = tmp_path / "source"
    skip = shutil.ignore_patterns(
        "*.egg-info", "build", "dist", ".git", ".ci-venv", "results", "__pycache__"
    )
    shutil.copytree(ROOT, source, ignore=skip)
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(site), str(source)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    entries = {p.name for p in site.iterdir()}
    assert entries == {"planarena", f"planarena-{version('planarena')}.dist-info", "bin"}
    assert {p.name for p in (site / "bin").iterdir()} >= {"planarena", "planarena-report"}
    package = site / "planarena"
    assert {p.name for p in package.iterdir() if p.is_dir() and p.name != "__pycache__"} == {
        "search",
        "envs",
        "planners",
        "experiments",
        "configs",
    }
    assert (package / "configs" / "config.yaml").is_file()
    assert (package / "envs" / "families" / "pipeline.yaml").is_file()
    code = (
        "import planarena, planarena.envs, sys\n"
        "print(planarena.__version__, planarena.__file__, planarena.envs.__file__)\n"
        "print(planarena.planner_names())\n"
    )
    shown = python(code, Path("/"), PYTHONPATH=str(site))
    assert shown.returncode == 0, shown.stderr[-2000:]
    first, second = shown.stdout.splitlines()[:2]
    ver, top, envs = first.split()
    assert ver == version("planarena")
    assert Path(top).is_relative_to(site) and Path(envs).is_relative_to(site)
    assert "react" in second
    job = [sys.executable, "-m", "planarena.experiments.run.runner", "planner=react"]
    job += ["env=[report,pipeline]", "n_tasks=1", "complexity=simple", "progress=false"]
    job += ["figures=false", f"hydra.run.dir={tmp_path / 'run'}"]
    ran = subprocess.run(
        job,
        cwd="/",
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(site)},
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert len(lines(tmp_path / "run" / "episodes.jsonl")) == 2
