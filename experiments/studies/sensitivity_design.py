"""The sensitivity study's design: its factors and cells (apart from the study, so its report
can read a design without importing the study)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from planarena.experiments.studies.registry import Cell

__all__ = ["Design", "Factor"]


@dataclass(frozen=True)
class Factor:
    """One assumption: the record column ``name``, the config ``key`` a cell sets, and its
    ``low``, ``middle`` (the centre cell's) and ``high`` levels."""

    name: str
    key: str
    low: Any
    middle: Any
    high: Any


@dataclass
class Design:
    """The cells in run order (the centre first: the reference), each cell's factor values,
    each factor's level per cell (-1 low, +1 high, 0 centre), and the factors left out."""

    factors: list[Factor]
    runs: int
    seed: int
    resolution: int = 5
    labels: list[str] = field(default_factory=list)
    values: list[dict[str, Any]] = field(default_factory=list)
    signs: dict[str, list[int]] = field(default_factory=dict)
    left_out: dict[str, str] = field(default_factory=dict)

    def cells(self) -> list[Cell]:
        by_name = {f.name: f for f in self.factors}
        return [
            Cell(label, columns=dict(v), overrides={by_name[k].key: x for k, x in v.items()})
            for label, v in zip(self.labels, self.values, strict=True)
        ]
