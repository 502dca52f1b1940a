"""planarena-report and the numbers behind it, checked against a reader's own recomputation.

A real small run is made once per session (shared with test_trace_view and test_notebook
through a fixed dir under pytest's basetemp, since each one costs a few seconds).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from experiments.figures import FIGURE_NAMES
from experiments.report import duplicate_episodes, load_runs, main, resolve_seed

BIN = Path(sys.executable).parent
OUTPUTS = ("summary.csv", "summary.md", "summary.tex")


@pytest.fixture(scope="module")
def run_dir(small_run_dir: Path) -> Path:
    return small_run_dir


def wilson(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Textbook Wilson score interval, written out independently of experiments.metrics."""
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def test_summary_numbers_equal_a_readers_recomputation(run_dir: Path) -> None:
    raw = pd.read_json(run_dir / "episodes.jsonl", lines=True)
    summary = pd.read_csv(run_dir / "summary.csv", engine="python")  # Python float(): exact
    keys = ["planner", "env", "complexity"]
    assert len(summary) == raw.groupby(keys).ngroups  # one row per cell, nothing pooled
    for (planner, env, complexity), cell in raw.groupby(keys):
        row = summary[
            (summary["planner"] == planner)
            & (summary["env"] == env)
            & (summary["complexity"] == complexity)
        ]
        assert len(row) == 1
        row = row.iloc[0]
        n, wins = len(cell), int(cell["success"].sum())
        latency = cell["latency_s"].to_numpy()
        assert row["n"] == n and row["successes"] == wins
        assert row["completion_rate"] == wins / n
        low, high = wilson(wins, n)
        assert row["completion_ci_low"] == pytest.approx(low, abs=1e-12)
        assert row["completion_ci_high"] == pytest.approx(high, abs=1e-12)
        # exact equality: same numpy method on the same floats, CSV read back round-trip
        assert row["latency_p50"] == np.percentile(latency, 50, method="linear")
        assert row["latency_p99"] == np.percentile(latency, 99, method="linear")
        assert row["latency_p50_ci_low"] <= row["latency_p50"] <= row["latency_p50_ci_high"]
        assert row["tokens_mean"] == pytest.approx(cell["tokens_total"].mean(), rel=1e-12)


def test_report_reproduces_the_runs_files_byte_for_byte(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Same code path as the ``planarena-report`` script, in-process (saves ~1.5 s of imports);
    the run itself was written by another process, so this is a cross-process comparison."""
    assert (BIN / "planarena-report").exists()  # the console script is installed
    out = tmp_path / "report"
    assert main([str(run_dir), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| planner" in printed and "plan_execute_replan" in printed
    for name in OUTPUTS:
        assert (out / name).read_bytes() == (run_dir / name).read_bytes(), name
    figures = sorted(p.name for p in (run_dir / "figures").iterdir())
    assert len(figures) == 2 * len(FIGURE_NAMES)
    assert sorted(p.name for p in (out / "figures").iterdir()) == figures
    for name in figures:
        assert (out / "figures" / name).read_bytes() == (run_dir / "figures" / name).read_bytes()
    assert not (out / "episodes.jsonl").exists()  # a report never writes records


def test_merging_dirs_needs_out_and_pools_their_episodes(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main([str(run_dir), str(run_dir)])
    assert exc.value.code == 2
    assert "--out is required" in capsys.readouterr().err
    df = load_runs([run_dir, run_dir])
    assert len(df) == 2 * len(load_runs([run_dir]))
    # the same episodes twice pool one condition into a cell: reported, not hidden
    assert duplicate_episodes(df) == len(df) // 2
    assert duplicate_episodes(load_runs([run_dir])) == 0
    assert resolve_seed(df, None) == 0 and resolve_seed(df, 7) == 7


def test_missing_records_fail_loudly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([str(tmp_path)])
    assert exc.value.code == 2
    assert "no episodes.jsonl" in capsys.readouterr().err


def test_sweep_job_dirs_load_in_job_number_order(tmp_path: Path) -> None:
    for job, planner in ((10, "late"), (2, "early")):
        d = tmp_path / str(job)
        d.mkdir()
        record = {
            "planner": planner,
            "env": "report",
            "complexity": "simple",
            "task_id": "t",
            "seed": 0,
            "trial": 0,
        }
        (d / "episodes.jsonl").write_text(json.dumps(record) + "\n")
    df = load_runs([tmp_path])
    assert list(df["planner"]) == ["early", "late"]


def test_sweep_jobs_named_by_overrides_load_in_launch_order(tmp_path: Path) -> None:
    for num, planner in ((0, "react"), (1, "plan_execute")):
        d = tmp_path / f"planner={planner}"
        (d / ".hydra").mkdir(parents=True)
        (d / ".hydra" / "hydra.yaml").write_text(f"hydra:\n  job:\n    num: {num}\n")
        record = {"planner": planner, "env": "e", "complexity": "simple", "task_id": "t"}
        (d / "episodes.jsonl").write_text(json.dumps({**record, "seed": 0, "trial": 0}) + "\n")
    assert list(load_runs([tmp_path])["planner"]) == ["react", "plan_execute"]


def test_a_damaged_records_file_is_one_line_naming_file_and_line(
    tmp_path: Path, small_run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A record line that is not JSON, in the middle of the file, stops planarena-report with
    one line naming the file and the line, and exit status 2 (no traceback)."""
    from experiments.report import main

    lines = (small_run_dir / "episodes.jsonl").read_text().splitlines()
    damaged = tmp_path / "run"
    damaged.mkdir()
    (damaged / "episodes.jsonl").write_text("\n".join([*lines[:2], '{"broken', *lines[2:4]]) + "\n")
    with pytest.raises(SystemExit) as stop:
        main([str(damaged)])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "episodes.jsonl:3" in err and "Traceback" not in err
