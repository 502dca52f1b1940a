"""The assumption registry: every value the default run rests on that was chosen rather than
measured, with the range a study sweeps and where the value comes from.

A default is an assumption, not a finding: a planner comparison that holds only at one of
these values must say so. ``assumptions.yaml`` beside this module is the registry;
``tests/test_assumptions.py`` fails when a knob that looks sweepable (a skill field, a
planner's numeric setting, a fault rule) is missing from it or when a registered default
differs from the code's, and ``docs/assumptions.md`` is rendered from it
(``python -m planarena.experiments.claims``).
"""

from __future__ import annotations

from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

REGISTRY = Path(__file__).with_name("assumptions.yaml")
PROVENANCES = ("measured", "cited", "chosen")
ModelT = TypeVar("ModelT", bound=BaseModel)


class RegistryError(ValueError):
    """A registry file that cannot be read: one line naming the file and the entry."""


class Assumption(BaseModel):
    """One registered value: what sets it, its default and range, and its provenance."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    key: str | None
    default: Any
    range: tuple[float, float] | None
    provenance: Literal["measured", "cited", "chosen"]
    source: str
    measured: str | None = None
    covers: tuple[str, ...] = ()
    swept_by: str | None = None
    integer: bool = False

    @model_validator(mode="after")
    def _default_in_range(self) -> Assumption:
        if self.range is not None:
            low, high = self.range
            if low > high:
                raise ValueError(f"range [{low}, {high}] runs backwards")
            if isinstance(self.default, int | float) and not low <= self.default <= high:
                raise ValueError(f"default {self.default} lies outside [{low}, {high}]")
        if self.key is None and self.swept_by is None:
            raise ValueError("no key and no swept_by: nothing can move it")
        return self

    @property
    def sweepable(self) -> bool:
        """Whether a study can set it on its own: a config key and a numeric range."""
        return self.key is not None and self.range is not None

    def levels(self) -> tuple[Any, Any, Any]:
        """(low, default, high), counts rounded."""
        assert self.range is not None
        low, high = self.range
        if self.integer:
            return int(round(low)), self.default, int(round(high))
        return float(low), self.default, float(high)


def read_entries(
    path: Path, key: str, model: type[ModelT], label: str, error: type[ValueError]
) -> list[ModelT]:
    """The ``key:`` list of a YAML file, each entry validated as ``model``; a bad file is one
    line naming the file and the entry (``label`` and its name or id), raised as ``error``."""
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise error(f"{path}: {type(exc).__name__}: {exc}") from None
    entries = raw.get(key) if isinstance(raw, dict) else None
    if not isinstance(entries, list):
        raise error(f"{path}: no '{key}:' list")
    out = []
    for i, entry in enumerate(entries):
        given = entry.get("name", entry.get("id")) if isinstance(entry, dict) else None
        try:
            out.append(model.model_validate(entry))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"]) or "entry"
            name = given if given is not None else f"#{i}"
            raise error(f"{path}: {label} {name}: {where}: {first['msg']}") from None
    return out


def _read(path: Path) -> list[Assumption]:
    out = read_entries(path, "assumptions", Assumption, "assumption", RegistryError)
    names = Counter(a.name for a in out)
    if dupes := sorted(n for n, k in names.items() if k > 1):
        raise RegistryError(f"{path}: assumption(s) named twice: {', '.join(dupes)}")
    return out


@cache
def load_assumptions(path: Path = REGISTRY) -> tuple[Assumption, ...]:
    """The registry's entries, in file order (validated; a bad file is one line)."""
    return tuple(_read(Path(path)))


def provenance_counts(entries: tuple[Assumption, ...] | None = None) -> dict[str, int]:
    """How many entries are measured, cited and chosen."""
    counts = Counter(a.provenance for a in (entries or load_assumptions()))
    return {p: counts.get(p, 0) for p in PROVENANCES}


def _cell(value: Any) -> str:
    if value is None:
        return "--"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_cell(v) for v in value) + "]"
    return f"{value:g}" if isinstance(value, float) else str(value)


def render_markdown(entries: tuple[Assumption, ...] | None = None) -> str:
    """``docs/assumptions.md``: the counts by provenance, then one row per assumption."""
    entries = entries or load_assumptions()
    counts = provenance_counts(entries)
    lines = [
        "# Assumptions",
        "",
        "<!-- rendered from experiments/claims/assumptions.yaml by "
        "`python -m planarena.experiments.claims`; do not edit by hand -->",
        "",
        "Every value the default run rests on that was chosen rather than measured: the "
        "simulated model's skills, the replanner's handicap, the planners' caps and "
        "schedules, the world's faults. A default is an assumption; a finding about planners "
        "has to hold over these ranges or say where it does not "
        "(`experiment=claims`: [claims.md](claims.md)).",
        "",
        f"{len(entries)} assumptions: {counts['measured']} measured, {counts['cited']} cited, "
        f"{counts['chosen']} chosen. *Measured* means the default is a fit's estimate; "
        "*cited*, a published number or setting; *chosen*, a neutral value picked before "
        "reading any table of ours. The last column is what the one real-model fit (a 0.5B "
        "model, [calibration.md](calibration.md)) found: evidence on the range, not the "
        "default.",
        "",
        "| assumption | set with | default | range | provenance | source | the 0.5B fit |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for a in entries:
        key = f"`{a.key}`" if a.key else f"moves with `{a.swept_by}`"
        if a.covers:
            key += " (also unset " + ", ".join(f"`{c}`" for c in a.covers) + ")"
        lines.append(
            f"| `{a.name}` | {key} | {_cell(a.default)} | {_cell(a.range)} | {a.provenance} "
            f"| {a.source.replace('|', '/')} | {(a.measured or '').replace('|', '/')} |"
        )
    return "\n".join(lines) + "\n"
