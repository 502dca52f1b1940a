"""The formatted tables of ``summary.md`` and ``summary.tex``, each a frame of strings built
from the per-cell numbers of :mod:`planarena.experiments.analysis.metrics` and its siblings.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from planarena.experiments.analysis.cells import (
    COMPLEXITY_ORDER,
    cell_keys,
    sort_cells,
)
from planarena.experiments.analysis.comparisons import pairwise_comparisons
from planarena.experiments.analysis.metrics import (
    consistency_k,
    pass_at_k,
    pass_hat_k,
    seed_spread,
)
from planarena.experiments.analysis.reliability import (
    read_recovery_times,
    recovery_by_fault,
    robustness,
    time_to_recover,
)
from planarena.experiments.analysis.stats import PERCENTILE_METHOD
from planarena.experiments.analysis.table_format import (
    MISSING,
    _diff_text,
    _flatten,
    _format_with_ci,
    _is_missing,
    _money,
    _num,
    _p_text,
    _pct,
    format_completion_cell,
)
from planarena.experiments.records.runs import with_swept_columns
from planarena.experiments.records.schema import INFRASTRUCTURE_ERROR, JOB_COST_CAP
from tabulate import tabulate

_COMPLETION_INPUTS = (
    "planner",
    "complexity",
    "n",
    "completion_rate",
    "completion_ci_low",
    "completion_ci_high",
)


def _swept_in(summary: pd.DataFrame) -> list[str]:
    """Key columns of a summary between ``complexity`` and ``n`` (the swept config keys)."""
    cols = list(summary.columns)
    if "complexity" not in cols or "n" not in cols:
        return []
    return cols[cols.index("complexity") + 1 : cols.index("n")]


def _row_keys(summary: pd.DataFrame) -> list[str]:
    """(env,) planner, swept keys: env only when several envs are present."""
    keys = ["planner", *_swept_in(summary)]
    if "env" in summary.columns and summary["env"].nunique(dropna=False) > 1:
        keys = ["env", *keys]
    return keys


def completion_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Wide completion table: rows planner (or env, planner), columns complexity.

    Complexity columns follow simple < medium < complex; planners keep the order of
    ``summary`` (itself first-appearance or explicit order). Raises if ``summary`` has
    several rows per (row, complexity) cell, e.g. when it was grouped by extra keys.
    """
    missing = [c for c in _COMPLETION_INPUTS if c not in summary.columns]
    if missing:
        raise KeyError(f"summary is missing columns: {missing}")
    row_keys = _row_keys(summary)
    cell_keys = [*row_keys, "complexity"]
    if summary.duplicated(cell_keys).any():
        raise ValueError(f"summary has several rows per {cell_keys}; cannot pivot")
    planner_order = list(dict.fromkeys(summary["planner"]))
    rows = sort_cells(summary[row_keys].drop_duplicates(), row_keys, planner_order=planner_order)
    complexities = sort_cells(summary[["complexity"]].drop_duplicates(), ["complexity"])
    columns = complexities["complexity"].tolist()

    lookup = {
        tuple(rec[k] for k in cell_keys): format_completion_cell(
            rec["completion_rate"], rec["completion_ci_low"], rec["completion_ci_high"], rec["n"]
        )
        for rec in summary.to_dict("records")
    }
    row_tuples = [tuple(r) for r in rows[row_keys].itertuples(index=False, name=None)]
    data = [[lookup.get((*r, c), MISSING) for c in columns] for r in row_tuples]
    if len(row_keys) == 1:
        index = pd.Index([r[0] for r in row_tuples], name=row_keys[0])
    else:
        index = pd.MultiIndex.from_tuples(row_tuples, names=row_keys)
    table = pd.DataFrame(data, index=index, columns=pd.Index(columns, name="complexity"))
    return table


