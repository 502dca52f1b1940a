"""The numbers of ``sim_vs_real``: per planner and source, the rank correlation and its
interval, and where the two sources disagree.

The task is the unit: a held-out task (env, complexity, task id) carries every planner's
episodes of it, in both sources, so one bootstrap resample of tasks moves all of them together
(paired) and both rankings are recomputed on the same tasks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from planarena.experiments.analysis.stats import (
    FloatArray,
    boot_rng,
    paired_difference_interval,
    percentile_interval,
    task_weights,
    wilson_interval,
)

SOURCES = ("real", "sim")

MECHANISMS: Mapping[str, str] = {
    "malformed_output": "p_malformed and its per-format fields (p_malformed_action, "
    "p_malformed_candidates, p_malformed_plan, p_malformed_replan, p_malformed_steps), "
    "malformed_persistence (a format broken again as it was last), p_sloppy_json (JSON "
    "plans), p_malformed_text / p_sloppy_text (text plans): output that does not parse",
    "false_success": "p_miss_signal (a wrong result taken at face value), check_coverage "
    "(the plan's checks that would flag it), judge_accuracy (a judge accepting it), w_stop (a "
    "tool call's mistake of answering early with what is in hand)",
    "hallucinated_tool_call": "w_hallucinate and w_hallucinate_plan (among wrong decisions of "
    "a tool call and of a plan step, inventing a tool), p_invent_fallback (a plan step's "
    "fallback naming a tool the catalogue lacks) and p_correct (how often a decision is "
    "wrong at all)",
    "plan_logic_error": "w_dependency (among wrong decisions, forgetting a dependency), "
    "w_stop_plan (a plan cut to nothing is refused as empty), "
    "p_prose_condition (a step's condition written in words the executor cannot evaluate), "
    "p_restart_ids (a replan numbered from step_1 again, reusing an executed step's id) and "
    "p_correct (how often a decision is wrong at all)",
    "precondition_unverified": "w_premise and w_premise_plan (a guessed argument), w_other and "
    "w_other_plan (another tool of the env called with the step's arguments, which it "
    "refuses), w_unchecked (an omitted post-condition), and p_correct (how often a decision "
    "is wrong at all)",
    "dead_end": "p_trap (the attractive dead end preferred), p_persist (staying on it), "
    "rollout_optimism (a doomed line imagined to succeed)",
    "gave_up_after_tool_failure": "w_stop and w_stop_plan (among wrong decisions, stopping "
    "early), p_persist "
    "(repeating the failed call instead of moving on), p_correct",
    "budget_exhausted": "p_correct and context_scale_tokens (the right-move rate and its "
    "decay with prompt length: loops that never finish), and the token/call budget and "
    "context window",
    "correctly_reported_unreachable": "p_correct and p_miss_signal on unreachable tasks "
    "(seeing the missing data and saying so instead of answering or giving up); which tasks "
    "are unreachable is the env's (faults.unreachable_rate), the same in both",
}
"""Each failure mode to the simulator mechanism (skill-profile fields, docs/simulator.md)
whose value a gap in that mode's share points to."""

UNMAPPED = "no simulator mechanism listed for this mode"

TIE_DECIMALS = 12
"""Completion rates equal to this many decimals count as tied in a ranking."""


# --------------------------------------------------------------------------- rank correlation


def kendall_tau_b(x: Sequence[float] | FloatArray, y: Sequence[float] | FloatArray) -> float:
    """Kendall's tau-b of two paired samples (ties in either corrected for); NaN when either
    sample is constant (no ranking to correlate)."""
    tau = kendall_tau_b_rows(
        np.asarray(x, dtype=float)[None, :], np.asarray(y, dtype=float)[None, :]
    )
    return float(tau[0])


