"""Provenance: run.json names the code that made the records, and other code cannot resume them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from planarena.experiments.records import RUN_FILE, RunDirError, claim_identity
from planarena.experiments.records.provenance import (
    RUN_SCHEMA_VERSION,
    code_version,
    source_digest,
)

ROOT = Path(__file__).resolve().parents[1]
CONFIG = {"planner": {"react": {}}, "env": {"report": {}}, "seed": 0, "n_tasks": 1}


def _code(digest: str) -> dict:
    return {**code_version(), "source_sha256": digest}


def _with_records(out: Path, code: dict) -> None:
    claim_identity(out, CONFIG, resume=True, code=code)
    (out / "episodes.jsonl").write_text('{"planner": "react"}\n')


def test_run_json_carries_schema_and_code_version(tmp_path: Path) -> None:
    claim_identity(tmp_path, CONFIG, resume=True)
    run = json.loads((tmp_path / RUN_FILE).read_text())
    assert run["schema"] == RUN_SCHEMA_VERSION
    code = run["code"]
    assert code["planarena"] and len(code["source_sha256"]) == 64
    assert code["python"].count(".") == 2 and "hydra-core" in code["packages"]
    assert code["git_commit"] is None or len(code["git_commit"]) == 40


def test_other_code_is_refused_naming_both_versions(tmp_path: Path) -> None:
    _with_records(tmp_path, _code("a" * 64))
    with pytest.raises(RunDirError) as refused:
        claim_identity(tmp_path, CONFIG, resume=True, code=_code("b" * 64))
    message = str(refused.value)
    assert "source aaaaaaaa" in message and "source bbbbbbbb" in message
    assert "resume=force" in message
    claim_identity(tmp_path, CONFIG, resume=True, code=_code("a" * 64))  # same code: resumes


def test_force_resumes_and_records_that_it_did(tmp_path: Path) -> None:
    _with_records(tmp_path, _code("a" * 64))
    claim_identity(tmp_path, CONFIG, resume="force", code=_code("b" * 64))
    run = json.loads((tmp_path / RUN_FILE).read_text())
    assert run["code"]["source_sha256"] == "a" * 64  # the records' own code stays named
    assert [c["source_sha256"] for c in run["resumed_under"]] == ["b" * 64]


def test_source_digest_follows_every_source_file(tmp_path: Path) -> None:
    (tmp_path / "planners").mkdir()
    (tmp_path / "planarena").mkdir()
    planner = tmp_path / "planners" / "mine.py"
    planner.write_text("X = 1\n")
    before = source_digest(tmp_path)
    planner.write_text("X = 2\n")
    assert source_digest(tmp_path) != before
    planner.write_text("X = 1\n")
    assert source_digest(tmp_path) == before
    (tmp_path / "planners" / "notes.txt").write_text("not source")
    assert source_digest(tmp_path) == before


@pytest.mark.slow
def test_an_edited_planner_cannot_resume_its_old_records(tmp_path: Path) -> None:
    """The same command into the same dir after a planner file changed: refused, naming both
    code versions (it silently reused the old records)."""
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps",
         "--target", str(site), str(ROOT)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(site)}
    cmd = [
        sys.executable, "-m", "planarena.experiments.run.runner", "planner=react", "env=report",
        "n_tasks=1", "complexity=simple", "progress=false", "figures=false",
        f"hydra.run.dir={tmp_path / 'run'}",
    ]  # fmt: skip
    first = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    react = site / "planarena" / "planners" / "react.py"
    react.write_text(react.read_text() + "\n# edited\n")
    again = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert again.returncode == 2
    (line,) = again.stderr.strip().splitlines()
    assert "holds records made by planarena" in line and line.count("source ") == 2
    forced = subprocess.run([*cmd, "resume=force"], cwd=tmp_path, env=env, capture_output=True)
    assert forced.returncode == 0
