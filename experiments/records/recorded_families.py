"""What a packed recording carries besides its run: the family files its envs were made from
and the decision map ``planner=auto`` chose with.

``pack`` copies each family file into ``<recording>/families/<env>.yaml`` and, when the run
had ``auto``, its map into ``<recording>/decision_map.json``; a replay, the calibration and
``sim_vs_real`` read those copies, so a family edited since (a fixed task, a new size range)
leaves the recording's task ids naming the tasks it was made on, and a map reinstalled since
leaves auto choosing as it did when the replies were recorded.
"""

from __future__ import annotations

from pathlib import Path

FAMILIES = "families"
"""The folder of a recording that holds its family files (``<env>.yaml``)."""

DECISION_MAP = "decision_map.json"
"""The file of a recording that holds the decision map auto ran with."""


def pinned_families(recording: Path) -> dict[str, Path]:
    """The family files a recording carries (env name -> its copy): none before ``pack``
    copied them (then the shipped files are taken as they are)."""
    folder = recording / FAMILIES
    return {p.stem: p.resolve() for p in sorted(folder.glob("*.yaml"))} if folder.is_dir() else {}


def pinned_map(recording: Path) -> Path | None:
    """The decision map a recording carries, or None (a run without auto, or one packed
    before maps were copied: then the shipped map is taken as it is)."""
    path = recording / DECISION_MAP
    return path.resolve() if path.is_file() else None
