"""A run dir's identity: which configuration made its records, and which job may write there.

``run.json`` holds the fingerprint of the configuration that made the records and the code
version that ran it (:mod:`.provenance`); a job that resumes into a dir made by another
configuration or other code is refused, one that starts over moves the
old outputs aside (nothing is overwritten). A lock file is held by the one job writing there.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from planarena.experiments.records.provenance import (
    RUN_SCHEMA_VERSION,
    code_version,
    plugin_changes,
    same_code,
)
from planarena.experiments.records.provenance import describe as describe_code
from planarena.experiments.records.schema import EPISODES, TRACES

RUN_FILE = "run.json"
LOCK_FILE = ".planarena.lock"
STATUS_FILE = "status.json"

OUTPUT_ONLY_KEYS = (
    "progress",
    "concurrency",
    "workers",
    "resume",
    "write_traces",
    "figures",
    "fail_fast",
    "hydra",
    "llm.max_concurrency",
    "llm.requests_per_minute",  # when requests are sent, never what they are
    "llm.tokens_per_minute",
    "llm.cache_dir",
    "llm.offline",  # a replay's records are the recording's, or infrastructure errors
    "dry_run",
    "budget.max_cost_usd",  # the only records it changes (cut by the cap) run again on resume
    "sequential",  # which of the full run's episodes run, never what they are
    "recovery",  # applied before the identity is taken: the planners', budget's and models'
    "equal_recovery_calls",  # values it sets are in the identity themselves
)
"""Config keys that change how a job runs or what it prints, never what its episodes are."""

LEGACY_GRADING = "exact"
"""The grading policy of every run made before ``grading`` was a key."""

LEGACY_PLAN_REVISION = 1
"""The plan prompt and reader of every run made before ``plan_revision`` was a key."""

SETTINGS_SINCE: dict[str, object] = {
    "grading": LEGACY_GRADING,
    "plan_revision": LEGACY_PLAN_REVISION,
    "recovery": "article",
    "equal_recovery_calls": 40,
}
"""Keys added since the first recordings that make episodes what they are, with the value
every run made before the key had: a replay and ``sim_vs_real`` take a recorded run's own
value of each (or this one), never the current default."""


FAMILY_DIGEST = "declaration_sha256"
"""The key, beside ``env.<name>.path`` in the run's identity (``run.json``), holding the hash
of the family file's declaration as loaded."""


class RunDirError(RuntimeError):
    """A run dir this job may not write into (locked, or made by another configuration)."""


def _drop(tree: dict[str, Any], dotted: str) -> None:
    head, _, rest = dotted.partition(".")
    if head not in tree:
        return
    if not rest:
        del tree[head]
    elif isinstance(tree[head], dict):
        _drop(tree[head], rest)


