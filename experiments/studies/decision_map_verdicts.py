"""The first source article's ladder and four decisions, each judged on paired intervals.

Each rule names two strategies, the task lengths it is about and what it claims:

- ``better``: ``a`` completes more than ``b``. Per cell of the grid (skill x fault rate,
  correlation and budget cells) the exact paired interval (Bonferroni over the cells), pooled
  over the cells a task bootstrap guarded by the sign test (:mod:`.sensitivity_stats`);
  ``confirmed`` when the pooled ordering holds for ``a`` with no cell significantly the other
  way, ``not confirmed`` when it holds for ``b``, ``depends on <factor>`` when cells disagree
  (the factor whose low and high levels move the difference most, or the task family when
  families disagree), ``unresolved at this n`` when nothing is significant.
- ``suffices``: ``a`` is not worse than ``b`` by more than :data:`MARGIN` (the pooled
  interval's lower end above -5 points, no cell significantly for ``b``), and, where the rule
  is about cost, ``a`` is separably cheaper per completed task (paired task bootstrap).
- ``reasoning``: with the reasoning profile, ToT against the linear plan (it "rarely pays")
  and the ReAct vs Plan-and-Execute gap (it "narrows"), from the skill factor's effect.
- ``format``: the same planners with JSON and with natural-language plans, paired over tasks,
  at the skill the rule names.

A rule whose strategy, skill or format the run lacks is ``not tested`` and says why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from planarena.experiments.analysis.stats import (
    boot_rng,
    derive_seed,
    percentile_interval,
    sign_test_p,
    task_weights,
)
from planarena.experiments.studies.sensitivity_stats import (
    Settings as StatSettings,
)
from planarena.experiments.studies.sensitivity_stats import (
    _deciding,
    bootstrap_cell_sums,
    cell_rows,
    factor_rows,
    groups_of,
    net_win_interval,
    pooled_row,
    sign_of,
    verdict_of,
)

if TYPE_CHECKING:
    from planarena.experiments.studies.decision_map_core import Settings

MARGIN = 0.05
"""How much worse a strategy that "suffices" may be, at most (the pooled interval's end)."""

FACTOR_NAMES = {
    "fault_rate": "fault rate",
    "judge_correlation": "generator-verifier correlation",
    "token_budget": "token budget",
}


@dataclass(frozen=True)
class Rule:
    """One claim of the article, as tested."""

    rid: str
    claim: str
    test: str
    kind: str  # better | suffices | reasoning | format
    a: str = ""
    b: str = ""
    min_steps: int | None = None
    max_steps: int | None = None
    cost: bool = False
    skill: str = ""


RULES: tuple[Rule, ...] = (
    Rule(
        "ladder 1",
        "ReAct while tasks have at most 3-5 steps and tools are stable",
        "ReAct not worse than Plan-and-Execute + replanning by more than 5 points on tasks of "
        "at most 5 steps",
        "suffices",
        "react",
        "plan_execute_replan",
        max_steps=5,
    ),
    Rule(
        "ladder 2",
        "Plan-and-Execute with replanning once tasks exceed 5-8 steps",
        "Plan-and-Execute + replanning completes more than ReAct on tasks of more than 8 steps",
        "better",
        "plan_execute_replan",
        "react",
        min_steps=9,
    ),
    Rule(
        "ladder 3",
        "ToT (beam 3-5) with a parallel DAG when the first plan is the problem and the budget "
        "allows 3-4x the tokens",
        "ToT completes more than Plan-and-Execute + replanning (all lengths; its token ratio "
        "in the numbers)",
        "better",
        "tot",
        "plan_execute_replan",
    ),
    Rule(
        "decision 1",
        "Plan-and-Execute beats ReAct",
        "Plan-and-Execute + replanning completes more than ReAct on tasks of 4 steps or more",
        "better",
        "plan_execute_replan",
        "react",
        min_steps=4,
    ),
    Rule(
        "decision 1 flip",
        "... unless the task has at most 3 steps and needs no tool: ReAct's overhead is lower",
        "on tasks of at most 3 steps (every task here needs tools), ReAct not worse by more "
        "than 5 points and separably cheaper per completed task",
        "suffices",
        "react",
        "plan_execute_replan",
        max_steps=3,
        cost=True,
    ),
    Rule(
        "decision 2",
        "ToT beats a single linear plan",
        "ToT completes more than Plan-and-Execute + replanning on tasks of 5 steps or more",
        "better",
        "tot",
        "plan_execute_replan",
        min_steps=5,
    ),
    Rule(
        "decision 2 flip",
        "... unless tasks have at most 4 steps and cost matters: the linear plan suffices",
        "on tasks of at most 4 steps, Plan-and-Execute + replanning not worse than ToT by more "
        "than 5 points and separably cheaper per completed task",
        "suffices",
        "plan_execute_replan",
        "tot",
        max_steps=4,
        cost=True,
    ),
    Rule(
        "decision 2 flip (reasoning)",
        "... with a reasoning model as planner, external ToT rarely pays and the ReAct / "
        "Plan-and-Execute gap narrows",
        "at skill=reasoning, ToT not better than Plan-and-Execute + replanning by more than 5 "
        "points, and |ReAct - Plan-and-Execute + replanning| smaller than at strong skill",
        "reasoning",
        "tot",
        "plan_execute_replan",
        skill="reasoning",
    ),
    Rule(
        "decision 3",
        "Dynamic replanning beats a static plan (static plans complete 25-40 % less on complex "
        "tasks)",
        "Plan-and-Execute + replanning completes more than static Plan-and-Execute on tasks of "
        "more than 8 steps",
        "better",
        "plan_execute_replan",
        "plan_execute",
        min_steps=9,
    ),
    Rule(
        "decision 3 flip",
        "... unless tasks can be rerun idempotently and cheaply: a static plan rerun from "
        "scratch is simpler",
        "on tasks of at most 5 steps (every tool here is idempotent: a rerun meets the same "
        "world), the static plan rerun not worse than replanning by more than 5 points and "
        "separably cheaper per completed task",
        "suffices",
        "plan_execute_rerun",
        "plan_execute_replan",
        max_steps=5,
        cost=True,
    ),
    Rule(
        "decision 4",
        "JSON plans beat natural-language plans",
        "at strong skill, the plan planners complete more with JSON than with text plans",
        "format",
        "json",
        "text",
        skill="strong",
    ),
    Rule(
        "decision 4 flip",
        "... unless the planner cannot emit valid JSON reliably: a natural-language plan with a "
        "lenient parser is more stable",
        "at skill=weak_json, the plan planners complete more with text than with JSON plans",
        "format",
        "text",
        "json",
        skill="weak_json",
    ),
)


def _pct(x: float) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{100 * x:.0f} %"


def _pp(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{100 * x:+.1f}"


def _scope(data: pd.DataFrame, rule: Rule) -> pd.DataFrame:
    keep = np.ones(len(data), dtype=bool)
    if rule.min_steps is not None:
        keep &= data["steps"].to_numpy() >= rule.min_steps
    if rule.max_steps is not None:
        keep &= data["steps"].to_numpy() <= rule.max_steps
    return data[keep]


def contexts(data: pd.DataFrame) -> list[str]:
    """The cells a pair is compared in: every cell but the plan-format ones, in run order."""
    return list(dict.fromkeys(data.loc[data["dm_kind"] != "format", "cell"]))


def factor_levels(data: pd.DataFrame, cells: Sequence[str], s: Settings) -> dict[str, list[int]]:
    """Per factor, each cell's level: -1 low, +1 high, 0 neither (two-level contrasts of
    the grid and of the one-at-a-time cells)."""
    first = data.drop_duplicates("cell").set_index("cell")
    info = first.reindex(list(cells))
    grid = info["dm_kind"] == "grid"
    rate = info["fault_rate_scale"].astype(float)
    out: dict[str, list[int]] = {}
    if len(s.fault_rates) > 1:
        lo, hi = min(s.fault_rates), max(s.fault_rates)
        out["fault_rate"] = [
            (-1 if r == lo else 1 if r == hi else 0) if g else 0
            for g, r in zip(grid, rate, strict=True)
        ]
    for skill in s.skills[1:] if s.skills[0] == "strong" else s.skills:
        if skill == "strong":
            continue
        out[f"skill {skill}"] = [
            (-1 if k == "strong" else 1 if k == skill else 0) if g else 0
            for g, k in zip(grid, info["skill"], strict=True)
        ]
    if len(s.correlations) >= 2:
        lo, hi = min(s.correlations), max(s.correlations)
        out["judge_correlation"] = [
            (-1 if c == lo else 1 if c == hi else 0) if k == "corr" else 0
            for k, c in zip(info["dm_kind"], info["judge_correlation"], strict=True)
        ]
    if s.budgets:
        tight = min(s.budgets)
        ref = cells[0] if cells else ""
        out["token_budget"] = [
            -1 if (k == "budget" and b == tight) else 1 if c == ref else 0
            for c, k, b in zip(cells, info["dm_kind"], info["token_budget"], strict=True)
        ]
    return out


def _family_split(scope: pd.DataFrame, a: str, b: str, cells: Sequence[str], alpha: float) -> str:
    """Families where ``a`` is separably ahead and where ``b`` is (sign test over tasks,
    each task's difference summed over the cells); '' unless both exist."""
    ahead: dict[int, list[str]] = {1: [], -1: []}
    for env, part in scope.groupby("env", sort=True, observed=True):
        part = part[part["cell"].isin(cells) & part["planner"].isin([a, b])]
        wide = part.pivot_table(index=["task", "cell"], columns="planner", values="success")
        if a not in wide or b not in wide:
            continue
        per = (wide[a] - wide[b]).groupby(level="task").sum()
        wins, losses = int((per > 0).sum()), int((per < 0).sum())
        if sign_test_p(wins, losses) < alpha:
            ahead[1 if wins > losses else -1].append(str(env))
    if ahead[1] and ahead[-1]:
        return f"task family ({a} ahead on {', '.join(ahead[1])}; {b} on {', '.join(ahead[-1])})"
    return ""


def pair_test(
    scope: pd.DataFrame, a: str, b: str, s: Settings, seed: int, rid: str
) -> dict[str, Any] | None:
    """The pair's per-cell intervals, pooled difference, factor effects and verdict."""
    cells = contexts(scope)
    part = scope[scope["planner"].isin([a, b]) & scope["cell"].isin(cells)].copy()
    if part.empty or {a, b} - set(part["planner"]):
        return None
    part["_scope"] = rid
    settings = StatSettings(alpha=s.alpha, n_boot=s.n_boot, seed=seed)
    part = part.rename(columns={"task": "_task"}).assign(task_id=lambda d: d["_task"])
    (group,) = groups_of(part, cells, [a, b], ["_scope"])
    per_cell = cell_rows(group, a, b, settings)
    d = group.rates[a] - group.rates[b]
    d = d[~np.isnan(d).any(axis=1)]
    boot = bootstrap_cell_sums(d, derive_seed(seed, "decision_map", rid), s.n_boot)
    pooled = pooled_row(d, boot, settings)
    effects = factor_rows(d, boot, factor_levels(scope, cells, s), settings)
    signs = [r["significant"] for r in per_cell]
    identical = all(r["wins_a"] == r["wins_b"] == 0 for r in per_cell)
    verdict = verdict_of(signs, pooled["pooled_sign"], identical)
    deciding = _deciding(effects)
    family = _family_split(part.rename(columns={"_task": "task"}), a, b, cells, s.alpha)
    return {
        "pooled": pooled,
        "cells_a": signs.count(1),
        "cells_b": signs.count(-1),
        "n_cells": len(cells),
        "verdict": verdict,
        "deciding": deciding,
        "family": family,
        "effects": effects,
        "rate_a": float(np.nanmean(group.rates[a])),
        "rate_b": float(np.nanmean(group.rates[b])),
    }


LEVEL_NAMES = {
    "fault_rate": ("lowest fault rate", "highest"),
    "judge_correlation": ("correlation 0", "correlation 1"),
    "token_budget": ("tightest budget", "no budget"),
}


def _factor_label(t: Mapping[str, Any]) -> str:
    """The deciding factor with the pair's difference at its two levels and the effect."""
    top = t["deciding"]
    if top.get("factor"):
        name = FACTOR_NAMES.get(top["factor"], top["factor"])
        effect = next(e for e in t["effects"] if e["factor"] == top["factor"])
        low, high = LEVEL_NAMES.get(top["factor"], ("strong", top["factor"].split()[-1]))
        return (
            f"{name}: {_pp(effect['at_low'])} pp at {low}, {_pp(effect['at_high'])} pp at "
            f"{high} (effect {_pp(top['effect'])} [{_pp(top['effect_low'])}, "
            f"{_pp(top['effect_high'])}])"
        )
    return t["family"] or ""


def _factor_name(t: Mapping[str, Any]) -> str:
    """The deciding factor's name alone (the verdict's words), or the family split."""
    top = t["deciding"].get("factor")
    if top:
        return FACTOR_NAMES.get(top, top)
    return t["family"].split(" (")[0] if t["family"] else "the cell (no single factor)"


def _cost_test(
    scope: pd.DataFrame, a: str, b: str, s: Settings, seed: int
) -> tuple[float, float, float, float]:
    """(cost per completed task of a, of b, paired bootstrap interval of a - b) over the
    rule's tasks x cells (each task in each cell a unit)."""
    from planarena.experiments.studies.decision_map_core import _ratio, paired_boot, per_task

    part = scope[scope["cell"].isin(contexts(scope))]
    part = part.assign(task=part["task"] + "@" + part["cell"].astype(str))
    tasks = per_task(part, [a, b])
    if len(tasks) < 2:
        return (math.nan,) * 4
    ta, tb = tasks[a], tasks[b]
    ca = _ratio(ta["cost"].to_numpy(float), ta["success"].to_numpy(float))
    cb = _ratio(tb["cost"].to_numpy(float), tb["success"].to_numpy(float))
    lo, hi = paired_boot(
        ta, tb, "cost", boot_rng(seed, "verdict-cost", a, b), s.n_boot, 1 - s.alpha
    )
    return ca, cb, lo, hi


def _tokens(scope: pd.DataFrame, p: str) -> float:
    part = scope[(scope["planner"] == p) & (scope["dm_kind"] != "format")]
    return float(part["tokens_total"].mean()) if len(part) else math.nan


def judge_pair(rule: Rule, data: pd.DataFrame, s: Settings, seed: int) -> dict[str, Any]:
    """A ``better`` or ``suffices`` rule's verdict, numbers and deciding factor."""
    scope = _scope(data, rule)
    t = pair_test(scope, rule.a, rule.b, s, seed, rule.rid)
    if t is None:
        return _not_tested(
            rule, f"{rule.a if rule.a not in set(data['planner']) else rule.b} is not in this run"
        )
    p = t["pooled"]
    n_tasks = p["n_tasks"]
    numbers = (
        f"{rule.a} {_pct(t['rate_a'])} vs {rule.b} {_pct(t['rate_b'])}; pooled difference "
        f"{_pp(p['pooled_diff'])} pp [{_pp(p['pooled_low'])}, {_pp(p['pooled_high'])}] over "
        f"{n_tasks} tasks x {t['n_cells']} cells; cells significant for {rule.a}: "
        f"{t['cells_a']}, for {rule.b}: {t['cells_b']}"
    )
    v = t["verdict"]
    factor = _factor_label(t)
    leader_a = p["pooled_sign"] > 0
    if rule.kind == "better":
        if v == "holds":
            verdict = "confirmed" if leader_a else "not confirmed"
        elif v in ("flips", "depends"):
            verdict = f"depends on {_factor_name(t)}"
        else:
            verdict = "unresolved at this n"
    else:  # suffices
        if v == "holds" and not leader_a:
            verdict = "not confirmed"
        elif v in ("flips", "depends") and t["cells_b"]:
            verdict = f"depends on {_factor_name(t)}"
        elif v == "tie" or (math.isfinite(p["pooled_low"]) and p["pooled_low"] >= -MARGIN):
            verdict = "confirmed"
        else:
            verdict = "unresolved at this n"
        if rule.cost and verdict == "confirmed":
            ca, cb, lo, hi = _cost_test(scope, rule.a, rule.b, s, seed)
            numbers += (
                f"; cost per completed task {rule.a} ${ca:.4f} vs {rule.b} ${cb:.4f}, "
                f"difference [{lo:+.4f}, {hi:+.4f}]"
            )
            sign = sign_of(lo, hi)
            verdict = (
                "confirmed" if sign < 0 else "not confirmed" if sign > 0 else "unresolved at this n"
            )
    if rule.rid in ("ladder 3",):
        ta, tb = _tokens(scope, rule.a), _tokens(scope, rule.b)
        numbers += f"; tokens per episode {rule.a} {ta:,.0f} vs {rule.b} {tb:,.0f} ({ta / tb:.1f}x)"
    if rule.rid == "decision 3":
        gap = 1 - t["rate_b"] / t["rate_a"] if t["rate_a"] else math.nan
        numbers += f"; the static plan completes {_pct(gap)} less (article: 25-40 %)"
    return {**_head(rule), "verdict": verdict, "numbers": numbers, "factor": factor}


def _head(rule: Rule) -> dict[str, Any]:
    return {"rule": rule.rid, "claim": rule.claim, "test": rule.test}


def _not_tested(rule: Rule, why: str) -> dict[str, Any]:
    return {**_head(rule), "verdict": f"not tested ({why})", "numbers": "", "factor": ""}


def judge_reasoning(rule: Rule, data: pd.DataFrame, s: Settings, seed: int) -> dict[str, Any]:
    """External ToT at the reasoning profile, and the ReAct / P&E gap, against strong."""
    if rule.skill not in s.skills:
        return _not_tested(rule, f"no {rule.skill} skill profile in this run")
    keep = (data["dm_kind"] == "grid") & data["skill"].isin(["strong", rule.skill])
    sub = data[keep]
    tot = pair_test(sub, "tot", "plan_execute_replan", s, seed, rule.rid + " tot")
    gap = pair_test(sub, "plan_execute_replan", "react", s, seed, rule.rid + " gap")
    if tot is None or gap is None:
        return _not_tested(rule, "tot, plan_execute_replan or react is not in this run")
    name = f"skill {rule.skill}"
    et = next(e for e in tot["effects"] if e["factor"] == name)
    eg = next(e for e in gap["effects"] if e["factor"] == name)
    tot_pays = et["at_high_low"] > 0 and math.isfinite(et["at_high_low"])
    tot_small = et["at_high_high"] <= MARGIN
    narrows = abs(eg["at_high"]) < abs(eg["at_low"])
    effect_sign = sign_of(eg["effect_low"], eg["effect_high"])
    toward_zero = effect_sign != 0 and effect_sign != (1 if eg["at_low"] > 0 else -1) and narrows
    away = effect_sign != 0 and not narrows
    if tot_pays or away:
        verdict = "not confirmed"
    elif tot_small and toward_zero:
        verdict = "confirmed"
    else:
        verdict = "unresolved at this n"
    numbers = (
        f"ToT - P&E+replan: strong {_pp(et['at_low'])} pp, {rule.skill} {_pp(et['at_high'])} pp "
        f"[{_pp(et['at_high_low'])}, {_pp(et['at_high_high'])}]; P&E+replan - ReAct: strong "
        f"{_pp(eg['at_low'])} pp, {rule.skill} {_pp(eg['at_high'])} pp (effect "
        f"{_pp(eg['effect'])} [{_pp(eg['effect_low'])}, {_pp(eg['effect_high'])}])"
    )
    return {**_head(rule), "verdict": verdict, "numbers": numbers, "factor": "model skill"}


def judge_format(rule: Rule, data: pd.DataFrame, s: Settings, seed: int) -> dict[str, Any]:
    """JSON against text plans of the same planners on the same tasks at one skill."""
    del seed
    if not s.plan_format:
        return _not_tested(rule, "no planner of this run has a plan_format setting")
    if rule.skill not in s.format_skills:
        return _not_tested(rule, f"no plan-format cell at skill {rule.skill}")
    fmt_cell = data[(data["dm_kind"] == "format") & (data["skill"] == rule.skill)]
    json_cell = data[
        (data["dm_kind"] == "grid")
        & (data["skill"] == rule.skill)
        & (data["fault_rate_scale"] == 1.0)
    ]
    planners = s.format_planners
    a_part = fmt_cell if rule.a == "text" else json_cell
    b_part = fmt_cell if rule.b == "text" else json_cell

    def per_unit(part: pd.DataFrame) -> pd.Series:
        part = part[part["planner"].isin(planners)]
        return part.groupby(part["planner"].astype(str) + "|" + part["task"])["success"].mean()

    ra, rb = per_unit(a_part), per_unit(b_part)
    both = ra.index.intersection(rb.index)
    d = (ra[both] - rb[both]).to_numpy(float)
    n = int(d.size)
    if n == 0:
        return _not_tested(rule, "no paired episodes")
    low, high = net_win_interval(int((d > 0).sum()), int((d < 0).sum()), n, 1 - s.alpha)
    sign = sign_of(low, high)
    verdict = "confirmed" if sign > 0 else "not confirmed" if sign < 0 else "unresolved at this n"

    def malformed(part: pd.DataFrame) -> float:
        part = part[part["planner"].isin(planners)]
        return float((part["failure_mode"] == "malformed_output").mean()) if len(part) else math.nan

    numbers = (
        f"{rule.a} {_pct(float(ra[both].mean()))} vs {rule.b} {_pct(float(rb[both].mean()))}; "
        f"difference {_pp(float(d.mean()))} pp [{_pp(low)}, {_pp(high)}] over {n} "
        f"planner x tasks ({', '.join(planners)}); malformed_output: {rule.a} "
        f"{_pct(malformed(a_part))}, {rule.b} {_pct(malformed(b_part))}"
    )
    return {**_head(rule), "verdict": verdict, "numbers": numbers, "factor": "model skill"}


def verdicts(data: pd.DataFrame, planners: Sequence[str], s: Settings, seed: int) -> pd.DataFrame:
    """One row per rule of :data:`RULES`: verdict, numbers and the deciding factor."""
    fixed = data[data["planner"].isin(planners)]
    rows = []
    for rule in RULES:
        if rule.kind in ("better", "suffices"):
            rows.append(judge_pair(rule, fixed, s, seed))
        elif rule.kind == "reasoning":
            rows.append(judge_reasoning(rule, fixed, s, seed))
        else:
            rows.append(judge_format(rule, fixed, s, seed))
    return pd.DataFrame(rows)


LADDER_PAIRS = (
    ("plan_execute_replan", "react"),
    ("tot", "plan_execute_replan"),
    ("plan_execute_replan", "plan_execute"),
    ("plan_execute_rerun", "plan_execute_replan"),
)


def mean_interval(d: np.ndarray, seed: int, s: Settings) -> tuple[float, float]:
    """Task-bootstrap interval of the mean paired difference ``d`` (one value per task), with
    0 put back inside (both ends moved to it) unless the exact sign test over the tasks agrees
    with the interval's side: a percentile bootstrap alone is too narrow when few tasks
    differ (:func:`.sensitivity_stats.guarded_signs`)."""
    if d.size == 0:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    means = np.concatenate([(w @ d) / d.size for w in task_weights(rng, d.size, s.n_boot)])
    low, high = percentile_interval(means, 1 - s.alpha)
    wins, losses = int((d > 0).sum()), int((d < 0).sum())
    side = sign_of(low, high)
    if side and (sign_test_p(wins, losses) >= s.alpha or side != (1 if wins > losses else -1)):
        return (min(low, 0.0), max(high, 0.0))
    return (low, high)


def ladder_table(data: pd.DataFrame, s: Settings, seed: int = 0) -> pd.DataFrame:
    """Per skill x length bin (the grid's fault rates pooled: each task's difference is its
    mean over them): each ladder pair's mean completion difference with a task-bootstrap
    interval guarded by the sign test (:func:`mean_interval`)."""
    grid = data[data["dm_kind"] == "grid"]
    rows = []
    for (skill, b), part in grid.groupby(["skill", "steps_bin"], sort=False, observed=True):
        row: dict[str, Any] = {"skill": skill, "steps_bin": b, "n_tasks": part["task"].nunique()}
        for a, c in LADDER_PAIRS:
            two = part[part["planner"].isin([a, c])]
            if {a, c} - set(two["planner"]):
                continue
            per = two.pivot_table(index="task", columns="planner", values="success", aggfunc="mean")
            d = (per[a] - per[c]).dropna().to_numpy(float)
            lo, hi = mean_interval(d, derive_seed(seed, "ladder", skill, b, a, c), s)
            row[f"{a}-{c}"] = float(d.mean())
            row[f"{a}-{c}_low"], row[f"{a}-{c}_high"] = lo, hi
        rows.append(row)
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    order = {label: i for i, label in enumerate(s.bins())}
    skills = {k: i for i, k in enumerate(s.skills)}
    return table.sort_values(
        ["skill", "steps_bin"], key=lambda c: c.map(skills if c.name == "skill" else order)
    ).reset_index(drop=True)


def markdown(
    table: pd.DataFrame,
    points: pd.DataFrame,
    s: Settings,
    config: Mapping[str, Any],
    data: pd.DataFrame,
    auto: pd.DataFrame | None,
    trend: pd.DataFrame | None = None,
    ladder: pd.DataFrame | None = None,
) -> str:
    """decision_map.md: the cells, the verdicts, the ladder pairs per length and skill, the
    within-family length trend (:mod:`.length_trend`), the winners per point and auto against
    every fixed planner."""
    cells = list(dict.fromkeys(data["cell"]))
    lines = [
        "# Decision map: which strategy, when",
        "",
        f"`planarena experiment=decision_map`, seed {config.get('seed', 0)}, "
        f"{config.get('n_tasks')} tasks per env x complexity "
        f"({', '.join(config.get('env') or {})}), {len(cells)} cells, "
        f"{data['planner'].nunique()} planners, {len(data):,} episodes. Task length: the number "
        "of tool calls of a task's shortest correct solution. Intervals: 95 % paired (exact "
        "McNemar per cell, Bonferroni over cells; pooled task bootstrap guarded by the sign test).",
        "",
    ]
    if s.left_out:
        lines += ["Left out of this run:", ""]
        lines += [f"- {k}: {v}" for k, v in s.left_out.items()]
        lines.append("")
    lines += [
        "## The article's rules",
        "",
        "| rule | claim | verdict | numbers | deciding factor |",
    ]
    lines.append("| --- | --- | --- | --- | --- |")
    for _, r in table.iterrows():
        lines.append(
            f"| {r['rule']} | {r['claim']} | **{r['verdict']}** | {r['numbers']} | {r['factor']} |"
        )
    lines += ["", "Tests, rule by rule:", ""]
    lines += [f"- {r['rule']}: {r['test']}" for _, r in table.iterrows()]
    if ladder is None:
        ladder = ladder_table(data, s, int(config.get("seed", 0)))
    if not ladder.empty:
        lines += [
            "",
            "## The ladder by task length (fault rates pooled)",
            "",
            "Mean completion difference in points [95 % task-bootstrap interval, kept across 0 "
            "unless the exact sign test agrees]; bold: separable.",
            "",
        ]
        pairs = [f"{a}-{c}" for a, c in LADDER_PAIRS if f"{a}-{c}" in ladder.columns]
        lines.append("| skill | steps | tasks | " + " | ".join(pairs) + " |")
        lines.append("| --- | --- | --- | " + " | ".join("---" for _ in pairs) + " |")
        for _, r in ladder.iterrows():
            cells_txt = []
            for p in pairs:
                d, lo, hi = r[p], r[f"{p}_low"], r[f"{p}_high"]
                text = f"{_pp(d)} [{_pp(lo)}, {_pp(hi)}]"
                cells_txt.append(f"**{text}**" if sign_of(lo, hi) else text)
            lines.append(
                f"| {r['skill']} | {r['steps_bin']} | {r['n_tasks']} | "
                + " | ".join(cells_txt)
                + " |"
            )
    if trend is not None:
        from planarena.experiments.studies.length_trend import markdown as trend_lines

        lines += trend_lines(trend)
    if not points.empty:
        lines += [
            "",
            "## Winners per point (cell x task length)",
            "",
            "Best by completion, by cost per completed task, by P99 latency (among the planners "
            "not separably behind on completion); `≈ x` when the runner-up x is not separable.",
            "",
            "| cell | steps | tasks | completion | cost / completed task | P99 latency |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for _, r in points.iterrows():
            lines.append(
                f"| {r['cell']} | {r['steps_bin']} | {r['n_tasks']} | "
                f"{_winner(r, 'completion', lambda x: _pct(x))} | "
                f"{_winner(r, 'cost', lambda x: f'${x:.4f}')} | "
                f"{_winner(r, 'p99', lambda x: f'{x:.0f} s')} |"
            )
    if auto is not None and not auto.empty:
        lines += [
            "",
            "## auto against every fixed planner (reference cell: strong skill, default faults)",
            "",
            "| planner | completion auto / it | difference [95 %] | | cost per completed auto / it "
            "| difference [95 %] | |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for _, r in auto.iterrows():
            lines.append(
                f"| {r['planner']} | {_pct(r['completion_auto'])} / {_pct(r['completion_other'])} "
                f"| {_pp(r['completion_diff'])} pp [{_pp(r['completion_low'])}, "
                f"{_pp(r['completion_high'])}] | {r['completion']} | ${r['cost_auto']:.4f} / "
                f"${r['cost_other']:.4f} | [{r['cost_low']:+.4f}, {r['cost_high']:+.4f}] | "
                f"{r['cost']} |"
            )
        if "auto_choice" in data.columns:
            chosen = data[(data["planner"] == "auto") & (data["cell"] == cells[0])]
            counts = chosen["auto_choice"].value_counts()
            lines += [
                "",
                "auto's choices in the reference cell: "
                + ", ".join(f"{k} {v}" for k, v in counts.items())
                + " (the map it read was the one shipped when this ran).",
            ]
    lines += [
        "",
        "These are measurements in a simulated world under stated assumptions (the skill "
        "profiles, fault rates, latency and price profiles, n above); the article's numbers are "
        "its own estimates. Each verdict is its own claim at 5 %: with many rules and points, "
        "a few are significant by chance.",
    ]
    return "\n".join(lines) + "\n"


def _winner(r: Mapping[str, Any], metric: str, fmt: Any) -> str:
    best = r.get(f"{metric}_best")
    if not isinstance(best, str) or not best:
        return "–"
    value = r.get(metric if metric != "completion" else "completion")
    text = f"{best} {fmt(value)}"
    second = r.get(f"{metric}_second")
    if isinstance(second, str) and second:
        text += "" if bool(r.get(f"{metric}_separable")) else f" ≈ {second}"
    return text
