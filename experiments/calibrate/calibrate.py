"""Calibration end to end: replay run dirs, build the decision table, run every registered
fit, and turn the pooled, identified estimates into a skill profile."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from planarena.experiments.calibrate.fit import WEIGHT_POOLS
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
        kept: dict[str, str] = {}
        from_fit: set[str] = set()
        pooled = self.pooled()
        for f in SkillProfile.model_fields:
            if f not in fields:
                continue
            e = pooled.get(f)
            if e is not None and e.identified and e.value is not None and math.isfinite(e.value):
                values[f] = round(float(e.value), 4)
                from_fit.add(f)
                continue
            why = e.reason if e is not None else "no fit measures it"
            values[f] = base[f]
            # what an unset field draws as: the field it falls back to, as fitted so far
            default = SkillProfile(**{**base, **values}).resolved(f)
            moved = _excluded(default, e)
            if moved is not None:
                values[f] = moved
                from_fit.add(f)
                interval = f"[{e.lo:.4g}, {e.hi:.4g}]"  # type: ignore[union-attr]
                kept[f] = (f"{f}: {moved} (the fit's estimate: {BASE}'s {default} is outside "
                           f"the data's interval {interval}; not identified: {why})")  # fmt: skip
            else:
                shown = "null" if base[f] is None else base[f]
                kept[f] = f"{f}: {shown} ({BASE}'s; not identified: {why})"
        _whole_pools(values, kept, from_fit, pooled)
        SkillProfile(**values)  # the profile loads (ranges, types)
        return values, list(kept.values())


def _whole_pools(
    values: dict[str, Any], kept: dict[str, str], from_fit: set[str], pooled: dict[str, Estimate]
) -> None:
    """A pool of mistake weights where some come from the fit takes the fit's estimate for
    every weight it estimated: only ratios within a pool are identified, and a pool that mixes
    the fit's weights with ``strong``'s (a fitted 0 for the inventions beside ``strong``'s 1 for
    stopping) describes a mix of mistakes neither the data nor the default do."""
    for pool in WEIGHT_POOLS:
        taken = [f for f in pool if f in from_fit]
        if not taken:
            continue
        for f in pool:
            e = pooled.get(f)
            if f in from_fit or e is None or e.value is None or not math.isfinite(e.value):
                continue
            if e.n == 0:  # nothing observed: a value the fit sets, not one it measured
                continue
            values[f] = round(float(e.value), 4)
            verb = "comes" if len(taken) == 1 else "come"
            kept[f] = (f"{f}: {values[f]} (the fit's estimate, with its pool: {', '.join(taken)} "
                       f"{verb} from the fit, and only ratios within a pool are identified; "
                       f"not identified alone: {e.reason})")  # fmt: skip


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
