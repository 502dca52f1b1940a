"""The decision map's settings and its paired per-task statistics (apart from the study, so
the verdicts can use them without importing the study)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from planarena.configs import CONFIG_DIR
from planarena.experiments.analysis.stats import (
    percentile_interval,
    task_weights,
    weighted_percentile_rows,
)

SPEC_KEYS = (
    "skills",
    "fault_rates",
    "judge_correlation",
    "budgets",
    "plan_format",
    "format_skills",
    "steps_bins",
    "meta_planners",
    "alpha",
    "n_boot",
)
REFERENCE_SKILL = "strong"
"""The skill of the one-at-a-time cells (correlation, budget) and of the reference cell."""
REFERENCE_RATE = 1.0


def skill_overrides_for(name: str) -> dict[str, Any] | None:
    """The cell overrides that select skill ``name``: ``llm.skill`` and, where a preset
    ``configs/llm/sim_<name>.yaml`` exists (``llm=sim_reasoning``), its other settings (model
    profiles: a reasoning model's tokens and latency). None when the simulator has no such
    profile."""
    from planarena.planners.llm.profiles import SKILLS

    if name not in SKILLS:
        return None
    out: dict[str, Any] = {"llm.skill": name}
    preset = CONFIG_DIR / "llm" / f"sim_{name}.yaml"
    if preset.is_file():
        from omegaconf import OmegaConf

        raw = OmegaConf.to_container(OmegaConf.load(preset), resolve=False)
        assert isinstance(raw, dict)
        for key, value in raw.items():
            if key not in ("defaults", "skill_overrides") and not str(key).startswith("_"):
                out[f"llm.{key}"] = value
        out["llm.skill"] = name
    return out


# --------------------------------------------------------------------------- cells


@dataclass(frozen=True)
class Settings:
    """``decision_map:`` in the config, checked, with the levels this run can have."""

    skills: list[str]
    fault_rates: list[float]
    correlations: list[float]
    budgets: list[int]
    plan_format: str | None
    format_skills: list[str]
    steps_edges: list[int]
    meta: list[str]
    alpha: float
    n_boot: int
    format_planners: list[str] = field(default_factory=list)
    skill_overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    left_out: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def of(config: Mapping[str, Any]) -> Settings:
        """Read and check ``config['decision_map']``; a ValueError names the bad key."""
        spec = config.get("decision_map") or {}
        unknown = sorted(set(spec) - set(SPEC_KEYS))
        if unknown:
            raise ValueError(f"decision_map.{unknown[0]}: unknown; known: {', '.join(SPEC_KEYS)}")
        if (config.get("llm") or {}).get("backend", "sim") != "sim":
            raise ValueError("decision_map varies the simulated LLM's skill: use llm=sim")
        left_out: dict[str, str] = {}
        skills, overrides = [], {}
        for name in _names(spec.get("skills", [REFERENCE_SKILL]), "decision_map.skills"):
            found = skill_overrides_for(name)
            if found is None:
                left_out[f"skill {name}"] = "no such skill profile in this simulator (yet)"
            else:
                skills.append(name)
                overrides[name] = found
        if REFERENCE_SKILL not in skills:
            raise ValueError(f"decision_map.skills: must include {REFERENCE_SKILL}")
        rates = [_number(x, "decision_map.fault_rates") for x in spec.get("fault_rates") or [1.0]]
        if REFERENCE_RATE not in rates:
            raise ValueError(f"decision_map.fault_rates: must include {REFERENCE_RATE:g}")
        corr = [
            _share(x, "decision_map.judge_correlation") for x in spec.get("judge_correlation") or []
        ]
        budgets = [_whole(x, "decision_map.budgets") for x in spec.get("budgets") or []]
        planners = list(config.get("planner") or {})
        fmt = spec.get("plan_format")
        fmt_planners = [
            p
            for p in planners
            if isinstance(config["planner"][p], Mapping) and "plan_format" in config["planner"][p]
        ]
        fmt_skills = [
            s for s in _names(spec.get("format_skills") or [], "decision_map.format_skills")
        ]
        if fmt and not fmt_planners:
            left_out[f"plan_format={fmt}"] = "no planner of this run has a plan_format setting"
        for s in [s for s in fmt_skills if s not in skills]:
            left_out[f"plan_format={fmt} at skill {s}"] = f"skill {s} is left out"
        edges = [
            _whole(x, "decision_map.steps_bins") for x in spec.get("steps_bins") or [3, 5, 8, 12]
        ]
        if edges != sorted(set(edges)):
            raise ValueError("decision_map.steps_bins: upper edges, increasing")
        meta = [str(m) for m in spec.get("meta_planners") or ["auto"]]
        return Settings(
            skills=skills,
            fault_rates=rates,
            correlations=corr,
            budgets=budgets,
            plan_format=str(fmt) if fmt and fmt_planners else None,
            format_skills=[s for s in fmt_skills if s in skills],
            steps_edges=edges,
            meta=meta,
            alpha=float(spec.get("alpha", 0.05)),
            n_boot=_whole(spec.get("n_boot", 1000), "decision_map.n_boot"),
            format_planners=fmt_planners,
            skill_overrides=overrides,
            left_out=left_out,
        )

    def bins(self) -> list[str]:
        """The length bins' labels: ``<=3``, ``4-5``, ..., ``13+``."""
        out, low = [], 1
        for i, edge in enumerate(self.steps_edges):
            out.append(f"<={edge}" if i == 0 else (f"{low}-{edge}" if low < edge else f"{edge}"))
            low = edge + 1
        return [*out, f"{low}+"]

    def bin_of(self, steps: int) -> str:
        labels = self.bins()
        for edge, label in zip(self.steps_edges, labels, strict=False):
            if steps <= edge:
                return label
        return labels[-1]


def _names(values: Any, key: str) -> list[str]:
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise ValueError(f"{key}: a list of names")
    return [str(v) for v in values]


def _number(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"{key}: {value!r} is not a number >= 0")
    return float(value)


def _share(value: Any, key: str) -> float:
    x = _number(value, key)
    if x > 1:
        raise ValueError(f"{key}: {value!r} is not between 0 and 1")
    return x


def _whole(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{key}: {value!r} is not a positive whole number")
    return value


def per_task(part: pd.DataFrame, planners: Sequence[str]) -> dict[str, pd.DataFrame]:
    """Per planner, per task (``env/task_id``, sorted): success rate, cost and latency
    (means over trials), on the tasks every listed planner ran."""
    return split_tasks(task_means(part, []), planners)


def task_means(data: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Success rate, cost and latency (means over trials) per ``by`` x planner x task,
    sorted: one pass over the records for every point of a table (each group's mean is the
    one :func:`per_task` takes on the point's records alone, the same rows in the same
    order)."""
    return data.groupby([*by, "planner", "task"], sort=True, observed=True).agg(
        success=("success", "mean"), cost=("cost_usd", "mean"), latency=("latency_s", "mean")
    )


def split_tasks(means: pd.DataFrame, planners: Sequence[str]) -> dict[str, pd.DataFrame]:
    """:func:`per_task` of the means of one point (indexed by planner x task, sorted: each
    planner's rows are one block, its tasks in order)."""
    names = np.asarray(means.index.get_level_values("planner"))
    tasks = means.index.get_level_values("task")
    starts = np.flatnonzero(np.r_[True, names[1:] != names[:-1]]) if len(names) else []
    ends = np.r_[starts[1:], len(names)] if len(names) else []
    blocks = {names[a]: (int(a), int(b)) for a, b in zip(starts, ends, strict=True)}
    present = [p for p in planners if p in blocks]
    if not present:
        return {}
    common = tasks[slice(*blocks[present[0]])]
    for p in present[1:]:
        common = common.intersection(tasks[slice(*blocks[p])])
    out = {}
    for p in present:
        a, b = blocks[p]
        frame = means.iloc[a + tasks[a:b].get_indexer(common)]
        frame.index = common
        out[p] = frame
    return out


def completion_order(
    tasks: Mapping[str, pd.DataFrame],
) -> tuple[list[str], dict[str, float], dict[str, float]]:
    """The planners of a point (:func:`per_task`) as the map ranks them, best first: highest
    completion, then lowest cost per completed task, then name; with their rates and costs."""
    rate = {p: float(t["success"].mean()) for p, t in tasks.items()}
    cost = {
        p: _ratio(t["cost"].to_numpy(float), t["success"].to_numpy(float)) for p, t in tasks.items()
    }
    return sorted(tasks, key=lambda p: (-rate[p], cost[p], p)), rate, cost


def _ratio(cost: np.ndarray, success: np.ndarray) -> float:
    done = float(success.sum())
    return float(cost.sum()) / done if done > 0 else math.inf


def paired_boot(
    a: pd.DataFrame, b: pd.DataFrame, metric: str, seed: int, n_boot: int, confidence: float
) -> tuple[float, float]:
    """Paired task-bootstrap interval of ``metric(a) - metric(b)`` (the same resampled tasks
    for both): ``cost`` per completed task, or ``p99`` latency. A resample where either has
    no completion has an infinite cost difference: with more than the interval's tail of
    them the interval is unbounded (not separable)."""
    n = len(a)
    rng = np.random.default_rng(seed)
    parts = []
    if metric == "cost":
        ca, sa = a["cost"].to_numpy(float), a["success"].to_numpy(float)
        cb, sb = b["cost"].to_numpy(float), b["success"].to_numpy(float)
        for w in task_weights(rng, n, n_boot):
            with np.errstate(divide="ignore", invalid="ignore"):
                d = (w @ ca) / (w @ sa) - (w @ cb) / (w @ sb)
            parts.append(np.where(np.isfinite(d), d, np.nan))
    else:
        la, lb = a["latency"].to_numpy(float), b["latency"].to_numpy(float)
        oa, ob = np.argsort(la, kind="stable"), np.argsort(lb, kind="stable")
        for w in task_weights(rng, n, n_boot, per_row=3 * n):
            parts.append(
                weighted_percentile_rows(la[oa], w[:, oa], 99)
                - weighted_percentile_rows(lb[ob], w[:, ob], 99)
            )
    stats = np.concatenate(parts)
    if np.isnan(stats).mean() > (1.0 - confidence) / 2.0:
        return (-math.inf, math.inf)
    return percentile_interval(stats, confidence)
