"""``planarena experiment=claims``: every registered claim tested over the assumption registry.

The cells are a seeded two-level screening design (plus its centre) over every registered
assumption this run can vary on its own (:mod:`planarena.experiments.claims.assumptions`: a
config key and a range; not the cost-only ones, nor one that would change the tasks): every
planner of the run on the same tasks in each cell. Per claim
(:mod:`planarena.experiments.claims.claims`) the paired difference on its population's tasks
in every cell gives a verdict with its conditions, the share of the space where it holds and
the assumptions that decide it (:mod:`planarena.experiments.claims.verdicts`). Writes
``claims.md``, ``claims.csv`` (a verdict per claim) and ``claims_effects.csv`` (each
assumption's effect on each claim).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from planarena.experiments.analysis.cells import success_bool
from planarena.experiments.claims.assumptions import Assumption, load_assumptions
from planarena.experiments.claims.claims import Claim, load_claims
from planarena.experiments.claims.verdicts import VERDICTS, Axis, Verdict, judge
from planarena.experiments.studies.registry import Cell, Study, study
from planarena.experiments.studies.sensitivity import check_sim, design_of, in_grid_order
from planarena.experiments.studies.sensitivity_design import Design

SPEC_KEYS = ("files", "runs", "design_seed", "alpha", "n_boot", "exclude")
NOT_SCREENED_PREFIXES = ("llm.models.default.", "faults.unreachable_rate")
"""Keys a screen leaves alone: the default model's prices and latency move cost and time,
never an outcome; the unreachable rate changes which tasks exist (a cell keeps the tasks)."""
PRICE_FIELDS = ("usd_per_mtok_input", "usd_per_mtok_output", "ttft_s", "s_per_output_token")


TEXT_PLAN_FIELDS = ("p_malformed_text", "p_sloppy_text")


def _asks_text_plans(config: Mapping[str, Any]) -> bool:
    planners = (config.get("planner") or {}).values()
    return any(isinstance(p, Mapping) and p.get("plan_format") == "text" for p in planners)


def _screened(entry: Assumption, config: Mapping[str, Any], exclude: Sequence[str]) -> bool:
    """Whether the screen varies ``entry`` in this run."""
    if not entry.sweepable or entry.name in exclude or entry.key is None:
        return False
    if entry.key.startswith(NOT_SCREENED_PREFIXES) or entry.key.endswith(PRICE_FIELDS):
        return False
    parts = entry.key.split(".")
    if entry.name in TEXT_PLAN_FIELDS and not _asks_text_plans(config):
        return False  # no planner of the run asks a plan as text: the field cannot act
    if parts[0] == "planner":
        return parts[1] in (config.get("planner") or {})
    if parts[0] == "llm" and parts[1] == "models":
        return parts[2] in ((config.get("llm") or {}).get("models") or {})
    return True


def factors_of(config: Mapping[str, Any]) -> dict[str, Any]:
    """The screen's factors, as the sensitivity design reads them."""
    spec = config.get("claims") or {}
    exclude = [str(x) for x in spec.get("exclude") or []]
    return {
        a.name: {"key": a.key, "levels": list(a.levels())}
        for a in load_assumptions()
        if _screened(a, config, exclude)
    }


def claims_design(config: Mapping[str, Any]) -> Design:
    """The screening design: the centre, then a two-level fraction over the factors."""
    spec = config.get("claims") or {}
    unknown = sorted(set(spec) - set(SPEC_KEYS))
    if unknown:
        raise ValueError(f"claims.{unknown[0]}: unknown; known: {', '.join(SPEC_KEYS)}")
    factors = factors_of(config)
    # resolution IV by default: at least twice as many runs as factors, so no main effect is
    # aliased with a two-factor interaction (at resolution III one was: an inert field came out
    # "deciding" through the interaction of two that act)
    runs = spec.get("runs") or 1 << (2 * len(factors)).bit_length()
    sensitivity = {
        "factors": factors,
        "runs": runs,
        "design_seed": int(spec.get("design_seed", 0)),
    }
    return design_of({**config, "sensitivity": sensitivity})


def task_steps(config: Mapping[str, Any]) -> pd.DataFrame:
    """(env, task_id, steps): each task's gold length, read from its oracle."""
    from planarena.experiments.studies.decision_map import task_table

    return task_table(config)[["env", "task_id", "steps"]]


def in_population(frame: pd.DataFrame, claim: Claim) -> pd.Series:
    pop = claim.population
    keep = pd.Series(True, index=frame.index)
    if pop.env:
        keep &= frame["env"].astype(str).isin(pop.env)
    if pop.complexity:
        keep &= frame["complexity"].astype(str).isin(pop.complexity)
    if pop.min_steps:
        keep &= frame["steps"] >= pop.min_steps
    if pop.max_steps:
        keep &= frame["steps"] <= pop.max_steps
    return keep


