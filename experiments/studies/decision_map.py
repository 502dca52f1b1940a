"""Which strategy wins where: ``planarena experiment=decision_map``.

Every planner runs the same tasks (every family, every complexity) in every cell of a grid
over the conditions the first source article's rules of thumb name:

- **task length**: the tasks' own lengths, the number of tool calls of a task's shortest
  correct solution (the oracle's gold plan, read by this analysis only), binned ``<=3``,
  ``4-5``, ``6-8``, ``9-12``, ``13+``. Complexity is what makes length vary (a cell may not
  change the tasks), and the families spread it: 2 to 21 steps;
- **fault rate** (``faults.rate_scale``) crossed with **model skill** (``llm.skill``: strong,
  weak, and weak_json / reasoning when the simulator has them): the main grid;
- **the generator-verifier correlation** (``llm.skill_overrides.judge_correlation``) and
  **the token budget** (``budget.max_tokens_per_episode``), one at a time at strong skill and
  the default fault rate;
- **the plan format** (``planner.<name>.plan_format=text`` for every planner that has the
  knob), at the skills ``format_skills`` names.

A level the run cannot have (a skill profile, a planner knob or a config file that does not
exist yet) is left out of the grid and named in ``decision_map.md``.

Per point (a cell and a length bin, or a cell and a family): the best planner by completion, by
cost per completed task and by P99 latency (among the planners not separably behind on
completion), each with the paired interval of its difference from the runner-up over the same
tasks, and whether it is separable. Completion: the exact conditional (McNemar) interval of
:mod:`.sensitivity_stats`; cost and P99: a paired task bootstrap. The article's rules are
judged in :mod:`.decision_map_verdicts`; the map ``planner=auto`` reads is written as
``decision_map.json`` (:func:`auto_map`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from planarena.experiments.analysis.stats import (
    boot_rng,
    percentile,
)
from planarena.experiments.records.identity import FAMILY_DIGEST
from planarena.experiments.studies.decision_map_core import (
    REFERENCE_RATE,
    REFERENCE_SKILL,
    Settings,
    _ratio,
    completion_order,
    paired_boot,
    per_task,
    split_tasks,
    task_means,
)
from planarena.experiments.studies.registry import Cell, Study, study
from planarena.experiments.studies.sensitivity_stats import net_win_interval, sign_of


def cells_of(config: Mapping[str, Any]) -> list[Cell]:
    """The reference cell (strong, default fault rate) first, then the rest of the skill x
    fault-rate grid, the correlation cells, the budget cells and the plan-format cells."""
    s = Settings.of(config)
    planners = list(config.get("planner") or {})
    auto = "auto" in planners

    def cell(label: str, kind: str, skill: str, rate: float, **extra: Any) -> Cell:
        columns = {
            "dm_kind": kind,
            "skill": skill,
            "fault_rate_scale": rate,
            "judge_correlation": extra.get("corr"),
            "token_budget": extra.get("budget", 0),
            "plan_format": extra.get("fmt", "json"),
        }
        overrides: dict[str, Any] = {**s.skill_overrides[skill], "faults.rate_scale": rate}
        if auto:
            overrides["planner.auto.model_profile"] = skill
        if extra.get("corr") is not None:
            overrides["llm.skill_overrides.judge_correlation"] = extra["corr"]
        if extra.get("budget"):
            overrides["budget.max_tokens_per_episode"] = extra["budget"]
        if extra.get("fmt"):
            for p in s.format_planners:
                overrides[f"planner.{p}.plan_format"] = extra["fmt"]
        return Cell(label, columns, overrides)

    grid = [(k, r) for k in s.skills for r in s.fault_rates]
    grid.sort(key=lambda kr: kr != (REFERENCE_SKILL, REFERENCE_RATE))
    out = [cell(f"skill={k} faults={r:g}", "grid", k, r) for k, r in grid]
    out += [
        cell(f"corr={c:g}", "corr", REFERENCE_SKILL, REFERENCE_RATE, corr=c) for c in s.correlations
    ]
    out += [
        cell(f"budget={b}", "budget", REFERENCE_SKILL, REFERENCE_RATE, budget=b) for b in s.budgets
    ]
    if s.plan_format:
        out += [
            cell(
                f"format={s.plan_format} skill={k}", "format", k, REFERENCE_RATE, fmt=s.plan_format
            )
            for k in s.format_skills
        ]
    return out


# --------------------------------------------------------------------------- the tasks


def task_table(config: Mapping[str, Any]) -> pd.DataFrame:
    """Per task of the run (env, task_id): its length (the oracle's gold plan from the start:
    this analysis reads it, no planner does) and the features ``planner=auto`` sees (goal
    entities, declared dependencies, tools)."""
    from hydra.utils import instantiate
    from planarena.planners.auto import goal_deps, goal_items

    seed = int(config.get("seed", 0))
    n = int(config.get("n_tasks", 0))
    complexities = config.get("complexity") or []
    complexities = [complexities] if isinstance(complexities, str) else list(complexities)
    unreachable = float((config.get("faults") or {}).get("unreachable_rate", 0.0))
    rows = []
    for name, spec in (config.get("env") or {}).items():
        spec = {k: v for k, v in dict(spec).items() if k != FAMILY_DIGEST}  # not a ctor arg
        env = instantiate(spec)
        for cx in complexities:
            for task in env.generate(n, seed=seed, complexity=cx, unreachable_rate=unreachable):
                tools = env.make_tools(task, rules=[], seed_keys=(seed,)).toolbox.names()
                rows.append(
                    {
                        "env": task.env,
                        "task_id": task.task_id,
                        "steps": len(env.oracle(task).remaining([])),
                        "items": goal_items(task.goal, tools),
                        "deps": goal_deps(task.goal),
                        "tools": len(tools),
                        "config_env": name,
                    }
                )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- points


def rank_point(
    tasks: Mapping[str, pd.DataFrame], seed: int, n_boot: int, confidence: float, key: Sequence[Any]
) -> dict[str, Any]:
    """The best planner of one point by completion, by cost per completed task and by P99
    latency, each against its runner-up with the paired interval of the difference."""
    names = list(tasks)
    if len(names) < 2 or not len(next(iter(tasks.values()))):
        return {}
    n = len(next(iter(tasks.values())))
    order, rate, cost = completion_order(tasks)
    out: dict[str, Any] = {"n_tasks": n}
    best, second = order[0], order[1]
    d = tasks[best]["success"].to_numpy(float) - tasks[second]["success"].to_numpy(float)
    low, high = net_win_interval(int((d > 0).sum()), int((d < 0).sum()), n, confidence)
    behind = []
    for p in order[1:]:
        dp = tasks[best]["success"].to_numpy(float) - tasks[p]["success"].to_numpy(float)
        lo_p, _ = net_win_interval(int((dp > 0).sum()), int((dp < 0).sum()), n, confidence)
        if lo_p <= 0:
            behind.append(p)  # not separably behind the leader
    out.update(
        completion_best=best,
        completion=rate[best],
        completion_second=second,
        completion_second_rate=rate[second],
        completion_diff=rate[best] - rate[second],
        completion_low=low,
        completion_high=high,
        completion_separable=sign_of(low, high) != 0,
        completion_ties=" ".join(behind),
    )

    def versus(metric: str, ranked: list[str], values: dict[str, float]) -> dict[str, Any]:
        """The best by ``metric`` against its runner-up: their paired interval."""
        a, b = ranked[0], ranked[1]
        lo, hi = paired_boot(
            tasks[a], tasks[b], metric, boot_rng(seed, metric, *key), n_boot, confidence
        )
        return {
            f"{metric}_second": b,
            f"{metric}_second_value": values[b],
            f"{metric}_diff": values[a] - values[b],
            f"{metric}_low": lo,
            f"{metric}_high": hi,
            f"{metric}_separable": sign_of(lo, hi) != 0,
        }

    by_cost = sorted([p for p in names if math.isfinite(cost[p])], key=lambda p: (cost[p], p))
    if len(by_cost) >= 2:
        out.update(cost_best=by_cost[0], cost=cost[by_cost[0]])
        out.update(versus("cost", by_cost, cost))
    contenders = [best, *behind]
    p99 = {p: percentile(tasks[p]["latency"].to_numpy(float), 99) for p in contenders}
    by_p99 = sorted(contenders, key=lambda p: (p99[p], p))
    out.update(p99_best=by_p99[0], p99=p99[by_p99[0]])
    if len(by_p99) >= 2:
        out.update(versus("p99", by_p99, p99))
    return out


def with_tasks(records: pd.DataFrame, tasks: pd.DataFrame, s: Settings) -> pd.DataFrame:
    """The records with each task's length, its bin and auto's features."""
    out = records.merge(tasks, on=["env", "task_id"], how="left", validate="many_to_one")
    if out["steps"].isna().any():
        missing = out.loc[out["steps"].isna(), "task_id"].iloc[0]
        raise ValueError(f"task {missing}: not among the tasks this config makes")
    out["steps"] = out["steps"].astype(int)
    out["steps_bin"] = [s.bin_of(int(x)) for x in out["steps"]]
    out["task"] = out["env"].astype(str) + "/" + out["task_id"].astype(str)
    out["success"] = out["success"].astype(bool).astype(float)
    return out


HEAD_COLUMNS = ("dm_kind", "skill", "fault_rate_scale", "token_budget")
"""A point's settings, as its first record holds them."""


