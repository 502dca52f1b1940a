"""Paper-ready tables (CSV, Markdown, LaTeX) built from :mod:`planarena.experiments.analysis.metrics`.

All outputs are deterministic for a given episode table and seed (sorted rows, no
timestamps, fixed number formats), so regenerated tables can be diffed byte for byte.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from planarena.experiments.analysis.cells import (
    COMPLEXITY_ORDER,
    cell_keys,
    sort_cells,
    swept_keys,
    table_columns,
)
from planarena.experiments.analysis.comparisons import pairwise_comparisons
from planarena.experiments.analysis.metrics import (
    consistency_k,
    failure_distribution,
    pass_at_k,
    pass_hat_k,
    seed_spread,
    summarize,
)
from planarena.experiments.analysis.reliability import (
    read_recovery_times,
    recovery_by_fault,
    robustness,
    time_to_recover,
)
from planarena.experiments.analysis.stats import PERCENTILE_METHOD
from planarena.experiments.records.columns import CATEGORY_COLUMNS
from planarena.experiments.records.runs import with_swept_columns
from planarena.experiments.records.schema import INFRASTRUCTURE_ERROR, JOB_COST_CAP, measured
from planarena.experiments.records.store import as_categories
from tabulate import tabulate

MISSING = "--"
"""Placeholder for cells without data (ASCII so it is safe in Markdown and LaTeX)."""

_COMPLETION_INPUTS = (
    "planner",
    "complexity",
    "n",
    "completion_rate",
    "completion_ci_low",
    "completion_ci_high",
)


def tables_frame(df: pd.DataFrame) -> pd.DataFrame:
    """The columns of ``df`` the tables and figures read
    (:func:`~planarena.experiments.analysis.metrics.table_columns`), the repeated strings
    (:data:`~planarena.experiments.analysis.metrics.CATEGORY_COLUMNS`) as categoricals: what
    :func:`write_summaries` computes from (the same bytes as from every column, with less
    to copy)."""
    overrides = pd.unique(df["overrides"]) if "overrides" in df.columns else ()
    columns = table_columns(df.columns, overrides)
    if len(columns) < len(df.columns):
        df = df[columns]
    return as_categories(df, CATEGORY_COLUMNS)


def _is_missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _pct(value: float) -> str:
    return MISSING if _is_missing(value) else f"{100.0 * value:.1f}"


def format_completion_cell(rate: float, low: float, high: float, n: int) -> str:
    """Render ``85.0% [76.2, 91.0] (n=20)``: rate and Wilson CI in percent, cell size."""
    if _is_missing(rate):
        return f"{MISSING} (n={int(n)})"
    return f"{_pct(rate)}% [{_pct(low)}, {_pct(high)}] (n={int(n)})"


def _format_with_ci(value: float, low: float, high: float, digits: int = 2) -> str:
    if _is_missing(value):
        return MISSING
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


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


def completion_heading(df: pd.DataFrame) -> str:
    """The printed table's heading, naming the interval it shows: Wilson when every task ran
    once, the task bootstrap when trials of a task repeat."""
    repeated = "trial" in df.columns and len(df) and int(df["trial"].max()) > 0
    kind = "task-bootstrap interval; trials > 1" if repeated else "Wilson interval"
    return f"Completion rate (95% {kind})"


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


def _money(value: float) -> str:
    return MISSING if _is_missing(value) else f"{value:.4f}"


def _num(value: float, digits: int = 1) -> str:
    return MISSING if _is_missing(value) else f"{value:,.{digits}f}"


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


def _flatten(table: pd.DataFrame) -> pd.DataFrame:
    """Move row labels into ordinary columns so every writer shows them the same way."""
    flat = table.reset_index()
    flat.columns = [str(c) for c in flat.columns]
    return flat


def _markdown(table: pd.DataFrame) -> str:
    return table.to_markdown(index=False, disable_numparse=True)


HUMAN_HEADERS: dict[str, str] = {
    "planner": "Planner",
    "env": "Env",
    "complexity": "Complexity",
    "seed": "Seed",
    "llm": "LLM",
    "faults": "Faults",
    "n": "n",
    "tasks": "Tasks",
    "n_failed": "Failed (n)",
    "simple": "Simple",
    "medium": "Medium",
    "complex": "Complex",
}


def human_header(column: str) -> str:
    """A LaTeX-friendly column header: known names mapped, others de-snake-cased."""
    return HUMAN_HEADERS.get(column, column.replace("_", " "))


def _latex(table: pd.DataFrame, caption: str, label: str, *, wide: bool = False) -> str:
    """A booktabs tabular with human headers, scaled to the column (``table``) or, when
    ``wide``, to the text width (``table*``) with ``\\resizebox`` (needs graphicx), so it
    never overflows; LaTeX special characters are escaped."""
    shown = table.rename(columns={c: human_header(str(c)) for c in table.columns})
    body = shown.to_latex(index=False, escape=True)
    env = "table*" if wide else "table"
    width = "\\textwidth" if wide else "\\columnwidth"
    return (
        f"\\begin{{{env}}}[t]\n\\centering\n\\caption{{{caption}}}\n\\label{{{label}}}\n"
        f"\\resizebox{{{width}}}{{!}}{{%\n{body.rstrip()}\n}}\n\\end{{{env}}}\n"
    )


def _tex_escape(text: str) -> str:
    return "".join("\\" + ch if ch in "_%&#$" else ch for ch in text)


def _latex_per_env(table: pd.DataFrame, caption: str, label: str, *, wide: bool) -> str:
    """One LaTeX table per env when several envs are present (a page holds one env's rows),
    else one table; see :func:`_latex`."""
    if "env" not in table.columns or table["env"].nunique() < 2:
        return _latex(table, caption, label, wide=wide)
    parts = []
    for env in dict.fromkeys(table["env"]):
        sub = table[table["env"] == env].drop(columns="env").reset_index(drop=True)
        safe = "".join(ch if ch.isalnum() else "-" for ch in str(env))
        parts.append(
            _latex(sub, f"{caption} Env: {_tex_escape(str(env))}.", f"{label}-{safe}", wide=wide)
        )
    return "\n".join(parts)


def left_out_text(df: pd.DataFrame) -> str:
    """What :func:`~planarena.experiments.records.schema.measured` leaves out of ``df``, each kind counted and
    named as what it is ("" when nothing is left out)."""
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


def _diff_text(d: float, lo: float, hi: float, degenerate: bool) -> str:
    d, lo, hi = (v + 0.0 if v != 0 else 0.0 for v in (d, lo, hi))  # no "-0.0"
    text = f"{100 * d:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"
    return text + " (degenerate: every resample equal)" if degenerate else text


def _p_text(p: float) -> str:
    return MISSING if _is_missing(p) else ("<0.001" if p < 0.001 else f"{p:.3f}")


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


def write_summaries(
    df: pd.DataFrame,
    out_dir: Path,
    *,
    seed: int = 0,
    n_boot: int = 1000,
    planner_order: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Write ``summary.csv``, ``summary.md``, ``summary.tex`` and ``comparisons.csv``.

    Cells are grouped by planner, env, complexity and every swept config key (a multi-seed
    sweep gives one row per seed). The CSV holds the full :func:`summarize` table at full
    float precision; ``comparisons.csv`` every pairwise comparison; Markdown and LaTeX hold the
    formatted tables. Byte-identical for identical input. Returns the summary.
    ``infrastructure_error`` records (the LLM endpoint failed) are left out of every table,
    and the Method paragraph says how many.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    df = tables_frame(df)
    left_out = left_out_text(df)
    df = measured(df)  # infrastructure_error: the endpoint's failure, not the agent's
    df = with_swept_columns(df)
    summary = summarize(df, seed=seed, n_boot=n_boot, planner_order=planner_order)
    several_envs = "env" in df.columns and df["env"].nunique() > 1
    fail_keys = [*(["env"] if several_envs else []), "planner", *swept_keys(df)]
    failures = failure_distribution(df, fail_keys, planner_order=planner_order)
    comparisons = pairwise_comparisons(df, seed=seed, n_boot=n_boot, planner_order=planner_order)

    completion = _flatten(completion_table(summary))
    cost = cost_latency_table(summary)
    success_cost = success_cost_table(summary)
    fail = failure_table(failures)
    method = method_text(seed=seed, n_boot=n_boot, n_episodes=len(df))
    if left_out:
        method += f" {left_out}"
    paired = paired_table(df, seed=seed, planner_order=planner_order, comparisons=comparisons)
    passk = pass_k_table(df)
    recovery = recovery_table(df, seed=seed, n_boot=n_boot)
    robust = robustness_table(df, seed=seed, n_boot=n_boot)
    # records read straight from a run dir (the runner) have no run_dir: their traces are
    # in out_dir itself, the same file a report on that run dir reads
    traced = df
    if "run_dir" not in df.columns and (out_dir / "traces.jsonl").is_file():
        traced = df.assign(run_dir=str(out_dir))
    recover_time = recovery_time_table(traced)
    spread = seed_spread_table(summary)

    matrices: list[str] = []
    for title, table in comparison_matrices(comparisons):
        matrices += [f"{title}:", "", _markdown(table), ""]
    if not matrices:
        matrices = ["(fewer than two planners on shared tasks: nothing to compare)", ""]

    md = "\n".join(
        [
            "# planarena summary",
            "",
            *(
                []
                if len(df)
                else [f"No measured episode, so every table is empty. {left_out}".strip(), ""]
            ),
            *([harness, ""] if (harness := harness_error_text(summary)) else []),
            "## Completion rate",
            "",
            "Completion rate % [95% CI] (n episodes) per planner and complexity.",
            "",
            _markdown(completion),
            "",
            *_optional_section(
                "Between-seed spread",
                "Completion rate across seeds (each seed draws its own tasks).",
                spread,
            ),
            "## Cost and latency",
            "",
            "Means over all episodes (failed ones included) [task-bootstrap 95% CI].",
            "",
            _markdown(cost),
            "",
            "## Cost of success",
            "",
            "Tokens, cost and latency over completed episodes only, beside the all-episode "
            "values; cost per success = all cost / successes; time to success = Kaplan-Meier "
            "median of latency with failed episodes censored at their end.",
            "",
            _markdown(success_cost),
            "",
            "## Failure modes",
            "",
            "Share of failed episodes (%) per failure mode.",
            "",
            _markdown(fail),
            "",
            "## Comparison matrix",
            "",
            "Row planner vs column planner on the same tasks: `+` completes significantly "
            "more, `-` fewer, `=` no significant difference (exact sign / McNemar test, "
            "Holm-adjusted over all comparisons, alpha 0.05); one symbol per complexity. "
            "Every comparison is in comparisons.csv.",
            "",
            *matrices,
            *_optional_section(
                "Paired comparisons",
                "Completion difference against the first planner on the same tasks, in "
                "percentage points [task-bootstrap 95% CI]; p: exact sign test (McNemar), "
                "p_holm: Holm-adjusted.",
                paired,
            ),
            *_section_or_note(
                "Robustness",
                "Completion with faults / completion without (faults=none) on the same tasks "
                "[task-bootstrap 95% CI; degenerate: every resample gave the same ratio, e.g. "
                "every task succeeded both ways, which is no evidence of precision].",
                robust,
                "Needs the same tasks run with faults=none and with faults: "
                "`planarena -m experiment=robustness`.",
            ),
            *_section_or_note(
                "Consistency",
                "pass@k (Chen et al. 2021): some of k trials succeeds; pass^k (Yao et al. "
                "2024, tau-bench): all k succeed; consistency: all k trials agree.",
                passk,
                "Needs several trials per task: e.g. `planarena trials=5`.",
            ),
            *_section_or_note(
                "Recoverability",
                "Share of episodes that succeeded, per fault kind drawn before the planner "
                "acts (exposed_faults): every planner has the same denominator. (none): no "
                "exposed fault.",
                recovery,
                "These records have no exposed_faults column.",
            ),
            *_optional_section(
                "Time to recover",
                "Simulated seconds from the end of an episode's first injected fault to the end "
                "of its next successful tool call (any tool), over episodes with an injected "
                "fault (n_faulted, the same episodes as Conditional recovery's; cells without "
                "one are left out; n_resumed had a later success). A 200-but-wrong result "
                "(wrong_result) is a fault, not a success. Conditional on faults the "
                "planner's own calls met.",
                recover_time,
            ),
            "## Conditional recovery",
            "",
            "Success among episodes in which a fault was injected (faults_injected > 0). "
            "Conditional on the planner's own calls (more calls meet more faults): not "
            "comparable across planners; see Recoverability.",
            "",
            _markdown(_conditional_recovery(summary)),
            "",
            "## Method",
            "",
            method,
            "",
        ]
    )
    tex = "".join(
        [
            "% planarena summary tables (generated; needs \\usepackage{booktabs,graphicx}).\n",
            f"% Method: {method}\n",
            "\n",
            _latex_per_env(
                completion,
                "Completion rate (\\%) with 95\\% intervals and episode counts.",
                "tab:completion",
                wide=len(completion.columns) > 3,
            ),
            "\n",
            _latex_per_env(
                cost,
                "Mean tokens, latency P50/P99 (simulated seconds) with task-bootstrap 95\\% "
                "intervals, and mean cost per episode, over all episodes.",
                "tab:cost-latency",
                wide=True,
            ),
            "\n",
            _latex_per_env(
                success_cost,
                "Cost of success: over completed episodes, per success, and Kaplan-Meier "
                "median time to success.",
                "tab:cost-success",
                wide=True,
            ),
            "\n",
            _latex_per_env(
                fail,
                "Failure-mode shares (\\% of failed episodes).",
                "tab:failure-modes",
                wide=True,
            ),
        ]
    )

    _write_text(out_dir / "summary.csv", summary.to_csv(index=False, lineterminator="\n"))
    _write_text(out_dir / "summary.md", md)
    _write_text(out_dir / "summary.tex", tex)
    _write_text(out_dir / "comparisons.csv", comparisons.to_csv(index=False, lineterminator="\n"))
    return summary


def _optional_section(title: str, note: str, table: pd.DataFrame) -> list[str]:
    if table.empty:
        return []
    return [f"## {title}", "", note, "", _markdown(table), ""]


def _section_or_note(title: str, note: str, table: pd.DataFrame, missing: str) -> list[str]:
    if table.empty:
        return [f"## {title}", "", missing, ""]
    return _optional_section(title, note, table)


def _write_text(path: Path, text: str) -> None:
    """UTF-8 with '\\n' newlines on every platform so files are byte-identical."""
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)


__all__ = [
    "MISSING",
    "comparison_matrices",
    "completion_table",
    "cost_latency_table",
    "failure_table",
    "format_completion_cell",
    "format_completion_table",
    "human_header",
    "method_text",
    "paired_table",
    "pass_k_table",
    "recovery_table",
    "recovery_time_table",
    "robustness_table",
    "success_cost_table",
    "tables_frame",
    "write_summaries",
]