METRIC_COLUMNS = {"tokens": "tokens_total", "latency": "latency_s"}


def differences(records: pd.DataFrame, claim: Claim, cells: Sequence[str]) -> np.ndarray:
    """Tasks x cells, on each task of the claim's population (NaN where either planner did
    not run it): for completion ``a``'s success rate minus ``b``'s; for tokens and latency
    the log of ``a``'s mean over ``b``'s."""
    part = records[records["planner"].isin([claim.a, claim.b]) & in_population(records, claim)]
    if part.empty:
        return np.empty((0, len(cells)))
    if claim.metric == "completion":
        value = success_bool(part["success"]).astype(float)
    else:
        value = np.log(part[METRIC_COLUMNS[claim.metric]].astype(float).clip(lower=1e-9))
    mean = (
        part.assign(_v=value)
        .groupby(["env", "task_id", "cell", "planner"], observed=True)["_v"]
        .mean()
        .unstack("planner")
    )
    if claim.a not in mean.columns or claim.b not in mean.columns:
        return np.empty((0, len(cells)))
    d = (mean[claim.a] - mean[claim.b]).unstack("cell").reindex(columns=list(cells))
    return d.to_numpy(dtype=np.float64)


def in_units(claim: Claim, q: float) -> float:
    """A judged quantity in the claim's units: points, or the ratio ``a / b``."""
    return 100.0 * q if claim.metric == "completion" else float(np.exp(q))


def reproduction(claim: Claim, low: float, high: float) -> str:
    """For a published claim: in magnitude (its published value inside the pooled interval,
    the direction holding), in direction, or not reproduced (claim units)."""
    if claim.published is None:
        return ""
    zero = 0.0 if claim.metric == "completion" else 1.0
    held = low > zero if claim.direction == "greater" else high < zero
    value = claim.published.value
    if held and value is not None and low <= value <= high:
        return "in magnitude within the interval"
    return "reproduced in direction" if held else "not reproduced"


def acting(design: Design, claim: Claim) -> list[int]:
    """The factors that can act on a claim's difference: not another planner's own settings
    (a planner knob of a planner the claim does not compare can only come out "deciding"
    through aliasing with an interaction of factors that act)."""
    keep = []
    for j, f in enumerate(design.factors):
        parts = f.key.split(".")
        if parts[0] == "planner" and len(parts) > 2 and parts[1] not in (claim.a, claim.b):
            continue
        keep.append(j)
    return keep


def axes_of(design: Design) -> list[Axis]:
    entries = {a.name: a for a in load_assumptions()}
    return [
        Axis(f.name, float(f.low), float(f.high), entries[f.name].integer) for f in design.factors
    ]


DOCS_HEADER = """<!-- rendered from docs/data/claims/ (a copy of the default run's claims.csv,
claims_effects.csv and claims_design.json, and its confirmatory run's claims_confirmed.csv) by
python -c 'from planarena.experiments.studies.claims import write_docs; write_docs()';
do not edit by hand: tests/test_claims.py checks it -->

"""


def write_docs(results: Path | None = None, page: Path | None = None) -> Path:
    """Render ``docs/claims.md`` from ``docs/data/claims/`` (or ``results``: a run dir)."""
    docs = Path(__file__).resolve().parents[2] / "docs"
    page = page or docs / "claims.md"
    page.write_text(DOCS_HEADER + render_results(results or docs / "data" / "claims"))
    return page


def render_results(results: Path) -> str:
    """``claims.md`` again from a run's ``claims.csv``, ``claims_effects.csv`` and
    ``claims_design.json`` (docs/claims.md is this, for the default run it names)."""
    design = json.loads((results / "claims_design.json").read_text(encoding="utf-8"))
    table = pd.read_csv(results / "claims.csv")
    text = ["conditions", "deciding", "published", "reproduction", "population"]
    table[text] = table[text].fillna("")
    effects = pd.read_csv(results / "claims_effects.csv")
    text = markdown(table, effects, design)
    confirmed = results / "claims_confirmed.csv"
    if confirmed.is_file():  # the confirmatory stage's output beside the screen's
        text += "\n## Confirmation\n\n" + confirmed_markdown(pd.read_csv(confirmed))
    return text


