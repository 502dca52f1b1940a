"""How far a ranking survives its assumptions: a grid over the simulator's decisive parameters.

``planarena experiment=sensitivity`` runs every planner on the same tasks in every cell of a
grid over the assumptions that decide rankings (judge noise, trap attraction, how often a
subtle warning sign is missed, the fault rates, how much of a model's error is a wrong belief
rather than a sampling slip), then reports for each pair of planners and each complexity (and
each env: several envs are kept apart, never pooled) whether the ordering by completion *holds*
in every cell, *mostly* holds, or *flips*, naming the cells where it flips, or whether the two
*tie* (complete equally often in every cell: no ordering to hold). ``experiment=budget_curves``
uses the same machinery over the per-episode token budget and plots completion against it.

A cell changes only skill fields, fault rates or the budget: the tasks, the planners and every
other setting are the run's own, so a cell differs from another by its parameters alone.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from planarena.experiments.studies.registry import Cell, Study, study

# A factor is a skill field of the simulated LLM, or one of these world/compute knobs.
WORLD_FACTORS = {
    "fault_rate_scale": "faults.rate_scale",
    "max_tokens_per_episode": "budget.max_tokens_per_episode",
}
VERDICT_MOSTLY = 0.2  # "mostly": the minority ordering in at most this share of decided cells
PAIR_COLUMNS = ("planner_a", "planner_b", "cells", "a_better", "b_better")
VERDICTS = ("holds", "mostly", "flips", "tie")  # "tie": no cell decides (equal everywhere)


def design(factors: Mapping[str, Sequence[Any]], corners: Sequence[str]) -> list[dict[str, Any]]:
    """The grid's cells: the centre (every factor at its middle level), one factor at a time
    at each other level, and the low/high corners of the ``corners`` factors (the rest at
    their middle). Duplicates are dropped; the order is fixed."""
    middle = {k: v[len(v) // 2] for k, v in factors.items()}
    cells = [dict(middle)]
    for name, levels in factors.items():
        for level in levels:
            cells.append({**middle, name: level})
    corner_levels = [(factors[n][0], factors[n][-1]) for n in corners]
    for combo in itertools.product(*corner_levels):
        cells.append({**middle, **dict(zip(corners, combo, strict=True))})
    unique: list[dict[str, Any]] = []
    for cell in cells:
        if cell not in unique:
            unique.append(cell)
    return unique


def cell_label(cell: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in cell.items())


def factor_override(name: str) -> str:
    """The config key a factor sets: a world knob's own, else a skill field of the simulated
    LLM."""
    return WORLD_FACTORS.get(name, f"llm.skill_overrides.{name}")


def grid_cells(factors: Mapping[str, Sequence[Any]], corners: Sequence[str]) -> list[Cell]:
    """The grid's cells as runnable :class:`Cell` objects (parameters as record columns)."""
    return [
        Cell(
            cell_label(c),
            columns=dict(c),
            overrides={factor_override(k): v for k, v in c.items()},
        )
        for c in design(factors, corners)
    ]


def check_sim(config: Mapping[str, Any]) -> None:
    if (config.get("llm") or {}).get("backend", "sim") != "sim":
        raise ValueError("a sensitivity grid varies the simulated LLM: use llm=sim")


def completion_table(records: pd.DataFrame) -> pd.DataFrame:
    """Completion per cell x env x complexity x planner (cells in grid order). Envs are kept
    apart, as in every table of a run: a grid over several envs does not pool them."""
    keys = ["cell", *group_keys(records), "planner"]
    table = records.groupby(keys, sort=False)["success"].agg(n="size", completion="mean")
    return table.reset_index()


def group_keys(table: pd.DataFrame) -> list[str]:
    """What a verdict is given per: the env (when the table has one) and the complexity."""
    return [k for k in ("env", "complexity") if k in table.columns]


def group_title(keys: Sequence[str], key: Any, *, several_envs: bool) -> str:
    """A group's heading: its complexity, with its env when the grid ran several."""
    values = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
    if several_envs and "env" in values:
        return f"{values['env']}: {values.get('complexity', '')}"
    return str(values.get("complexity", ""))


