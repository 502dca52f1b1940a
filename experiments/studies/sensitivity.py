"""How far a ranking survives its assumptions: a fractional factorial over the simulator's
decisive parameters, with a paired interval behind every verdict.

``planarena experiment=sensitivity`` runs every planner on the same tasks in every cell of a
seeded two-level fractional factorial (plus its centre) over the assumptions that could decide
rankings: the judge's noise and its correlation with the proposer, trap attraction, missed
warning signs, check coverage, the replanner's error scale, rollout optimism, the fault rate
and outage length, and each search planner's own budget knob. Per pair of planners and env x
complexity (envs are never pooled) it writes a paired difference of completion with its
interval in every cell and pooled over cells, a verdict on those intervals (``holds``,
``depends``, ``flips``, ``unresolved``, ``tie``; :mod:`.sensitivity_stats`), and per factor
the orderings its low and high levels reverse. ``experiment=budget_curves`` shares
:func:`group_keys`.

A cell changes only skill fields, model, fault, budget or planner settings: the tasks and every
other setting are the run's own, so a cell differs from another by its parameters alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from planarena.envs.faults import FaultConfig
from planarena.experiments.analysis.stats import derive_seed
from planarena.experiments.studies.registry import Cell, Study, study
from planarena.experiments.studies.sensitivity_design import Design, Factor
from planarena.experiments.studies.sensitivity_stats import (
    ALPHA,
    N_BOOT,
    VERDICTS,
    Settings,
    analyse,
    groups_of,
)

# Short names for keys that are not skill fields (a bare name is a skill field of the
# simulated LLM: llm.skill_overrides.<name>); any factor may also name its key itself.
WORLD_FACTORS = {
    "fault_rate_scale": "faults.rate_scale",
    "fault_duration_scale": "faults.duration_scale",
    "max_tokens_per_episode": "budget.max_tokens_per_episode",
}
SPEC_KEYS = ("factors", "runs", "design_seed", "alpha", "n_boot")
CENTRE = "centre"
__all__ = ["VERDICTS", "Design", "Factor", "Sensitivity", "design_of", "group_keys"]


def parse_factors(spec: Mapping[str, Any]) -> list[Factor]:
    """``sensitivity.factors``: ``name: [low, middle, high]`` (a skill field or a name of
    :data:`WORLD_FACTORS`) or ``name: {key: a.config.key, levels: [low, middle, high]}``."""
    if not isinstance(spec, Mapping) or not spec:
        raise ValueError("sensitivity.factors: give at least one factor, name: [low, middle, high]")
    out = []
    for name, entry in spec.items():
        if isinstance(entry, Mapping):
            unknown = sorted(set(entry) - {"key", "levels"})
            if unknown or "key" not in entry:
                raise ValueError(f"sensitivity.factors.{name}: give key and levels")
            key, levels = str(entry["key"]), entry.get("levels")
        else:
            key = WORLD_FACTORS.get(name, f"llm.skill_overrides.{name}")
            levels = entry
        if not isinstance(levels, Sequence) or isinstance(levels, str) or len(levels) != 3:
            raise ValueError(f"sensitivity.factors.{name}: levels must be [low, middle, high]")
        if levels[0] == levels[2]:
            raise ValueError(f"sensitivity.factors.{name}: the low and high levels are equal")
        out.append(Factor(str(name), key, levels[0], levels[1], levels[2]))
    return out


def left_out_reason(factor: Factor, config: Mapping[str, Any]) -> str | None:
    """Why a factor cannot be varied in this run (None: it can): a planner knob of a planner
    the run does not select, a fault knob the fault model does not have (yet), or a key whose
    parent the config lacks. Skill fields and planner knobs are checked by their own models
    when the cell is built."""
    parts = factor.key.split(".")
    if parts[:2] == ["llm", "skill_overrides"]:
        return None  # the skill profile names a field it lacks when the cell is built
    if parts[0] == "planner" and len(parts) > 2:
        if parts[1] not in (config.get("planner") or {}):
            return f"planner {parts[1]} is not in this run"
        return None
    if parts[0] == "faults" and len(parts) == 2:
        known = parts[1] in FaultConfig.model_fields or parts[1] in (config.get("faults") or {})
        return None if known else f"{factor.key} is not a knob of this fault model"
    node: Any = config
    for part in parts[:-1]:
        if not isinstance(node, Mapping) or part not in node:
            return f"{factor.key}: this run's config has no {part}"
        node = node[part]
    return None


def two_level(k: int, runs: int, seed: int) -> npt.NDArray[np.int64]:
    """A ``runs`` x ``k`` regular two-level fractional factorial (entries -1/+1) of the
    highest resolution this simple rule reaches: the ``m = log2(runs)`` base columns; one more
    factor gets their full product (resolution m + 1); more factors get odd-order
    interactions first (no product of two of them is a third: resolution IV up to runs / 2
    factors), then even-order ones (resolution III). The columns are assigned to the factors in
    a seeded random order with seeded signs. Every column is balanced and any two are
    orthogonal."""
    m = runs.bit_length() - 1
    if runs != 1 << m or runs < k + 1:
        raise ValueError(f"sensitivity.runs={runs}: must be a power of two above the {k} factors")
    base = np.array([[1 if (i >> j) & 1 else -1 for j in range(m)] for i in range(runs)])
    subsets: list[tuple[int, ...]] = [(j,) for j in range(m)]
    if k == m + 1:
        subsets.append(tuple(range(m)))
    else:
        sizes = sorted(range(2, m + 1), key=lambda size: (size % 2 == 0, -size))
        for size in sizes:
            subsets += list(combinations(range(m), size))
    columns = np.stack([base[:, list(s)].prod(axis=1) for s in subsets[:k]], axis=1)
    rng = np.random.default_rng(derive_seed(seed, "sensitivity-design"))
    order = rng.permutation(k)
    flips = np.where(rng.integers(0, 2, size=k) == 1, -1, 1)
    return columns[:, order] * flips


def resolution(table: npt.NDArray[np.int64]) -> int:
    """The design's resolution: the fewest factors whose columns multiply to a constant
    (III: main effects aliased with two-factor interactions; IV: with three-factor ones and
    two-factor interactions with each other; V and more reported as 5). A full factorial has
    no such set: reported as 5 too."""
    k = table.shape[1]
    for size in (3, 4):
        for cols in combinations(range(k), size):
            product = table[:, list(cols)].prod(axis=1)
            if (product == product[0]).all():
                return size
    return 5


def design_of(config: Mapping[str, Any]) -> Design:
    """The study's cells from ``config['sensitivity']``: the centre, then the fractional
    factorial's runs (the smallest power of two above the factors unless ``runs`` is set)."""
    spec = config.get("sensitivity") or {}
    unknown = sorted(set(spec) - set(SPEC_KEYS))
    if unknown:
        raise ValueError(f"sensitivity.{unknown[0]}: unknown; known: {', '.join(SPEC_KEYS)}")
    every = parse_factors(spec.get("factors") or {})
    left_out = {f.name: r for f in every if (r := left_out_reason(f, config)) is not None}
    factors = [f for f in every if f.name not in left_out]
    if not factors:
        raise ValueError("sensitivity.factors: none of them can be varied in this run")
    k = len(factors)
    runs = int(spec.get("runs") or 1 << k.bit_length())
    seed = int(spec.get("design_seed", 0))
    table = two_level(k, runs, seed)
    out = Design(factors, runs, seed, resolution(table), left_out=left_out)
    out.labels = [CENTRE, *(f"run{i + 1:02d}" for i in range(runs))]
    out.values = [{f.name: f.middle for f in factors}]
    out.values += [
        {f.name: f.high if s > 0 else f.low for f, s in zip(factors, row, strict=True)}
        for row in table
    ]
    out.signs = {f.name: [0, *(int(s) for s in table[:, j])] for j, f in enumerate(factors)}
    return out


