"""``planarena experiment=claims_confirm claims_confirm.screen=<dir>``: the confirmatory stage.

A screen (``experiment=claims``) says which assumptions decide each claim and where it may
turn, but a two-level fraction aliases effects and reads the boundary off a fitted plane. This
stage runs, for every claim the screen left *holds where* or *unresolved*, paired cells at the
corners of its two deciding assumptions (each at its registered low and high, every other
assumption at its default), on tasks the screen never saw (its own ``seed``). Each corner gets
its own paired interval, Bonferroni-corrected over the claim's corners: *holds*, *fails* or
*unresolved* there. Writes ``claims_confirmed.csv`` and ``claims_confirmed.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from planarena.experiments.claims.assumptions import Assumption, load_assumptions
from planarena.experiments.claims.claims import Claim, load_claims
from planarena.experiments.claims.verdicts import HOLDS_WHERE, UNRESOLVED, task_weights
from planarena.experiments.studies.claims import (
    confirmed_markdown,
    differences,
    in_units,
    task_steps,
)
from planarena.experiments.studies.registry import Cell, Study, study
from planarena.experiments.studies.sensitivity import check_sim, in_grid_order

TO_CONFIRM = (HOLDS_WHERE, UNRESOLVED)
CORNER_FACTORS = 2
"""Deciding assumptions a claim's corners span (4 cells per claim)."""


class ScreenError(ValueError):
    """``claims_confirm.screen`` missing or not a screen's run dir."""


def screen_table(config: Mapping[str, Any]) -> pd.DataFrame:
    spec = config.get("claims_confirm") or {}
    screen = spec.get("screen")
    if not screen:
        raise ScreenError(
            "claims_confirm.screen: the screen's run dir (experiment=claims) is required"
        )
    path = Path(str(screen)) / "claims.csv"
    if not path.is_file():
        raise ScreenError(
            f"claims_confirm.screen: {path} does not exist (run experiment=claims first)"
        )
    table = pd.read_csv(path)
    table["deciding"] = table["deciding"].fillna("")
    return table


def _corner_label(levels: Sequence[tuple[str, Any]]) -> str:
    return ",".join(f"{name}={value:g}" for name, value in levels)


def corners(entries: Sequence[Assumption]) -> list[list[tuple[Assumption, Any]]]:
    """Every low/high combination of ``entries`` (registered levels)."""
    out: list[list[tuple[Assumption, Any]]] = [[]]
    for entry in entries:
        low, _, high = entry.levels()
        out = [[*c, (entry, v)] for c in out for v in (low, high)]
    return out


def plan(config: Mapping[str, Any]) -> dict[str, list[str]]:
    """claim id -> the labels of its corner cells (claims with nothing to confirm left out)."""
    entries = {a.name: a for a in load_assumptions()}
    out: dict[str, list[str]] = {}
    for row in screen_table(config).itertuples():
        if row.verdict not in TO_CONFIRM or not row.deciding:
            continue
        names = [n.strip() for n in str(row.deciding).split(",")][:CORNER_FACTORS]
        out[str(row.claim)] = [
            _corner_label([(e.name, v) for e, v in c]) for c in corners([entries[n] for n in names])
        ]
    return out


def confirm_cells(config: Mapping[str, Any]) -> list[Cell]:
    """The union of every claim's corners, the defaults first (the reference cell)."""
    entries = {a.name: a for a in load_assumptions()}
    cells = [Cell("defaults", {"corner": "defaults"}, {})]
    seen = {"defaults"}
    for labels in plan(config).values():
        for label in labels:
            if label in seen:
                continue
            seen.add(label)
            overrides = {}
            for part in label.split(","):
                name, _, value = part.partition("=")
                entry = entries[name]
                overrides[str(entry.key)] = int(float(value)) if entry.integer else float(value)
            cells.append(Cell(label, {"corner": label}, overrides))
    return cells


def corner_verdict(
    d: np.ndarray, threshold: float, alpha: float, n_boot: int, seed: int
) -> tuple[str, float, float, float, int]:
    """(verdict, mean, low, high, tasks) of one corner's paired differences."""
    d = d[~np.isnan(d)]
    if d.size == 0:
        return UNRESOLVED, np.nan, np.nan, np.nan, 0
    boot = task_weights(d.size, n_boot, seed) @ d / d.size
    low, high = np.percentile(boot, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    verdict = "holds" if low > threshold else "fails" if high < threshold else UNRESOLVED
    return verdict, float(d.mean()), float(low), float(high), int(d.size)


@study("claims_confirm")
class ClaimsConfirm(Study):
    """Paired cells at the corners of each undecided claim's deciding assumptions."""

    def cells(self, config: Mapping[str, Any]) -> list[Cell]:
        check_sim(config)
        return confirm_cells(config)

    def render(
        self, records: pd.DataFrame, config: Mapping[str, Any], out_dir: Path, *, seed: int
    ) -> str:
        spec = config.get("claims_confirm") or {}
        claims = {c.id: c for c in load_claims([str(f) for f in spec.get("files") or []])}
        alpha, n_boot = float(spec.get("alpha", 0.05)), int(spec.get("n_boot", 1000))
        labels = [c.label for c in confirm_cells(config)]
        records = in_grid_order(records, labels)
        records = records.merge(task_steps(config), on=["env", "task_id"], how="left")
        rows = []
        for claim_id, corner_labels in plan(config).items():
            claim = claims.get(claim_id)
            if claim is None:
                continue
            rows += self._claim_rows(claim, records, corner_labels, alpha, n_boot, seed)
        table = pd.DataFrame(rows)
        out_dir.mkdir(parents=True, exist_ok=True)
        table.to_csv(out_dir / "claims_confirmed.csv", index=False)
        (out_dir / "claims_confirmed.md").write_text(confirmed_markdown(table), encoding="utf-8")
        held = int((table["verdict"] == "holds").sum()) if len(table) else 0
        return (
            f"Confirmation: {table['claim'].nunique() if len(table) else 0} claim(s) at "
            f"{len(table)} corner(s): {held} hold — {out_dir / 'claims_confirmed.md'}"
        )

    @staticmethod
    def _claim_rows(
        claim: Claim,
        records: pd.DataFrame,
        corner_labels: list[str],
        alpha: float,
        n_boot: int,
        seed: int,
    ) -> list[dict[str, Any]]:
        sign = 1.0 if claim.direction == "greater" else -1.0
        d = sign * differences(records, claim, corner_labels)
        level = alpha / len(corner_labels)  # Bonferroni over the claim's corners
        rows = []
        for j, label in enumerate(corner_labels):
            verdict, mean, low, high, n = corner_verdict(
                d[:, j] if d.size else np.empty(0), sign * claim.threshold(), level, n_boot, seed
            )
            ends = sorted((in_units(claim, sign * low), in_units(claim, sign * high)))
            rows.append(
                {
                    "claim": claim.id,
                    "statement": claim.statement,
                    "corner": label,
                    "verdict": verdict,
                    "metric": claim.metric,
                    "mean": round(in_units(claim, sign * mean), 3),
                    "low": round(ends[0], 3),
                    "high": round(ends[1], 3),
                    "n_tasks": n,
                }
            )
        return rows