def verdicts(table: pd.DataFrame, planners: Sequence[str]) -> pd.DataFrame:
    """For each pair of planners and complexity (and env, when the table has one: envs are never
    pooled): in how many cells each one completes more,
    and whether the ordering holds (one side better in at least one cell and never worse),
    mostly holds (the minority ordering in at most 20 % of decided cells), flips, or is a tie
    (both complete exactly as often in every cell: there is no ordering, so it does not count
    as one that holds). Cells where both complete exactly as often decide nothing and are
    counted in neither column."""
    rows = []
    keys = group_keys(table)
    for key, part in table.groupby(keys, sort=False):
        group = dict(zip(keys, key, strict=True))
        wide = part.pivot(index="cell", columns="planner", values="completion")
        for a, b in itertools.combinations([p for p in planners if p in wide.columns], 2):
            diff = wide[a] - wide[b]
            a_better, b_better = int((diff > 0).sum()), int((diff < 0).sum())
            decided = a_better + b_better
            minority = min(a_better, b_better)
            if decided == 0:
                verdict = "tie"
            elif minority == 0:
                verdict = "holds"
            elif minority <= VERDICT_MOSTLY * decided:
                verdict = "mostly"
            else:
                verdict = "flips"
            leader = a if a_better >= b_better else b
            against = diff[diff < 0] if leader == a else diff[diff > 0]
            rows.append(
                {
                    "planner_a": a,
                    "planner_b": b,
                    **group,
                    "cells": len(wide),
                    "a_better": a_better,
                    "b_better": b_better,
                    "verdict": verdict,
                    "leader": leader if decided else "",
                    "against_leader": "; ".join(map(str, against.index)),
                }
            )
    return pd.DataFrame(rows)


