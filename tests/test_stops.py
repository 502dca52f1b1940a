"""Stops that say what to do: a refused run leaves nothing, a resumed run says what it reuses,
and an interrupted one prints the exact command that resumes it."""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
SMALL = ["planner=react", "env=report", "complexity=simple", "progress=false", "figures=false"]


def _planarena(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "planarena"), *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("bad", ["complexity=hard", "n_tasks=-1"])
def test_a_refused_run_leaves_nothing_behind(tmp_path: Path, bad: str) -> None:
    done = _planarena([*SMALL, bad], tmp_path)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert list(tmp_path.iterdir()) == []  # no results/runs/<date>/<time> with an empty log


def test_a_resumed_run_says_how_many_episodes_it_reuses(tmp_path: Path) -> None:
    out = f"hydra.run.dir={tmp_path / 'run'}"
    first = _planarena([*SMALL, "n_tasks=2", out], tmp_path)
    assert first.returncode == 0, first.stderr
    assert "already recorded" not in first.stderr
    again = _planarena([*SMALL, "n_tasks=2", out], tmp_path)
    assert "2 episode(s) already recorded" in again.stderr and "0 to run" in again.stderr


def _wait_for_a_record(tmp_path: Path, proc: subprocess.Popen[str]) -> None:
    """Until the job has written its first episode (or ended, which the caller's asserts
    then report)."""
    while proc.poll() is None:
        found = list(tmp_path.glob("results/runs/*/*/episodes.jsonl"))
        if found and found[0].read_bytes().count(b"\n"):
            return
        time.sleep(0.05)


@pytest.mark.slow
def test_ctrl_c_prints_the_command_that_resumes_this_run(tmp_path: Path) -> None:
    """In the default (timestamped) run dir: rerunning the same command would make a new dir
    and run everything again; the printed command names this dir, and resumes it."""
    args = [*SMALL, "n_tasks=4000", "workers=1"]
    proc = subprocess.Popen(
        [str(BIN / "planarena"), *args], cwd=tmp_path, stderr=subprocess.PIPE, text=True
    )
    _wait_for_a_record(tmp_path, proc)  # the job's state, not a time: loaded cores vary
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    (line,) = [x for x in err.splitlines() if "to resume:" in x]
    command = shlex.split(line.split("to resume: ", 1)[1])
    (run_dir,) = tmp_path.glob("results/runs/*/*")
    assert command == ["planarena", *args, f"hydra.run.dir={run_dir.resolve()}"]
    saved = (run_dir / "episodes.jsonl").read_bytes().count(b"\n")
    assert 0 < saved < 4000  # Ctrl-C stopped the job, not the job's end
    resumed = subprocess.run(
        [str(BIN / "planarena"), *command[1:-1], "n_tasks=4000", command[-1]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert f"{saved} episode(s) already recorded" in resumed.stderr
    assert len(list(tmp_path.glob("results/runs/*/*"))) == 1  # no orphan dir
