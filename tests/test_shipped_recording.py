"""The shipped recording of a real model replays offline: no request, the recorded records.

``tests/data/recordings/qwen2.5-coder-0.5b`` (its README says how it was made) holds a run of
every default planner against Qwen2.5-Coder-0.5B-Instruct served by llama.cpp, and the replies
in its response cache. Replaying it needs no server: every request must be a cache hit, and the
records must be the recording's but for the wall clock and the cache counters. A change that
alters what a planner sends (a prompt, a parser, an episode's draws) fails here: then the
recording must be made again (docs/local-models.md says how).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from planarena.experiments.run import recording

RECORDING = Path(__file__).resolve().parent / "data" / "recordings" / "qwen2.5-coder-0.5b"


def _check(replayed: list[dict[str, object]], ignore: tuple[str, ...] = ()) -> None:
    assert replayed and all(r["llm_requests"] == 0 for r in replayed)
    assert all(r["cache_hits"] == r["llm_calls"] for r in replayed)
    assert all(r["failure_mode"] != "infrastructure_error" for r in replayed)
    recorded = recording.recorded_episodes(RECORDING)
    assert recording.differences(recorded, replayed, ignore) == []


def _recorded_tasks_per_cell() -> int:
    overrides = recording.recorded_overrides(RECORDING)
    return int(next(o.split("=", 1)[1] for o in overrides if o.startswith("n_tasks=")))


def test_a_subset_of_the_shipped_recording_replays_exactly(tmp_path: Path) -> None:
    """Three planners of different kinds on one family: a ReAct transcript, a plan with its
    replans, a tree search (the k-th identical request is the k-th cached reply)."""
    subset = ["planner=[react,plan_execute_replan,tot]", "env=report"]
    replayed = recording.replay(RECORDING, tmp_path / "replay", subset)
    tasks_per_cell = _recorded_tasks_per_cell()
    assert len(replayed) == 3 * 3 * tasks_per_cell  # planners x complexities x tasks per cell
    _check(replayed, ignore=("config_id",))


def test_auto_replays_with_the_map_the_recording_carries(tmp_path: Path) -> None:
    """auto chooses from the decision map copied in at packing, not the shipped one (a map
    reinstalled since would choose other strategies and ask for replies never recorded):
    the recording replays exactly with its map, and differs when its map is swapped."""
    import json
    import shutil

    from planarena.experiments.records.recorded_families import DECISION_MAP

    subset = ["planner=[auto]", "env=report", "complexity=simple"]
    assert any(
        p.startswith("++planner.auto.map_path=")
        for p in recording.family_pins(
            RECORDING, [*recording.recorded_overrides(RECORDING), *subset]
        )
    )
    assert not any(
        "planner.auto" in p
        for p in recording.family_pins(
            RECORDING, [*recording.recorded_overrides(RECORDING), "planner=[react]"]
        )
    )
    _check(recording.replay(RECORDING, tmp_path / "replay", subset), ignore=("config_id",))
    swapped = tmp_path / "swapped"
    shutil.copytree(RECORDING, swapped)
    other = json.loads((RECORDING / DECISION_MAP).read_text())
    other.update(entries=[], fallback="reflexion")
    (swapped / DECISION_MAP).write_text(json.dumps(other))
    replayed = recording.replay(swapped, tmp_path / "other", subset)
    assert {r["auto_choice"] for r in replayed} == {"reflexion"}
    recorded = recording.recorded_episodes(RECORDING)
    assert recording.differences(recorded, replayed, ("config_id",))


@pytest.mark.slow  # every planner, every cell: about a minute
def test_the_whole_shipped_recording_replays_exactly(tmp_path: Path) -> None:
    replayed = recording.replay(RECORDING, tmp_path / "replay")
    assert len(replayed) == len(recording.recorded_episodes(RECORDING))
    # its envs read the family files it carries (their path is in the config's identity)
    _check(replayed, ignore=("config_id",) if recording.pinned_families(RECORDING) else ())


@pytest.mark.slow  # replays the fit split and fits it: about 20 s
def test_the_shipped_profile_is_what_calibration_fits_and_each_estimate_is_in_its_interval(
    tmp_path: Path,
) -> None:
    """``profile.yaml`` is reproducible from the run and its cache with the command its
    README gives, and no estimate of any group lies outside its own interval."""
    from planarena.experiments.calibrate.cli import main

    out, report = tmp_path / "profile.yaml", tmp_path / "fit.md"
    with recording.unpacked_cache(RECORDING) as cache:
        argv = [str(RECORDING / "run"), "--cache", str(cache), "--name", "qwen2.5-coder-0.5b",
                "--out", str(out), "--report", str(report)]  # fmt: skip
        assert main(argv) == 0
    body = [line for line in out.read_text().splitlines() if not line.startswith("#")]
    shipped = (RECORDING / "profile.yaml").read_text().splitlines()
    assert body == [line for line in shipped if not line.startswith("#")]
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \| ([-\d.]+) \| \[([-\d.]+), ([-\d.]+)\]",
                      report.read_text(), re.M)  # fmt: skip
    assert len(rows) > 30
    outside = [r for r in rows if not float(r[3]) - 1e-3 <= float(r[2]) <= float(r[4]) + 1e-3]
    assert outside == []
