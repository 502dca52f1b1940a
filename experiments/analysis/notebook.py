"""Which run ``experiments/notebooks/analysis.ipynb`` analyses (:func:`find_run`).

The notebook reads the run dir from the environment variable ``PLANARENA_RUN``. A relative
path there was typed relative to the directory the command started in, but the kernel does
not run there: ``jupyter nbconvert --execute`` (and Jupyter itself) starts it in the
notebook's own folder. So a relative ``PLANARENA_RUN`` is resolved against the repository
root (the checkout holding ``experiments/``), where the README's commands are run; if it is
not there, against ``$PWD`` (the shell's directory when the command was typed, which the
kernel inherits) and the kernel's working directory, in that order.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from planarena.experiments.records.schema import EPISODES

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The checkout that holds ``experiments/`` (with ``pip install -e``, the repository)."""

RUN_VARIABLE = "PLANARENA_RUN"


def run_candidates(value: str, environ: Mapping[str, str], cwd: Path) -> list[Path]:
    """Where ``PLANARENA_RUN=value`` may point, in the order tried (no repeats)."""
    path = Path(value).expanduser()
    if path.is_absolute():
        return [path]
    bases = [REPO_ROOT]
    if environ.get("PWD"):
        bases.append(Path(environ["PWD"]))
    bases.append(cwd)
    out: list[Path] = []
    for base in bases:
        candidate = (base / path).resolve()
        if candidate not in out:
            out.append(candidate)
    return out


def find_run(environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> Path:
    """``PLANARENA_RUN`` if set (a relative path resolved as the module says), else the newest
    run dir under ``results/runs`` of the working directory or a parent of it, else of the
    repository root (by the modification time of its ``episodes.jsonl``)."""
    environ = os.environ if environ is None else environ
    cwd = (Path.cwd() if cwd is None else cwd).resolve()
    value = environ.get(RUN_VARIABLE)
    if value:
        candidates = run_candidates(value, environ, cwd)
        for candidate in candidates:
            if candidate.exists():
                return candidate
        tried = ", ".join(map(str, candidates))
        raise FileNotFoundError(f"{RUN_VARIABLE}={value}: no such run dir (looked for {tried})")
    roots = [p for p in (cwd, *cwd.parents, REPO_ROOT) if (p / "results" / "runs").is_dir()]
    if not roots:
        raise FileNotFoundError(f"set {RUN_VARIABLE} or run planarena first (no results/runs)")
    runs = sorted(
        (roots[0] / "results" / "runs").rglob(EPISODES),
        key=lambda p: (p.stat().st_mtime, str(p)),
    )
    if not runs:
        raise FileNotFoundError(f"no {EPISODES} under {roots[0] / 'results' / 'runs'}")
    return runs[-1].parent


__all__ = ["REPO_ROOT", "find_run", "run_candidates"]
