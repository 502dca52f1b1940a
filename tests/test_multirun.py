"""A Hydra multirun aggregates its jobs into the sweep dir
(planarena.experiments.run.callbacks), with any launcher; job dirs are named by their
overrides; a failed job is named, not fatal."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest
from planarena.experiments.analysis import tables
from planarena.experiments.analysis.report import load_runs
from planarena.experiments.records import store as records
from planarena.experiments.records.columns import EPISODE_COLUMNS

BIN = Path(sys.executable).parent
SMALL = ["env=report", "n_tasks=2", "complexity=simple", "progress=false"]


def sweep(sweep_dir: Path, *overrides: str, check: bool = True) -> subprocess.CompletedProcess:
    cmd = [str(BIN / "planarena"), "-m", *overrides, *SMALL, f"hydra.sweep.dir={sweep_dir}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def job(name: str) -> str:
    """The job dir of a sweep job: its overrides, sorted, the swept ones included."""
    return ",".join(sorted(["complexity=simple", "env=report", "n_tasks=2", *name.split(",")]))


@pytest.mark.slow  # ~15 s: two jobs and the aggregate, which renders figures
def test_multirun_writes_sweep_level_summary_and_figures(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    proc = sweep(out, "planner=react,plan_execute")
    summary = pd.read_csv(out / "summary.csv")
    assert sorted(summary["planner"]) == ["plan_execute", "react"]
    assert list(summary["n"]) == [2, 2]
    merged = pd.read_parquet(out / "episodes.parquet")
    assert len(merged) == 4
    assert sorted(set(merged["run_dir"])) == [job("planner=plan_execute"), job("planner=react")]
    assert len(list((out / "figures").glob("*.pdf"))) >= 4
    assert not list(out.glob("*/figures"))  # jobs leave figures to the aggregate
    assert not (out / "episodes.jsonl").exists()  # a rerun of the aggregate cannot double
    assert "Sweep — " in proc.stdout and "Completion rate (95% Wilson interval)" in proc.stdout
    # the sweep-level files are exactly what planarena-report makes from the same jobs
    report = tmp_path / "report"
    subprocess.run(
        [str(BIN / "planarena-report"), str(out), "--out", str(report)],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    for name in ("summary.csv", "summary.md", "summary.tex", "figures/latency_percentiles.pdf"):
        assert (report / name).read_bytes() == (out / name).read_bytes(), name


@pytest.mark.slow  # ~20 s: three sweeps of tables only
def test_extending_a_sweep_keeps_job_dirs_and_a_failed_job_is_named(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    sweep(out, "planner=react", "seed=0", "figures=false")
    first = (out / job("planner=react,seed=0") / "episodes.jsonl").read_bytes()
    sweep(out, "planner=react", "seed=0,1", "figures=false")  # extended: seed=0 is resumed
    assert (out / job("planner=react,seed=0") / "episodes.jsonl").read_bytes() == first
    assert len(pd.read_parquet(out / "episodes.parquet")) == 4
    # one job of three fails (an invalid value): the others are aggregated, it is named
    proc = sweep(out, "planner=react", "seed=0,1,-1", "trials=1,0", "figures=false", check=False)
    assert proc.returncode == 1
    assert "trials=0" in proc.stderr and "left out of the aggregate" in proc.stderr
    assert "Traceback" not in proc.stderr
    status = json.loads((out / job("planner=react,seed=-1,trials=0") / "status.json").read_text())
    assert status["status"] == "failed" and "trials=0" in status["message"]
    # seed=0,trials=1 is seed=0's configuration (trials=1 is the default): the same episodes,
    # counted once (they were counted twice, in cells that differed only by a blank trials)
    assert "has the configuration of job" in proc.stderr and "counted once" in proc.stderr
    merged = pd.read_parquet(out / "episodes.parquet")
    assert len(merged) == 6  # seeds 0, 1 and -1, two tasks each
    assert sorted(set(merged["seed"])) == [-1, 0, 1]
    assert (out / "summary.csv").exists()


def fake_sweep(run_dir: Path, sweep_dir: Path, *, note_in: str | None = None) -> list[Path]:
    """A finished sweep over ``llm.skill`` made of a real run's records, each with a large
    column no table reads (and, in job ``note_in``, a column the other job lacks). The jobs
    ran in the reverse of their dirs' order, which fixes the rows' order."""
    sweep_dir.mkdir()
    (sweep_dir / "multirun.yaml").write_text("hydra: {}\n")
    lines = (run_dir / "episodes.jsonl").read_text().splitlines()
    jobs = []
    for num, skill in ((1, "strong"), (0, "weak")):
        job_dir = sweep_dir / f"llm.skill={skill}"
        (job_dir / ".hydra").mkdir(parents=True)
        (job_dir / ".hydra" / "overrides.yaml").write_text(f"- llm.skill={skill}\n")
        (job_dir / ".hydra" / "hydra.yaml").write_text(f"hydra:\n  job:\n    num: {num}\n")
        (job_dir / "status.json").write_text('{"status": "ok"}')
        shutil.copy(run_dir / "traces.jsonl", job_dir / "traces.jsonl")
        extra: dict[str, Any] = {"blob": skill * 5_000}
        if job_dir.name == note_in:
            extra["note"] = "only in this job"
        rows = [{**json.loads(line), **extra} for line in lines]
        (job_dir / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        jobs.append(job_dir)
    return jobs


@pytest.mark.parametrize("note_in", [None, "llm.skill=weak"], ids=["same", "columns_differ"])
def test_aggregate_holds_only_the_columns_the_tables_read(
    small_run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, note_in: str | None
) -> None:
    """The sweep aggregate's frame holds the columns the tables read (and the swept one), not
    the large unused ones; its files are what the whole records frame gives, and its merged
    Parquet is the whole frame's, also when the jobs' columns differ (then read whole)."""
    from planarena.experiments.run.callbacks import aggregate

    sweep_dir = tmp_path / "sweep"
    jobs = fake_sweep(small_run_dir, sweep_dir, note_in=note_in)
    monkeypatch.setattr(records, "CHUNK_ROWS", 7)  # several chunks and row groups a job
    monkeypatch.setattr(records, "ROW_GROUP_ROWS", 14)
    seen: list[pd.DataFrame] = []
    write_summaries = tables.write_summaries

    def spy(df: pd.DataFrame, *args: Any, **kwargs: Any) -> pd.DataFrame:
        seen.append(df)
        return write_summaries(df, *args, **kwargs)

    monkeypatch.setattr(tables, "write_summaries", spy)
    table = aggregate(jobs, sweep_dir, figures=False)
    (df,) = seen
    keys = json.loads((jobs[0] / "episodes.jsonl").read_text().splitlines()[0]).keys()
    needed = {c for c in EPISODE_COLUMNS if c in keys} | {"run_dir", "overrides", "llm.skill"}
    assert set(df.columns) == needed
    if int(pd.__version__.split(".")[0]) >= 3:
        assert isinstance(df["failure_mode"].dtype, pd.CategoricalDtype)
    # the reference: every column of every episode, as the aggregate read them before
    whole = load_runs(jobs, every_column=True)
    assert "blob" in whole.columns and len(whole) == len(df)
    reference = tmp_path / "whole"
    summary = write_summaries(whole, reference, seed=0)
    # under the heading that names its interval (the task bootstrap when trials repeat)
    assert table == f"{tables.completion_heading(whole)}\n{tables.format_completion_table(summary)}"
    for name in ("summary.csv", "summary.md", "summary.tex", "comparisons.csv"):
        assert (sweep_dir / name).read_bytes() == (reference / name).read_bytes(), name
    whole["run_dir"] = [Path(r).name for r in whole["run_dir"]]
    whole.to_parquet(reference / "episodes.parquet", index=False)
    pd.testing.assert_frame_equal(
        pd.read_parquet(sweep_dir / "episodes.parquet"),
        pd.read_parquet(reference / "episodes.parquet"),
    )
    # copied a row group at a time from the jobs' records; read whole when their columns differ
    groups = pq.ParquetFile(sweep_dir / "episodes.parquet").num_row_groups
    assert groups == (1 if note_in else -(-len(df) // 14))
    assert not [p.name for p in sweep_dir.iterdir() if p.name.startswith(".")]  # copies removed


def _launcher_installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@pytest.mark.slow  # ~1 min on 2 cores: two sweeps of four jobs, worker processes start cold
@pytest.mark.parametrize(
    ("launcher", "module"),
    [
        (
            ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
            "hydra_plugins.hydra_joblib_launcher",
        ),
        (["hydra/launcher=submitit_local"], "hydra_plugins.hydra_submitit_launcher"),
    ],
    ids=["joblib", "submitit_local"],
)
def test_launchers_aggregate_byte_identically(
    tmp_path: Path, launcher: list[str], module: str
) -> None:
    if not _launcher_installed(module):
        pytest.skip(f"{module} not installed (pip install -e '.[joblib]' / '.[slurm]')")
    grid = ["planner=react,plan_execute", "seed=0,1", "figures=false"]
    basic, other = tmp_path / "basic", tmp_path / "other"
    start = time.perf_counter()
    sweep(basic, *grid)
    basic_s = time.perf_counter() - start
    sweep(other, *grid, *launcher)
    # the command ends when its work does: joblib's workers lingered 300 s (their idle
    # timeout) when the exit skipped the threads' exit hooks that shut them down
    assert time.perf_counter() - start - basic_s < basic_s + 120
    for name in ("summary.csv", "summary.md"):
        assert (basic / name).read_bytes() == (other / name).read_bytes(), name
    jobs = sorted(p.name for p in other.iterdir() if (p / "episodes.jsonl").exists())
    assert jobs == sorted(p.name for p in basic.iterdir() if (p / "episodes.jsonl").exists())
    assert len(jobs) == 4