def format_completion_table(summary: pd.DataFrame) -> str:
    """Plain-text (tabulate 'github') completion table for terminal output."""
    flat = _flatten(completion_table(summary))
    return tabulate(flat, headers="keys", tablefmt="github", showindex=False, disable_numparse=True)


def _keys_of(summary: pd.DataFrame) -> list[str]:
    cols = list(summary.columns)
    return cols[: cols.index("n")] if "n" in cols else []


def cost_latency_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Per cell, over all episodes: mean tokens [task-bootstrap 95% CI], latency P50/P99
    [task-bootstrap 95% CI] and mean cost, as strings; ``n`` episodes and ``tasks``."""
    keys = _keys_of(summary)
    out = summary[keys].copy()
    out["n"] = summary["n"].astype("int64").astype(str)
    if "n_tasks" in summary.columns:
        out["tasks"] = summary["n_tasks"].astype("int64").astype(str)
    out["tokens (all episodes)"] = [
        f"{_num(v)} [{_num(lo)}, {_num(hi)}]" if "tokens_mean_ci_low" in summary else _num(v)
        for v, lo, hi in zip(
            summary["tokens_mean"],
            summary.get("tokens_mean_ci_low", summary["tokens_mean"]),
            summary.get("tokens_mean_ci_high", summary["tokens_mean"]),
            strict=True,
        )
    ]
    for q in ("p50", "p99"):
        col = f"latency_{q}"
        out[f"{q.upper()} latency s"] = [
            _format_with_ci(v, lo, hi, 1)
            for v, lo, hi in zip(
                summary[col], summary[f"{col}_ci_low"], summary[f"{col}_ci_high"], strict=True
            )
        ]
    out["cost USD (all episodes)"] = [_money(v) for v in summary["cost_mean"]]
    return out.reset_index(drop=True)


def success_cost_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Cost of success per cell: tokens, cost and P50 latency over *completed* episodes only,
    all-episode cost divided by successes, and the Kaplan-Meier median time to success
    (failures censored), beside the all-episode means."""
    keys = _keys_of(summary)
    out = summary[keys].copy()
    out["successes"] = summary["successes"].astype("int64").astype(str)
    out["tokens (all)"] = [_num(v) for v in summary["tokens_mean"]]
    out["tokens (completed)"] = [_num(v) for v in summary["successes_tokens_mean"]]
    out["cost USD (all)"] = [_money(v) for v in summary["cost_mean"]]
    out["cost USD (completed)"] = [_money(v) for v in summary["successes_cost_mean"]]
    out["cost USD per success"] = [_money(v) for v in summary["cost_per_success"]]
    out["P50 s (all)"] = [_num(v) for v in summary["latency_p50"]]
    out["P50 s (completed)"] = [_num(v) for v in summary["successes_latency_p50"]]
    out["KM median s to success"] = [_num(v) for v in summary["time_to_success_km_median"]]
    return out.reset_index(drop=True)


def failure_table(failures: pd.DataFrame) -> pd.DataFrame:
    """Failure-mode shares as percentages (one decimal), keeping ``n_failed`` as an int."""
    out = failures.copy()
    start = list(out.columns).index("n_failed")
    for col in out.columns[start + 1 :]:
        out[col] = [_pct(v) for v in failures[col]]
    out["n_failed"] = out["n_failed"].astype("int64").astype(str)
    return out.reset_index(drop=True)


def left_out_text(df: pd.DataFrame) -> str:
    """What :func:`~planarena.experiments.records.schema.measured` leaves out of ``df``, each
    kind counted and named as what it is ("" when nothing is left out)."""
    if "failure_mode" not in df.columns:
        return ""
    infra = df["failure_mode"] == INFRASTRUCTURE_ERROR
    capped = ~infra & (df["stop_reason"] == JOB_COST_CAP if "stop_reason" in df.columns else False)
    parts = []
    if int(infra.sum()):
        parts.append(
            f"{int(infra.sum())} infrastructure_error episode(s) (the LLM endpoint failed, not "
            "the agent)"
        )
    if int(capped.sum()):
        parts.append(
            f"{int(capped.sum())} episode(s) the job's cost cap cut (stop reason job_cost_cap: "
            "the cap ended it, not the agent)"
        )
    if not parts:
        return ""
    how = " with a higher budget.max_cost_usd" if int(capped.sum()) else ""
    return f"{' and '.join(parts)} are left out of every table; rerun the job{how} to measure them."


