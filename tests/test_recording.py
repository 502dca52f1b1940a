"""A real-model run packed as a recording replays offline: no request, the same records.

The recording here is made against the loopback fake server (``fake_server.py``); the shipped
recording of a real model is replayed by ``test_shipped_recording.py``.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_server import FakeOpenAI, serve
from planarena.experiments.run import local_model, recording
from planarena.planners.llm.base import EndpointError, Request
from planarena.planners.llm.openai_backend import OpenAIBackend
from planarena.planners.llm.profiles import ModelProfile

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    yield from serve()


def record(run_dir: Path, cache: Path, url: str) -> None:
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update(NO_PROXY="127.0.0.1,localhost")
    cmd = [
        sys.executable,
        "-m",
        "planarena.experiments.run.runner",
        "llm=openai",
        f"llm.base_url={url}",
        "llm.model=fake",
        "planner=[react,plan_execute]",
        "env=report",
        "complexity=simple",
        "n_tasks=2",
        "progress=false",
        "figures=false",
        f"hydra.run.dir={run_dir}",
        f"llm.cache_dir={cache}",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]


def test_a_packed_recording_replays_offline_with_no_request_and_the_same_records(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    record(tmp_path / "run", tmp_path / "cache", server.url)
    asked = server.requests
    assert asked > 0
    n = recording.pack(tmp_path / "run", tmp_path / "cache", tmp_path / "rec")
    assert n == len(list((tmp_path / "cache").rglob("*.json")))
    assert not (tmp_path / "rec" / "decision_map.json").exists()  # no auto, no map
    server.shutdown()  # nothing to answer a request: a replay must not need one
    replayed = recording.replay(tmp_path / "rec", tmp_path / "again")
    assert server.requests == asked
    assert len(replayed) == 4 and all(r["llm_requests"] == 0 for r in replayed)
    assert all(r["cache_hits"] == r["llm_calls"] > 0 for r in replayed)
    recorded = recording.recorded_episodes(tmp_path / "rec")
    assert recording.differences(recorded, replayed) == []
    # a subset of the recording (one planner) replays the same episodes
    subset = recording.replay(tmp_path / "rec", tmp_path / "subset", ["planner=[plan_execute]"])
    assert [r["planner"] for r in subset] == ["plan_execute"] * 2
    assert recording.differences(recorded, subset, ignore=("config_id",)) == []


def test_the_map_auto_ran_with_is_the_one_packed(tmp_path: Path) -> None:
    """A run with auto names the map it chose from: its ``map_path``, else the shipped one."""
    import json

    from planarena.planners.auto import SHIPPED_MAP

    run = tmp_path / "run"
    run.mkdir()
    for planner, want in (
        ({"react": {}}, None),
        ({"auto": {"map_path": None}}, SHIPPED_MAP),
        (
            {"auto": {"map_path": "/elsewhere/decision_map.json"}},
            Path("/elsewhere/decision_map.json"),
        ),
    ):
        (run / "run.json").write_text(json.dumps({"config": {"planner": planner}}))
        assert recording.auto_map(run) == want


def test_a_changed_record_is_reported_as_a_difference() -> None:
    row = {"planner": "react", "env": "e", "complexity": "simple", "task_id": "t", "trial": 0}
    recorded = [{**row, "success": True, "wall_s": 1.0}]
    assert recording.differences(recorded, [{**row, "success": True, "wall_s": 9.0}]) == []
    (line,) = recording.differences(recorded, [{**row, "success": False, "wall_s": 1.0}])
    assert "success" in line
    (line,) = recording.differences(recorded, [{**row, "task_id": "u", "success": True}])
    assert "not in the recording" in line


def test_offline_backend_sends_nothing_and_a_missing_reply_is_the_endpoints_error(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    backend = OpenAIBackend("fake", base_url=server.url, cache_dir=str(tmp_path), offline=True)
    request = Request(Request.digest_of([{"role": "user", "content": "hi"}]))
    with pytest.raises(EndpointError, match="NotInCache"):
        asyncio.run(
            backend.generate(
                [{"role": "user", "content": "hi"}],
                role="executor",
                model=ModelProfile(name="m"),
                request=request,
            )
        )
    assert server.requests == 0


def test_packing_the_same_cache_twice_gives_the_same_bytes(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    for key, text in (("ab12", "x"), ("cd34", "y")):
        (cache / key[:2]).mkdir(parents=True)
        (cache / key[:2] / f"{key}.json").write_text(f'{{"text": "{text}"}}')
    recording._archive(cache, tmp_path / "a.tar.xz")  # noqa: SLF001
    os.utime(cache / "ab" / "ab12.json", (1, 1))  # a later mtime changes nothing
    recording._archive(cache, tmp_path / "b.tar.xz")  # noqa: SLF001
    assert (tmp_path / "a.tar.xz").read_bytes() == (tmp_path / "b.tar.xz").read_bytes()


def test_a_dir_that_is_no_recording_is_one_line_and_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert local_model.main(["replay", str(tmp_path), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a recording" in err[0]
    assert not (tmp_path / "out").exists()
    assert local_model.main(["pack", str(tmp_path), str(tmp_path), str(tmp_path / "d")]) == 2
    assert "not a finished run dir" in capsys.readouterr().err


def test_an_option_accepts_the_keys_it_extends_and_still_refuses_unknown_ones() -> None:
    """``llm=local`` extends ``llm=openai`` through its defaults list: ``llm.offline`` and
    ``llm.stop`` (openai's keys) are accepted with it; a key neither has is refused."""
    from planarena.experiments.run.overrides import unknown_key_override

    assert unknown_key_override(["llm=local", "llm.offline=true", "llm.stop=false"]) is None
    refused = unknown_key_override(["llm=local", "llm.offlin=true"])
    assert refused is not None and "did you mean offline" in refused
