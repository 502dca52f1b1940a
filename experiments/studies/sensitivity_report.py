"""``sensitivity.md``: the verdicts, what each assumption reverses, and the design, in words."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd
from planarena.experiments.studies.sensitivity_stats import VERDICTS, Settings

if TYPE_CHECKING:
    from planarena.experiments.studies.sensitivity_design import Design

TOP_PAIRS = 5


def group_title(row: Mapping[str, Any], *, several_envs: bool) -> str:
    """A group's heading: its complexity, with its env when the study ran several."""
    if several_envs and "env" in row:
        return f"{row['env']}: {row.get('complexity', '')}"
    return str(row.get("complexity", ""))


def _pct(x: float) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:+.1f}"


def _interval(x: float, low: float, high: float) -> str:
    return f"{_pct(x)} [{_pct(low)}, {_pct(high)}]"


def _counts(part: pd.DataFrame) -> str:
    counts = part["verdict"].value_counts()
    return ", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS)


def _method(design: Design, n_tasks: int, settings: Settings, cells: int) -> list[str]:
    k, f = cells, len(design.factors)
    aliasing = {
        3: "resolution III: a factor's effect is aliased with two-factor interactions of "
        "others, so read it as that factor's or such an interaction's; "
        "`sensitivity.runs` twice as large separates them",
        4: "resolution IV: main effects are clear of two-factor interactions",
    }.get(design.resolution, "main effects clear of two- and three-factor interactions")
    return [
        f"{cells} cells: the centre (every factor at its middle level) and a {design.runs}-run "
        f"two-level fractional factorial over {f} factors (design seed {design.seed}; each "
        f"factor at its low level in half the runs and its high level in the other half, "
        f"balanced against every other factor; {aliasing}). {n_tasks} tasks per env x "
        "complexity in each cell; every planner runs the same tasks in every cell.",
        "",
        "Per cell a pair's paired difference of completion (a - b, percentage points) has an "
        "exact interval (McNemar: Clopper-Pearson on the tasks where the two differ) at "
        f"{1 - settings.alpha / k:.2%} confidence, Bonferroni over the {k} cells of the pair; "
        "pooled over every cell, a task-bootstrap interval at "
        f"{1 - settings.alpha:.0%} ({settings.n_boot} resamples of tasks with all their "
        "cells, seeded), which counts only when the exact sign test over tasks agrees. "
        "**holds**: one planner is better pooled and no cell is significantly the other way; "
        "**depends**: significant in some cells, without such a pooled ordering; **flips**: "
        "significant both ways in different cells; **unresolved**: nothing significant; "
        "**tie**: identical outcomes on every task in every cell. Pairs and groups are not "
        f"corrected against each other: of pairs that do not differ at all, up to "
        f"{settings.alpha:.0%} can get a verdict other than unresolved by chance.",
    ]


def _by_factor(factors: pd.DataFrame, design: Design, several_envs: bool) -> list[str]:
    """Per factor: the orderings it reverses (significant one way at its low level and the
    other way at its high level) and the pairs it moves (a significant effect)."""
    lines = [
        "",
        "## By assumption",
        "",
        "Each factor from its low to its high level, over the design's runs (the others "
        "balanced): the pooled difference at each level and the effect (high - low) have "
        f"task-bootstrap intervals, Bonferroni over the {len(design.factors)} factors. An "
        "ordering is **reversed** when it is significant one way at the low level and the "
        "other way at the high level; a pair is **moved** when the effect is significant.",
        "",
        "| factor | key | low → high | orderings reversed | pairs moved | largest effect |",
        "|---|---|---|---|---|---|",
    ]
    for f in design.factors:
        part = factors[factors["factor"] == f.name] if len(factors) else factors
        reversed_ = part[part["reverses"]] if len(part) else part
        moved = part[part["moves"]] if len(part) else part
        names = [_reversal(r, several_envs) for r in reversed_.to_dict("records")]
        largest = "—"
        if len(moved):
            top = moved.loc[moved["effect"].abs().idxmax()]
            largest = f"{_pair(top, several_envs)} {_pct(top['effect'])}"
        lines.append(
            f"| {f.name} | `{f.key}` | {f.low} → {f.high} | {'; '.join(names) or 'none'} | "
            f"{len(moved)} | {largest} |"
        )
    return lines


def _pair(row: Mapping[str, Any], several_envs: bool) -> str:
    return (
        f"{row['planner_a']} vs {row['planner_b']} ({group_title(row, several_envs=several_envs)})"
    )


def _reversal(row: Mapping[str, Any], several_envs: bool) -> str:
    a, b = row["planner_a"], row["planner_b"]
    first, then = (a, b) if row["at_low"] > 0 else (b, a)
    return f"{first} > {then} → {then} > {first} ({group_title(row, several_envs=several_envs)})"


