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
    import matplotlib.pyplot as plt

    fig = _plot(table, planners)
    (out_dir / "figures").mkdir(exist_ok=True)
    for ext in ("pdf", "png"):
        fig.savefig(out_dir / "figures" / f"budget_curves.{ext}", dpi=150)
    plt.close(fig)


def _plot(table: pd.DataFrame, planners: list[str]) -> Any:
    """The figure: one panel per env x complexity (a row per env), completion against the
    budget on a log axis whose ticks are the budgets run (1k, 2k, ... 128k), not powers of
    two."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from planarena.experiments.analysis.figures import planner_colors

    colors = planner_colors(planners)
    markers = dict(zip(planners, "osD^vP*Xhp<>", strict=False))

    complexities = list(dict.fromkeys(table.complexity))
    envs = list(dict.fromkeys(table.env)) if "env" in table.columns else [None]
    budgets = sorted({int(b) for b in table.max_tokens_per_episode})
    fig, axes = plt.subplots(
        len(envs),
        len(complexities),
        figsize=(3.2 * len(complexities), 2.9 + 2.3 * (len(envs) - 1)),
        sharey=True,
        squeeze=False,
    )
    panels = [
        (ax, env, c)
        for row, env in zip(axes, envs, strict=True)
        for ax, c in zip(row, complexities, strict=True)
    ]
    for ax, env, complexity in panels:
        part = table[table.complexity == complexity]
        if env is not None:
            part = part[part.env == env]
        for planner in planners:
            rows = part[part.planner == planner].sort_values("max_tokens_per_episode")
            if rows.empty:
                continue
            ax.plot(
                rows.max_tokens_per_episode,
                rows.completion,
                label=planner,
                color=colors[planner],
                marker=markers.get(planner, "o"),
                markersize=4,
            )
        ax.set_xscale("log", base=2)
        ax.set_xticks(budgets, labels=[budget_label(b) for b in budgets], fontsize=7)
        ax.set_xticks([], minor=True)
        ax.set_title(complexity if env is None or len(envs) == 1 else f"{env}: {complexity}")
        ax.set_xlabel("token budget per episode")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    for row in axes:
        row[0].set_ylabel("completion rate")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, frameon=False, bbox_to_anchor=(0.5, 0))
    fig.tight_layout(rect=(0, 0.16 * 2.9 / fig.get_figheight(), 1, 1))  # the legend's inches
    return fig
