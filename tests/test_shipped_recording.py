"""The shipped recordings of real models replay offline: no request, the recorded records.

Each folder of ``tests/data/recordings/`` (its README says how it was made) holds a run of
planners against a real model served by llama.cpp, and the replies in its response cache;
``qwen2.5-coder-0.5b`` has every default planner. Replaying one needs no server: every
request must be a cache hit, and the records must be the recording's but for the wall clock
and the cache counters. A change that alters what a planner sends (a prompt, a parser, an
episode's draws) fails here: then the recording must be made again (docs/local-models.md
says how).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from planarena.experiments.run import recording

SHIPPED = Path(__file__).resolve().parent / "data" / "recordings"
RECORDINGS = sorted(p for p in SHIPPED.iterdir() if (p / "run").is_dir())
RECORDING = SHIPPED / "qwen2.5-coder-0.5b"  # the one with auto and the map it ran with


@pytest.fixture(params=RECORDINGS, ids=lambda p: p.name)
def shipped(request: pytest.FixtureRequest) -> Path:
    return request.param


def _check(
    replayed: list[dict[str, object]], ignore: tuple[str, ...] = (), folder: Path = RECORDING
) -> None:
    assert replayed and all(r["llm_requests"] == 0 for r in replayed)
    assert all(r["cache_hits"] == r["llm_calls"] for r in replayed)
    assert all(r["failure_mode"] != "infrastructure_error" for r in replayed)
    recorded = recording.recorded_episodes(folder)
    assert recording.differences(recorded, replayed, ignore) == []


def test_a_subset_of_the_shipped_recording_replays_exactly(shipped: Path, tmp_path: Path) -> None:
    """Three planners of different kinds on one family: a ReAct transcript, a plan with its
    replans, a tree search (the k-th identical request is the k-th cached reply)."""
    planners = {"react", "plan_execute_replan", "tot"}
    subset = [f"planner=[{','.join(sorted(planners))}]", "env=report"]
    replayed = recording.replay(shipped, tmp_path / "replay", subset)
    expected = [
        r
        for r in recording.recorded_episodes(shipped)
        if r["planner"] in planners and r["env"] == "report"
    ]
    assert len(replayed) == len(expected) > 0
    _check(replayed, ignore=("config_id",), folder=shipped)


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
def test_the_whole_shipped_recording_replays_exactly(shipped: Path, tmp_path: Path) -> None:
    replayed = recording.replay(shipped, tmp_path / "replay")
    assert len(replayed) == len(recording.recorded_episodes(shipped))
    # its envs read the family files it carries (their path is in the config's identity)
    pinned = recording.pinned_families(shipped)
    _check(replayed, ignore=("config_id",) if pinned else (), folder=shipped)


@pytest.mark.slow  # replays the fit split and fits it: about 20 s
def test_the_shipped_profile_is_what_calibration_fits_and_each_estimate_is_in_its_interval(
    shipped: Path, tmp_path: Path
) -> None:
    """``profile.yaml`` is reproducible from the run and its cache with the command its
    README gives, and no estimate of any group lies outside its own interval."""
    from planarena.experiments.calibrate.cli import main

    out, report = tmp_path / "profile.yaml", tmp_path / "fit.md"
    with recording.unpacked_cache(shipped) as cache:
        argv = [str(shipped / "run"), "--cache", str(cache), "--name", shipped.name,
                "--out", str(out), "--report", str(report)]  # fmt: skip
        assert main(argv) == 0
    body = [line for line in out.read_text().splitlines() if not line.startswith("#")]
    fitted = (shipped / "profile.yaml").read_text().splitlines()
    assert body == [line for line in fitted if not line.startswith("#")]
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \| ([-\d.]+) \| \[([-\d.]+), ([-\d.]+)\]",
                      report.read_text(), re.M)  # fmt: skip
    assert len(rows) > 30
    outside = [r for r in rows if not float(r[3]) - 1e-3 <= float(r[2]) <= float(r[4]) + 1e-3]
    assert outside == []
    # a flat likelihood bounds nothing: such a row shows no interval (the 1.5B dry run's
    # w_hallucinate_plan sat at 0.676 beside every resample's 0)
    lines = report.read_text().splitlines()
    flat = [line for line in lines if line.startswith("| `") and "does not move" in line]
    assert all(line.split(" | ")[3] == "-" for line in flat), flat


def test_the_readme_completion_table_is_the_records() -> None:
    """The 1.5B recording's README states completion per planner and cell: each row must be
    what ``run/episodes.jsonl`` holds (a re-recording that changes them fails here until the
    README says so)."""
    import json

    folder = SHIPPED / "qwen2.5-coder-1.5b"
    records = [json.loads(line) for line in (folder / "run" / "episodes.jsonl").open()]
    cells = [("file", "simple"), ("report", "simple"), ("file", "medium"), ("report", "medium")]
    row = re.compile(r"^\| (\w+) \| (\d+) of (\d+) \| [^|]+\|((?: \d+ \|){4})$", re.M)
    rows = row.findall((folder / "README.md").read_text(encoding="utf-8"))
    assert {r[0] for r in rows} == {r["planner"] for r in records}
    for planner, done, total, by_cell in rows:
        mine = [r for r in records if r["planner"] == planner]
        assert (int(done), int(total)) == (sum(r["success"] for r in mine), len(mine)), planner
        stated = [int(x) for x in by_cell.replace("|", " ").split()]
        counted = [
            sum(r["success"] for r in mine if (r["env"], r["complexity"]) == c) for c in cells
        ]
        assert stated == counted, planner


def test_the_readme_failure_modes_and_plan_reading_are_measured() -> None:
    """The 1.5B README's failure modes per planner are the records', and its count of the
    conditions revision 3 reads is what ``plan_reading`` measures on the traces."""
    import json
    from collections import Counter

    from planarena.experiments.calibrate import plan_reading

    folder = SHIPPED / "qwen2.5-coder-1.5b"
    readme = (folder / "README.md").read_text(encoding="utf-8")
    records = [json.loads(line) for line in (folder / "run" / "episodes.jsonl").open()]
    for planner in {r["planner"] for r in records}:
        modes = Counter(r["failure_mode"] for r in records if r["planner"] == planner)
        modes.pop("none", None)
        stated = re.search(rf"^\| {planner} \| ([a-z_]+ \d+(?:, [a-z_]+ \d+)*) \|$", readme, re.M)
        assert stated is not None, planner
        pairs = [item.rsplit(" ", 1) for item in stated.group(1).split(", ")]
        assert {mode: int(n) for mode, n in pairs} == dict(modes), planner
    line = plan_reading.condition_readings(list(plan_reading.replies(folder)))
    conditions, replies = re.search(r"\): (\d+) in (\d+) accepted", line).groups()  # type: ignore[union-attr]
    assert f"Revision 3 also reads {conditions} conditions in {replies} accepted replies" in (
        " ".join(readme.split())
    )