def confirmed_markdown(table: pd.DataFrame) -> str:
    """One block per claim: each corner's paired difference and verdict."""
    lines = [
        "Confirmation on fresh tasks: each undecided claim at the corners of its two deciding "
        "assumptions (every other at its default), a paired interval per corner, "
        "Bonferroni-corrected over the claim's corners.",
        "",
        "| claim | corner | verdict | paired difference | tasks |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in table.itertuples():
        if r.metric == "completion":
            shown = f"{r.mean:+.1f} pp [{r.low:+.1f}, {r.high:+.1f}]"
        else:
            shown = f"{r.mean:.2f}x [{r.low:.2f}, {r.high:.2f}]"
        lines.append(f"| {r.claim} | {r.corner} | **{r.verdict}** | {shown} | {r.n_tasks} |")
    return "\n".join(lines) + "\n"


def _identity(claim: Claim) -> dict[str, Any]:
    """The columns that name a claim in claims.csv."""
    return {
        "claim": claim.id,
        "statement": claim.statement,
        "a": claim.a,
        "b": claim.b,
        "population": claim.population.describe(),
        "threshold_pp": claim.threshold_pp,
    }


def verdict_rows(claim: Claim, v: Verdict) -> dict[str, Any]:
    sign = 1.0 if claim.direction == "greater" else -1.0  # v was judged on sign * q
    ends = sorted((in_units(claim, sign * v.pooled_low), in_units(claim, sign * v.pooled_high)))
    pooled = in_units(claim, sign * v.pooled)
    return {
        **_identity(claim),
        "verdict": v.verdict,
        "conditions": "; ".join(v.conditions),
        "share_holds": round(v.share_holds, 3),
        "share_fails": round(v.share_fails, 3),
        "metric": claim.metric,
        "pooled": round(pooled, 3),
        "pooled_low": round(ends[0], 3),
        "pooled_high": round(ends[1], 3),
        "n_tasks": v.n_tasks,
        "deciding": ", ".join(v.deciding()),
        "source": claim.source,
        "published": claim.published.reported if claim.published else "",
        "reproduction": reproduction(claim, ends[0], ends[1]),
    }


def not_run_row(claim: Claim) -> dict[str, Any]:
    """A claim the screen cannot test (it needs a setting the screen does not run)."""
    return {
        **_identity(claim),
        "verdict": f"not run: needs {claim.needs}",
        "conditions": "",
        "share_holds": 0.0,
        "share_fails": 0.0,
        "metric": claim.metric,
        "pooled": np.nan,
        "pooled_low": np.nan,
        "pooled_high": np.nan,
        "n_tasks": 0,
        "deciding": "",
        "source": claim.source,
        "published": claim.published.reported if claim.published else "",
        "reproduction": "",
    }


def _shown(r: Any) -> str:
    """The pooled value with its interval in the claim's units."""
    if r.metric == "completion":
        return f"{r.pooled:+.1f} pp [{r.pooled_low:+.1f}, {r.pooled_high:+.1f}]"
    return f"{r.pooled:.2f}x [{r.pooled_low:.2f}, {r.pooled_high:.2f}]"


def _effect(metric: str, x: float) -> str:
    """An effect on the judged quantity: points for completion, a factor on the ratio."""
    return f"{100 * x:+.1f}" if metric == "completion" else f"x{np.exp(x):.2f}"


def design_summary(design: Design, n_tasks: int) -> dict[str, Any]:
    """What ``claims.md`` says of the design (``claims_design.json``: the docs page is
    rendered from it and the two CSVs, never typed)."""
    return {
        "cells": len(design.labels),
        "runs": design.runs,
        "resolution": design.resolution,
        "factors": [f.name for f in design.factors],
        "left_out": dict(design.left_out),
        "n_tasks": n_tasks,
    }


def _row(r: Any, *, published: bool = False) -> str:
    if str(r.verdict).startswith("not run"):
        middle = "--- | --- | ---"
    else:
        middle = f"{r.conditions or '--'} | {100 * r.share_holds:.0f} % | {_shown(r)}"
    head = (
        f"| {r.statement} | {r.published} | {r.reproduction or '--'} "
        if published
        else (f"| {r.statement} | {r.population} ")
    )
    return f"{head}| **{r.verdict}** | {middle} | {r.deciding or '--'} |"


def markdown(rows: pd.DataFrame, effects: pd.DataFrame, design: Mapping[str, Any]) -> str:
    """``claims.md``: the method in two sentences, then one row per claim."""
    resolution = design["resolution"] if design["resolution"] < 5 else "V+"
    lines = [
        "# Claims over the assumptions",
        "",
        f"Each claim tested in {design['cells']} cells: the centre and a {design['runs']}-run "
        f"two-level screen (resolution {resolution}) over {len(design['factors'])} registered "
        f"assumptions, {design['n_tasks']} tasks per env x "
        "complexity, every planner on the same tasks; a planner's own settings count only for "
        "the claims about that planner. *Holds throughout*: its paired "
        "interval clears the threshold over at least 99 % of the space; *holds where*: over "
        "part of it, the boundary in the deciding assumptions' units (one at a time, the "
        "others at their middle; a screen's boundary is where to confirm, not a confirmed "
        "threshold); *fails*: below it over 99 %; else *unresolved at this n*.",
        "",
        "| claim | population | verdict | where it holds | share holding | pooled "
        "| deciding assumptions |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    own = rows[rows["published"].fillna("") == ""] if len(rows) else rows
    for r in own.itertuples():
        lines.append(_row(r))
    published = rows[rows["published"].fillna("") != ""] if len(rows) else rows
    if len(published):
        lines += [
            "",
            "Published findings mapped onto planarena (the paper's numbers quoted; the "
            "mapping in experiments/claims/literature.yaml):",
            "",
            "| claim | published | reproduction | verdict | where it holds | share holding "
            "| pooled | deciding assumptions |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in published.itertuples():
            lines.append(_row(r, published=True))
    if design["left_out"]:
        left = "; ".join(f"{k} ({v})" for k, v in design["left_out"].items())
        lines += ["", f"Not varied: {left}"]
    lines += [
        "",
        "Each claim's largest effects, high level minus low (points; for tokens and latency "
        "the factor on the ratio), in the claim's direction:",
        "",
    ]
    for claim, part in effects.groupby("claim", sort=False):
        top = part.head(3)
        shown = ", ".join(
            f"{e.factor} {_effect(e.metric, e.effect)} [{_effect(e.metric, e.low)}, "
            f"{_effect(e.metric, e.high)}]" + ("" if e.decides else " (not deciding)")
            for e in top.itertuples()
        )
        lines.append(f"- {claim}: {shown}")
    return "\n".join(lines) + "\n"


@study("claims")
class Claims(Study):
    """Every registered claim, tested over the registered assumptions' ranges."""

    def cells(self, config: Mapping[str, Any]) -> list[Cell]:
        check_sim(config)
        files = (config.get("claims") or {}).get("files") or []
        load_claims([str(f) for f in files])  # a bad claims file: one line, before any episode
        return claims_design(config).cells()

    def render(
        self, records: pd.DataFrame, config: Mapping[str, Any], out_dir: Path, *, seed: int
    ) -> str:
        spec = config.get("claims") or {}
        design = claims_design(config)
        claims = load_claims([str(f) for f in spec.get("files") or []])
        planners = set(config.get("planner") or {})
        records = in_grid_order(records, design.labels)
        records = records.merge(task_steps(config), on=["env", "task_id"], how="left")
        signs = np.array([design.signs[f.name] for f in design.factors], dtype=float).T
        axes = axes_of(design)
        alpha, n_boot = float(spec.get("alpha", 0.05)), int(spec.get("n_boot", 1000))
        rows, effects = [], []
        for claim in claims:
            if claim.needs:
                rows.append(not_run_row(claim))
                continue
            if not {claim.a, claim.b} <= planners:
                continue
            sign = 1.0 if claim.direction == "greater" else -1.0
            d = sign * differences(records, claim, design.labels)
            own = acting(design, claim)
            v = judge(
                d,
                signs[:, own],
                [axes[j] for j in own],
                threshold=sign * claim.threshold(),
                alpha=alpha,
                n_boot=n_boot,
                seed=seed,
            )
            rows.append(verdict_rows(claim, v))
            effects += [{"claim": claim.id, "metric": claim.metric, **e} for e in v.effects]
        table = pd.DataFrame(rows)
        effect_table = pd.DataFrame(effects)
        out_dir.mkdir(parents=True, exist_ok=True)
        table.to_csv(out_dir / "claims.csv", index=False)
        effect_table.to_csv(out_dir / "claims_effects.csv", index=False)
        summary = design_summary(design, int(config["n_tasks"]))
        (out_dir / "claims_design.json").write_text(
            json.dumps(summary, indent=1, sort_keys=True) + "\n", encoding="utf-8"
        )
        text = markdown(table, effect_table, summary)
        (out_dir / "claims.md").write_text(text, encoding="utf-8")
        counts = table["verdict"].value_counts() if len(table) else pd.Series(dtype=int)
        return (
            f"Claims: {len(table)} tested in {len(design.labels)} cells; "
            + ", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS)
            + f" — {out_dir / 'claims.md'}; confirm where the verdict turns with: planarena "
            f"experiment=claims_confirm claims_confirm.screen={out_dir} seed={seed + 1}"
        )
