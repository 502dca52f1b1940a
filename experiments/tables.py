"""Paper-ready tables (CSV, Markdown, LaTeX) built from :mod:`experiments.metrics`.

All outputs are deterministic for a given episode table and seed (sorted rows, no
timestamps, fixed number formats), so regenerated tables can be diffed byte for byte.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from tabulate import tabulate

from experiments.metrics import (
    COMPLEXITY_ORDER,
    PERCENTILE_METHOD,
    failure_distribution,
    sort_cells,
    summarize,
)

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


def _row_keys(summary: pd.DataFrame) -> list[str]:
    """(env, planner) when several envs are present, else just planner."""
    if "env" in summary.columns and summary["env"].nunique(dropna=False) > 1:
        return ["env", "planner"]
    return ["planner"]


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


def cost_latency_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Per-cell tokens, latency P50/P99 with bootstrap CIs, and mean cost, as strings."""
    keys = [c for c in ("planner", "env", "complexity") if c in summary.columns]
    out = summary[keys].copy()
    out["n"] = summary["n"].astype("int64").astype(str)
    out["tokens_mean"] = [f"{v:.1f}" for v in summary["tokens_mean"]]
    for q in ("p50", "p99"):
        col = f"latency_{q}"
        out[f"{col} [95% CI] (s)"] = [
            _format_with_ci(v, lo, hi)
            for v, lo, hi in zip(
                summary[col], summary[f"{col}_ci_low"], summary[f"{col}_ci_high"], strict=True
            )
        ]
    out["cost_mean (USD)"] = [f"{v:.4f}" for v in summary["cost_mean"]]
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


def _latex(table: pd.DataFrame, caption: str, label: str) -> str:
    """booktabs tabular (\\toprule/\\midrule/\\bottomrule) with LaTeX special chars escaped."""
    text = table.to_latex(index=False, escape=True, caption=caption, label=label)
    return text if text.endswith("\n") else text + "\n"


def method_text(*, seed: int, n_boot: int, n_episodes: int) -> str:
    """The 'Method' paragraph, so each table states how its numbers were computed."""
    return (
        f"Computed from {n_episodes} episodes. Completion rate counts only episodes with "
        "success == True (correctly_reported_unreachable is not a completion); brackets "
        "are Wilson score 95% intervals. Latency is in simulated seconds (latency_s); P50 "
        f"and P99 use numpy's percentile method '{PERCENTILE_METHOD}' (Hyndman-Fan type 7, "
        f"the numpy/pandas default) with {n_boot}-sample percentile bootstrap 95% "
        f'intervals, seeded per cell with zlib.crc32 of "{seed}|<planner>|<env>|'
        "<complexity>|latency_p50\" (resp. latency_p99), resampling each cell's "
        "latencies sorted ascending. Token and cost columns are "
        "arithmetic means per episode (tokens = tokens_total). Failure-mode shares are "
        "fractions of failed episodes (success == False) per planner."
    )


def paired_table(
    df: pd.DataFrame, *, seed: int, planner_order: Sequence[str] | None = None
) -> pd.DataFrame:
    """Each planner against the first one, on the same tasks: the difference in completion
    (percentage points) with a paired-bootstrap 95% interval, per complexity and overall."""
    from experiments.metrics import paired_difference

    planners = list(planner_order or []) or list(dict.fromkeys(df["planner"]))
    planners = [p for p in planners if p in set(df["planner"])]
    if len(planners) < 2:
        return pd.DataFrame()
    reference = planners[0]
    rows = []
    for other in planners[1:]:
        for complexity in [*COMPLEXITY_ORDER, "all"]:
            part = df if complexity == "all" else df[df["complexity"] == complexity]
            if part.empty:
                continue
            d = paired_difference(part, other, reference, seed=seed, n_boot=1000)
            if d["n_pairs"] == 0:
                continue
            rows.append(
                {
                    "planner": other,
                    "vs": reference,
                    "complexity": complexity,
                    "n_pairs": d["n_pairs"],
                    "difference_pp": f"{100 * d['mean_diff']:+.1f} "
                    f"[{100 * d['ci_low']:+.1f}, {100 * d['ci_high']:+.1f}]",
                }
            )
    return pd.DataFrame(rows)