def point_table(
    data: pd.DataFrame, planners: Sequence[str], by: Sequence[str], s: Settings, seed: int
) -> pd.DataFrame:
    """One row per cell x ``by`` (the length bin, or env x complexity): :func:`rank_point`."""
    keys = ["cell", *by]
    means = task_means(data, keys)
    points = dict(iter(means.groupby(level=keys, sort=False, observed=True)))
    firsts = data.drop_duplicates(keys).dropna(subset=keys)  # in the order points appear
    rows = []
    for first in firsts.itertuples(index=False):
        values = tuple(getattr(first, k) for k in keys)
        head = {
            "cell": values[0],
            **dict(zip(by, values[1:], strict=True)),
            **{c: getattr(first, c) for c in HEAD_COLUMNS},
        }
        point = points[values if len(values) > 1 else values[0]].droplevel(keys)
        ranked = rank_point(split_tasks(point, planners), seed, s.n_boot, 1.0 - s.alpha, values)
        if ranked:
            rows.append({**head, **ranked})
    table = pd.DataFrame(rows)
    if "steps_bin" in by and len(table):  # lengths in their order within each cell
        order = {label: i for i, label in enumerate(s.bins())}
        cells = {c: i for i, c in enumerate(dict.fromkeys(table["cell"]))}
        rank = table["cell"].map(cells) * len(order) + table["steps_bin"].map(order)
        table = table.iloc[rank.argsort(kind="stable")].reset_index(drop=True)
    return table


