"""Which code made a run's records: version, git commit, a digest of the sources, packages.

A record is only as good as the code that made it: ``run.json`` carries this, and a resume
under different code is refused (a fingerprint of the configuration alone let an edited
planner reuse its old records silently).
"""

from __future__ import annotations

import hashlib
import platform
import subprocess
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

RUN_SCHEMA_VERSION = 2
"""``run.json``'s layout: 1 had the configuration alone; 2 adds ``schema``, ``code`` and
``resumed_under``."""

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
"""The folder holding ``envs/``, ``planners/`` ... (the repository, or ``site-packages/planarena``
when installed)."""

SOURCE_FOLDERS = ("planarena", "search", "envs", "planners", "experiments", "configs")
SOURCE_SUFFIXES = (".py", ".yaml", ".j2", ".jsonl")
KEY_PACKAGES = (
    "hydra-core",
    "omegaconf",
    "pydantic",
    "numpy",
    "pandas",
    "pyarrow",
    "networkx",
    "tiktoken",
    "json-repair",
    "simpleeval",
    "bm25s",
    "openai",
)


def _source_files(root: Path) -> list[Path]:
    folders = [root / f for f in SOURCE_FOLDERS if (root / f).is_dir()]
    if root.name == "planarena" and not (root / "planarena").is_dir():
        folders = [root]  # installed: the package's own folder holds everything
    return sorted(
        p
        for folder in folders
        for p in folder.rglob("*")
        if p.suffix in SOURCE_SUFFIXES and p.is_file() and "__pycache__" not in p.parts
    )


def source_digest(root: Path = PACKAGE_ROOT) -> str:
    """SHA-256 over the package's source files (relative path and bytes, in path order)."""
    digest = hashlib.sha256()
    for path in _source_files(root):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_state(root: Path = PACKAGE_ROOT) -> tuple[str | None, bool | None]:
    """The checkout's commit and whether its sources differ from it (None outside git)."""
    if not (root / ".git").exists():
        return None, None
    commit = _git(root, "rev-parse", "HEAD")
    status = _git(root, "status", "--porcelain", "--", *SOURCE_FOLDERS)
    return commit, (None if status is None else bool(status))


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


@cache
def code_version() -> dict[str, Any]:
    """This process's code: planarena's version, git commit and dirty flag (in a checkout),
    the source digest, Python's and the key packages' versions."""
    commit, dirty = git_state()
    return {
        "planarena": _version("planarena"),
        "git_commit": commit,
        "git_dirty": dirty,
        "source_sha256": source_digest(),
        "python": platform.python_version(),
        "packages": {name: _version(name) for name in KEY_PACKAGES},
    }


def describe(code: dict[str, Any] | None) -> str:
    """One phrase naming a code version: ``planarena 0.2.0 (commit 1a2b3c4, dirty; source
    5d6e7f8a)``."""
    if not code:
        return "an unrecorded code version (a run.json without one)"
    parts = []
    if code.get("git_commit"):
        dirty = ", dirty" if code.get("git_dirty") else ""
        parts.append(f"commit {str(code['git_commit'])[:7]}{dirty}")
    parts.append(f"source {str(code.get('source_sha256', ''))[:8]}")
    return f"planarena {code.get('planarena')} ({'; '.join(parts)})"


def same_code(old: dict[str, Any] | None, new: dict[str, Any]) -> bool:
    """Whether records made by ``old`` code may be resumed by ``new`` code: the same sources."""
    return bool(old) and old.get("source_sha256") == new.get("source_sha256")
