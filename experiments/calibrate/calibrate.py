"""Calibration end to end: replay run dirs, build the decision table, run every registered
fit, and turn the pooled, identified estimates into a skill profile."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from planarena.experiments.calibrate.observe import decisions
from planarena.experiments.calibrate.registry import FITS, Estimate, FitOptions
from planarena.experiments.calibrate.table import rows_of
from planarena.planners.llm.profiles import SKILLS, SkillProfile

BASE = "strong"
"""The profile whose values stand where the data identify nothing."""


@dataclass
class Calibration:
    """What a calibration found: the table, every estimate, and where the data came from."""

    runs: list[str]
    split: str
    table: pd.DataFrame
    estimates: list[Estimate]
    requests: dict[str, int] = field(default_factory=dict)  # per request kind
    episodes: int = 0

    def pooled(self) -> dict[str, Estimate]:
        """The pooled estimate per parameter (the first registered fit's, if several)."""
        out: dict[str, Estimate] = {}
        for e in self.estimates:
            if e.group == "pooled" and e.parameter not in out:
                out[e.parameter] = e
        return out

    def profile(self, name: str = "calibrated") -> tuple[dict[str, Any], list[str]]:
        """(the profile's fields: the identified pooled estimates over the ``strong``
        defaults, the fields left at the default with why)."""
        fields = set(SkillProfile.model_fields) - {"name"}
        base = SKILLS[BASE].model_dump()
        values: dict[str, Any] = {"name": name}
        kept: list[str] = []
        pooled = self.pooled()
        for f in SkillProfile.model_fields:
            if f not in fields:
                continue
            e = pooled.get(f)
            if e is not None and e.identified and e.value is not None and math.isfinite(e.value):
                values[f] = round(float(e.value), 4)
                continue
            why = e.reason if e is not None else "no fit measures it"
            values[f] = base[f]
            # what an unset field draws as: the field it falls back to, as fitted so far
            default = SkillProfile(**{**base, **values}).resolved(f)
            moved = _excluded(default, e)
            if moved is not None:
                values[f] = moved
                interval = f"[{e.lo:.4g}, {e.hi:.4g}]"  # type: ignore[union-attr]
                kept.append(f"{f}: {moved} (the fit's estimate: {BASE}'s {default} is outside "
                            f"the data's interval {interval}; not identified: {why})")  # fmt: skip
            else:
                shown = "null" if base[f] is None else base[f]
                kept.append(f"{f}: {shown} ({BASE}'s; not identified: {why})")
        SkillProfile(**values)  # the profile loads (ranges, types)
        return values, kept


def _excluded(default: float, e: Estimate | None) -> float | None:
    """The estimate of a field not identified only for its interval's width, where that
    interval excludes ``default`` (the data are enough to rule the default out, not to pin a
    value: the best guess is theirs, not the default, nor an end of the interval, which is the
    least likely value in it); None where no such interval excludes it."""
    if e is None or not e.bounded or e.lo is None or e.hi is None or e.value is None:
        return None
    if e.lo <= default <= e.hi or not math.isfinite(e.value):
        return None
    return round(float(e.value), 4)


def calibrate(
    run_dirs: Sequence[str | Path],
    *,
    cache: str | None = None,
    split: str = "fit",
    options: FitOptions | None = None,
) -> Calibration:
    """Replay every run dir on ``split``'s tasks, tabulate, and fit."""
    options = options or FitOptions()
    rows: list[dict[str, Any]] = []
    requests: dict[str, int] = {}
    episodes: set[tuple[str, str, str, int]] = set()
    for run in run_dirs:
        for d in decisions(run, cache=cache, split=split):
            requests[d.kind] = requests.get(d.kind, 0) + 1
            episodes.add((str(run), d.planner, d.task, d.trial))
            rows.extend(rows_of([d]))
    table = pd.DataFrame(rows) if rows else pd.DataFrame(
        columns=["task", "role", "kind", "quantity", "outcome", "prompt_tokens", "error_scale"]
    )  # fmt: skip
    estimates: list[Estimate] = []
    for fit in FITS.values():  # the proposer side first: later fits read its profile
        estimates.extend(fit(table, options))
        options.extra["profile"] = {
            e.parameter: e.value
            for e in estimates
            if e.group == "pooled" and e.identified and e.value is not None
            and math.isfinite(e.value) and e.parameter in SkillProfile.model_fields
        }  # fmt: skip
    return Calibration([str(r) for r in run_dirs], split, table, estimates, requests,
                       len(episodes))  # fmt: skip