# --------------------------------------------------------------------------- the map


CHOICE_MARGIN = 0.05
"""How far below the completion leader (point estimate) a cheaper strategy may be chosen."""


def choose_group(
    tasks: Mapping[str, pd.DataFrame], confidence: float
) -> tuple[str, str, dict[str, Any]] | None:
    """The strategy for a group of tasks: among the planners not separably behind the
    completion leader (paired exact interval over tasks) and within :data:`CHOICE_MARGIN` of
    its completion, the cheapest per completed task."""
    rank = rank_point(tasks, 0, 1, confidence, ("choose",)) if len(tasks) >= 2 else {}
    if not rank:
        return None
    leader = rank["completion_best"]
    close = [
        p
        for p in rank["completion_ties"].split()
        if p and float(tasks[p]["success"].mean()) >= rank["completion"] - CHOICE_MARGIN
    ]
    pool = [leader, *close]
    cost = {
        p: _ratio(tasks[p]["cost"].to_numpy(float), tasks[p]["success"].to_numpy(float))
        for p in pool
    }
    choice = min(pool, key=lambda p: (cost[p], p))
    rate = float(tasks[choice]["success"].mean())
    tied = [p for p in pool if p != leader]
    why = (
        f"{choice}: completion {rate:.0%} (leader {leader} {rank['completion']:.0%}; "
        f"{'close and not separable: ' + ', '.join(tied) if tied else 'no close rival'})"
        f", ${cost[choice]:.4f} per completed task, the cheapest of those; "
        f"{rank['n_tasks']} tasks"
    )
    return choice, why, {"completion": rate, "cost_per_completed": cost[choice], "leader": leader}


FEATURE_LADDER: tuple[tuple[str, ...], ...] = (("items_bin", "deps"), ())
"""The map's groupings, most specific first: features any toolset has (the goal's entity
bucket and declared dependencies). Not the tool count: on the shipped families it names a pair
of families, so a map keyed on it is a lookup of the families it was measured on
(:mod:`.auto_lofo` scores this ladder on a family left out)."""