def pass_k_table(df: pd.DataFrame) -> pd.DataFrame:
    """pass@k and pass^k (tau-bench) for k = 1 .. trials, when tasks ran several trials."""
    from experiments.metrics import pass_at_k, pass_hat_k

    trials = int(df.groupby(["planner", "env", "complexity", "task_id"]).size().max())
    if trials < 2:
        return pd.DataFrame()
    frames = []
    for k in sorted({1, 2, trials}):
        at = pass_at_k(df, k)
        hat = pass_hat_k(df, k)
        merged = at.merge(
            hat[["planner", "env", "complexity", "pass_hat_k"]], on=["planner", "env", "complexity"]
        )
        frames.append(merged)
    out = pd.concat(frames, ignore_index=True)
    out["pass_at_k"] = out["pass_at_k"].map(lambda v: f"{100 * v:.1f}%")
    out["pass_hat_k"] = out["pass_hat_k"].map(lambda v: f"{100 * v:.1f}%")
    return out[["planner", "env", "complexity", "k", "n_tasks", "pass_at_k", "pass_hat_k"]]


def write_summaries(
    df: pd.DataFrame,
    out_dir: Path,
    *,
    seed: int = 0,
    n_boot: int = 1000,
    planner_order: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Write ``summary.csv``, ``summary.md`` and ``summary.tex`` to ``out_dir``.

    The CSV holds the full :func:`~experiments.metrics.summarize` table at full float
    precision; Markdown and LaTeX hold the formatted completion, cost/latency and
    failure-mode tables. Byte-identical for identical input. Returns the summary.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = summarize(df, seed=seed, n_boot=n_boot, planner_order=planner_order)
    failures = failure_distribution(df, ("planner",), planner_order=planner_order)

    completion = _flatten(completion_table(summary))
    cost = cost_latency_table(summary)
    fail = failure_table(failures)
    method = method_text(seed=seed, n_boot=n_boot, n_episodes=len(df))
    paired = paired_table(df, seed=seed, planner_order=planner_order)
    passk = pass_k_table(df)

    md = "\n".join(
        [
            "# planarena summary",
            "",
            "## Completion rate",
            "",
            "Completion rate % [Wilson 95% CI] (n episodes) per planner and complexity.",
            "",
            _markdown(completion),
            "",
            "## Cost and latency",
            "",
            _markdown(cost),
            "",
            "## Failure modes",
            "",
            "Share of failed episodes (%) per failure mode.",
            "",
            _markdown(fail),
            "",
            *_optional_section(
                "Paired comparisons",
                "Completion difference against the first planner on the same tasks, in "
                "percentage points [paired bootstrap 95% CI].",
                paired,
            ),
            *_optional_section(
                "pass@k and pass^k",
                "tau-bench's estimators over the trials of each task.",
                passk,
            ),
            "## Method",
            "",
            method,
            "",
        ]
    )
    tex = "".join(
        [
            "% planarena summary tables (generated; requires \\usepackage{booktabs}).\n",
            f"% Method: {method}\n",
            "\n",
            _latex(
                completion,
                "Completion rate (\\%) with Wilson 95\\% intervals and episode counts.",
                "tab:completion",
            ),
            "\n",
            _latex(
                cost,
                "Mean tokens, latency P50/P99 (simulated seconds, bootstrap 95\\% intervals) "
                "and mean cost per episode.",
                "tab:cost-latency",
            ),
            "\n",
            _latex(fail, "Failure-mode shares (\\% of failed episodes).", "tab:failure-modes"),
        ]
    )

    _write_text(out_dir / "summary.csv", summary.to_csv(index=False, lineterminator="\n"))
    _write_text(out_dir / "summary.md", md)
    _write_text(out_dir / "summary.tex", tex)
    return summary


def _optional_section(title: str, note: str, table: pd.DataFrame) -> list[str]:
    if table.empty:
        return []
    return [f"## {title}", "", note, "", _markdown(table), ""]


def _write_text(path: Path, text: str) -> None:
    """UTF-8 with '\\n' newlines on every platform so files are byte-identical."""
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)


__all__ = [
    "MISSING",
    "completion_table",
    "cost_latency_table",
    "failure_table",
    "format_completion_cell",
    "format_completion_table",
    "method_text",
    "write_summaries",
]