def check_sim(config: Mapping[str, Any]) -> None:
    """A study of the simulator's assumptions needs the simulator."""
    if (config.get("llm") or {}).get("backend", "sim") != "sim":
        raise ValueError("a sensitivity grid varies the simulated LLM: use llm=sim")


def group_keys(table: pd.DataFrame) -> list[str]:
    """What a verdict is given per: the env (when the table has one) and the complexity."""
    return [k for k in ("env", "complexity") if k in table.columns]


def completion_table(records: pd.DataFrame) -> pd.DataFrame:
    """Completion per cell x env x complexity x planner (cells in design order)."""
    keys = ["cell", *group_keys(records), "planner"]
    table = records.groupby(keys, sort=False)["success"].agg(n="size", completion="mean")
    return table.reset_index()


def in_grid_order(records: pd.DataFrame, labels: Sequence[str]) -> pd.DataFrame:
    """The records of the design's cells, in design order (the records' file order is job
    order, but a resumed run may have appended cells in another order)."""
    order = {label: i for i, label in enumerate(labels)}
    if "cell" not in records.columns:
        raise ValueError("these records have no cell column: not a study grid's run")
    kept = records[records["cell"].isin(order)]
    rank = kept["cell"].map(order)
    return kept.iloc[rank.argsort(kind="stable")].reset_index(drop=True)