def kendall_tau_b_rows(x: FloatArray, y: FloatArray) -> FloatArray:
    """Row-wise :func:`kendall_tau_b` of two ``(rows, n)`` arrays:
    ``(n_c - n_d) / sqrt((n_0 - n_x) (n_0 - n_y))`` over the ``n_0`` pairs, ``n_x`` and ``n_y``
    the pairs tied in x and in y; NaN for a row where every pair is tied in x or in y."""
    x = np.round(np.asarray(x, dtype=float), TIE_DECIMALS)
    y = np.round(np.asarray(y, dtype=float), TIE_DECIMALS)
    n = x.shape[1]
    i, j = np.triu_indices(n, k=1)
    dx = np.sign(x[:, i] - x[:, j])
    dy = np.sign(y[:, i] - y[:, j])
    n0 = i.size
    untied_x = n0 - (dx == 0).sum(axis=1)
    untied_y = n0 - (dy == 0).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        tau = (dx * dy).sum(axis=1) / np.sqrt(untied_x * untied_y)
    return np.where((untied_x > 0) & (untied_y > 0), tau, np.nan)


def average_ranks(values: Sequence[float]) -> list[float]:
    """Ranks, 1 = highest completion; tied values share their average rank."""
    s = pd.Series(np.round(np.asarray(values, dtype=float), TIE_DECIMALS))
    return s.rank(ascending=False, method="average").tolist()


# --------------------------------------------------------------------------- per-task arrays


TASK = "_task"
"""A frame's column holding :func:`task_key`, once :func:`with_task_key` added it."""


