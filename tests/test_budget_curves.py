"""experiment=budget_curves: the figure's budget axis is labelled with the budgets run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from experiments.budget_curves import _figure, budget_label

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
