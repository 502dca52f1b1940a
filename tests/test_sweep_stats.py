"""The README's multirun over seeds gives one sweep summary with a row per seed (issue 9)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

BIN = Path(sys.executable).parent


@pytest.mark.slow  # four small jobs and the aggregate
def test_multi_seed_sweep_has_one_summary_with_seed_rows(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    cmd = [
        str(BIN / "planarena"),
        "-m",
        "planner=react,plan_execute",
        "seed=0,1",
        "env=report",
        "n_tasks=2",
        "complexity=simple",
        "write_traces=false",
        f"hydra.sweep.dir={sweep}",
        "progress=false",
    ]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600)
    summary = pd.read_csv(sweep / "summary.csv")
    assert sorted(zip(summary["planner"], summary["seed"], strict=True)) == [
        ("plan_execute", 0),
        ("plan_execute", 1),
        ("react", 0),
        ("react", 1),
    ]
    assert set(summary["n"]) == {2} and set(summary["n_tasks"]) == {2}
    md = (sweep / "summary.md").read_text()
    assert "## Between-seed spread" in md and "## Comparison matrix" in md
    comparisons = pd.read_csv(sweep / "comparisons.csv")
    assert comparisons["n_pairs"].tolist() == [4]  # 2 tasks x 2 seeds, paired by seed
