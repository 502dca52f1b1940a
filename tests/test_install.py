"""The install CI tests is the README's: the lock, the dependency floors and CI's script agree.

A floor in ``pyproject.toml`` that ``requirements/lowest.txt`` does not pin (or pins at
another version) would leave the lowest-versions stage testing something else; a README
set-up command that CI does not run would let a fresh user's install drift from CI's.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def _pins(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            out[_norm(name)] = version.strip()
    return out


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _floors() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    out = {}
    for spec in project["dependencies"]:
        m = re.match(r"^([A-Za-z0-9_.-]+)\s*>=\s*([0-9][^,;\s]*)", spec)
        assert m, f"dependency without a floor: {spec}"
        out[_norm(m.group(1))] = m.group(2)
    return out


def _readme_block() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("## Install", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


def test_every_floor_is_pinned_at_its_version_in_the_lowest_constraints() -> None:
    floors, lowest = _floors(), _pins(ROOT / "requirements" / "lowest.txt")
    assert set(lowest) == set(floors)
    moved = {k: (floors[k], lowest[k]) for k in floors if Version(floors[k]) != Version(lowest[k])}
    assert not moved, f"pyproject floor -> lowest.txt pin: {moved}"


def test_the_lock_pins_every_dependency_within_its_range() -> None:
    floors, lock = _floors(), _pins(ROOT / "requirements" / "lock.txt")
    for name, floor in floors.items():
        assert name in lock, f"{name} is not in requirements/lock.txt"
        assert Version(lock[name]) >= Version(floor), f"{name}: {lock[name]} below {floor}"


def test_ci_runs_the_readmes_setup_and_test_commands_and_both_range_ends() -> None:
    setup, test = _readme_block()
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert setup.startswith("pip install -c requirements/lock.txt ") and setup in ci
    assert test == "pytest" and "pytest" in ci
    assert "bash .ci/dependency-range lowest" in ci and "bash .ci/dependency-range newest" in ci
    assert (ROOT / "requirements" / "refresh-lock.sh").exists()