def identity(config: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a resolved config that determines episodes (output-only keys removed)."""
    tree = json.loads(json.dumps(dict(config), default=str))
    for key in OUTPUT_ONLY_KEYS:
        _drop(tree, key)
    llm = tree.get("llm")
    overrides = llm.get("skill_overrides") if isinstance(llm, dict) else None
    if isinstance(overrides, dict):  # null is the profile's own value: the same episodes
        # whether the key is listed or not, so a skill field added to the simulator (listed
        # as null) leaves every run's identity as it was
        llm["skill_overrides"] = {k: v for k, v in overrides.items() if v is not None}
    return tree


def fingerprint(config: Mapping[str, Any]) -> str:
    """A short stable hash of :func:`identity` (the ``config_id`` of records)."""
    tree = identity(config)
    if tree.get("grading") == LEGACY_GRADING:  # every run before the key graded so: their
        del tree["grading"]  # config_id (and a shipped recording's) stays what it was
    if tree.get("plan_revision") == LEGACY_PLAN_REVISION:  # likewise
        del tree["plan_revision"]
    canonical = json.dumps(tree, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def differences(old: Any, new: Any, prefix: str = "") -> dict[str, tuple[Any, Any]]:
    """Dotted key -> (old, new) for every value that differs between two identity trees (a
    subtree present on one side only is one entry)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: dict[str, tuple[Any, Any]] = {}
        for k in sorted(old.keys() | new.keys()):
            out.update(differences(old.get(k, "<unset>"), new.get(k, "<unset>"), f"{prefix}{k}."))
        return out
    return {} if old == new else {prefix[:-1]: (old, new)}


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str) if value != "<unset>" else "unset"
    return text if len(text) <= 40 else text[:37] + "..."


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def write_json_atomic(path: Path, payload: Any) -> None:
    _write_atomic(path, json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n")


RUN_OUTPUTS = (EPISODES, TRACES, RUN_FILE, STATUS_FILE, "episodes.parquet", "figures")
"""What a job writes into its run dir under these names (``.hydra/`` is rewritten, Hydra's
job log kept) ..."""
RUN_OUTPUT_PATTERNS = (
    "summary.*",
    "comparisons.csv",
    "seed_table*",
    "sensitivity*",
    "budget_curves*",
    "scenarios*",
)
"""... and under these patterns (the tables, a named experiment's reports)."""


def set_aside(out_dir: Path) -> str | None:
    """Move a run's outputs out of the way (``resume=false``) as ``<name>.replaced``, or, if
    an earlier start-over already used that, ``<name>.replaced.2``, ``.3``, ... (one suffix
    for the whole set): no earlier run's records are ever overwritten, and no table or
    Parquet file of the old run stays beside the new records. Returns the suffix used."""
    found = [out_dir / name for name in RUN_OUTPUTS if (out_dir / name).exists()]
    for pattern in RUN_OUTPUT_PATTERNS:
        found += [p for p in sorted(out_dir.glob(pattern)) if ".replaced" not in p.name]
    if not found:
        return None
    taken = {p.name for p in out_dir.iterdir()}
    n = 1
    while True:
        suffix = ".replaced" if n == 1 else f".replaced.{n}"
        if not any(p.name + suffix in taken for p in found):
            break
        n += 1
    for path in found:
        os.replace(path, path.with_name(path.name + suffix))
    return suffix


def _code_difference(old: dict[str, Any] | None, new: dict[str, Any]) -> str:
    """What differs between the code that made a dir's records and this code, as the end
    of "holds records made by ...": planarena's own sources, or the plug-ins that changed."""
    if old and old.get("source_sha256") == new.get("source_sha256"):
        return f"other plug-in code ({'; '.join(plugin_changes(old, new))})"
    return f"{describe_code(old)}, not by this {describe_code(new)}"


def claim_identity(
    out_dir: Path,
    config: Mapping[str, Any],
    *,
    resume: bool | str,
    code: dict[str, Any] | None = None,
) -> str:
    """Bind ``out_dir`` to this configuration and code; returns its ``config_id``.

    With ``resume`` a dir made by another configuration, or by other code (another source
    digest: an edited planner would reuse its old records), is refused, naming the differing
    keys or both code versions; ``resume="force"`` accepts other code and records that it did
    (``resumed_under`` in ``run.json``). Without ``resume`` the old run's records and tables
    are moved aside (:func:`set_aside`: ``*.replaced``, then ``*.replaced.2``, ...) and the
    run starts over.
    """
    code = code_version() if code is None else code
    ident = identity(config)
    config_id = fingerprint(config)
    run_file = out_dir / RUN_FILE
    has_records = (out_dir / EPISODES).exists() and (out_dir / EPISODES).stat().st_size > 0
    run = {"schema": RUN_SCHEMA_VERSION, "config_id": config_id, "config": ident, "code": code}
    if resume and run_file.exists() and has_records:  # nothing recorded: nothing to protect
        old = json.loads(run_file.read_text())
        if old.get("config_id") != config_id:
            diff = differences(old.get("config", {}), ident)
            shown = ", ".join(
                f"{k} ({_short(a)} -> {_short(b)})" for k, (a, b) in list(diff.items())[:6]
            ) + (f" and {len(diff) - 6} more" if len(diff) > 6 else "")
            raise RunDirError(
                f"{out_dir} holds records of another configuration (differs in: {shown}); "
                "use a new hydra.run.dir, or resume=false to start over in this dir "
                "(the old records are kept as *.replaced)"
            )
        if not same_code(old.get("code"), code):
            if resume != "force":
                raise RunDirError(
                    f"{out_dir} holds records made by {_code_difference(old.get('code'), code)}; "
                    "use a new hydra.run.dir, resume=force to resume anyway (run.json records "
                    "it), or resume=false to start over"
                )
            run = {**old, "resumed_under": [*old.get("resumed_under", []), code]}
            write_json_atomic(run_file, run)
    elif resume and has_records:
        raise RunDirError(
            f"{out_dir} holds records without a {RUN_FILE} fingerprint (an older planarena?); "
            "use a new hydra.run.dir, or resume=false to start over in this dir "
            "(the old records are kept as *.replaced)"
        )
    if not resume:
        set_aside(out_dir)
    if not resume or not has_records or not run_file.exists():
        write_json_atomic(run_file, run)
    return config_id


# --------------------------------------------------------------------------- locking


class RunLock:
    """An exclusive ``fcntl.flock`` on the run dir, held until :meth:`release` (or exit)."""

    def __init__(self, out_dir: Path) -> None:
        import fcntl

        self.path = out_dir / LOCK_FILE
        self.fh: IO[str] | None = self.path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(self.fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.fh.seek(0)
            holder = self.fh.read().strip() or "another process"
            self.fh.close()
            self.fh = None
            raise RunDirError(
                f"{out_dir} is in use by another planarena job ({holder}); wait for it to end "
                "or choose another hydra.run.dir"
            ) from None
        self.fh.seek(0)
        self.fh.truncate()
        self.fh.write(f"pid {os.getpid()}\n")
        self.fh.flush()

    def release(self) -> None:
        if self.fh is not None:
            self.fh.close()  # closing the descriptor drops the lock
            self.fh = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
