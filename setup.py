"""Packaging: the top-level folders install under one import name, ``planarena``.

The repository keeps ``search/``, ``envs/``, ``planners/``, ``experiments/`` and ``configs/`` at
its top; installed, they are ``planarena.search``, ``planarena.envs``, and so on, so a user's own
``experiments`` or ``search`` package never collides with ours. Everything else is in
``pyproject.toml``.
"""

from pathlib import Path

from setuptools import find_packages, setup

ROOT = Path(__file__).resolve().parent
FOLDERS = ("search", "envs", "planners", "experiments", "configs")


def mapped_packages() -> tuple[list[str], dict[str, str]]:
    packages, package_dir = ["planarena"], {"planarena": "planarena"}
    for folder in FOLDERS:
        for sub in ["", *find_packages(str(ROOT / folder))]:
            dotted = f"planarena.{folder}" + (f".{sub}" if sub else "")
            packages.append(dotted)
            package_dir[dotted] = str(Path(folder, *sub.split("."))) if sub else folder
    return packages, package_dir


PACKAGES, PACKAGE_DIR = mapped_packages()
setup(packages=PACKAGES, package_dir=PACKAGE_DIR)
