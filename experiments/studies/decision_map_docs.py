"""The rendered blocks of docs/decision-map.md: nothing there about planners is typed by hand.

``docs/data/decision_map/`` holds copies of two decision-map runs' outputs, one at the
article's recovery budget and one at equal budgets (``recovery=article`` and
``recovery=equal``): their ``decision_map.csv`` (the verdicts) and
``decision_map_trend.csv`` (:mod:`.length_trend`), and the first run's ``auto_lofo.csv``
(:mod:`.auto_lofo`). Each block of the page between
``<!-- rendered: <name> -->`` and ``<!-- /rendered -->`` is re-rendered from them by
``python -m planarena.experiments.studies.decision_map_docs``; ``tests/test_decision_map.py``
fails when the page and the data disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
from planarena.experiments.studies.rendered_docs import fill_blocks, rewrite

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "docs" / "data" / "decision_map"
PAGE = ROOT / "docs" / "decision-map.md"


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
        mid, lo, hi = (float(getattr(r, f"{k}_{end}")) for k in ("slope_pp", "low_pp", "high_pp"))
        text = f"{mid:+.2f} [{lo:+.2f}, {hi:+.2f}]"
        return f"**{text}**" if lo > 0 or hi < 0 else text

    for r in both.itertuples():
        lines.append(
            f"| {r.skill} | {r.pair} | {slope(r, 'a')} | {slope(r, 'e')} | {r.cells_a} "
            f"({r.families_a}, {r.families_same_sign_a} / {r.families_same_sign_e}) |"
        )
    return "\n".join(lines) + "\n"


RENDERERS: dict[str, Callable[[Path], str]] = {
    "recovery": recovery_table,
    "auto_lofo": lofo_table,
    "trend": trend_table,
}


def render_page(text: str, data: Path = DATA) -> str:
    """``text`` with every rendered block replaced by a fresh render."""
    return fill_blocks(text, RENDERERS, data, "docs/decision-map.md")


def main() -> int:
    print(f"rendered {rewrite(PAGE, RENDERERS, DATA)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
