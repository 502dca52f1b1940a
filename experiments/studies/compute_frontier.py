"""Completion against the tokens really spent, one frontier per planner.

``planarena experiment=compute_frontier``.

"X beats Y" means little when X spends five times Y's tokens. This study sweeps each planner
over its own knobs (``compute_frontier.knobs`` in the config: beam and branching for bfs and
tot, nodes for dfs, iterations for mcts, replans, turns), optionally under per-episode token
budgets too (``compute_frontier.budgets``: search planners size themselves to a budget), and
plots each setting's completion against its mean tokens per episode. A planner's *frontier*
is its Pareto-efficient settings (no other setting of it completes as much for fewer tokens).

Cells: cell ``knobs=k`` sets every listed planner to its k-th setting (a planner with fewer
settings keeps its last; its repeats are dropped from the analysis, so a grid of equal lengths
wastes nothing), cell ``budget=B`` runs every planner at its configured settings under a
budget of B tokens. Every cell runs the same tasks, so two planners' points are compared
paired, task by task.

Intervals: completion by Wilson's score interval; mean tokens by a percentile bootstrap over
tasks; the leaders' difference by a paired percentile bootstrap over tasks (the same resampled
tasks for both). All bootstrap draws are seeded from the run's seed and the point's identity.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from planarena.experiments.analysis.stats import boot_rng, wilson_interval
from planarena.experiments.studies.registry import Cell, Study, study

KNOB_CELL = "knobs="
BUDGET_CELL = "budget="
CONFIGURED = "configured"


@dataclass(frozen=True)
class Settings:
    """The study's parameters (``compute_frontier:`` in the config), checked."""

    knobs: dict[str, list[dict[str, Any]]]
    budgets: list[int]
    leaders_at: list[int]
    n_boot: int

    @staticmethod
    def of(config: Mapping[str, Any]) -> Settings:
        """Read and check the study's block; a ValueError names what is wrong."""
        block = config.get("compute_frontier") or {}
        planners = list(config.get("planner") or {})
        knobs_in = block.get("knobs") or {}
        if not isinstance(knobs_in, Mapping):
            raise ValueError("compute_frontier.knobs: a mapping planner -> list of settings")
        knobs: dict[str, list[dict[str, Any]]] = {}
        for name, grid in knobs_in.items():
            if not isinstance(grid, Sequence) or isinstance(grid, str) or not grid:
                raise ValueError(f"compute_frontier.knobs.{name}: a non-empty list of settings")
            if any(not isinstance(s, Mapping) or not s for s in grid):
                raise ValueError(
                    f"compute_frontier.knobs.{name}: each setting is a mapping key: value"
                )
            if name in planners:  # a planner not selected in this run has no points
                knobs[name] = [dict(s) for s in grid]
        budgets = [_positive(b, "compute_frontier.budgets") for b in block.get("budgets") or []]
        leaders = [
            _positive(b, "compute_frontier.leaders_at") for b in block.get("leaders_at") or []
        ]
        n_boot = _positive(block.get("n_boot", 1000), "compute_frontier.n_boot")
        return Settings(knobs, budgets, leaders, n_boot)

    def levels(self) -> int:
        """Knob cells: the longest planner's grid (one cell when no planner has knobs)."""
        return max([1, *(len(g) for g in self.knobs.values())])

    def setting(self, planner: str, level: int) -> dict[str, Any] | None:
        """The settings planner runs at knob ``level``; None when the level repeats its last
        (or, for a planner without knobs, any level but the first)."""
        grid = self.knobs.get(planner)
        if grid is None:
            return {} if level == 0 else None
        return grid[level] if level < len(grid) else None


