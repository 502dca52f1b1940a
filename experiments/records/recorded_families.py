"""A packed recording's copies of the family files its envs were made from.

``pack`` copies each family file into ``<recording>/families/<env>.yaml``; a replay, the
calibration and ``sim_vs_real`` read those copies, so a family edited since (a fixed task, a
new size range) leaves the recording's task ids naming the tasks it was made on.
"""

from __future__ import annotations

from pathlib import Path

FAMILIES = "families"
"""The folder of a recording that holds its family files (``<env>.yaml``)."""


def pinned_families(recording: Path) -> dict[str, Path]:
    """The family files a recording carries (env name -> its copy): none before ``pack``
    copied them (then the shipped files are taken as they are)."""
    folder = recording / FAMILIES
    return {p.stem: p.resolve() for p in sorted(folder.glob("*.yaml"))} if folder.is_dir() else {}
