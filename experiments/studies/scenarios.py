"""The first source article's scenario map, measured (``experiment=scenarios``).

The article (point 6 of its summary in ``docs/source_articles.md``) recommends one search
algorithm per kind of task: BFS for short optimal paths such as code generation, DFS with
pruning for web navigation, MCTS for long uncertain sequences such as research reports, and
topological sorting when the dependencies are known (data pipelines); the second (Article B)
recommends Plan-and-Execute for well-structured multi-hop RAG questions. This report gives, for
each family in the run (all its complexities pooled, the task as the unit), every planner's
completion (Wilson 95 %), cost per completed task (all the cell's cost over its completions,
task-bootstrap 95 %) and P99 latency (task-bootstrap 95 %); the best planner by each, and the
planners whose interval overlaps the best one's (not separable from it at this n). The closing
note compares the measured best with the article's pick, family by family. Nothing is tuned to
match the article: the families, the simulator and the planners are what every other run uses.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from planarena.experiments.analysis.stats import (
    derive_seed,
    percentile,
    task_bootstrap_percentile,
    task_weights,
    wilson_interval,
)
from planarena.experiments.studies.registry import Study, study

# The article's recommendation per scenario (families named after the scenarios they model).
ARTICLE_PICK = {
    "code_gen": "bfs",
    "web_nav": "dfs",
    "research": "mcts",
    "pipeline": "topo",
    "rag": "plan_execute",  # Article B: plan first, then execute, for structured questions
}
ARTICLE_WHY = {
    "code_gen": "BFS, beam 3: short optimal paths (3-5 steps)",
    "web_nav": "DFS with pruning: a feasible path fast (10-20 steps)",
    "research": "MCTS: long, uncertain sequences (20+ steps)",
    "pipeline": "topological sort: dependencies known",
    "rag": "Article B, Plan-and-Execute: complex but well-structured questions",
}
N_BOOT = 1000


def _rng(seed: int, *parts: object) -> np.random.Generator:
    return np.random.default_rng(derive_seed(seed, *parts))


def _cost_interval(
    cost: np.ndarray, successes: np.ndarray, rng: np.random.Generator
) -> tuple[float, float]:
    """Task-bootstrap 95 % interval of sum(cost) / sum(successes); a resample without a
    completion costs infinitely much per completion (kept, not dropped, so the upper end is
    honest), and the interval's ends are resampled values (no interpolation with infinity)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        stats = np.concatenate(
            [(w @ cost) / (w @ successes) for w in task_weights(rng, cost.size, N_BOOT)]
        )
    stats = np.where(np.isfinite(stats), stats, np.inf)
    low, high = np.quantile(stats, [0.025, 0.975], method="inverted_cdf")
    return float(low), float(high)


def scenario_table(df: pd.DataFrame, *, seed: int = 0) -> pd.DataFrame:
    """One row per env x planner: completion, cost per completion and P99, with intervals."""
    rows: list[dict[str, Any]] = []
    for (env, planner), sub in df.groupby(["env", "planner"], sort=False):
        success = sub["success"].astype(bool).to_numpy()
        n, k = int(success.size), int(success.sum())
        low, high = wilson_interval(k, n)
        task = pd.factorize(sub["complexity"].astype(str) + "/" + sub["task_id"].astype(str))[0]
        cost = sub["cost_usd"].astype(float).fillna(math.nan).to_numpy()
        cps = float(np.nansum(cost) / k) if k else math.nan
        if k and not np.isnan(cost).any():
            c_low, c_high = _cost_interval(
                np.bincount(task, weights=cost),
                np.bincount(task, weights=success.astype(float)),
                _rng(seed, "scenarios", env, planner, "cost"),
            )
        else:
            c_low = c_high = math.nan
        latency = sub["latency_s"].astype(float).to_numpy()
        p_low, p_high = task_bootstrap_percentile(
            latency, task, 99, rng=_rng(seed, "scenarios", env, planner, "p99"), n_boot=N_BOOT
        )
        rows.append(
            {
                "env": env,
                "planner": planner,
                "n": n,
                "completion": k / n if n else math.nan,
                "completion_ci_low": low,
                "completion_ci_high": high,
                "cost_per_completion": cps,
                "cost_ci_low": c_low,
                "cost_ci_high": c_high,
                "latency_p99": percentile(latency, 99),
                "p99_ci_low": p_low,
                "p99_ci_high": p_high,
            }
        )
    return pd.DataFrame(rows)


def _best(
    part: pd.DataFrame, col: str, low: str, high: str, *, larger: bool
) -> tuple[str, list[str]]:
    """(best planner, planners whose interval overlaps the best's interval)."""
    valid = part[part[col].notna()]
    if valid.empty:
        return "-", []
    row = valid.loc[valid[col].idxmax() if larger else valid[col].idxmin()]
    lo, hi = row[low], row[high]
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return str(row["planner"]), []
    tied = [
        str(r["planner"])
        for _, r in valid.iterrows()
        if r["planner"] != row["planner"] and r[high] >= lo and r[low] <= hi
    ]
    return str(row["planner"]), tied


