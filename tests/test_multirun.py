"""A Hydra multirun aggregates its jobs into the sweep dir (experiments.callbacks)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from experiments.figures import FIGURE_NAMES

BIN = Path(sys.executable).parent


@pytest.mark.slow  # ~10 s: two jobs and the aggregate each render figures
def test_multirun_writes_sweep_level_summary_and_figures(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    cmd = [
        str(BIN / "planarena"),
        "-m",
        "planner=react,plan_execute",
        "n_tasks=2",
        "complexity=simple",
        f"hydra.sweep.dir={sweep}",
        "progress=false",
    ]
    proc = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300)
    summary = pd.read_csv(sweep / "summary.csv")
    assert list(summary["planner"]) == ["react", "plan_execute"]
    assert list(summary["n"]) == [2, 2]
    merged = pd.read_parquet(sweep / "episodes.parquet")
    assert len(merged) == 4 and sorted(set(merged["run_dir"])) == ["0", "1"]
    assert len(list((sweep / "figures").glob("*.pdf"))) == len(FIGURE_NAMES)
    assert len(list((sweep / "figures").glob("*.png"))) == len(FIGURE_NAMES)
    assert not (sweep / "episodes.jsonl").exists()  # a rerun of the aggregate cannot double
    assert "Sweep completion rate" in proc.stdout
    # the sweep-level files are exactly what planarena-report makes from the same jobs
    out = tmp_path / "report"
    subprocess.run(
        [str(BIN / "planarena-report"), str(sweep), "--out", str(out)],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    for name in ("summary.csv", "summary.md", "summary.tex", "figures/latency_cdf.pdf"):
        assert (out / name).read_bytes() == (sweep / name).read_bytes(), name
