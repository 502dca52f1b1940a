"""The study registry: a study names the cells it runs and the analysis it writes from records.

A study is what ``experiment=<name>`` selects through its config's ``study: <name>``. It
declares its cells (each a set of config overrides; a plain study has one empty cell) and
renders its tables and figures from the run's records alone, so the cells run as ordinary
jobs through the one episode loop (resume, worker processes, traces, launchers, the cost cap,
fail-fast) and ``planarena-report RUN`` writes the same analysis again.

Register a study with :func:`study` on a class, in a module of this package or in a user's
own package named by the ``planarena.studies`` entry-point group.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:  # pandas is loaded by the studies, not by every job that imports this
    import pandas as pd
    from planarena.experiments.studies.sequential import Rule

ENTRY_POINT_GROUP = "planarena.studies"
"""Entry-point group whose modules register studies from outside planarena."""


@dataclass(frozen=True)
class Cell:
    """One cell of a study: its ``label`` and ``columns`` (written into each of its records)
    and the config ``overrides`` that make it (dotted keys of the root config, e.g.
    ``llm.skill_overrides.evaluator_noise``; ``faults.rate_scale`` multiplies every fault
    rule's rate)."""

    label: str
    columns: Mapping[str, Any] = field(default_factory=dict)
    overrides: Mapping[str, Any] = field(default_factory=dict)

    def record_fields(self) -> dict[str, Any]:
        """What each record of this cell carries beside its fixed keys."""
        return {"cell": self.label, **self.columns} if self.label else {}


PLAIN = Cell("")
"""The one cell of a run without a study grid: records carry no cell keys."""


class Study:
    """A named analysis over a run's records, optionally over a grid of cells."""

    name: ClassVar[str] = ""

    def cells(self, config: Mapping[str, Any]) -> list[Cell]:
        """The cells to run, in order (the first is the reference: the job's own summary
        tables are computed from its records)."""
        del config
        return [PLAIN]

    def settled_cells(
        self, records: pd.DataFrame, config: Mapping[str, Any], rule: Rule
    ) -> set[str]:
        """The labels of the cells whose records so far (``records``: the cells still
        running, every planner on the same first tasks) already settle every comparison the
        study draws from them under ``rule``; they take no more tasks
        (``sequential.stages``). By default none: every cell runs every task. A study whose
        analysis pools cells over the tasks every cell ran (the claims and sensitivity
        screens) must keep the default: a cell stopped early takes those tasks from all."""
        del records, config, rule
        return set()

    def render(
        self, records: pd.DataFrame, config: Mapping[str, Any], out_dir: Path, *, seed: int
    ) -> str:
        """Write the study's files into ``out_dir`` from ``records`` (every measured episode
        of the run, all cells) and return a Markdown summary to print."""
        raise NotImplementedError


_STUDIES: dict[str, type[Study]] = {}
_LOADED = False


def study(name: str) -> Callable[[type[Study]], type[Study]]:
    """Class decorator: register a :class:`Study` under ``name``."""

    def register(cls: type[Study]) -> type[Study]:
        if name in _STUDIES and _STUDIES[name] is not cls:
            raise ValueError(f"study {name!r} is registered twice")
        cls.name = name
        _STUDIES[name] = cls
        return cls

    return register


def _load() -> None:
    """Import this package's study modules and the entry-point group's, once."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    package = importlib.import_module(__package__ or "planarena.experiments.studies")
    for info in pkgutil.iter_modules(package.__path__):
        if info.name != "registry":
            importlib.import_module(f"{package.__name__}.{info.name}")
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        entry.load()


def names() -> list[str]:
    """Every registered study's name."""
    _load()
    return sorted(_STUDIES)


def get(name: str) -> Study:
    """The study registered as ``name``; a ``KeyError`` naming the ones there are."""
    _load()
    if name not in _STUDIES:
        raise KeyError(f"study {name!r}: no such study; registered: {', '.join(names())}")
    return _STUDIES[name]()


def canonical(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` as ``run.json`` keeps it (keys sorted): a study sees the same config, and so
    names the same cells in the same order, when the job runs and when a report reads it."""
    return json.loads(json.dumps(config, sort_keys=True, default=str))


def cells_of(config: Mapping[str, Any]) -> list[Cell]:
    """The cells a run's config asks for: its study's, or the one plain cell."""
    name = config.get("study")
    return get(str(name)).cells(canonical(config)) if name else [PLAIN]


def cell_labels(cells: Sequence[Cell]) -> list[str]:
    labels = [c.label for c in cells]
    twice = sorted({x for x in labels if labels.count(x) > 1})
    if twice:
        raise ValueError(f"cells named twice: {', '.join(twice)}")
    return labels