def _fmt_rate(r: pd.Series) -> str:
    return (
        f"{100 * r['completion']:.0f}% [{100 * r['completion_ci_low']:.0f}, "
        f"{100 * r['completion_ci_high']:.0f}]"
    )


def _fmt_cost(r: pd.Series) -> str:
    if not np.isfinite(r["cost_per_completion"]):
        return "n/a"
    if not np.isfinite(r["cost_ci_low"]):
        return f"${r['cost_per_completion']:.4f}"
    return f"${r['cost_per_completion']:.4f} [{r['cost_ci_low']:.4f}, {r['cost_ci_high']:.4f}]"


def _fmt_p99(r: pd.Series) -> str:
    return f"{r['latency_p99']:.0f} s [{r['p99_ci_low']:.0f}, {r['p99_ci_high']:.0f}]"


def _against_article(env: str, part: pd.DataFrame, bests: dict[str, tuple[str, list[str]]]) -> str:
    """One line: where the article's pick for ``env`` stands by each metric ("" when the
    article picks nothing for it)."""
    pick = ARTICLE_PICK.get(env)
    if pick is None:
        return ""
    if pick not in set(part["planner"]):
        return f"- {env}: the article's pick ({pick}) was not in this run."
    said = []
    for metric, (best, tied) in bests.items():
        if best == pick:
            said.append(f"best by {metric}")
        elif pick in tied:
            said.append(f"not separable from the best ({best}) by {metric}")
        else:
            said.append(f"behind {best} by {metric}")
    verdict = (
        "agrees (best by completion)"
        if said[0].startswith("best")
        else "consistent (not separated from the best by completion at this n)"
        if said[0].startswith("not separable")
        else "disagrees (separably behind the best by completion)"
    )
    return (
        f"- **{env}** — article: {ARTICLE_WHY[env]}. Measured: {pick} is "
        f"{'; '.join(said)}. Verdict: {verdict}."
    )


def render(df: pd.DataFrame, container: dict[str, Any], out_dir: Path, *, seed: int) -> str:
    """Write ``scenarios.md`` and ``scenarios.csv``; return the markdown."""
    del container
    table = scenario_table(df, seed=seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    table.to_csv(out_dir / "scenarios.csv", index=False)
    lines = [
        "# Scenarios: which planner wins on which kind of task",
        "",
        "Per family, all complexities pooled; completion with its 95 % Wilson interval, cost "
        "per completed task (all cost / completions) and P99 latency with 95 % task-bootstrap "
        "intervals. *Best*: the best point estimate; *not separable*: planners whose interval "
        "overlaps the best one's. P99 latency is compared among the planners not separably "
        "behind the best by completion (failing fast is not being fast).",
        "",
    ]
    verdicts: list[str] = []
    for env, part in table.groupby("env", sort=False):
        part = part.reset_index(drop=True)
        lines += [f"## {env} (n = {int(part['n'].max())} episodes per planner)", ""]
        lines += [
            "| planner | completion | cost / completed task | P99 latency |",
            "|---|---|---|---|",
        ]
        for _, r in part.iterrows():
            lines.append(f"| {r['planner']} | {_fmt_rate(r)} | {_fmt_cost(r)} | {_fmt_p99(r)} |")
        top, tied_top = _best(
            part, "completion", "completion_ci_low", "completion_ci_high", larger=True
        )
        # a planner that fails fast has a low P99: latency is compared among the planners
        # whose completion is not separably behind the best's
        contenders = part[part["planner"].isin([top, *tied_top])]
        bests = {
            "completion": (top, tied_top),
            "cost per completed task": _best(
                part, "cost_per_completion", "cost_ci_low", "cost_ci_high", larger=False
            ),
            "P99 latency": _best(
                contenders, "latency_p99", "p99_ci_low", "p99_ci_high", larger=False
            ),
        }
        lines.append("")
        for metric, (best, tied) in bests.items():
            extra = f" (not separable: {', '.join(tied)})" if tied else " (separable from all)"
            lines.append(f"- best by {metric}: **{best}**{extra}")
        lines.append("")
        verdict = _against_article(str(env), part, bests)
        if verdict:
            verdicts.append(verdict)
    if verdicts:
        lines += ["## Against the article's recommendation", "", *verdicts, ""]
        lines.append(
            "These are measurements under the stated assumptions (the simulated LLM's skill, "
            "the fault rates, latency and price profiles, the search budgets in "
            "configs/planner/, n above); the article's map is a recommendation, not a "
            "measurement. Where the intervals overlap, this run does not separate the planners."
        )
    text = "\n".join(lines)
    (out_dir / "scenarios.md").write_text(text + "\n", encoding="utf-8")
    return text


@study("scenarios")
class Scenarios(Study):
    """A plain run's records, rendered as this study's tables (one cell)."""

    def render(
        self, records: pd.DataFrame, config: Mapping[str, Any], out_dir: Path, *, seed: int
    ) -> str:
        return render(records, dict(config), out_dir, seed=seed)
