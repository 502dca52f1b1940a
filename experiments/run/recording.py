"""A recorded real-model run, shipped in the repository and replayed offline.

A run against a real model (``llm=local``, ``llm=openai``) keeps every reply in its response
cache (``llm.cache_dir``), keyed by the request and the episode, never by the planner. A
*recording* is that run's directory (its saved config, ``episodes.jsonl``, ``run.json``, the
traces compressed) beside its cache packed as one reproducible ``llm_cache.tar.xz``: enough
for any machine to rerun the same command with no server and get the same records, since
every request is a cache hit. ``pack`` makes one; ``replay`` reruns one and says whether a
request was sent and which records differ.
"""

from __future__ import annotations

import io
import json
import lzma
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import yaml
from planarena.experiments.records.identity import LEGACY_GRADING, RUN_FILE

RUN = "run"
CACHE_ARCHIVE = "llm_cache.tar.xz"
TRACES = "traces.jsonl.xz"
RUN_FILES = ("episodes.jsonl", "run.json")
HYDRA_FILES = ("config.yaml", "overrides.yaml")
# what a replay may change: the wall clock, and whether a reply came from the server
VOLATILE = ("wall_s", "llm_requests", "cache_hits", "llm_queue_s")
# overrides a replay sets itself (where the run and the cache are, how it reports progress)
_OWN = ("hydra.run.dir", "llm.cache_dir", "llm.offline", "progress", "figures", "resume")


class RecordingError(Exception):
    """A recording that cannot be packed or replayed: one line, exit status 2."""


def _archive(cache: Path, out: Path) -> int:
    """The cache's JSON entries in a tar.xz whose bytes depend on their content only
    (sorted names, no times or owners), so packing the same cache twice gives the same file."""
    entries = sorted(p for p in cache.rglob("*.json") if p.is_file())
    if not entries:
        raise RecordingError(f"{cache}: no response cache entries (*.json)")
    with lzma.open(out, "wb", preset=9) as xz, tarfile.open(fileobj=xz, mode="w") as tar:
        for path in entries:
            data = path.read_bytes()
            info = tarfile.TarInfo(path.relative_to(cache).as_posix())
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    return len(entries)


def pack(run_dir: Path, cache: Path, dest: Path) -> int:
    """Copy ``run_dir``'s config, records and traces (compressed) to ``dest/run`` and its
    response cache to ``dest/llm_cache.tar.xz``; returns the number of cache entries."""
    hydra = run_dir / ".hydra"
    missing = [f for f in RUN_FILES if not (run_dir / f).is_file()]
    missing += [f".hydra/{f}" for f in HYDRA_FILES if not (hydra / f).is_file()]
    if missing:
        raise RecordingError(f"{run_dir}: not a finished run dir (missing {', '.join(missing)})")
    out = dest / RUN
    (out / ".hydra").mkdir(parents=True, exist_ok=True)
    for name in RUN_FILES:
        shutil.copyfile(run_dir / name, out / name)
    for name in HYDRA_FILES:
        shutil.copyfile(hydra / name, out / ".hydra" / name)
    traces = run_dir / "traces.jsonl"
    if traces.is_file():
        with lzma.open(out / TRACES, "wb", preset=9) as xz:
            xz.write(traces.read_bytes())
    return _archive(cache, dest / CACHE_ARCHIVE)


@contextmanager
def unpacked_cache(recording: Path) -> Iterator[Path]:
    """The recording's response cache unpacked into a temporary dir (removed afterwards)."""
    archive = recording / CACHE_ARCHIVE
    if not archive.is_file():
        raise RecordingError(f"{recording}: no {CACHE_ARCHIVE} (not a recording made by pack)")
    with tempfile.TemporaryDirectory(prefix="planarena-cache-") as tmp:
        with tarfile.open(archive, mode="r:xz") as tar:
            tar.extractall(tmp, filter="data")  # plain files only, inside tmp
        yield Path(tmp)


def recorded_overrides(recording: Path) -> list[str]:
    """The command-line overrides the recorded run was made with, less those a replay sets."""
    path = recording / RUN / ".hydra" / "overrides.yaml"
    if not path.is_file():
        raise RecordingError(f"{recording}: no {RUN}/.hydra/overrides.yaml")
    overrides = yaml.safe_load(path.read_text()) or []
    kept = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") not in _OWN]
    if not any(o.split("=", 1)[0] == "grading" for o in kept) and not _graded_by_key(recording):
        kept.append(f"grading={LEGACY_GRADING}")  # made before the key: graded exactly
    return kept


def _graded_by_key(recording: Path) -> bool:
    """Whether the recorded run's configuration has ``grading`` (runs before it did not)."""
    try:
        run = json.loads((recording / RUN / RUN_FILE).read_text())
    except (OSError, ValueError):
        return False
    return "grading" in (run.get("config") or {})


def recorded_episodes(recording: Path) -> list[dict[str, object]]:
    """The recording's records, in file order."""
    text = (recording / RUN / "episodes.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def replay(recording: Path, out: Path, extra: Sequence[str] = ()) -> list[dict[str, object]]:
    """Rerun the recorded command (plus ``extra`` overrides, e.g. a subset of its planners)
    in ``out`` against the unpacked cache, and return the replay's records."""
    with unpacked_cache(recording) as cache:
        cmd = [
            sys.executable,
            "-c",
            "from planarena.experiments.run.runner import cli; cli()",
            *recorded_overrides(recording),
            *extra,
            f"llm.cache_dir={cache}",
            "llm.offline=true",
            f"hydra.run.dir={out}",
            "progress=false",
            "figures=false",
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise RecordingError(f"replay exited with status {done.returncode}: {tail}")
    text = (out / "episodes.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def differences(
    recorded: Sequence[dict[str, object]],
    replayed: Sequence[dict[str, object]],
    ignore: Sequence[str] = (),
) -> list[str]:
    """Where the replay's records differ from the recording's, the volatile keys and
    ``ignore`` aside (``config_id`` for a replay of a subset, whose config differs): one line
    per episode that differs or is missing (matched by planner, env, task, trial)."""
    skip = {*VOLATILE, *ignore}

    def key(r: dict[str, object]) -> tuple[object, ...]:
        return (r["planner"], r["env"], r["complexity"], r["task_id"], r["trial"])

    def stable(r: dict[str, object]) -> dict[str, object]:
        return {k: v for k, v in r.items() if k not in skip}

    by_key = {key(r): r for r in recorded}
    lines = []
    for r in replayed:
        k = key(r)
        if k not in by_key:
            lines.append(f"{k}: not in the recording")
        elif (a := stable(by_key[k])) != (b := stable(r)):
            keys = sorted(x for x in a.keys() | b.keys() if a.get(x) != b.get(x))
            lines.append(f"{k}: differs in {', '.join(keys)}")
    return lines