def harness_error_text(summary: pd.DataFrame) -> str:
    """A warning when episodes ended in ``harness_error`` (an exception in planarena itself,
    not an outcome of the agent: must be 0): the tables count them as failures, so the
    completion rates of their cells are too low. "" when there is none."""
    if "harness_errors" not in summary.columns or not int(summary["harness_errors"].sum()):
        return ""
    hit = summary[summary["harness_errors"] > 0]
    keys = [k for k in _keys_of(summary) if summary[k].nunique(dropna=False) > 1] or ["planner"]
    cells = "; ".join(
        " ".join(str(v) for v in row) + f" ({n})"
        for row, n in zip(
            hit[keys].itertuples(index=False, name=None), hit["harness_errors"], strict=True
        )
    )
    return (
        f"**WARNING: {int(hit['harness_errors'].sum())} harness_error episode(s)** (an "
        "exception in planarena, not the agent's failure; see each record's detail and "
        "traces.jsonl) are counted as failures here, so these cells' completion rates are too "
        f"low: {cells}. Fix the cause and rerun the job: a resume runs them again."
    )


def method_text(*, seed: int, n_boot: int, n_episodes: int) -> str:
    """The 'Method' paragraph, so each table states how its numbers were computed."""
    return (
        f"Computed from {n_episodes} episodes. The unit of resampling is the task (seed, "
        "env, complexity, task_id and any swept config value; trials of one task are "
        "correlated); rows are never pooled over swept config values. Completion rate counts "
        "only episodes with success == True (correctly_reported_unreachable is not a "
        "completion); brackets are Wilson score 95% intervals when every task ran once, else "
        f"{n_boot}-resample task (cluster) bootstrap percentile intervals widened to contain "
        "the episode-level Wilson interval. Latency is in simulated seconds (latency_s); P50 "
        f"and P99 use numpy's percentile method '{PERCENTILE_METHOD}' (Hyndman-Fan type 7, "
        f"the numpy/pandas default) with {n_boot}-resample task-bootstrap 95% intervals; "
        "each bootstrap draws multinomial task counts from its own numpy Generator seeded "
        f'with zlib.crc32 of "{seed}|<cell keys>|<statistic>". Token and cost columns are '
        "arithmetic means per episode (tokens = tokens_total) over all episodes, and, in the "
        "cost-of-success table, over completed episodes only. Failure-mode shares are "
        "fractions of failed episodes (success == False) per planner. Paired comparisons "
        "pair planners on the same tasks; p-values are exact two-sided sign tests on per-task "
        "differences (McNemar's exact test when trials = 1), Holm-adjusted over every "
        "comparison in the summary."
    )