def _positive(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{key}: {value!r} is not a positive whole number")
    return value


def setting_label(setting: Mapping[str, Any]) -> str:
    """``beam_width=1 branching=3``; ``configured`` for the planner's own settings."""
    return " ".join(f"{k}={v}" for k, v in setting.items()) or CONFIGURED


@study("compute_frontier")
class ComputeFrontier(Study):
    """Each planner over its own knobs (and budgets): completion against tokens spent."""

    def cells(self, config: Mapping[str, Any]) -> list[Cell]:
        s = Settings.of(config)
        cells = []
        for level in range(s.levels()):
            overrides = {
                f"planner.{name}.{key}": value
                for name, grid in s.knobs.items()
                for key, value in grid[min(level, len(grid) - 1)].items()
            }
            cells.append(Cell(f"{KNOB_CELL}{level}", {"knob_level": level}, overrides))
        for b in s.budgets:
            cells.append(
                Cell(
                    f"{BUDGET_CELL}{b}",
                    {"knob_level": -1, "max_tokens_per_episode": b},
                    {"budget.max_tokens_per_episode": b},
                )
            )
        return cells

    def render(
        self, records: pd.DataFrame, config: Mapping[str, Any], out_dir: Path, *, seed: int
    ) -> str:
        s = Settings.of(config)
        planners = list(config.get("planner") or {})
        base_budget = (config.get("budget") or {}).get("max_tokens_per_episode")
        tagged = label_points(records, s, base_budget)
        points = point_table(tagged, seed=seed, n_boot=s.n_boot)
        leaders = leader_table(tagged, points, s.leaders_at, seed=seed, n_boot=s.n_boot)
        out_dir.mkdir(parents=True, exist_ok=True)
        points.to_csv(out_dir / "compute_frontier_points.csv", index=False)
        leaders.to_csv(out_dir / "compute_frontier.csv", index=False)
        text = markdown(points, leaders)
        (out_dir / "compute_frontier.md").write_text(text)
        from planarena.experiments.analysis.figures.frontier import write_frontier_figures

        write_frontier_figures(points, planners, s.leaders_at, out_dir / "figures")
        return text


# --------------------------------------------------------------------------- the analysis


def label_points(
    records: pd.DataFrame, s: Settings, base_budget: int | None = None
) -> pd.DataFrame:
    """The records of the study's points, each tagged with ``point`` (its settings, or
    ``budget 20k`` for a budget cell) and ``budget`` (the token budget it ran under, 0 for
    none); repeats of a planner's last setting are dropped."""
    cells = records["cell"].astype(str)
    keep = np.zeros(len(records), dtype=bool)
    point = np.full(len(records), "", dtype=object)
    budget = np.zeros(len(records), dtype=np.int64)
    for i, (cell, planner) in enumerate(zip(cells, records["planner"], strict=True)):
        if cell.startswith(KNOB_CELL):
            setting = s.setting(planner, int(cell[len(KNOB_CELL) :]))
            if setting is None:
                continue
            keep[i], point[i], budget[i] = True, setting_label(setting), base_budget or 0
        elif cell.startswith(BUDGET_CELL):
            b = int(cell[len(BUDGET_CELL) :])
            keep[i], point[i], budget[i] = True, f"budget {_k(b)}", b
    out = records.loc[keep].copy()
    out["point"] = point[keep]
    out["budget"] = budget[keep]
    out["task"] = out["env"].astype(str) + "/" + out["task_id"].astype(str)
    return out


def _k(tokens: float) -> str:
    return f"{tokens / 1000:g}k" if tokens >= 1000 else f"{tokens:g}"


def point_table(tagged: pd.DataFrame, *, seed: int, n_boot: int) -> pd.DataFrame:
    """One row per complexity x planner x point: n, completion with its Wilson interval,
    mean tokens with a bootstrap interval over tasks, and ``frontier`` (Pareto-efficient
    among the planner's points)."""
    rows = []
    for (complexity, planner, point), part in tagged.groupby(
        ["complexity", "planner", "point"], sort=False
    ):
        per_task = part.groupby("task", sort=True).agg(
            success=("success", "mean"), tokens=("tokens_total", "mean")
        )
        n = len(part)
        wins = int(part["success"].sum())
        lo, hi = wilson_interval(wins, n)
        t_lo, t_hi = _boot_mean(
            per_task["tokens"].to_numpy(),
            boot_rng(seed, "tokens", complexity, planner, point),
            n_boot,
        )
        rows.append(
            {
                "complexity": complexity,
                "planner": planner,
                "point": point,
                "budget": int(part["budget"].iloc[0]),
                "n": n,
                "completion": wins / n,
                "completion_lo": lo,
                "completion_hi": hi,
                "tokens_mean": float(per_task["tokens"].mean()),
                "tokens_lo": t_lo,
                "tokens_hi": t_hi,
                "budget_stops": int((part["stop_reason"] == "budget").sum()),
            }
        )
    table = pd.DataFrame(rows)
    if table.empty:
        return table.assign(frontier=pd.Series(dtype=bool))
    table["frontier"] = False
    from planarena.experiments.analysis.figures.curves import pareto_front  # matplotlib: late

    for _, part in table.groupby(["complexity", "planner"], sort=False):
        on = pareto_front(list(zip(part["tokens_mean"], part["completion"], strict=True)))
        table.loc[part.index[on], "frontier"] = True
    return table


def _boot_mean(values: np.ndarray, rng: np.random.Generator, n_boot: int) -> tuple[float, float]:
    """Percentile-bootstrap 95 % interval of the mean of ``values`` (one per task)."""
    if values.size == 0:
        return (math.nan, math.nan)
    idx = rng.integers(0, values.size, size=(n_boot, values.size))
    means = values[idx].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def best_within(points: pd.DataFrame, tokens: float) -> pd.DataFrame:
    """Each planner's best point spending at most ``tokens`` on average (highest completion,
    then fewest tokens), best planner first."""
    within = points[points["tokens_mean"] <= tokens]
    if within.empty:
        return within
    ranked = within.sort_values(
        ["completion", "tokens_mean", "planner"], ascending=[False, True, True], kind="stable"
    )
    return ranked.drop_duplicates("planner").reset_index(drop=True)


def paired_difference(
    tagged: pd.DataFrame,
    a: tuple[str, str],
    b: tuple[str, str],
    complexity: str,
    *,
    seed: int,
    n_boot: int,
) -> tuple[float, float, float, int]:
    """Completion of point ``a`` minus point ``b`` (each ``(planner, point)``) on the tasks
    both ran, with a paired percentile-bootstrap 95 % interval over tasks; and n tasks."""

    def per_task(planner: str, point: str) -> pd.Series:
        part = tagged[
            (tagged["complexity"] == complexity)
            & (tagged["planner"] == planner)
            & (tagged["point"] == point)
        ]
        return part.groupby("task", sort=True)["success"].mean()

    sa, sb = per_task(*a), per_task(*b)
    both = sa.index.intersection(sb.index)
    diff = (sa[both] - sb[both]).to_numpy(dtype=float)
    if diff.size == 0:
        return (math.nan, math.nan, math.nan, 0)
    lo, hi = _boot_mean(diff, boot_rng(seed, "paired", complexity, *a, *b), n_boot)
    return float(diff.mean()), lo, hi, int(diff.size)


def leader_table(
    tagged: pd.DataFrame,
    points: pd.DataFrame,
    levels: Sequence[int],
    *,
    seed: int,
    n_boot: int,
) -> pd.DataFrame:
    """Per complexity and token level: the planner whose best point within that many mean
    tokens completes most, the runner-up's, and their paired difference with its interval
    (``separable`` when the interval excludes 0; otherwise the two are a statistical tie)."""
    rows = []
    for complexity in dict.fromkeys(points.get("complexity", [])):
        part = points[points["complexity"] == complexity]
        for level in levels:
            ranked = best_within(part, level)
            row: dict[str, Any] = {"complexity": complexity, "tokens_at_most": level}
            if ranked.empty:
                rows.append({**row, "leader": "", "note": "no point this cheap"})
                continue
            lead = ranked.iloc[0]
            row.update(
                leader=lead["planner"],
                leader_point=lead["point"],
                leader_completion=lead["completion"],
                leader_lo=lead["completion_lo"],
                leader_hi=lead["completion_hi"],
                leader_tokens=lead["tokens_mean"],
                n=int(lead["n"]),
            )
            if len(ranked) > 1:
                second = ranked.iloc[1]
                diff, lo, hi, n_pairs = paired_difference(
                    tagged,
                    (lead["planner"], lead["point"]),
                    (second["planner"], second["point"]),
                    complexity,
                    seed=seed,
                    n_boot=n_boot,
                )
                row.update(
                    runner_up=second["planner"],
                    runner_up_point=second["point"],
                    runner_up_completion=second["completion"],
                    runner_up_tokens=second["tokens_mean"],
                    difference=diff,
                    difference_lo=lo,
                    difference_hi=hi,
                    paired_tasks=n_pairs,
                    separable=bool(lo > 0 or hi < 0),
                )
            rows.append(row)
    return pd.DataFrame(rows)


def _pct(x: float) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.0f} %"


