"""The rendered blocks of docs/planners.md: what the page says planners measured, rendered from
copies of the runs under ``docs/data/``, never typed.

- ``recovery_ladder``: ReAct minus replanning per length bin (``docs/data/decision_map/``,
  :mod:`.decision_map_docs`);
- ``sizing``: the search planners under a per-episode budget they size themselves to
  (``docs/data/sizing/``: one run's ``summary.csv`` and ``run.json``);
- ``compute_frontier``: the leaders table of ``experiment=compute_frontier``
  (``docs/data/compute_frontier/``);
- ``budget_curves``: completion per budget of ``experiment=budget_curves``
  (``docs/data/budget_curves/``).

``python -m planarena.experiments.studies.rendered_docs`` renders them;
``tests/test_rendered_docs.py`` fails when the page and the data disagree.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from planarena.experiments.studies.budget_curves import budget_label
from planarena.experiments.studies.decision_map_docs import recovery_ladder
from planarena.experiments.studies.rendered_blocks import DOCS, Page, measured_by

DATA = DOCS / "data"


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def sizing(data: Path = DATA) -> str:
    """Completion and mean tokens of the search planners under one run's budget."""
    folder = data / "sizing"
    summary = pd.read_csv(folder / "summary.csv")
    lines = [
        measured_by(folder, "sizing"),
        "",
        "| planner | tasks | completion [95 % CI] | mean tokens |",
        "| --- | ---: | --- | ---: |",
    ]
    lines += [
        f"| {r['planner']} | {r['n']} | {_pct(r['completion_rate'])} "
        f"[{_pct(r['completion_ci_low'])}, {_pct(r['completion_ci_high'])}] | "
        f"{r['tokens_mean'] / 1000:.1f} k |"
        for _, r in summary.iterrows()
    ]
    return "\n".join(lines) + "\n"


def compute_frontier(data: Path = DATA) -> str:
    """The run's leaders table (its ``compute_frontier.md`` up to the frontiers)."""
    folder = data / "compute_frontier"
    text = (folder / "compute_frontier.md").read_text(encoding="utf-8")
    leaders = text.split("\n", 1)[1].split("## Frontiers", 1)[0].strip()
    return f"{measured_by(folder, 'compute_frontier')}\n\n{leaders}\n"


def budget_curves(data: Path = DATA) -> str:
    """Completion per planner (rows) and budget (columns), one table per complexity."""
    folder = data / "budget_curves"
    table = pd.read_csv(folder / "budget_curves.csv")
    budgets = list(dict.fromkeys(table["max_tokens_per_episode"]))
    lines = [measured_by(folder, "budget_curves"), ""]
    for (env, complexity), part in table.groupby(["env", "complexity"], sort=False):
        n = sorted(set(part["n"]))
        lines += [
            f"Completion on `{env}`, {complexity} ({'/'.join(map(str, n))} tasks per cell):",
            "",
            "| planner | " + " | ".join(budget_label(b) for b in budgets) + " |",
            "| --- | " + " | ".join("---:" for _ in budgets) + " |",
        ]
        for planner, rows in part.groupby("planner", sort=False):
            by_budget = dict(zip(rows["max_tokens_per_episode"], rows["completion"], strict=True))
            cells = [_pct(by_budget[b]) if b in by_budget else "" for b in budgets]
            lines.append(f"| {planner} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


PLANNERS = Page(
    DOCS / "planners.md",
    DATA,
    {
        "recovery_ladder": lambda data: recovery_ladder(data / "decision_map"),
        "sizing": sizing,
        "compute_frontier": compute_frontier,
        "budget_curves": budget_curves,
    },
)
