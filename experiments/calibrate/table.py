"""The decision table: every extractor's rows for every decision, one DataFrame."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd
from planarena.experiments.calibrate.registry import EXTRACTORS, REQUIRED, Decision, Row


def rows_of(decisions: Iterable[Decision]) -> list[Row]:
    """The rows of every extractor registered for each decision's kind."""
    rows: list[Row] = []
    for d in decisions:
        for extract in EXTRACTORS.get(d.kind, ()):
            rows.extend(extract(d))
    return rows


def build(decisions: Iterable[Decision]) -> pd.DataFrame:
    """The decision table (one row per observation; covariates a row lacks are NaN)."""
    rows = rows_of(decisions)
    if not rows:
        return pd.DataFrame(columns=[*REQUIRED, "error_scale"])
    table = pd.DataFrame(rows)
    missing = [k for k in REQUIRED if k not in table]
    if missing:
        raise ValueError(f"extractor rows lack {missing}")
    return table