def by_factor(
    table: pd.DataFrame,
    factors: Mapping[str, Sequence[Any]],
    cells: Sequence[Mapping[str, Any]],
    planners: Sequence[str],
) -> pd.DataFrame:
    """For each factor alone (the others at their middle level): the pairs of planners whose
    ordering by completion differs between the factor's low and high level, per complexity
    (and env).
    This is the verdict on each assumption: an empty list means no ranking hinges on it."""
    middle = {k: v[len(v) // 2] for k, v in factors.items()}
    rows = []
    for name, levels in factors.items():
        low, high = ({**middle, name: levels[0]}, {**middle, name: levels[-1]})
        if low not in cells or high not in cells:
            continue
        keys = group_keys(table)
        for key, part in table.groupby(keys, sort=False):
            wide = part.pivot(index="cell", columns="planner", values="completion")
            lo, hi = wide.loc[cell_label(low)], wide.loc[cell_label(high)]
            flipped = []
            for a, b in itertools.combinations([p for p in planners if p in wide.columns], 2):
                before, after = lo[a] - lo[b], hi[a] - hi[b]
                if before * after < 0:  # strictly reversed (a tie decides nothing)
                    flipped.append(f"{a}/{b}")
            rows.append(
                {
                    "factor": name,
                    "low": levels[0],
                    "high": levels[-1],
                    **dict(zip(keys, key, strict=True)),
                    "pairs_reversed": len(flipped),
                    "which": " ".join(flipped),
                }
            )
    return pd.DataFrame(rows)


def _markdown(
    table: pd.DataFrame,
    verdict: pd.DataFrame,
    cells: Sequence[Mapping[str, Any]],
    n: int,
    factors: pd.DataFrame,
) -> str:
    several_envs = "env" in table.columns and table["env"].nunique() > 1
    per = "env x planner x complexity" if several_envs else "planner x complexity"
    lines = [
        "# Sensitivity of the rankings",
        "",
        f"{len(cells)} grid cells, {n} tasks per {per} in each; every planner "
        "runs the same tasks in every cell. A pair's ordering **holds** if one planner "
        "completes at least as often in every cell and more often in at least one, **mostly** "
        f"if the other ordering appears in at most {VERDICT_MOSTLY:.0%} of the cells that "
        "decide (ties decide nothing), else it **flips**; a **tie** is a pair that completes "
        "equally often in every cell (no cell decides, so no ordering). With few tasks per "
        "cell a flip between close planners can be noise: read the cells listed against the "
        "leader.",
        "",
        "## Cells",
        "",
    ]
    lines += [f"- `{cell_label(c)}`" for c in cells]
    if not factors.empty:
        env_head, env_rule = ("env | ", "---|") if several_envs else ("", "")
        lines += [
            "",
            "## By assumption",
            "",
            "Each factor alone from its low to its high level (the others at their middle): the "
            "pairs whose ordering is strictly reversed.",
            "",
            f"| factor | low → high | {env_head}complexity | pairs reversed | which |",
            f"|---|---|{env_rule}---|---|---|",
        ]
        for r in factors.itertuples():
            env = f"{r.env} | " if several_envs else ""
            lines.append(
                f"| {r.factor} | {r.low} → {r.high} | {env}{r.complexity} | "
                f"{r.pairs_reversed} | {r.which or '—'} |"
            )
    keys = group_keys(verdict)
    for key, part in verdict.groupby(keys, sort=False):
        lines += ["", f"## {group_title(keys, key, several_envs=several_envs)}", ""]
        counts = part.verdict.value_counts()
        lines.append(", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS) + " (pairs)")
        lines += ["", "| a | b | a better | b better | verdict | cells against the leader |"]
        lines.append("|---|---|---|---|---|---|")
        for r in part.itertuples():
            against = r.against_leader or "—"
            lines.append(
                f"| {r.planner_a} | {r.planner_b} | {r.a_better} | {r.b_better} | "
                f"**{r.verdict}** | {against} |"
            )
        mask = pd.Series(True, index=table.index)
        for k, v in zip(keys, key, strict=True):
            mask &= table[k] == v
        comp = table[mask].pivot(index="cell", columns="planner", values="completion")
        lines += ["", "Completion per cell:", "", comp.round(2).to_markdown()]
    return "\n".join(lines) + "\n"


@study("sensitivity")
class Sensitivity(Study):
    """Every planner on the same tasks in every cell of a grid over the simulator's
    assumptions; per pair of planners: holds, mostly, flips or tie."""

    def cells(self, config: Mapping[str, Any]) -> list[Cell]:
        check_sim(config)
        spec = config.get("sensitivity") or {}
        return grid_cells(spec.get("factors") or {}, spec.get("corners") or [])

    def render(
        self, records: pd.DataFrame, config: Mapping[str, Any], out_dir: Path, *, seed: int
    ) -> str:
        """Write sensitivity.md / .csv, sensitivity_cells.csv (completion per cell) and
        sensitivity_factors.csv from the run's records."""
        del seed
        spec = config.get("sensitivity") or {}
        factors = spec.get("factors") or {}
        cells = design(factors, spec.get("corners") or [])
        planners = list(config["planner"])
        table = completion_table(in_grid_order(records, cells))
        verdict = verdicts(table, planners)
        if verdict.empty:  # one planner: no pair to order (the file keeps its columns)
            verdict = pd.DataFrame(columns=[*PAIR_COLUMNS, *group_keys(table), "verdict"])
        out_dir.mkdir(parents=True, exist_ok=True)
        table.to_csv(out_dir / "sensitivity_cells.csv", index=False)
        columns = ["planner_a", "planner_b", *group_keys(verdict), "cells", "a_better", "b_better"]
        verdict[[*columns, "verdict"]].to_csv(out_dir / "sensitivity.csv", index=False)
        per_factor = by_factor(table, factors, cells, planners)
        per_factor.to_csv(out_dir / "sensitivity_factors.csv", index=False)
        text = _markdown(table, verdict, cells, int(config["n_tasks"]), per_factor)
        (out_dir / "sensitivity.md").write_text(text, encoding="utf-8")
        counts = verdict.verdict.value_counts()
        groups = "envs x complexities" if table["env"].nunique() > 1 else "complexities"
        return (
            f"Sensitivity: {len(cells)} cells; pairs x {groups}: "
            + ", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS)
            + f" — {out_dir / 'sensitivity.md'}"
        )


def in_grid_order(records: pd.DataFrame, cells: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The records of the grid's cells, in grid order (the records' file order is job order,
    but a resumed run may have appended cells in another order)."""
    order = {cell_label(c): i for i, c in enumerate(cells)}
    if "cell" not in records.columns:
        raise ValueError("these records have no cell column: not a study grid's run")
    kept = records[records["cell"].isin(order)]
    rank = kept["cell"].map(order)
    return kept.iloc[rank.argsort(kind="stable")].reset_index(drop=True)
