"""The Ray launcher (optional extra ``planarena[ray]``) sweeps on a local Ray cluster and
aggregates byte-identically to the basic launcher. Ray is a large install, so CI leaves it
out and this test skips; run it with ``pip install -e '.[ray]' && pytest -m slow``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.test_multirun import sweep


@pytest.mark.slow  # ~40 s: a local Ray cluster starts cold, two sweeps of four jobs
def test_ray_launcher_aggregates_byte_identically(tmp_path: Path) -> None:
    if importlib.util.find_spec("hydra_plugins.hydra_ray_launcher") is None:
        pytest.skip("hydra-ray-launcher not installed (pip install -e '.[ray]')")
    grid = ["planner=react,plan_execute", "seed=0,1", "figures=false"]
    basic, ray = tmp_path / "basic", tmp_path / "ray"
    sweep(basic, *grid)
    proc = sweep(ray, *grid, "hydra/launcher=ray_local")
    for name in ("summary.csv", "summary.md"):
        assert (basic / name).read_bytes() == (ray / name).read_bytes(), name
    jobs = sorted(p.name for p in ray.iterdir() if (p / "episodes.jsonl").exists())
    assert jobs == sorted(p.name for p in basic.iterdir() if (p / "episodes.jsonl").exists())
    assert len(jobs) == 4
    assert "Sweep — " in proc.stdout and "Completion rate (95% Wilson interval)" in proc.stdout