def markdown(points: pd.DataFrame, leaders: pd.DataFrame) -> str:
    """The leaders per token level, then every planner's frontier."""
    lines = ["# Compute frontier", ""]
    lines += [
        "Which planner completes most within a mean spend of at most N tokens per episode "
        "(each planner at its best setting that cheap), the runner-up, and their paired "
        "difference over the same tasks (95 % bootstrap interval; `tie` when it includes 0).",
        "",
        "| complexity | ≤ tokens | leader (setting) | completion [95 % CI] | tokens | runner-up "
        "(setting) | completion | difference [95 % CI] | |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for _, r in leaders.iterrows():
        if not r.get("leader"):
            lines.append(f"| {r['complexity']} | {_k(r['tokens_at_most'])} | none | | | | | | |")
            continue
        lead = (
            f"| {r['complexity']} | {_k(r['tokens_at_most'])} | {r['leader']} "
            f"({r['leader_point']}) | {_pct(r['leader_completion'])} "
            f"[{_pct(r['leader_lo'])}, {_pct(r['leader_hi'])}] | {r['leader_tokens']:,.0f} |"
        )
        if isinstance(r.get("runner_up"), str):
            verdict = "leads" if r["separable"] else "tie"
            lead += (
                f" {r['runner_up']} ({r['runner_up_point']}) | "
                f"{_pct(r['runner_up_completion'])} | "
                f"{100 * r['difference']:+.0f} pp [{100 * r['difference_lo']:+.0f}, "
                f"{100 * r['difference_hi']:+.0f}] | {verdict} |"
            )
        else:
            lead += " | | | |"
        lines.append(lead)
    lines += ["", "## Frontiers", ""]
    lines += [
        "| complexity | planner | setting | n | completion [95 % CI] | mean tokens [95 % CI] "
        "| budget stops |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    order = {p: i for i, p in enumerate(dict.fromkeys(points["planner"]))}
    on = points[points["frontier"]].sort_values(
        ["complexity", "planner", "tokens_mean"],
        key=lambda c: c.map(order) if c.name == "planner" else c,
        kind="stable",
    )
    for _, r in on.iterrows():
        lines.append(
            f"| {r['complexity']} | {r['planner']} | {r['point']} | {r['n']} | "
            f"{_pct(r['completion'])} [{_pct(r['completion_lo'])}, {_pct(r['completion_hi'])}] | "
            f"{r['tokens_mean']:,.0f} [{r['tokens_lo']:,.0f}, {r['tokens_hi']:,.0f}] | "
            f"{r['budget_stops']} |"
        )
    return "\n".join(lines) + "\n"
