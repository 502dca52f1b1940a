"""Which code made a run's records: version, git commit, a digest of the sources, packages.

A record is only as good as the code that made it: ``run.json`` carries this, and a resume
under different code is refused (a fingerprint of the configuration alone let an edited
planner reuse its old records silently).
"""

from __future__ import annotations

import hashlib
import platform
import subprocess
import sys
from collections.abc import Iterable
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


PLUGIN_SUFFIXES = (*SOURCE_SUFFIXES, ".json", ".j2", ".txt")


def _package_digest(folder: Path) -> str:
    """SHA-256 over a package folder's source files (relative path and bytes, in path order)."""
    digest = hashlib.sha256()
    files = sorted(
        p
        for p in folder.rglob("*")
        if p.suffix in PLUGIN_SUFFIXES and p.is_file() and "__pycache__" not in p.parts
    )
    for path in files:
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def _source_of(package: str) -> tuple[Path | None, str]:
    """(the folder, or single file, of an imported top-level package; how to hash it)."""
    module = sys.modules.get(package)
    file = getattr(module, "__file__", None)
    if file is None:  # a namespace package: its first folder
        paths = list(getattr(module, "__path__", []) or [])
        return (Path(paths[0]) if paths else None), "folder"
    path = Path(file)
    return (path.parent, "folder") if path.name == "__init__.py" else (path, "file")


def plugin_sources(objects: Iterable[object]) -> list[dict[str, Any]]:
    """The code outside planarena that ``objects`` (a run's planners, envs, ...) come from:
    one entry per top-level package, with its distribution's name and version (None for
    code not installed as a distribution) and a digest of the package's installed sources.

    ``run.json`` carries it, so a resume under an edited plug-in is refused as one under
    edited planarena code is (the config alone names a plug-in's class, not its code)."""
    packages = sorted(
        {
            type(obj).__module__.split(".")[0]
            for obj in objects
            if type(obj).__module__.split(".")[0] not in {"planarena", "builtins"}
        }
    )
    if not packages:  # planarena's own code only: no scan of every installed distribution
        return []
    owners = metadata.packages_distributions()  # about 0.2 s of CPU: every distribution's files
    out = []
    for package in packages:
        dist = (owners.get(package) or [None])[0]
        where, kind = _source_of(package)
        if where is None:
            digest = None
        elif kind == "folder":
            digest = _package_digest(where)
        else:
            digest = hashlib.sha256(where.read_bytes()).hexdigest()
        out.append(
            {
                "package": package,
                "distribution": dist,
                "version": _version(dist) if dist else None,
                "source_sha256": digest,
            }
        )
    return out


DETERMINISTIC = "a rerun will not help"
"""The words an error's detail carries when rerunning it would fail the same way."""


def code_source(obj: object) -> str:
    """Whose code ``obj`` is, for an error message: ``plug-in my-pkg 0.1 (my_pkg)``, or
    ``planarena`` for its own."""
    package = type(obj).__module__.split(".")[0]
    if package == "planarena":
        return "planarena"
    dist = (metadata.packages_distributions().get(package) or [None])[0]
    version = _version(dist) if dist else None
    label = f"{dist} {version}" if dist and version else (dist or package)
    return f"plug-in {label} ({package})" if dist else f"plug-in {package}"


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


def _plugin_label(entry: dict[str, Any]) -> str:
    name = entry.get("distribution") or entry.get("package")
    version = f" {entry['version']}" if entry.get("version") else ""
    return f"{name}{version}"


def plugin_changes(old: dict[str, Any] | None, new: dict[str, Any]) -> list[str]:
    """One phrase per plug-in package whose code differs between two code versions:
    ``plug-in my_planners 0.1.0: source 1a2b3c4d -> 5e6f7a8b`` (or added, removed)."""
    before = {e["package"]: e for e in (old or {}).get("plugins", [])}
    after = {e["package"]: e for e in new.get("plugins", [])}
    changes = []
    for package in sorted(before.keys() | after.keys()):
        a, b = before.get(package), after.get(package)
        if a is None and b is not None:
            changes.append(f"plug-in {_plugin_label(b)} ({package}): not in the old run")
        elif b is None and a is not None:
            changes.append(f"plug-in {_plugin_label(a)} ({package}): not in this run")
        elif a is not None and b is not None and a.get("source_sha256") != b.get("source_sha256"):
            changes.append(
                f"plug-in {_plugin_label(b)} ({package}): source "
                f"{str(a.get('source_sha256'))[:8]} -> {str(b.get('source_sha256'))[:8]}"
            )
    return changes


def same_code(old: dict[str, Any] | None, new: dict[str, Any]) -> bool:
    """Whether records made by ``old`` code may be resumed by ``new`` code: the same sources,
    planarena's and every plug-in's."""
    return (
        bool(old)
        and old.get("source_sha256") == new.get("source_sha256")
        and not plugin_changes(old, new)
    )