def _top_pairs(verdicts: pd.DataFrame, several_envs: bool) -> list[str]:
    """The pairs of planners whose ordering is most contested: ranked by the number of groups
    where it flips or depends, then by the largest significant factor effect; each shown in
    its group with that effect (a contested one first) and the factor."""
    head = ["", "## The pairs an assumption decides", ""]
    moved = verdicts[verdicts["factor"].fillna("").astype(str) != ""] if len(verdicts) else verdicts
    if not len(moved):
        return [*head, "No factor moves any pair."]
    pair = ["planner_a", "planner_b"]
    contested = (
        verdicts["verdict"].isin(["flips", "depends"]).groupby([verdicts[k] for k in pair]).sum()
    )
    ranked = moved.assign(
        _groups=[
            -int(contested[(a, b)]) for a, b in zip(moved[pair[0]], moved[pair[1]], strict=True)
        ],
        _here=~moved["verdict"].isin(["flips", "depends"]),
        _size=-moved["effect"].abs(),
    ).sort_values(["_groups", "_here", "_size"], kind="stable")
    top = ranked.drop_duplicates(pair).head(TOP_PAIRS)
    lines = [
        *head,
        f"The {TOP_PAIRS} pairs of planners whose ordering is most contested (the most groups "
        "where it flips or depends), each in its group where a factor moves it most, and that "
        "factor: the one with the largest significant effect on the pair's paired difference.",
        "",
        "| pair | verdict | contested in | pooled a - b | deciding factor | effect (high - low) |",
        "|---|---|---|---|---|---|",
    ]
    groups = verdicts.groupby(pair).size()
    for r in top.to_dict("records"):
        key = (r["planner_a"], r["planner_b"])
        lines.append(
            f"| {_pair(r, several_envs)} | {r['verdict']} | {contested[key]} of {groups[key]} "
            f"groups | {_interval(r['pooled_diff'], r['pooled_low'], r['pooled_high'])} | "
            f"{r['factor']} | {_interval(r['effect'], r['effect_low'], r['effect_high'])} |"
        )
    return lines


def _design_table(design: Design) -> list[str]:
    names = [f.name for f in design.factors]
    lines = ["", "## Design", "", "| cell | " + " | ".join(names) + " |"]
    lines.append("|---|" + "---|" * len(names))
    for label, values in zip(design.labels, design.values, strict=True):
        lines.append(f"| {label} | " + " | ".join(str(values[n]) for n in names) + " |")
    if design.left_out:
        lines += ["", "Left out of this run's design:", ""]
        lines += [f"- {name}: {why}" for name, why in design.left_out.items()]
    return lines


def _groups(verdicts: pd.DataFrame, keys: Sequence[str], several_envs: bool) -> list[str]:
    lines: list[str] = []
    for _, part in verdicts.groupby(list(keys), sort=False):
        first = part.iloc[0].to_dict()
        lines += ["", f"## {group_title(first, several_envs=several_envs)}", ""]
        lines += [_counts(part) + " (pairs)", ""]
        lines.append(
            "| a | b | pooled a - b [interval] | cells a / b significant | verdict | leader | "
            "deciding factor |"
        )
        lines.append("|---|---|---|---|---|---|---|")
        for r in part.to_dict("records"):
            factor = r["factor"] or "—"
            if r["factor"]:
                factor += f" ({_pct(r['effect'])})"
            lines.append(
                f"| {r['planner_a']} | {r['planner_b']} | "
                f"{_interval(r['pooled_diff'], r['pooled_low'], r['pooled_high'])} | "
                f"{r['cells_a']} / {r['cells_b']} | **{r['verdict']}** | "
                f"{r['leader'] or '—'} | {factor} |"
            )
    return lines


def markdown(
    verdicts: pd.DataFrame,
    factors: pd.DataFrame,
    design: Design,
    n_tasks: int,
    settings: Settings,
    several_envs: bool,
) -> str:
    """The study's report: method, verdict counts, per factor the orderings it reverses, the
    pairs an assumption moves most, the design, and every pair's verdict per group."""
    lines = ["# Sensitivity of the rankings", ""]
    lines += _method(design, n_tasks, settings, len(design.labels))
    keys = [k for k in ("env", "complexity") if k in verdicts.columns]
    lines += ["", "## Verdicts", ""]
    if not len(verdicts):
        lines.append("One planner: no pair to order.")
    else:
        lines.append(f"{_counts(verdicts)} (pairs x {' x '.join(keys) or 'groups'}).")
        lines += ["", "| " + " | ".join([*keys, *VERDICTS]) + " |"]
        lines.append("|" + "---|" * (len(keys) + len(VERDICTS)))
        for key, part in verdicts.groupby(keys, sort=False):
            values = key if isinstance(key, tuple) else (key,)
            counts = part["verdict"].value_counts()
            cols = [*map(str, values), *(str(counts.get(v, 0)) for v in VERDICTS)]
            lines.append("| " + " | ".join(cols) + " |")
    lines += _by_factor(factors, design, several_envs)
    lines += _top_pairs(verdicts, several_envs)
    lines += _design_table(design)
    if len(verdicts):
        lines += _groups(verdicts, keys, several_envs)
    return "\n".join(lines) + "\n"
