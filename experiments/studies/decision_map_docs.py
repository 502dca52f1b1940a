"""The rendered blocks of docs/decision-map.md: nothing there about planners is typed by hand.

``docs/data/decision_map/`` holds copies of two decision-map runs' outputs, one at the
article's recovery budget and one at equal budgets (``recovery=article`` and
``recovery=equal``): their ``decision_map.csv`` (the verdicts) and the first run's
``auto_lofo.csv`` (:mod:`.auto_lofo`). Each block of the page between
``<!-- rendered: <name> -->`` and ``<!-- /rendered -->`` is re-rendered from them by
``python -m planarena.experiments.studies.decision_map_docs``; ``tests/test_decision_map.py``
fails when the page and the data disagree.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "docs" / "data" / "decision_map"
PAGE = ROOT / "docs" / "decision-map.md"
BLOCK = re.compile(r"(<!-- rendered: (\w+) -->\n)(.*?)(<!-- /rendered -->)", re.S)


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


RENDERERS: dict[str, Callable[[Path], str]] = {"recovery": recovery_table, "auto_lofo": lofo_table}


def render_page(text: str, data: Path = DATA) -> str:
    """``text`` with every rendered block replaced by a fresh render."""

    def fill(m: re.Match[str]) -> str:
        name = m.group(2)
        if name not in RENDERERS:
            raise ValueError(f"docs/decision-map.md: no renderer for block {name!r}")
        return m.group(1) + RENDERERS[name](data) + m.group(4)

    return BLOCK.sub(fill, text)


def main() -> int:
    PAGE.write_text(render_page(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"rendered {PAGE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
