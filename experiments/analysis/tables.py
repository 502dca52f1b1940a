"""Paper-ready tables (CSV, Markdown, LaTeX) of a set of episode records: :func:`write_summaries`.

All outputs are deterministic for a given episode table and seed (sorted rows, no
timestamps, fixed number formats), so regenerated tables can be diffed byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from planarena.experiments.analysis.cells import (
    swept_keys,
    table_columns,
)
from planarena.experiments.analysis.comparisons import pairwise_comparisons
from planarena.experiments.analysis.headline import best_vs_others, headline_markdown
from planarena.experiments.analysis.metrics import (
    failure_distribution,
    summarize,
)
from planarena.experiments.analysis.table_builders import (
    _conditional_recovery,
    comparison_matrices,
    completion_table,
    cost_latency_table,
    failure_table,
    format_completion_table,
    harness_error_text,
    left_out_text,
    method_text,
    paired_table,
    pass_k_table,
    recovery_table,
    recovery_time_table,
    robustness_table,
    seed_spread_table,
    success_cost_table,
)
from planarena.experiments.analysis.table_format import (
    MISSING,
    _flatten,
    _latex_per_env,
    _markdown,
    _optional_section,
    _section_or_note,
    _write_text,
    format_completion_cell,
    human_header,
)
from planarena.experiments.records.columns import CATEGORY_COLUMNS
from planarena.experiments.records.runs import with_swept_columns
from planarena.experiments.records.schema import measured
from planarena.experiments.records.store import as_categories


def tables_frame(df: pd.DataFrame) -> pd.DataFrame:
    """The columns of ``df`` the tables and figures read
    (:func:`~planarena.experiments.analysis.cells.table_columns`), the repeated strings
    (:data:`~planarena.experiments.records.columns.CATEGORY_COLUMNS`) as categoricals: what
    :func:`write_summaries` computes from (the same bytes as from every column, with less
    to copy)."""
    overrides = pd.unique(df["overrides"]) if "overrides" in df.columns else ()
    columns = table_columns(df.columns, overrides)
    if len(columns) < len(df.columns):
        df = df[columns]
    return as_categories(df, CATEGORY_COLUMNS)


def completion_heading(df: pd.DataFrame) -> str:
    """The printed table's heading, naming the interval it shows: Wilson when every task ran
    once, the task bootstrap when trials of a task repeat."""
    repeated = "trial" in df.columns and len(df) and int(df["trial"].max()) > 0
    kind = "task-bootstrap interval; trials > 1" if repeated else "Wilson interval"
    return f"Completion rate (95% {kind})"


@dataclass
class _Summary:
    """Everything ``summary.md`` and ``summary.tex`` show, computed once from the records."""

    n_episodes: int
    left_out: str
    headline: list[str]
    summary: pd.DataFrame
    comparisons: pd.DataFrame
    method: str
    completion: pd.DataFrame
    cost: pd.DataFrame
    success_cost: pd.DataFrame
    fail: pd.DataFrame
    paired: pd.DataFrame
    passk: pd.DataFrame
    recovery: pd.DataFrame
    robust: pd.DataFrame
    recover_time: pd.DataFrame
    spread: pd.DataFrame


def _summary_tables(
    df: pd.DataFrame,
    out_dir: Path,
    *,
    seed: int,
    n_boot: int,
    planner_order: Sequence[str] | None,
) -> _Summary:
    """The numbers and the formatted tables of :func:`write_summaries`."""
    df = tables_frame(df)
    left_out = left_out_text(df)
    df = measured(df)  # infrastructure_error: the endpoint's failure, not the agent's
    df = with_swept_columns(df)
    summary = summarize(df, seed=seed, n_boot=n_boot, planner_order=planner_order)
    several_envs = "env" in df.columns and df["env"].nunique() > 1
    fail_keys = [*(["env"] if several_envs else []), "planner", *swept_keys(df)]
    failures = failure_distribution(df, fail_keys, planner_order=planner_order)
    comparisons = pairwise_comparisons(df, seed=seed, n_boot=n_boot, planner_order=planner_order)
    method = method_text(seed=seed, n_boot=n_boot, n_episodes=len(df))
    if left_out:
        method += f" {left_out}"
    # records read straight from a run dir (the runner) have no run_dir: their traces are
    # in out_dir itself, the same file a report on that run dir reads
    traced = df
    if "run_dir" not in df.columns and (out_dir / "traces.jsonl").is_file():
        traced = df.assign(run_dir=str(out_dir))
    return _Summary(
        n_episodes=len(df),
        left_out=left_out,
        headline=headline_markdown(best_vs_others(df, planner_order=planner_order)),
        summary=summary,
        comparisons=comparisons,
        method=method,
        completion=_flatten(completion_table(summary)),
        cost=cost_latency_table(summary),
        success_cost=success_cost_table(summary),
        fail=failure_table(failures),
        paired=paired_table(df, seed=seed, planner_order=planner_order, comparisons=comparisons),
        passk=pass_k_table(df),
        recovery=recovery_table(df, seed=seed, n_boot=n_boot),
        robust=robustness_table(df, seed=seed, n_boot=n_boot),
        recover_time=recovery_time_table(traced),
        spread=seed_spread_table(summary),
    )


def _main_sections(s: _Summary) -> list[str]:
    """``summary.md`` from its title to the comparison matrix (the sections always there),
    opening with the headline the job prints (best planner per cell, who is separable)."""
    matrices: list[str] = []
    for title, table in comparison_matrices(s.comparisons):
        matrices += [f"{title}:", "", _markdown(table), ""]
    if not matrices:
        matrices = ["(fewer than two planners on shared tasks: nothing to compare)", ""]
    return [
        "# planarena summary",
        "",
        *s.headline,
        *(
            []
            if s.n_episodes
            else [f"No measured episode, so every table is empty. {s.left_out}".strip(), ""]
        ),
        *([harness, ""] if (harness := harness_error_text(s.summary)) else []),
        "## Completion rate",
        "",
        "Completion rate % [95% CI] (n episodes) per planner and complexity.",
        "",
        _markdown(s.completion),
        "",
        *_optional_section(
            "Between-seed spread",
            "Completion rate across seeds (each seed draws its own tasks).",
            s.spread,
        ),
        "## Cost and latency",
        "",
        "Means over all episodes (failed ones included) [task-bootstrap 95% CI].",
        "",
        _markdown(s.cost),
        "",
        "## Cost of success",
        "",
        "Tokens, cost and latency over completed episodes only, beside the all-episode "
        "values; cost per success = all cost / successes; time to success = Kaplan-Meier "
        "median of latency with failed episodes censored at their end.",
        "",
        _markdown(s.success_cost),
        "",
        "## Failure modes",
        "",
        "Share of failed episodes (%) per failure mode.",
        "",
        _markdown(s.fail),
        "",
        "## Comparison matrix",
        "",
        "Row planner vs column planner on the same tasks: `+` completes significantly "
        "more, `-` fewer, `=` no significant difference (exact sign / McNemar test, "
        "Holm-adjusted over all comparisons, alpha 0.05); one symbol per complexity. "
        "Every comparison is in comparisons.csv.",
        "",
        *matrices,
    ]


def _reliability_sections(s: _Summary) -> list[str]:
    """``summary.md`` from the paired comparisons to the Method paragraph (sections shown,
    or noted as missing, when the records hold what they need)."""
    return [
        *_optional_section(
            "Paired comparisons",
            "Completion difference against the first planner on the same tasks, in "
            "percentage points [task-bootstrap 95% CI]; p: exact sign test (McNemar), "
            "p_holm: Holm-adjusted.",
            s.paired,
        ),
        *_section_or_note(
            "Robustness",
            "Completion with faults / completion without (faults=none) on the same tasks "
            "[task-bootstrap 95% CI; degenerate: every resample gave the same ratio, e.g. "
            "every task succeeded both ways, which is no evidence of precision].",
            s.robust,
            "Needs the same tasks run with faults=none and with faults: "
            "`planarena -m experiment=robustness`.",
        ),
        *_section_or_note(
            "Consistency",
            "pass@k (Chen et al. 2021): some of k trials succeeds; pass^k (Yao et al. "
            "2024, tau-bench): all k succeed; consistency: all k trials agree.",
            s.passk,
            "Needs several trials per task: e.g. `planarena trials=5`.",
        ),
        *_section_or_note(
            "Recoverability",
            "Share of episodes that succeeded, per fault kind drawn before the planner "
            "acts (exposed_faults): every planner has the same denominator. (none): no "
            "exposed fault.",
            s.recovery,
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
            s.recover_time,
        ),
        "## Conditional recovery",
        "",
        "Success among episodes in which a fault was injected (faults_injected > 0). "
        "Conditional on the planner's own calls (more calls meet more faults): not "
        "comparable across planners; see Recoverability.",
        "",
        _markdown(_conditional_recovery(s.summary)),
        "",
        "## Method",
        "",
        s.method,
        "",
    ]


def _latex_tables(s: _Summary) -> str:
    """``summary.tex``: the completion, cost, cost-of-success and failure tables."""
    return "".join(
        [
            "% planarena summary tables (generated; needs \\usepackage{booktabs,graphicx}).\n",
            f"% Method: {s.method}\n",
            "\n",
            _latex_per_env(
                s.completion,
                "Completion rate (\\%) with 95\\% intervals and episode counts.",
                "tab:completion",
                wide=len(s.completion.columns) > 3,
            ),
            "\n",
            _latex_per_env(
                s.cost,
                "Mean tokens, latency P50/P99 (simulated seconds) with task-bootstrap 95\\% "
                "intervals, and mean cost per episode, over all episodes.",
                "tab:cost-latency",
                wide=True,
            ),
            "\n",
            _latex_per_env(
                s.success_cost,
                "Cost of success: over completed episodes, per success, and Kaplan-Meier "
                "median time to success.",
                "tab:cost-success",
                wide=True,
            ),
            "\n",
            _latex_per_env(
                s.fail,
                "Failure-mode shares (\\% of failed episodes).",
                "tab:failure-modes",
                wide=True,
            ),
        ]
    )


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
    s = _summary_tables(df, out_dir, seed=seed, n_boot=n_boot, planner_order=planner_order)
    md = "\n".join([*_main_sections(s), *_reliability_sections(s)])
    summary, comparisons = s.summary, s.comparisons
    _write_text(out_dir / "summary.csv", summary.to_csv(index=False, lineterminator="\n"))
    _write_text(out_dir / "summary.md", md)
    _write_text(out_dir / "summary.tex", _latex_tables(s))
    _write_text(out_dir / "comparisons.csv", comparisons.to_csv(index=False, lineterminator="\n"))
    return summary


__all__ = [
    "MISSING",
    "comparison_matrices",
    "completion_heading",
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