def _group_order(config: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], tuple[int, int]]:
    """A group's rank: its env and complexity in the order the config names them."""
    envs = list(config.get("env") or {})
    complexities = list(config.get("complexity") or [])
    if isinstance(config.get("complexity"), str):
        complexities = [config["complexity"]]

    def rank(key: Mapping[str, Any]) -> tuple[int, int]:
        env, cx = key.get("env"), key.get("complexity")
        return (
            envs.index(env) if env in envs else len(envs),
            complexities.index(cx) if cx in complexities else len(complexities),
        )

    return rank


@study("sensitivity")
class Sensitivity(Study):
    """Every planner on the same tasks in every cell of a fractional factorial over the
    simulator's assumptions; per pair of planners a verdict on paired intervals."""

    def cells(self, config: Mapping[str, Any]) -> list[Cell]:
        check_sim(config)
        return design_of(config).cells()

    def render(
        self, records: pd.DataFrame, config: Mapping[str, Any], out_dir: Path, *, seed: int
    ) -> str:
        """Write sensitivity.md / .csv (a verdict per pair), sensitivity_pairs.csv (the
        paired interval per cell), sensitivity_factors.csv (per factor) and
        sensitivity_cells.csv (completion per cell) from the run's records."""
        from planarena.experiments.studies.sensitivity_report import markdown

        spec = config.get("sensitivity") or {}
        design = design_of(config)
        settings = Settings(
            alpha=float(spec.get("alpha", ALPHA)),
            n_boot=int(spec.get("n_boot", N_BOOT)),
            seed=seed,
        )
        planners = list(config["planner"])
        records = in_grid_order(records, design.labels)
        table = completion_table(records)
        groups = groups_of(records, design.labels, planners, group_keys(records))
        groups.sort(key=lambda g: _group_order(config)(g.key))
        verdicts, pairs, factors = analyse(groups, planners, design.signs, settings)
        out_dir.mkdir(parents=True, exist_ok=True)
        table.to_csv(out_dir / "sensitivity_cells.csv", index=False)
        verdicts.to_csv(out_dir / "sensitivity.csv", index=False)
        pairs.to_csv(out_dir / "sensitivity_pairs.csv", index=False)
        factors.to_csv(out_dir / "sensitivity_factors.csv", index=False)
        n_tasks = int(config["n_tasks"])
        text = markdown(verdicts, factors, design, n_tasks, settings, several_envs(table))
        (out_dir / "sensitivity.md").write_text(text, encoding="utf-8")
        counts = verdicts["verdict"].value_counts() if len(verdicts) else pd.Series(dtype=int)
        groups_name = "envs x complexities" if several_envs(table) else "complexities"
        return (
            f"Sensitivity: {len(design.labels)} cells; pairs x {groups_name}: "
            + ", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS)
            + f" — {out_dir / 'sensitivity.md'}"
        )


def several_envs(table: pd.DataFrame) -> bool:
    """Whether the study ran several envs (then each heading names its env)."""
    return "env" in table.columns and table["env"].nunique() > 1
