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
from planarena.experiments.records.identity import RUN_FILE, SETTINGS_SINCE
from planarena.experiments.records.recorded_families import (
    DECISION_MAP,
    FAMILIES,
    pinned_families,
    pinned_map,
)

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
    for env, source in family_files(run_dir).items():
        (dest / FAMILIES).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, dest / FAMILIES / f"{env}.yaml")
    chosen_with = auto_map(run_dir)
    if chosen_with is not None:
        shutil.copyfile(chosen_with, dest / DECISION_MAP)
    return _archive(cache, dest / CACHE_ARCHIVE)


def _run_config(run_dir: Path) -> dict[str, object]:
    """The resolved config a run recorded in its run.json (empty when it has none)."""
    try:
        return json.loads((run_dir / RUN_FILE).read_text()).get("config") or {}
    except (OSError, ValueError):
        return {}


def auto_map(run_dir: Path) -> Path | None:
    """The decision map ``auto`` chose with in the run (its ``map_path``, else the shipped
    map), or None when the run had no auto."""
    from planarena.planners.auto import SHIPPED_MAP

    auto = (_run_config(run_dir).get("planner") or {}).get("auto")
    if not isinstance(auto, dict):
        return None
    return Path(auto["map_path"]) if auto.get("map_path") else SHIPPED_MAP


def family_files(run_dir: Path) -> dict[str, Path]:
    """The family file of each env of the run declared in one (env name -> file)."""
    from planarena.envs.family.env import family_file

    config = _run_config(run_dir)
    return {
        env: family_file(spec.get("name") or env, spec.get("path"))
        for env, spec in (config.get("env") or {}).items()
        if isinstance(spec, dict) and str(spec.get("_target_", "")).endswith("FamilyEnv")
    }


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
    composed = recording / RUN / ".hydra" / "config.yaml"
    config = (yaml.safe_load(composed.read_text()) or {}) if composed.is_file() else {}
    for key, before in SETTINGS_SINCE.items():  # the run's own value; before the key, its then
        if not any(o.split("=", 1)[0] == key for o in kept):
            kept.append(f"{key}={config.get(key, before)}")
    return kept


def family_pins(recording: Path, overrides: Sequence[str]) -> list[str]:
    """Overrides that give each env the command selects the tasks it was recorded on: the
    recording's copy of its family file, and an env setting added since at the value the
    recording had (:func:`unset_env_settings`); and auto, when it runs, the map it chose
    with. ``overrides``: the whole command's; its last
    ``env=`` selects."""
    chosen = [o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0] == "env"]
    selected = set(chosen[-1].strip("[]").split(",")) if chosen else set()
    pinned = pinned_families(recording)
    pins = [f"++env.{env}.path={pinned[env]}" for env in sorted(selected & set(pinned))]
    for env, settings in sorted(unset_env_settings(recording).items()):
        if env in selected:
            pins += [f"++env.{env}.{key}={value}" for key, value in settings.items()]
    chosen_with = pinned_map(recording)
    if chosen_with is not None and "auto" in _planners(recording, overrides):
        pins.append(f"++planner.auto.map_path={chosen_with}")
    return pins


def _planners(recording: Path, overrides: Sequence[str]) -> set[str]:
    """The planners a replay runs: the last ``planner=`` of ``overrides``, else the
    recorded run's."""
    chosen = [o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0] == "planner"]
    if chosen:
        return set(chosen[-1].strip("[]").split(","))
    return set(_run_config(recording / RUN).get("planner") or {})


def unset_env_settings(recording: Path) -> dict[str, dict[str, str]]:
    """Per env of the recorded config, each setting the shipped config has added since, as
    the override that restores the value the recording was made at (the class's default).
    Today one: the report family's ``branches`` (length at every complexity)."""
    from planarena.envs.report.env import FIXED_BRANCHES

    config = _run_config(recording / RUN)
    fixed = ",".join(f"{cx}:[{lo},{hi}]" for cx, (lo, hi) in FIXED_BRANCHES.items())
    return {
        env: {"branches": "{" + fixed + "}"}
        for env, spec in (config.get("env") or {}).items()
        if isinstance(spec, dict)
        and str(spec.get("_target_", "")).endswith("ReportEnv")
        and "branches" not in spec
    }


def recorded_episodes(recording: Path) -> list[dict[str, object]]:
    """The recording's records, in file order."""
    text = (recording / RUN / "episodes.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def replay(recording: Path, out: Path, extra: Sequence[str] = ()) -> list[dict[str, object]]:
    """Rerun the recorded command (plus ``extra`` overrides, e.g. a subset of its planners)
    in ``out`` against the unpacked cache, and return the replay's records."""
    with unpacked_cache(recording) as cache:
        overrides = [*recorded_overrides(recording), *extra]
        cmd = [
            sys.executable,
            "-c",
            "from planarena.experiments.run.runner import cli; cli()",
            *overrides,
            *family_pins(recording, overrides),
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