def paired_table(
    df: pd.DataFrame,
    *,
    seed: int,
    planner_order: Sequence[str] | None = None,
    comparisons: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Each planner against the first one, on the same tasks, per complexity: the difference
    in completion (percentage points, other minus first) with a task-bootstrap 95% interval,
    the sign-test p-value and its Holm adjustment (family: every pairwise comparison)."""
    comps = (
        pairwise_comparisons(df, seed=seed, planner_order=planner_order)
        if comparisons is None
        else comparisons
    )
    if comps.empty:
        return pd.DataFrame()
    planners = [p for p in (planner_order or []) if p in set(df["planner"])]
    planners += [p for p in dict.fromkeys(df["planner"]) if p not in planners]
    reference = planners[0]
    groups = list(comps.columns[: list(comps.columns).index("planner_a")])
    rows = []
    for rec in comps[comps["planner_a"] == reference].to_dict("records"):
        rows.append(
            {
                **{k: rec[k] for k in groups if k != "env" or df["env"].nunique() > 1},
                "planner": rec["planner_b"],
                "vs": reference,
                "tasks": int(rec["n_pairs"]),
                "difference_pp": _diff_text(
                    0.0 - rec["mean_diff"],
                    0.0 - rec["ci_high"],
                    0.0 - rec["ci_low"],
                    rec["degenerate"],
                ),
                "p": _p_text(rec["p_value"]),
                "p_holm": _p_text(rec["p_holm"]),
            }
        )
    return pd.DataFrame(rows)


VERDICT_SYMBOL = {"better": "+", "worse": "-", "no difference": "="}


def comparison_matrices(comparisons: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """Compact planner x planner matrices, one per env and swept config (seeds pooled).

    Cell (row a, column b) holds one symbol per complexity (simple medium complex order):
    ``+`` a completes significantly more than b (Holm-adjusted p < 0.05), ``-`` fewer,
    ``=`` no significant difference, ``.`` not compared there.
    """
    if comparisons.empty:
        return []
    cols = list(comparisons.columns)
    groups = [c for c in cols[: cols.index("planner_a")] if c != "complexity"]
    out = []
    for key, sub in comparisons.groupby(groups, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        levels = [c for c in COMPLEXITY_ORDER if c in set(sub["complexity"])]
        levels += sorted(c for c in set(sub["complexity"]) if c not in levels)
        planners = list(dict.fromkeys([*sub["planner_a"], *sub["planner_b"]]))
        verdict: dict[tuple[str, str, str], str] = {}
        for rec in sub.to_dict("records"):
            a, b, v = rec["planner_a"], rec["planner_b"], rec["verdict"]
            verdict[(a, b, rec["complexity"])] = VERDICT_SYMBOL[v]
            flipped = {"better": "worse", "worse": "better"}.get(v, v)
            verdict[(b, a, rec["complexity"])] = VERDICT_SYMBOL[flipped]
        data = [
            [
                "" if a == b else " ".join(verdict.get((a, b, c), ".") for c in levels)
                for b in planners
            ]
            for a in planners
        ]
        table = pd.DataFrame(data, columns=planners)
        table.insert(0, "planner", planners)
        title = ", ".join(f"{k}={v}" for k, v in zip(groups, key, strict=True))
        out.append((f"{title} (symbols: {' / '.join(levels)})", table))
    return out


def pass_k_table(df: pd.DataFrame) -> pd.DataFrame:
    """pass@k (Chen et al. 2021), pass^k (tau-bench) and consistency (share of tasks whose k
    trials agree) for k = 1, 2 and the trial count, when tasks ran several trials."""
    df = with_swept_columns(df)
    if df.empty:  # nothing measured (e.g. a cost cap that cut the first episode)
        return pd.DataFrame()
    keys = cell_keys(df)
    trials = int(
        df.groupby(keys + ["task_id"] + (["seed"] if "seed" not in keys else [])).size().max()
    )
    if trials < 2:
        return pd.DataFrame()
    frames = []
    for k in sorted({1, 2, trials}):
        merged = pass_at_k(df, k)
        for extra, col in (
            (pass_hat_k(df, k), "pass_hat_k"),
            (consistency_k(df, k), "consistency"),
        ):
            merged = merged.merge(extra[[*keys, col]], on=keys)
        frames.append(merged)
    out = pd.concat(frames, ignore_index=True)
    for col in ("pass_at_k", "pass_hat_k", "consistency"):
        out[col] = out[col].map(lambda v: f"{100 * v:.1f}%")
    out = out.rename(columns={"pass_at_k": "pass@k", "pass_hat_k": "pass^k"})
    return out[[*keys, "k", "n_tasks", "pass@k", "pass^k", "consistency"]]


def recovery_table(df: pd.DataFrame, *, seed: int, n_boot: int) -> pd.DataFrame:
    """Recoverability per planner (rows) and fault kind drawn before the planner acts
    (columns): ``rate% [95% CI] (n)``; ``(none)`` is the episodes with no exposed fault."""
    rec = recovery_by_fault(df, seed=seed, n_boot=n_boot)
    if rec.empty:
        return rec
    keys = list(rec.columns[: list(rec.columns).index("fault")])
    rec = rec.assign(
        cell=[
            format_completion_cell(r, lo, hi, n)
            for r, lo, hi, n in zip(
                rec["rate"], rec["ci_low"], rec["ci_high"], rec["n"], strict=True
            )
        ]
    )
    kinds = list(dict.fromkeys(rec["fault"]))
    wide = rec.pivot_table(index=keys, columns="fault", values="cell", aggfunc="first", sort=False)
    wide = wide.reindex(columns=kinds).fillna(MISSING).reset_index()
    wide.columns = [str(c) for c in wide.columns]
    if "env" in wide.columns and wide["env"].nunique() == 1:
        wide = wide.drop(columns="env")
    return wide


def recovery_time_table(df: pd.DataFrame) -> pd.DataFrame:
    """Simulated seconds from the first injected fault (a ``wrong_result`` that returned ok
    included) to the next successful, not injected, tool call (median, P90) per cell, read
    from the runs' ``traces.jsonl`` (empty without traces)."""
    if "run_dir" not in df.columns:
        return pd.DataFrame()
    times = time_to_recover(df, read_recovery_times(pd.unique(df["run_dir"])))
    if times.empty:
        return times
    out = times.drop(columns=["recover_s_p50", "recover_s_p90"])
    out["median s"] = [_num(v, 2) for v in times["recover_s_p50"]]
    out["P90 s"] = [_num(v, 2) for v in times["recover_s_p90"]]
    return out


def robustness_table(df: pd.DataFrame, *, seed: int, n_boot: int) -> pd.DataFrame:
    """Completion with faults / without on the same tasks, with a task-bootstrap 95% CI."""
    rob = robustness(df, seed=seed, n_boot=n_boot)
    if rob.empty:
        return rob
    out = rob.drop(
        columns=["completion_faults", "completion_none", "robustness", "ci_low", "ci_high"]
    )
    out["completion (faults)"] = [_pct(v) + "%" for v in rob["completion_faults"]]
    out["completion (none)"] = [_pct(v) + "%" for v in rob["completion_none"]]
    out["robustness"] = [
        MISSING
        if _is_missing(r)
        else f"{r:.2f} [{lo:.2f}, {hi:.2f}]" + (" (degenerate)" if lo == hi else "")
        for r, lo, hi in zip(rob["robustness"], rob["ci_low"], rob["ci_high"], strict=True)
    ]
    return out


def seed_spread_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Between-seed spread of completion (mean, SD, min-max of the per-seed rates)."""
    spread = seed_spread(summary)
    if spread.empty or int(spread["n_seeds"].max()) < 2:
        return pd.DataFrame()
    out = spread.drop(
        columns=["completion_mean", "completion_sd", "completion_min", "completion_max"]
    )
    out["mean %"] = [_pct(v) for v in spread["completion_mean"]]
    out["SD pp"] = [_pct(v) for v in spread["completion_sd"]]
    out["min-max %"] = [
        f"{_pct(lo)}-{_pct(hi)}"
        for lo, hi in zip(spread["completion_min"], spread["completion_max"], strict=True)
    ]
    return out


def _conditional_recovery(summary: pd.DataFrame) -> pd.DataFrame:
    keys = _keys_of(summary)
    out = summary[keys].copy()
    out["faulted episodes"] = summary["n_faulted"].astype("int64").astype(str)
    out["success among faulted %"] = [_pct(v) for v in summary["recovery_rate_conditional"]]
    return out
