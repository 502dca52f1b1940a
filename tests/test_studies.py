"""Studies: a registry feeds experiment=, cells run as ordinary jobs through the one episode
loop (so a study resumes after a kill and spreads over a launcher), and the analysis is written
from the records alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import CONFIGS
from hydra import compose, initialize_config_dir
from planarena.experiments.run.prepare import prepare
from planarena.experiments.studies import registry
from planarena.experiments.studies.registry import Cell, Study, study

BIN = Path(sys.executable).parent
SMALL_GRID = [
    "experiment=sensitivity",
    "planner=[react,plan_execute_replan]",
    "env=[report]",
    "complexity=simple",
    "progress=false",
    "figures=false",
]


def test_every_experiment_that_names_a_study_names_a_registered_one() -> None:
    named = []
    for path in sorted((CONFIGS / "experiment").glob("*.yaml")):
        name = (yaml.safe_load(path.read_text()) or {}).get("study")
        if name:
            named.append(name)
            assert name in registry.names(), path
    assert {"sensitivity", "budget_curves", "scenarios", "seed_tables"} <= set(named)


def test_an_unknown_study_names_the_registered_ones() -> None:
    with pytest.raises(KeyError, match="registered: .*sensitivity"):
        registry.get("sensitivty")


def test_a_study_registered_from_anywhere_is_found_and_runs_its_cells() -> None:
    @study("two_budgets_for_test")
    class TwoBudgets(Study):
        def cells(self, config: dict) -> list[Cell]:  # type: ignore[override]
            del config
            return [
                Cell(f"b={b}", {"b": b}, {"budget.max_tokens_per_episode": b})
                for b in (500, 50_000)
            ]

    with initialize_config_dir(version_base="1.3", config_dir=str(CONFIGS)):
        cfg = compose(
            "config",
            overrides=["study=two_budgets_for_test", "planner=[react]", "env=[report]",
                       "n_tasks=2", "complexity=simple"],
        )  # fmt: skip
    prepared = prepare(cfg)
    assert prepared.cells == ["b=500", "b=50000"]
    assert [c.budget.max_tokens for c in prepared.contexts] == [500, 50_000]
    jobs = list(prepared.jobs)
    assert len(jobs) == 2 * 2  # cells x tasks, cell-major: every cell runs the same tasks
    assert [j.cell_label for j in jobs] == ["b=500", "b=500", "b=50000", "b=50000"]
    assert jobs[0].ref == jobs[2].ref
    assert jobs[0].key(0, "x") != jobs[2].key(0, "x")  # the cell is part of a record's key
    assert prepared.contexts[1].cell == {"cell": "b=50000", "b": 50_000}


def test_a_shard_runs_every_other_cell() -> None:
    with initialize_config_dir(version_base="1.3", config_dir=str(CONFIGS)):
        cfg = compose("config", overrides=[*SMALL_GRID, "n_tasks=1", "shard=1", "shards=2"])
    cells = prepare(cfg).cells
    with initialize_config_dir(version_base="1.3", config_dir=str(CONFIGS)):
        whole = prepare(compose("config", overrides=[*SMALL_GRID, "n_tasks=1"])).cells
    assert cells == whole[1::2]


def _run(args: list[str], cwd: Path, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "planarena"), *args], cwd=cwd, capture_output=True, text=True, **kw
    )  # type: ignore[call-overload]


def test_a_plain_run_has_no_cell_keys_and_a_grid_run_has_them(tmp_path: Path) -> None:
    plain = _run(["planner=react", "env=report", "n_tasks=1", "complexity=simple",
                  "progress=false", "figures=false", f"hydra.run.dir={tmp_path / 'a'}"],
                 tmp_path)  # fmt: skip
    assert plain.returncode == 0, plain.stderr
    record = json.loads((tmp_path / "a" / "episodes.jsonl").read_text().splitlines()[0])
    assert "cell" not in record
    grid = _run([*SMALL_GRID, "n_tasks=1", "planner=[react]", "write_traces=true",
                 f"hydra.run.dir={tmp_path / 'b'}"], tmp_path)  # fmt: skip
    assert grid.returncode == 0, grid.stderr
    lines = (tmp_path / "b" / "episodes.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert {"cell", "p_trap", "evaluator_noise"} <= set(records[0])
    assert len({r["cell"] for r in records}) == len(records) > 1
    traces = (tmp_path / "b" / "traces.jsonl").read_text().splitlines()
    assert [json.loads(t)["cell"] for t in traces] == [r["cell"] for r in records]


@pytest.mark.slow
def test_a_killed_sensitivity_study_resumes_and_writes_the_same_analysis(tmp_path: Path) -> None:
    """SIGKILL mid-way, then the same command: recorded cells do not run again, and
    sensitivity.md equals an uninterrupted run's; planarena-report writes it again the same."""
    args = [*SMALL_GRID, "n_tasks=8", "workers=1"]
    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        [str(BIN / "planarena"), *args, f"hydra.run.dir={killed}"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    episodes = killed / "episodes.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if episodes.exists() and episodes.read_bytes().count(b"\n") >= 60:
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the study ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    recorded = episodes.read_bytes().count(b"\n")
    with initialize_config_dir(version_base="1.3", config_dir=str(CONFIGS)):
        cells = len(prepare(compose("config", overrides=args)).cells)
    total = cells * 2 * 8  # cells x planners x tasks
    assert 60 <= recorded < total
    resumed = _run([*args, f"hydra.run.dir={killed}"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{recorded} episode(s) already recorded" in resumed.stderr
    assert f"{total - recorded} to run" in resumed.stderr
    whole = _run([*args, f"hydra.run.dir={tmp_path / 'whole'}"], tmp_path)
    assert whole.returncode == 0, whole.stderr
    text = (tmp_path / "whole" / "sensitivity.md").read_text()
    assert (killed / "sensitivity.md").read_text() == text
    (killed / "sensitivity.md").unlink()
    again = subprocess.run([str(BIN / "planarena-report"), str(killed)], capture_output=True)
    assert again.returncode == 0, again.stderr
    assert (killed / "sensitivity.md").read_text() == text


def _records(run: Path) -> list[str]:
    """A run's records, the wall clock and the (shard's) config id aside."""
    drop = ("wall_s", "config_id")
    lines = (run / "episodes.jsonl").read_text().splitlines()
    return [json.dumps({k: v for k, v in json.loads(x).items() if k not in drop}) for x in lines]


@pytest.mark.slow  # a local Ray cluster starts cold: about a minute
@pytest.mark.parametrize(
    ("launcher", "plugin", "shards"),
    [("joblib", "hydra_joblib_launcher", 3), ("ray_local", "hydra_ray_launcher", 2)],
)
def test_a_study_spread_over_a_launcher_writes_the_same_analysis(
    tmp_path: Path, launcher: str, plugin: str, shards: int
) -> None:
    """The study's shards as a launcher's jobs (joblib; Ray, the optional extra
    ``planarena[ray]``, which CI installs in a venv of its own): the aggregate's analysis and
    every cell's records equal one process running every cell."""
    pytest.importorskip(f"hydra_plugins.{plugin}")
    args = [*SMALL_GRID, "n_tasks=2"]
    one = _run([*args, f"hydra.run.dir={tmp_path / 'one'}"], tmp_path)
    assert one.returncode == 0, one.stderr
    sweep = _run(["-m", *args, f"shard={','.join(map(str, range(shards)))}", f"shards={shards}",
                  f"hydra/launcher={launcher}", f"hydra.sweep.dir={tmp_path / 'sweep'}"],
                 tmp_path, timeout=600)  # fmt: skip
    assert sweep.returncode == 0, sweep.stderr
    for name in ("sensitivity.md", "sensitivity.csv", "sensitivity_cells.csv"):
        assert (tmp_path / "sweep" / name).read_text() == (tmp_path / "one" / name).read_text()
    jobs = sorted(p for p in (tmp_path / "sweep").iterdir() if (p / "episodes.jsonl").exists())
    assert len(jobs) == shards
    spread = sorted(line for job in jobs for line in _records(job))
    assert spread == sorted(_records(tmp_path / "one"))


def test_the_sensitivity_section_is_rendered_from_its_shipped_run() -> None:
    """docs/simulator.md's sensitivity verdicts are a render of docs/data/sensitivity/ (one
    run of experiment=sensitivity), never typed."""
    from planarena.experiments.studies.simulator_docs import SIMULATOR as SENSITIVITY

    page = SENSITIVITY.path.read_text(encoding="utf-8")
    assert "<!-- rendered: sensitivity -->" in page
    assert SENSITIVITY.render(page) == page
    assert "### By assumption" in page  # the copy's sections, a heading level down