def auto_map(
    data: pd.DataFrame,
    planners: Sequence[str],
    s: Settings,
    config: Mapping[str, Any],
    ladder: Sequence[Sequence[str]] = FEATURE_LADDER,
) -> dict[str, Any]:
    """``decision_map.json``: per model skill (the grid's cells, fault rates pooled: auto
    cannot see the fault rate) and per budget (its cells, at strong skill), entries from the
    most specific (entity bucket, declared dependencies) to the whole skill."""
    from planarena.planners.auto import MAP_FORMAT, items_bin

    confidence = 1.0 - s.alpha
    data = data.assign(items_bin=[items_bin(int(x)) for x in data["items"]])
    entries: list[dict[str, Any]] = []

    def add(part: pd.DataFrame, head: dict[str, Any], keys: list[str]) -> None:
        groups = part.groupby(keys, sort=True, observed=True) if keys else [((), part)]
        for key, sub in groups:
            values = key if isinstance(key, tuple) else (key,)
            # a task in several cells is one unit per cell: paired units of (task, cell)
            sub = sub.assign(task=sub["task"] + "@" + sub["cell"].astype(str))
            picked = choose_group(per_task(sub, planners), confidence)
            if picked is None or (keys and sub["task"].nunique() < 10):
                continue
            choice, why, numbers = picked
            spec = dict(zip(keys, values, strict=True))
            entries.append(
                {
                    **head,
                    "tools": int(spec["tools"]) if "tools" in spec else None,
                    "items": spec.get("items_bin"),
                    "deps": bool(spec["deps"]) if "deps" in spec else None,
                    "choice": choice,
                    "why": why,
                    **{k: round(v, 6) if isinstance(v, float) else v for k, v in numbers.items()},
                }
            )

    grid = data[data["dm_kind"] == "grid"]
    for skill, part in grid.groupby("skill", sort=False, observed=True):
        head = {"model": str(skill), "budget": None}
        for keys in ladder:
            add(part, head, list(keys))
    budget = data[data["dm_kind"] == "budget"]
    for b, part in budget.groupby("token_budget", sort=True, observed=True):
        head = {"model": None, "budget": int(b)}
        for keys in ladder:
            add(part, head, list(keys))
    overall = choose_group(
        per_task(
            grid[grid["skill"] == REFERENCE_SKILL].assign(
                task=lambda d: d["task"] + "@" + d["cell"].astype(str)
            ),
            planners,
        ),
        confidence,
    )
    from planarena.experiments.records.provenance import code_version, describe

    return {
        "format": MAP_FORMAT,
        "version": f"seed {config.get('seed', 0)}, {describe(code_version())}",
        "assumptions": {
            "study": "planarena experiment=decision_map",
            "seed": config.get("seed", 0),
            "n_tasks": config.get("n_tasks"),
            "envs": list(config.get("env") or {}),
            "complexity": config.get("complexity"),
            "faults": (config.get("faults") or {}).get("name"),
            "fault_rates_pooled": s.fault_rates,
            "skills": s.skills,
            "budgets": s.budgets,
            "planners": list(planners),
            "llm_models": (config.get("llm") or {}).get("models"),
            "rule": "per group: among the planners not separably behind the completion leader "
            f"(paired exact interval over tasks x cells, {confidence:.0%}) and within "
            f"{CHOICE_MARGIN:.0%} of its completion, the cheapest per completed task; budget "
            "entries were measured at strong skill; fault rates pooled",
            "left_out": s.left_out,
        },
        "budget_levels": sorted(s.budgets),
        "default_model": REFERENCE_SKILL,
        "fallback": overall[0] if overall else "plan_execute_replan",
        "entries": entries,
    }


# --------------------------------------------------------------------------- the study


@study("decision_map")
class DecisionMap(Study):
    """Every planner on every family in a grid of task length x fault rate x model skill
    (plus correlation, budget and plan-format cells): the winners, the article's verdicts,
    and the map ``planner=auto`` reads."""

    def cells(self, config: Mapping[str, Any]) -> list[Cell]:
        return cells_of(config)

    def render(
        self, records: pd.DataFrame, config: Mapping[str, Any], out_dir: Path, *, seed: int
    ) -> str:
        """Write decision_map.md / .csv (the verdicts), decision_map_points.csv (per cell and
        length bin), decision_map_families.csv (per cell, env and complexity),
        decision_map_trend.csv (the gap's change with length inside each family),
        decision_map_ladder.csv (the ladder's pairs per skill and length bin),
        decision_map.json (auto's map) and figures/decision_map_*.{pdf,png}."""
        from planarena.experiments.analysis.figures.decision_map import write_decision_figures
        from planarena.experiments.studies.decision_map_verdicts import (
            ladder_table,
            markdown,
            verdicts,
        )
        from planarena.experiments.studies.length_trend import trend_table

        s = Settings.of(config)
        all_planners = list(config.get("planner") or {})
        planners = [p for p in all_planners if p not in s.meta]
        data = with_tasks(records, task_table(config), s)
        fixed = data[data["planner"].isin(planners)]
        ranked = fixed[fixed["dm_kind"] != "format"]
        points = point_table(ranked, planners, ["steps_bin"], s, seed)
        families = point_table(ranked, planners, ["env", "complexity"], s, seed)
        table = verdicts(data, planners, s, seed)
        out_dir.mkdir(parents=True, exist_ok=True)
        points.to_csv(out_dir / "decision_map_points.csv", index=False)
        families.to_csv(out_dir / "decision_map_families.csv", index=False)
        table.to_csv(out_dir / "decision_map.csv", index=False)
        amap = auto_map(ranked, planners, s, config)
        (out_dir / "decision_map.json").write_text(map_text(amap), encoding="utf-8")
        auto = auto_comparison(data, planners, s, seed) if "auto" in all_planners else None
        if auto is not None:
            auto.to_csv(out_dir / "decision_map_auto.csv", index=False)
        trend = trend_table(fixed, s, seed)
        trend.to_csv(out_dir / "decision_map_trend.csv", index=False)
        ladder = ladder_table(data, s, int(config.get("seed", 0)))
        ladder.to_csv(out_dir / "decision_map_ladder.csv", index=False)
        text = markdown(table, points, s, config, data, auto, trend, ladder)
        (out_dir / "decision_map.md").write_text(text, encoding="utf-8")
        write_decision_figures(points, s.skills, s.fault_rates, s.bins(), out_dir / "figures")
        counts = table["verdict"].str.split().str[0].value_counts()
        return (
            f"Decision map: {data['cell'].nunique()} cells, {len(points)} points; verdicts: "
            + ", ".join(f"{n} {v}" for v, n in counts.items())
            + f" — {out_dir / 'decision_map.md'}"
        )