def with_task_key(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with its :func:`task_key` as a column (read many times, built once)."""
    return df.assign(**{TASK: task_key(df)})


def task_key(df: pd.DataFrame) -> pd.Series:
    """``env/complexity/task_id``: the bootstrap unit."""
    if TASK in df.columns:
        return df[TASK]
    return (
        df["env"].astype(str) + "/" + df["complexity"].astype(str) + "/" + df["task_id"].astype(str)
    )


def task_matrix(
    df: pd.DataFrame, value: str, tasks: Sequence[str], planners: Sequence[str]
) -> tuple[FloatArray, FloatArray]:
    """(sum of ``value``, episode count) per task x planner (rows ``tasks``, columns
    ``planners``); zeros where a planner has no episode of a task."""
    work = pd.DataFrame(
        {"task": task_key(df), "planner": df["planner"].astype(str), "v": df[value].astype(float)}
    )
    grouped = work.groupby(["task", "planner"], sort=False)["v"]
    sums = grouped.sum().unstack("planner").reindex(index=tasks, columns=planners)
    counts = grouped.size().unstack("planner").reindex(index=tasks, columns=planners)
    return sums.fillna(0.0).to_numpy(float), counts.fillna(0.0).to_numpy(float)


def tau_with_interval(
    real: pd.DataFrame,
    sim: pd.DataFrame,
    planners: Sequence[str],
    *,
    seed: int,
    n_boot: int,
    label: str = "held_out",
    value: str = "success",
) -> dict[str, Any]:
    """Kendall tau-b of the planners' per-episode mean of ``value`` (default: completion),
    real against sim, and its percentile bootstrap 95 % interval over the tasks both sources
    ran (each resample recomputes both rankings on the same drawn tasks; every ``value`` of
    one ``label`` draws the same tasks); ``undefined`` counts resamples with a ranking of all
    ties (left out of the interval), ``tied`` names the source(s) whose ranking is all ties
    (``real``, ``sim``, ``both``; empty when tau is defined)."""
    tasks = sorted(set(task_key(real)) & set(task_key(sim)))
    out: dict[str, Any] = {"tasks": len(tasks), "planners": len(planners), "n_boot": n_boot}
    out["value"] = value
    if len(tasks) == 0 or len(planners) < 2:
        nan = {"tau": math.nan, "tau_lo": math.nan, "tau_hi": math.nan}
        return {**out, **nan, "undefined": 0, "tied": "", "real_mean": [], "sim_mean": []}
    sr, nr = task_matrix(real, value, tasks, planners)
    ss, ns = task_matrix(sim, value, tasks, planners)
    with np.errstate(divide="ignore", invalid="ignore"):
        mr, ms = sr.sum(0) / nr.sum(0), ss.sum(0) / ns.sum(0)
    tau = kendall_tau_b(mr, ms)
    flat = [name for name, m in (("real", mr), ("sim", ms)) if len(set(np.round(m, 12))) < 2]
    tied = "both" if len(flat) == 2 else "".join(flat)
    rng = boot_rng(seed, "sim_vs_real", "tau", label)
    parts = []
    for w in task_weights(rng, len(tasks), n_boot):
        with np.errstate(divide="ignore", invalid="ignore"):
            parts.append(kendall_tau_b_rows((w @ sr) / (w @ nr), (w @ ss) / (w @ ns)))
    taus = np.concatenate(parts)
    lo, hi = percentile_interval(taus, 0.95)
    return {
        **out,
        "tau": tau,
        "tau_lo": lo,
        "tau_hi": hi,
        "undefined": int(np.isnan(taus).sum()),
        "tied": tied,
        "real_mean": mr.tolist(),
        "sim_mean": ms.tolist(),
    }


RANKED_BY: Mapping[str, str] = {
    "completion": "completion",
    "tokens": "tokens per episode",
    "calls": "LLM calls per episode",
    "progress": "progress per episode",
}
"""The measures the planners are ranked by, each correlated real against sim (short name to
the label the page shows). Completion is the headline; the others still rank the planners
when every planner completes the same share (0 % with a small real model)."""


def ranked_values(real: pd.DataFrame, sim: pd.DataFrame, tokens: str) -> dict[str, str]:
    """Each :data:`RANKED_BY` measure to the record column it is the mean of (``progress``
    only when both sources carry it for every episode)."""
    values = {"completion": "success", "tokens": tokens, "calls": "llm_calls"}
    if all("progress" in d.columns and d["progress"].notna().all() for d in (real, sim)):
        values["progress"] = "progress"
    return values


def taus_by_measure(
    real: pd.DataFrame,
    sim: pd.DataFrame,
    planners: Sequence[str],
    tokens: str,
    *,
    seed: int,
    n_boot: int,
    label: str = "held_out",
) -> dict[str, dict[str, Any]]:
    """:func:`tau_with_interval` for each :func:`ranked_values` measure, in
    :data:`RANKED_BY`'s order, on the same resampled tasks."""
    return {
        name: tau_with_interval(
            real, sim, planners, seed=seed, n_boot=n_boot, label=label, value=value
        )
        for name, value in ranked_values(real, sim, tokens).items()
    }


GAP_COLUMNS = ["planner", "gap", "gap_lo", "gap_hi", "verdict", "rel_gap", "rel_lo", "rel_hi"]
GAP_COLUMNS += ["rel_verdict"]


def _sign_verdict(lo: float, hi: float, above: str, below: str, neither: str) -> str:
    return above if lo > 0 else below if hi < 0 else neither


def completion_gaps(
    real: pd.DataFrame, sim: pd.DataFrame, planners: Sequence[str], *, seed: int, n_boot: int
) -> tuple[pd.DataFrame, dict[str, float]]:
    """Per planner: sim's completion minus real's on the tasks both ran, with a paired
    percentile-bootstrap 95 % interval over tasks (``verdict``: over- or under-predicted,
    the interval clear of 0, or ``agrees``); and the same gap minus the mean gap over the
    planners (``rel_*``: a simulator that is off by the same amount for every planner still
    ranks them right, so the planners it *ranks* wrong are those whose gap differs from the
    others'). Also returns the mean gap (the level) with its interval."""
    tasks = sorted(set(task_key(real)) & set(task_key(sim)))
    rows = []
    nan = {"gap": math.nan, "gap_lo": math.nan, "gap_hi": math.nan}
    if not tasks or not planners:
        return pd.DataFrame(columns=GAP_COLUMNS), nan
    sr, nr = task_matrix(real, "success", tasks, planners)
    ss, ns = task_matrix(sim, "success", tasks, planners)
    rng = boot_rng(seed, "sim_vs_real", "gap")
    draws = []
    for w in task_weights(rng, len(tasks), n_boot):
        with np.errstate(divide="ignore", invalid="ignore"):
            draws.append((w @ ss) / (w @ ns) - (w @ sr) / (w @ nr))
    boot = np.concatenate(draws)
    with np.errstate(divide="ignore", invalid="ignore"):
        point = ss.sum(0) / ns.sum(0) - sr.sum(0) / nr.sum(0)
    with np.errstate(invalid="ignore"):
        boot_mean = np.nanmean(boot, axis=1) if boot.size else boot
    level_lo, level_hi = percentile_interval(boot_mean, 0.95)
    level = {"gap": float(np.mean(point)), "gap_lo": level_lo, "gap_hi": level_hi}
    for k, planner in enumerate(planners):
        lo, hi = percentile_interval(boot[:, k], 0.95)
        r_lo, r_hi = percentile_interval(boot[:, k] - boot_mean, 0.95)
        rows.append(
            {
                "planner": planner,
                "gap": float(point[k]),
                "gap_lo": lo,
                "gap_hi": hi,
                "verdict": _sign_verdict(
                    lo, hi, "sim over-predicts", "sim under-predicts", "agrees"
                ),
                "rel_gap": float(point[k] - np.mean(point)),
                "rel_lo": r_lo,
                "rel_hi": r_hi,
                "rel_verdict": _sign_verdict(
                    r_lo, r_hi, "sim ranks it too high", "sim ranks it too low", "in line"
                ),
            }
        )
    return pd.DataFrame(rows, columns=GAP_COLUMNS), level


# --------------------------------------------------------------------------- side by side


PAIR_VERDICTS = {
    "right": "both separate them, the same way",
    "wrong": "both separate them, opposite ways",
    "sim only": "the simulator separates them, the real runs do not",
    "real only": "the real runs separate them, the simulator does not",
    "neither": "neither separates them",
}
"""How a pair of planners' completion difference compares, real against sim (the key is the
``verdict`` column of :func:`pair_comparisons`)."""


def pair_comparisons(
    real: pd.DataFrame, sim: pd.DataFrame, planners: Sequence[str], confidence: float = 0.95
) -> pd.DataFrame:
    """Every pair of planners (in ``planners``' order): completion of the first minus the
    second on the tasks both sources ran, in each source, with Newcombe's paired interval of
    the difference (:func:`paired_outcomes`), and whether the simulator's pair comes out as
    the real one does (:data:`PAIR_VERDICTS`)."""
    from planarena.experiments.studies.sensitivity_stats import sign_of

    tasks = set(task_key(real)) & set(task_key(sim))
    outcomes = {name: paired_outcomes(df, tasks) for name, df in (("real", real), ("sim", sim))}
    rows = []
    for i, a in enumerate(planners):
        for b in planners[i + 1 :]:
            row: dict[str, Any] = {"planner_a": a, "planner_b": b}
            signs = {}
            for name, table in outcomes.items():
                pair = table[[a, b]].dropna() if {a, b} <= set(table.columns) else table[[]]
                x, y = pair.to_numpy(bool).T if len(pair) else (np.zeros(0, bool),) * 2
                counts = (int((x & y).sum()), int((x & ~y).sum()), int((~x & y).sum()))
                lo, hi = paired_difference_interval(*counts, len(x) - sum(counts), confidence)
                signs[name] = sign_of(lo, hi)
                row.update({
                    f"{name}_diff": (counts[1] - counts[2]) / len(x) if len(x) else math.nan,
                    f"{name}_lo": lo,
                    f"{name}_hi": hi,
                    f"{name}_tasks": pair.index.get_level_values(0).nunique(),
                })  # fmt: skip
            real_sign, sim_sign = signs["real"], signs["sim"]
            if real_sign and sim_sign:
                row["verdict"] = "right" if real_sign == sim_sign else "wrong"
            else:
                row["verdict"] = "sim only" if sim_sign else "real only" if real_sign else "neither"
            rows.append(row)
    return pd.DataFrame(rows)


def paired_outcomes(df: pd.DataFrame, tasks: set[str]) -> pd.DataFrame:
    """Completion per episode of ``tasks``, one row per (task, seed, trial) and one column per
    planner (missing: NaN). Two planners pair on the same task, seed and trial; where a task
    ran with several seeds, each seed is a pair of its own (the interval then treats a task's
    seeds as independent)."""
    key = task_key(df)
    keep = key.isin(tasks)
    cols = {"task": key[keep]}
    for extra in ("seed", "trial"):
        cols[extra] = df.loc[keep, extra] if extra in df.columns else 0
    work = pd.DataFrame(cols)
    work["planner"] = df.loc[keep, "planner"].astype(str)
    work["success"] = df.loc[keep, "success"].astype(float)
    return work.pivot_table(
        index=["task", "seed", "trial"], columns="planner", values="success", aggfunc="first"
    )


def tokens_column(real: pd.DataFrame, sim: pd.DataFrame) -> str:
    """``tokens_o200k`` when both sources carry it (one tokenizer for both: a real server's
    own count is in its model's tokens), else ``tokens_total``."""
    both = all("tokens_o200k" in d.columns and d["tokens_o200k"].notna().all() for d in (real, sim))
    return "tokens_o200k" if both else "tokens_total"


def _boot_mean(
    df: pd.DataFrame, value: str, rng: np.random.Generator, n_boot: int
) -> tuple[float, float]:
    """Task-bootstrap 95 % interval of the per-episode mean of ``value``."""
    per = pd.DataFrame({"task": task_key(df), "v": df[value].astype(float)})
    g = per.groupby("task", sort=True)["v"]
    sums, counts = g.sum().to_numpy(float), g.size().to_numpy(float)
    if sums.size == 0:
        return (math.nan, math.nan)
    parts = [(w @ sums) / (w @ counts) for w in task_weights(rng, sums.size, n_boot)]
    return percentile_interval(np.concatenate(parts), 0.95)


def side_by_side(
    sources: Mapping[str, pd.DataFrame],
    planners: Sequence[str],
    modes: Sequence[str],
    tokens: str,
    *,
    seed: int,
    n_boot: int,
) -> pd.DataFrame:
    """One row per planner x source: episodes, tasks, completion (Wilson 95 %; a task
    bootstrap when a task ran more than once, :func:`repeats`), mean tokens and LLM calls per
    episode (task-bootstrap 95 %), rank by completion, and each failure mode's share of the
    episodes (``share_<mode>``; ``none`` is the completion)."""
    rows: list[dict[str, Any]] = []
    repeated = repeats(sources)
    for source, df in sources.items():
        rates = {}
        for planner in planners:
            part = df[df["planner"].astype(str) == planner]
            n = len(part)
            wins = int(part["success"].astype(bool).sum())
            if not n:
                lo, hi = (math.nan, math.nan)
            elif repeated:  # trials of a task are correlated: the task is the unit
                rng = boot_rng(seed, "sim_vs_real", source, planner, "completion")
                lo, hi = _boot_mean(
                    part.assign(_s=part["success"].astype(float)), "_s", rng, n_boot
                )
            else:
                lo, hi = wilson_interval(wins, n)
            rates[planner] = wins / n if n else math.nan
            t_lo, t_hi = _boot_mean(
                part, tokens, boot_rng(seed, "sim_vs_real", source, planner, "tokens"), n_boot
            )
            c_lo, c_hi = _boot_mean(
                part, "llm_calls", boot_rng(seed, "sim_vs_real", source, planner, "calls"), n_boot
            )
            row: dict[str, Any] = {
                "planner": planner,
                "source": source,
                "episodes": n,
                "tasks": int(task_key(part).nunique()),
                "completion": rates[planner],
                "completion_lo": lo,
                "completion_hi": hi,
                "tokens_mean": float(part[tokens].astype(float).mean()) if n else math.nan,
                "tokens_lo": t_lo,
                "tokens_hi": t_hi,
                "calls_mean": float(part["llm_calls"].astype(float).mean()) if n else math.nan,
                "calls_lo": c_lo,
                "calls_hi": c_hi,
            }
            counts = part["failure_mode"].astype(str).value_counts()
            for mode in modes:
                row[f"share_{mode}"] = float(counts.get(mode, 0)) / n if n else math.nan
            rows.append(row)
        ranks = average_ranks([rates[p] for p in planners])
        for row, rank in zip(rows[-len(planners) :], ranks, strict=True):
            row["rank"] = rank
    return pd.DataFrame(rows)


def repeats(sources: Mapping[str, pd.DataFrame]) -> bool:
    """Whether some planner ran some task more than once (trials > 1) in either source."""
    return any(
        bool(pd.DataFrame({"t": task_key(d), "p": d["planner"]}).duplicated().any())
        for d in sources.values()
    )


def common_tasks(sources: Mapping[str, pd.DataFrame], planners: Sequence[str]) -> list[str]:
    """The tasks every planner ran in every source: a planner's completion is then measured
    on the same tasks as every other's (a recording cut short leaves some out)."""
    sets = [
        set(task_key(d[d["planner"].astype(str) == p])) for d in sources.values() for p in planners
    ]
    return sorted(set.intersection(*sets)) if sets else []


def on_tasks(df: pd.DataFrame, tasks: Sequence[str]) -> pd.DataFrame:
    """``df``'s records of ``tasks``."""
    return df[task_key(df).isin(set(tasks))].reset_index(drop=True)


def failure_modes(sources: Mapping[str, pd.DataFrame]) -> list[str]:
    """The failure modes either source shows, ``none`` first, then by total count."""
    counts = pd.concat([d["failure_mode"].astype(str) for d in sources.values()]).value_counts()
    return ["none", *[m for m in counts.index if m != "none"]]


def disagreements(
    table: pd.DataFrame, modes: Sequence[str], *, top: int, min_gap: float
) -> pd.DataFrame:
    """Per planner, its failure modes whose share of episodes differs most between the
    sources (sim minus real, ``|gap| >= min_gap``, at most ``top``), each with the simulator
    mechanism it points to (:data:`MECHANISMS`): a positive gap says the simulator makes that
    failure too often, so the mechanism's probability is set too high for this model."""
    rows = []
    for planner, part in table.groupby("planner", sort=False):
        by = part.set_index("source")
        if not set(SOURCES) <= set(by.index):
            continue
        gaps = [
            (mode, float(by.at["sim", f"share_{mode}"] - by.at["real", f"share_{mode}"]))
            for mode in modes
            if mode != "none"
        ]
        gaps = [g for g in gaps if not math.isnan(g[1]) and abs(g[1]) >= min_gap]
        gaps.sort(key=lambda g: (-abs(g[1]), g[0]))
        for mode, gap in gaps[:top]:
            rows.append(
                {
                    "planner": planner,
                    "failure_mode": mode,
                    "real_share": float(by.at["real", f"share_{mode}"]),
                    "sim_share": float(by.at["sim", f"share_{mode}"]),
                    "gap": gap,
                    "direction": "sim too often" if gap > 0 else "sim too rarely",
                    "mechanism": MECHANISMS.get(mode, UNMAPPED),
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "planner",
            "failure_mode",
            "real_share",
            "sim_share",
            "gap",
            "direction",
            "mechanism",
        ],
    )


# --------------------------------------------------------------------------- failure-mode mix

MEAN_ROW = "(mean over planners)"
"""The ``planner`` of :func:`failure_distance`'s summary row."""


def _mode_counts(
    df: pd.DataFrame, planner: str, tasks: Sequence[str], modes: Sequence[str]
) -> FloatArray:
    """Tasks x modes: how many of ``planner``'s episodes of each task ended in each mode."""
    part = df[df["planner"].astype(str) == planner]
    table = pd.crosstab(task_key(part), part["failure_mode"].astype(str))
    return table.reindex(index=list(tasks), columns=list(modes), fill_value=0).to_numpy(float)


def total_variation(real: FloatArray, sim: FloatArray) -> FloatArray:
    """Half the L1 distance between the mode mixes of two count arrays (modes on the last
    axis): 0 when the shares are equal, 1 when no mode is in both."""
    p = real / real.sum(-1, keepdims=True)
    q = sim / sim.sum(-1, keepdims=True)
    return 0.5 * np.abs(p - q).sum(-1)


def failure_distance(
    sources: Mapping[str, pd.DataFrame],
    planners: Sequence[str],
    modes: Sequence[str],
    *,
    seed: int,
    n_boot: int,
) -> pd.DataFrame:
    """Per planner, how far the simulator's failure-mode mix is from the real one: the
    total-variation distance of the shares (``none``, completion, is a mode), its paired
    task-bootstrap 95 % interval, and what chance alone gives. Chance is a paired permutation:
    each task's real and simulated episodes swap sources with probability 1/2, which is
    exchangeable when the two come from one distribution; ``chance_95`` is that distance's
    95th percentile and ``p_value`` the share of permutations at least as far as observed
    (plus one). A small sample is far apart by chance alone (12 episodes from one mix rarely
    match), so a distance means something only above ``chance_95``. The last row is the mean
    over the planners, resampled with the same tasks."""
    tasks = common_tasks(sources, planners)
    columns = ["planner", "distance", "distance_lo", "distance_hi", "chance_95", "p_value"]
    if not tasks or not planners:
        return pd.DataFrame(columns=columns)
    real = np.stack([_mode_counts(sources["real"], p, tasks, modes) for p in planners])
    sim = np.stack([_mode_counts(sources["sim"], p, tasks, modes) for p in planners])
    observed = total_variation(real.sum(1), sim.sum(1))  # per planner
    boot = np.concatenate(
        [
            total_variation(np.einsum("bt,ptm->bpm", w, real), np.einsum("bt,ptm->bpm", w, sim))
            for w in task_weights(
                boot_rng(seed, "sim_vs_real", "failure_distance", "bootstrap"),
                len(tasks),
                n_boot,
                per_row=real.size,
            )
        ]
    )
    swap = boot_rng(seed, "sim_vs_real", "failure_distance", "chance").integers(
        0, 2, size=(n_boot, len(tasks))
    )
    moved = np.einsum("bt,ptm->bpm", swap.astype(float), sim - real)
    chance = total_variation(real.sum(1)[None] + moved, sim.sum(1)[None] - moved)
    rows = []
    for i, name in enumerate([*planners, MEAN_ROW]):
        if name == MEAN_ROW:
            obs, b, c = observed.mean(), boot.mean(1), chance.mean(1)
        else:
            obs, b, c = observed[i], boot[:, i], chance[:, i]
        lo, hi = percentile_interval(b, 0.95)
        rows.append(
            {
                "planner": name,
                "distance": float(obs),
                "distance_lo": lo,
                "distance_hi": hi,
                "chance_95": float(np.percentile(c, 95)),
                "p_value": float((1 + np.sum(c >= obs - 1e-12)) / (1 + c.size)),
            }
        )
    return pd.DataFrame(rows, columns=columns)
