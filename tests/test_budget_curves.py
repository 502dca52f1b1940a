"""experiment=budget_curves: the figure's budget axis is labelled with the budgets run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from planarena.experiments.studies.budget_curves import _figure, budget_label

BUDGETS = [1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000]


def test_budget_label_reads_as_the_budget() -> None:
    assert [budget_label(b) for b in BUDGETS] == [
        "1k", "2k", "4k", "8k", "16k", "32k", "64k", "128k",
    ]  # fmt: skip
    assert budget_label(500) == "500"
    assert budget_label(2500) == "2.5k"
    assert budget_label(1_000_000) == "1M"


def test_figure_ticks_are_the_budgets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    saved: list[Any] = []
    original = Figure.savefig

    def keep(fig: Figure, *args: Any, **kwargs: Any) -> None:
        saved.append(fig)
        original(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    table = pd.DataFrame(
        [
            {
                "max_tokens_per_episode": b,
                "complexity": complexity,
                "planner": planner,
                "completion": min(1.0, i / 7),
            }
            for complexity in ("medium", "complex")
            for planner in ("react", "plan_execute_replan")
            for i, b in enumerate(BUDGETS)
        ]
    )
    _figure(table, ["react", "plan_execute_replan"], tmp_path)
    assert (tmp_path / "figures" / "budget_curves.png").is_file()
    fig = saved[0]
    fig.canvas.draw()
    for ax in fig.axes:
        lo, hi = ax.get_xlim()
        shown = [
            (round(t), label.get_text())
            for t, label in zip(ax.get_xticks(), ax.get_xticklabels(), strict=True)
            if lo <= t <= hi
        ]
        assert shown == [(b, budget_label(b)) for b in BUDGETS]
        assert not [m for m in ax.get_xticks(minor=True) if lo <= m <= hi]


def test_budget_curves_keep_envs_apart(tmp_path: Path) -> None:
    """``experiment=budget_curves 'env=[report,rag]'``: a row per budget x env x complexity x
    planner over that env's n_tasks tasks (both envs were pooled, n = 2 x n_tasks), and a row
    of panels per env in the figure."""
    from test_sensitivity import run_study

    run_study(
        tmp_path,
        [
            "experiment=budget_curves",
            "planner=[react]",
            "env=[report,rag]",
            "n_tasks=2",
            "complexity=[medium]",
        ],
        {"budget_curves.budgets": [1000, 64000]},
    )
    table = pd.read_csv(tmp_path / "budget_curves.csv")
    assert set(table.env) == {"report", "rag"}
    assert (table.n == 2).all() and len(table) == 2 * 2  # budgets x envs
    import matplotlib

    matplotlib.use("Agg")
    from planarena.experiments.studies.budget_curves import _plot

    fig = _plot(table, ["react"])
    assert sorted(ax.get_title() for ax in fig.axes) == ["rag: medium", "report: medium"]
