"""Completion against the per-episode token budget, per planner (``experiment=budget_curves``).

A compute-matched comparison: the same budget binds every planner (the call that would cross
it is refused and the episode ends as ``budget_exhausted``), so a planner that wins only by
spending more shows it here. One panel per complexity.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
from planarena.experiments.studies.registry import Cell, Study, study
from planarena.experiments.studies.sensitivity import group_keys


@study("budget_curves")
class BudgetCurves(Study):
    """Completion against the per-episode token budget: one cell per budget."""

    def cells(self, config: Mapping[str, Any]) -> list[Cell]:
        budgets = [int(b) for b in (config.get("budget_curves") or {}).get("budgets", [])]
        return [
            Cell(
                f"max_tokens_per_episode={b}",
                columns={"max_tokens_per_episode": b},
                overrides={"budget.max_tokens_per_episode": b},
            )
            for b in budgets
        ]

    def render(
        self, records: pd.DataFrame, config: Mapping[str, Any], out_dir: Path, *, seed: int
    ) -> str:
        del seed
        budgets = [int(b) for b in (config.get("budget_curves") or {}).get("budgets", [])]
        records = records[records["max_tokens_per_episode"].isin(budgets)]
        records = records.iloc[
            records["max_tokens_per_episode"].map(budgets.index).argsort(kind="stable")
        ]
        keys = ["max_tokens_per_episode", *group_keys(records), "planner"]  # envs kept apart
        table = (
            records.groupby(keys, sort=False)
            .agg(
                n=("success", "size"),
                completion=("success", "mean"),
                budget_exhausted=(
                    "failure_mode",
                    lambda s: float((s == "budget_exhausted").mean()),
                ),
                tokens_mean=("tokens_total", "mean"),
            )
            .reset_index()
        )
        out_dir.mkdir(parents=True, exist_ok=True)
        table.to_csv(out_dir / "budget_curves.csv", index=False)
        _figure(table, list(config["planner"]), out_dir)
        return f"Budget curves: {len(budgets)} budgets — {out_dir / 'budget_curves.csv'}"


def budget_label(budget: float) -> str:
    """A token budget as a tick reads it: 500, 1k, 2.5k, 128k, 1M."""
    for scale, unit in ((1_000_000, "M"), (1_000, "k")):
        if budget >= scale:
            return f"{budget / scale:g}{unit}"
    return f"{budget:g}"


def _figure(table: pd.DataFrame, planners: list[str], out_dir: Path) -> None:
    fig = _plot(table, planners)
    (out_dir / "figures").mkdir(exist_ok=True)
    for ext in ("pdf", "png"):
        fig.savefig(out_dir / "figures" / f"budget_curves.{ext}", dpi=150)


def _plot(table: pd.DataFrame, planners: list[str]) -> Any:
    """The figure: one panel per env x complexity (a row per env), completion against the
    budget on a log axis whose ticks are the budgets run (1k, 2k, ... 128k), not powers of
    two; every planner in its figure-wide style, the legend above the panels."""
    from planarena.experiments.analysis.figures.layout import _planner_handles, _top_legend
    from planarena.experiments.analysis.figures.style import (
        new_figure,
        paper_style,
        planner_styles,
    )

    styles = planner_styles(planners)
    complexities = list(dict.fromkeys(table.complexity))
    envs = list(dict.fromkeys(table.env)) if "env" in table.columns else [None]
    budgets = sorted({int(b) for b in table.max_tokens_per_episode})
    with paper_style():
        fig = new_figure(7.0, 1.4 + 2.3 * len(envs))
        axes = fig.subplots(len(envs), len(complexities), sharey=True, squeeze=False)
        for row, env in zip(axes, envs, strict=True):
            for ax, complexity in zip(row, complexities, strict=True):
                part = table[table.complexity == complexity]
                if env is not None:
                    part = part[part.env == env]
                for planner in planners:
                    rows = part[part.planner == planner].sort_values("max_tokens_per_episode")
                    if rows.empty:
                        continue
                    look = styles[planner]
                    ax.plot(
                        rows.max_tokens_per_episode,
                        rows.completion,
                        color=look.color,
                        marker=look.marker,
                        ls=look.linestyle,
                        markeredgecolor="black",
                        markeredgewidth=0.4,
                        markersize=4,
                        lw=1.0,
                    )
                ax.set_xscale("log", base=2)
                ax.set_xticks(budgets, labels=[budget_label(b) for b in budgets])
                ax.set_xticks([], minor=True)
                ax.tick_params(axis="x", labelsize=6.5)
                title = complexity if env is None or len(envs) == 1 else f"{env}: {complexity}"
                ax.set_title(title)
                ax.set_ylim(-0.02, 1.02)
                ax.grid(alpha=0.3)
            row[0].set_ylabel("completion rate")
        fig.supxlabel("token budget per episode")
        _top_legend(fig, _planner_handles(planners))
    return fig
