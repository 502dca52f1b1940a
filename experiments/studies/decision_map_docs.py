"""The rendered blocks of docs/decision-map.md: nothing there about planners is typed by hand.

``docs/data/decision_map/`` holds copies of two decision-map runs' outputs, one at the
article's recovery budget and one at equal budgets (``recovery=article`` and
``recovery=equal``): their ``decision_map.csv`` (the verdicts) and
``decision_map_trend.csv`` (:mod:`.length_trend`), and the first run's ``auto_lofo.csv``
(:mod:`.auto_lofo`). Each block of the page between
``<!-- rendered: <name> -->`` and ``<!-- /rendered -->`` is re-rendered from them by
``python -m planarena.experiments.studies.rendered_docs``; ``tests/test_decision_map.py``
fails when the page and the data disagree.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from planarena.experiments.studies import auto_docs
from planarena.experiments.studies.length_trend import slope_text
from planarena.experiments.studies.rendered_blocks import DOCS, Page

DATA = DOCS / "data" / "decision_map"


def recovery_table(data: Path = DATA) -> str:
    """Each rule's verdict and numbers under both recovery budgets, side by side."""
    article = pd.read_csv(data / "article" / "decision_map.csv")
    equal = pd.read_csv(data / "equal" / "decision_map.csv")
    both = article.merge(equal, on=["rule", "claim"], suffixes=("_article", "_equal"))
    lines = [
        "| rule | at the article's recovery budget | at equal recovery budgets |",
        "| --- | --- | --- |",
    ]
    for r in both.itertuples():
        lines.append(
            f"| {r.rule}: {r.claim} | **{r.verdict_article}**: {r.numbers_article} "
            f"| **{r.verdict_equal}**: {r.numbers_equal} |"
        )
    return "\n".join(lines) + "\n"


def lofo_table(data: Path = DATA) -> str:
    """:mod:`.auto_lofo`'s table for the article-budget run."""
    from planarena.experiments.studies.auto_lofo import markdown

    text = markdown(pd.read_csv(data / "article" / "auto_lofo.csv"))
    return text.split("\n", 2)[2].lstrip("\n")  # without its heading


def trend_table(data: Path = DATA) -> str:
    """The within-family length trend (:mod:`.length_trend`) under both recovery budgets."""
    runs = {b: pd.read_csv(data / b / "decision_map_trend.csv") for b in ("article", "equal")}
    both = runs["article"].merge(runs["equal"], on=["skill", "pair"], suffixes=("_a", "_e"))
    lines = [
        "| skill | pair | article: pp per step [95 %] | equal: pp per step [95 %] "
        "| cells (families, same sign: article / equal) |",
        "| --- | --- | --- | --- | --- |",
    ]

    def slope(r: object, end: str) -> str:
        return slope_text(
            *(float(getattr(r, f"{k}_{end}")) for k in ("slope_pp", "low_pp", "high_pp"))
        )

    for r in both.itertuples():
        lines.append(
            f"| {r.skill} | {r.pair} | {slope(r, 'a')} | {slope(r, 'e')} | {r.cells_a} "
            f"({r.families_a}, {r.families_same_sign_a} / {r.families_same_sign_e}) |"
        )
    return "\n".join(lines) + "\n"


def _points(share: float) -> str:
    """A difference of shares in whole points, signed; 0 unsigned."""
    points = round(100 * share)
    return f"{points:+d}" if points else "0"


def recovery_ladder(data: Path = DATA) -> str:
    """ReAct minus replanning per length bin at strong skill, under both recovery budgets
    (each run's ``decision_map_ladder.csv``), with the within-family trend per step."""
    pair = "plan_execute_replan-react"
    rows = []
    for budget in ("article", "equal"):
        ladder = pd.read_csv(data / budget / "decision_map_ladder.csv")
        ladder = ladder[ladder["skill"] == "strong"]
        trend = pd.read_csv(data / budget / "decision_map_trend.csv")
        mine = trend[(trend["skill"] == "strong") & (trend["pair"] == "react-plan_execute_replan")]
        t = mine.iloc[0]
        cells = [  # the ladder has replanning minus ReAct, as shares
            f"{_points(-r[pair])} [{_points(-r[pair + '_high'])}, {_points(-r[pair + '_low'])}] "
            f"({r['n_tasks']})"
            for _, r in ladder.iterrows()
        ]
        slope = slope_text(t["slope_pp"], t["low_pp"], t["high_pp"], bold=False)
        rows.append((budget, list(ladder["steps_bin"]), cells, slope))
    bins = rows[0][1]
    lines = [
        "| recovery | " + " | ".join(bins) + " | per step inside a family |",
        "| --- | " + " | ".join("---" for _ in bins) + " | --- |",
    ]
    lines += [f"| `{b}` | " + " | ".join(c) + f" | {sl} |" for b, _, c, sl in rows]
    return "\n".join(lines) + "\n"


DECISION_MAP = Page(
    DOCS / "decision-map.md",
    DATA,
    {
        "recovery": recovery_table,
        "auto_lofo": lofo_table,
        "trend": trend_table,
        "auto_cells": auto_docs.cell_table,
    },
)
