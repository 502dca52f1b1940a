"""The Ray launcher (optional extra ``planarena[ray]``) sweeps on a local Ray cluster and
aggregates byte-identically to the basic launcher. The extra's pins conflict with the lock,
so CI runs this test in a venv of its own (``.ci/ray``); elsewhere it skips without the
extra (``pip install -e '.[dev,ray]' && pytest -m slow -k ray``)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
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


@pytest.mark.slow  # a Ray head started and stopped around a sweep of four jobs: ~30 s
def test_a_sweep_joins_a_running_ray_cluster(tmp_path: Path) -> None:
    """``hydra/launcher=ray_cluster`` (the recipe of docs/sweeps.md) joins a cluster started
    with ``ray start --head`` and aggregates as the basic launcher does."""
    if importlib.util.find_spec("hydra_plugins.hydra_ray_launcher") is None:
        pytest.skip("hydra-ray-launcher not installed (pip install -e '.[ray]')")
    ray = Path(sys.executable).parent / "ray"
    head = [str(ray), "start", "--head", "--num-cpus=2", "--include-dashboard=false"]
    subprocess.run([*head, "--disable-usage-stats"], check=True, capture_output=True)
    try:
        grid = ["planner=react,plan_execute", "seed=0,1", "figures=false"]
        basic, cluster = tmp_path / "basic", tmp_path / "cluster"
        sweep(basic, *grid)
        sweep(cluster, *grid, "hydra/launcher=ray_cluster")
    finally:
        subprocess.run([str(ray), "stop"], check=False, capture_output=True)
    for name in ("summary.csv", "summary.md"):
        assert (basic / name).read_bytes() == (cluster / name).read_bytes(), name