def map_text(amap: Mapping[str, Any]) -> str:
    """The map as JSON, one entry a line (a small file that diffs entry by entry)."""
    import json

    head = {k: v for k, v in amap.items() if k != "entries"}
    text = json.dumps(head, indent=1, default=str)[:-2]
    entries = ",\n".join("  " + json.dumps(e, default=str) for e in amap.get("entries", []))
    return f'{text},\n "entries": [\n{entries}\n ]\n}}\n'


def auto_comparison(
    data: pd.DataFrame, planners: Sequence[str], s: Settings, seed: int
) -> pd.DataFrame:
    """``auto`` against every fixed planner on the reference cell (strong skill, default fault
    rate), paired over tasks: completion (exact interval) and cost per completed task
    (paired bootstrap)."""
    ref = data[(data["dm_kind"] == "grid") & (data["skill"] == REFERENCE_SKILL)]
    ref = ref[ref["fault_rate_scale"] == REFERENCE_RATE]
    return compare_with(ref, "auto", planners, s.alpha, s.n_boot, seed)


def compare_with(
    data: pd.DataFrame, subject: str, planners: Sequence[str], alpha: float, n_boot: int, seed: int
) -> pd.DataFrame:
    """``subject`` against each of ``planners`` on the same tasks of ``data`` (records with a
    ``task`` column): completion difference with its exact paired interval, cost per completed
    task difference with a paired bootstrap interval, each with ``better``/``equal``/``worse``."""
    if "task" not in data.columns:
        data = data.assign(task=data["env"].astype(str) + "/" + data["task_id"].astype(str))
    data = data.assign(success=data["success"].astype(bool).astype(float))
    rows = []
    confidence = 1.0 - alpha
    for other in planners:
        if other == subject:
            continue
        tasks = per_task(data, [subject, other])
        if len(tasks) < 2 or not len(tasks[subject]):
            continue
        a, b = tasks[subject], tasks[other]
        n = len(a)
        d = a["success"].to_numpy(float) - b["success"].to_numpy(float)
        low, high = net_win_interval(int((d > 0).sum()), int((d < 0).sum()), n, confidence)
        ca = _ratio(a["cost"].to_numpy(float), a["success"].to_numpy(float))
        cb = _ratio(b["cost"].to_numpy(float), b["success"].to_numpy(float))
        c_lo, c_hi = paired_boot(a, b, "cost", boot_rng(seed, "auto", other), n_boot, confidence)
        rows.append(
            {
                "planner": other,
                "n_tasks": n,
                "completion_auto": float(a["success"].mean()),
                "completion_other": float(b["success"].mean()),
                "completion_diff": float(d.mean()),
                "completion_low": low,
                "completion_high": high,
                "completion": _word(sign_of(low, high), larger_better=True),
                "cost_auto": ca,
                "cost_other": cb,
                "cost_diff": ca - cb,
                "cost_low": c_lo,
                "cost_high": c_hi,
                "cost": _word(sign_of(c_lo, c_hi), larger_better=False),
            }
        )
    return pd.DataFrame(rows)


def _word(sign: int, *, larger_better: bool) -> str:
    if sign == 0:
        return "equal"
    return "better" if (sign > 0) == larger_better else "worse"
