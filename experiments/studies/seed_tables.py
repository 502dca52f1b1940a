"""The first seed article's §9 tables, measured, beside the article's illustrative numbers.

The article says its numbers are estimates ("示意估算，非實測數據"); ours are measurements
under stated assumptions (skill profile, fault rates, latency and price profiles, n). Nothing is
tuned to match: where they differ, the tables say so by showing both.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from planarena.experiments.analysis.metrics import failure_distribution, summarize
from planarena.experiments.analysis.stats import boot_rng, task_bootstrap_ratio, wilson_interval
from planarena.experiments.analysis.table_format import _pct
from planarena.experiments.records.checks import CHECK_KEYS
from planarena.experiments.records.schema import measured
from planarena.experiments.studies.registry import Study, study

# §9.1 completion rate (%), by complexity: simple (3 steps), medium (5-8), complex (10+).
ARTICLE_91 = {
    "react": ("ReAct", 85, 62, 34),
    "plan_execute": ("Plan-and-Execute (static)", 86, 78, 61),
    "plan_execute_replan": ("Plan-and-Execute + Replan", 87, 85, 82),
    "tot": ("ToT + Replan + parallel", 88, 91, 91),
}
# §9.2 medium tasks: tokens, P50 s, P99 s, cost per task (USD).
ARTICLE_92 = {
    "react": ("ReAct", 3200, 8, 35, 0.032),
    "plan_execute": ("Plan-and-Execute", 4800, 11, 28, 0.048),
    "tot": ("ToT + parallel", 7200, 9, 22, 0.072),
}
# §9.3 share of failures (%) for ReAct vs Plan-and-Execute.
ARTICLE_93 = {
    "dead_end": ("walked into a dead end", 38, 5),
    "gave_up_after_tool_failure": ("gave up after a tool failure", 29, 8),
    "precondition_unverified": ("precondition not verified", 18, 2),
    "plan_logic_error": ("plan logic error", None, 12),
    "hallucinated_tool_call": ("hallucinated tool call", 15, 11),
}
# source_articles.md, article A, item 9: post-conditions "intercept 15-20 % of tool calls that look
# successful but return wrong results", an estimate: a share of the wrong results, a recall.
ARTICLE_CHECKS = "15-20%"
ORDER = ["react", "plan_execute", "plan_execute_replan", "tot"]
SEED_ENV = "report"  # §9 measures report-writing tasks: the tables are this env's episodes
FAILURE_PLANNERS = ("react", "plan_execute", "plan_execute_replan")  # §9.3's columns


def _rate(share: float) -> str:
    """A rate or share in percent, printed as the main summary tables print it (``_pct``:
    one decimal), so the same number reads the same in ``seed_tables.md`` and ``summary.md``
    and two distinct rates at n = 200 (steps of 0.5 %) never print alike."""
    return "—" if pd.isna(share) else f"{_pct(share)}%"


def _ci(rate: float, low: float, high: float) -> str:
    return f"{_rate(rate)} [{_pct(low)}, {_pct(high)}]"


def table_91(summary: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for planner in ORDER:
        label, *article = ARTICLE_91[planner]
        row: dict[str, Any] = {"architecture": label, "planner": planner}
        for complexity, theirs in zip(("simple", "medium", "complex"), article, strict=True):
            cell = summary[(summary.planner == planner) & (summary.complexity == complexity)]
            if cell.empty:
                row[complexity] = f"— (article {theirs}%)"
                continue
            c = cell.iloc[0]
            row[complexity] = (
                f"{_ci(c.completion_rate, c.completion_ci_low, c.completion_ci_high)}"
                f" (n={int(c.n)}; article {theirs}%)"
            )
        rows.append(row)
    return pd.DataFrame(rows)


def _interval(value: float, low: float, high: float) -> str:
    return f"{value:.1f} [{low:.1f}, {high:.1f}]"


def table_92(summary: pd.DataFrame) -> pd.DataFrame:
    rows = []
    medium = summary[summary.complexity == "medium"]
    for planner in ORDER:
        cell = medium[medium.planner == planner]
        if cell.empty:
            continue
        c = cell.iloc[0]
        article = ARTICLE_92.get(planner)
        rows.append(
            {
                "planner": planner,
                "tokens": f"{c.tokens_mean:,.0f}"
                + (f" (article {article[1]:,})" if article else ""),
                "P50 s": _interval(c.latency_p50, c.latency_p50_ci_low, c.latency_p50_ci_high)
                + (f" (article {article[2]})" if article else ""),
                "P99 s": _interval(c.latency_p99, c.latency_p99_ci_low, c.latency_p99_ci_high)
                + (f" (article {article[3]})" if article else ""),
                "cost/task": f"${c.cost_mean:.4f}"
                + (f" (article ${article[4]:.3f})" if article else ""),
                "tokens per completed": f"{c.successes_tokens_mean:,.0f}" if c.successes else "—",
                "cost per success": f"${c.cost_per_success:.4f}" if c.successes else "—",
                "n": int(c.n),
            }
        )
    return pd.DataFrame(rows)


def table_93(df: pd.DataFrame) -> pd.DataFrame:
    dist = failure_distribution(
        df[df.planner.isin(["react", "plan_execute", "plan_execute_replan"])],
        planner_order=["react", "plan_execute", "plan_execute_replan"],
    )
    dist = dist.set_index("planner")
    rows = []
    for mode, (label, react_a, pe_a) in ARTICLE_93.items():
        row: dict[str, Any] = {"failure mode": label, "key": mode}
        for planner, theirs in (
            ("react", react_a),
            ("plan_execute", pe_a),
            ("plan_execute_replan", None),
        ):
            share = (
                dist.at[planner, mode] if planner in dist.index and mode in dist else float("nan")
            )
            row[planner] = _rate(share) + (
                ""
                if planner == "plan_execute_replan"
                else f" (article {'N/A' if theirs is None else f'{theirs}%'})"
            )
        rows.append(row)
    for mode in (m for m in dist.columns if m not in ARTICLE_93 and m != "n_failed"):
        row = {"failure mode": mode.replace("_", " ") + " (not in the article)", "key": mode}
        shares = [
            dist.at[planner, mode] if planner in dist.index else float("nan")
            for planner in FAILURE_PLANNERS
        ]
        for planner, share in zip(FAILURE_PLANNERS, shares, strict=True):
            row[planner] = _rate(share)
        if any(share > 0 for share in shares if not pd.isna(share)):
            rows.append(row)
    n_row = {"failure mode": "failed episodes (n)", "key": "n_failed"}
    for planner in ("react", "plan_execute", "plan_execute_replan"):
        n_row[planner] = str(int(dist.at[planner, "n_failed"])) if planner in dist.index else "0"
    rows.append(n_row)
    return pd.DataFrame(rows)


def _share_interval(
    hits: pd.Series, totals: pd.Series, tasks: pd.Series, seed: int, *parts: object
) -> tuple[float, float, float]:
    """(share, low, high) of ``hits.sum() / totals.sum()``: the hull of the Wilson interval
    of the pooled counts (right at 0 % and 100 %, where a bootstrap collapses) and a task
    bootstrap of the ratio (one episode's results are not independent draws)."""
    n, k = int(totals.sum()), int(hits.sum())
    if n == 0:
        return (float("nan"),) * 3
    low, high = wilson_interval(k, n)
    per_task = pd.DataFrame({"k": hits.to_numpy(), "n": totals.to_numpy(), "t": tasks.to_numpy()})
    sums = per_task.groupby("t", sort=True, observed=True)[["k", "n"]].sum()
    b_low, b_high = task_bootstrap_ratio(
        sums["k"].to_numpy(np.float64), sums["n"].to_numpy(np.float64), rng=boot_rng(seed, *parts)
    )
    if not np.isnan(b_low):
        low, high = min(low, b_low), max(high, b_high)
    return (k / n, low, high)


def table_checks(df: pd.DataFrame, seed: int = 0) -> pd.DataFrame | None:
    """Post-conditions per planner, from the records' ground truth: recall (wrong results
    that returned normally and a post-condition rejected, over all of them) and precision
    (rejections that refused a result the task could not use, over all rejections), each
    with a 95% interval; None when the records predate the ground truth."""
    if not {*CHECK_KEYS, "postcondition_catches"} <= set(df.columns):
        return None
    df = measured(df)
    tasks = df["env"].astype(str) + "/" + df["complexity"].astype(str) + "/" + df["task_id"]
    rows = []
    planners = [p for p in ORDER if p in set(df["planner"])]
    planners += sorted(p for p in set(df["planner"]) if p not in ORDER)
    for planner in planners:
        mine = df["planner"] == planner
        d, t = df[mine], tasks[mine]
        caught, returned = d["wrong_caught"], d["wrong_returned"]
        rejections, alarms = d["postcondition_catches"], d["check_false_alarms"]
        recall = _share_interval(caught, returned, t, seed, "checks", planner, "recall")
        right = rejections - alarms
        precision = _share_interval(right, rejections, t, seed, "checks", planner, "precision")
        rows.append(
            {
                "planner": planner,
                "wrong returned": int(returned.sum()),
                "caught": int(caught.sum()),
                "recall": (_ci(*recall) if returned.sum() else "— (none returned)")
                + f" (article {ARTICLE_CHECKS})",
                "rejections": int(rejections.sum()),
                "of a wrong result": int(caught.sum()),
                "of an unusable result": int(right.sum() - caught.sum()),
                "false alarms": int(alarms.sum()),
                "precision": _ci(*precision) if rejections.sum() else "— (no rejection)",
                "episodes": int(len(d)),
            }
        )
    return pd.DataFrame(rows)


CHECKS_NOTE = (
    "`wrong returned`: tool calls that returned normally with a result an injected fault"
    ' altered ("200 but wrong"); `caught`: those a plan step\'s post-condition rejected;'
    " `recall` = caught / wrong returned. `rejections`: every post-condition rejection:"
    " of a wrong result (caught), of a result the task could not use though no fault touched"
    " it (a stale page, a decoy, an empty search for a report that does not exist: it fails"
    " a check a careful model could write for that step), or a false alarm (a result that"
    " passes all of them, refused); `precision` = (rejections - false alarms) / rejections."
    " Intervals: the hull of the Wilson interval of the counts and a task bootstrap. The"
    " article's 15-20 % is an estimate of the share of wrong-but-successful calls that checks"
    " intercept, a recall. A planner that writes no post-conditions (ReAct) catches nothing."
)


def assumptions(cfg: Mapping[str, Any], df: pd.DataFrame) -> str:
    from planarena.envs.report.env import LATENCY

    llm = cfg.get("llm", {})
    faults = cfg.get("faults", {})
    rules = "; ".join(
        f"{r['kind']} {r['rate']:.0%} per {r['scope']} on {', '.join(r['tools'])}"
        for r in faults.get("rules", [])
    )
    tools = ", ".join(f"{k} {v.median_s:g} s" for k, v in LATENCY.items())
    overrides = {k: v for k, v in (llm.get("skill_overrides") or {}).items() if v is not None}
    p_stale = float(cfg.get("env", {}).get("report", {}).get("p_stale_trap", 0.5))
    n = int(df.groupby(["planner", "complexity"]).size().min())
    models = "; ".join(
        f"{role}: {m.get('name')} (TTFT {m.get('ttft_s')} s, "
        f"{m.get('s_per_output_token')} s/output token, "
        f"${m.get('usd_per_mtok_input')}/${m.get('usd_per_mtok_output')} per M "
        "input/output tokens)"
        for role, m in llm.get("models", {}).items()
    )
    return "\n".join(
        [
            f"- LLM: simulated, skill profile `{llm.get('skill')}`"
            f" (overrides: {overrides}); models: {models}.",
            f"- Faults (`{faults.get('name')}`): {rules or 'none'}; unreachable goals (data"
            f" not published) in {float(faults.get('unreachable_rate', 0)):.0%} of tasks.",
            f"- Tool latency medians (log-normal): {tools}.",
            f"- Env `report`, stale press release in {p_stale:.0%} of branches; n = {n} tasks"
            f" per planner x complexity, seed {cfg.get('seed')}.",
            "- Completion: share of episodes the grader passed, with 95% Wilson intervals. P50/P99:"
            " numpy 'linear' percentiles of simulated seconds with 95% percentile-bootstrap"
            " intervals. Cost from the model profiles' price table.",
        ]
    )


def render(df: pd.DataFrame, cfg: Mapping[str, Any], out_dir: Path, seed: int = 0) -> str:
    """Write ``seed_tables.md`` (and CSVs) into ``out_dir``; return the Markdown.

    The tables are computed from the :data:`SEED_ENV` episodes alone (§9's setting); other
    envs of the run are named and left to ``summary.md``, never pooled into a cell."""
    envs = [str(e) for e in dict.fromkeys(df["env"])] if "env" in df.columns else [SEED_ENV]
    others = [e for e in envs if e != SEED_ENV]
    if SEED_ENV not in envs:
        text = (
            "# The seed article's §9 tables, measured\n\n"
            f"§9 measures `{SEED_ENV}` tasks and this run has none (envs: "
            f"{', '.join(envs)}): no table. Run `planarena experiment=seed_tables`.\n"
        )
        (out_dir / "seed_tables.md").write_text(text, encoding="utf-8")
        return text
    if others:
        df = df[df["env"] == SEED_ENV].reset_index(drop=True)
    summary = summarize(df, seed=seed, planner_order=ORDER)
    t91, t92, t93 = table_91(summary), table_92(summary), table_93(df)
    checks = table_checks(df, seed=seed)
    checks_text = (
        "Post-condition ground truth is not in these records (written before"
        " `wrong_returned`): rerun to measure recall and precision."
        if checks is None
        else checks.to_markdown(index=False) + "\n\n" + CHECKS_NOTE
    )
    text = (
        "\n\n".join(
            [
                "# The seed article's §9 tables, measured",
                "Each cell: our measurement [95% interval] and, in brackets, the article's"
                " illustrative estimate. The article's numbers are not measurements; ours are,"
                " under these assumptions:\n\n"
                + assumptions(cfg, df)
                + (
                    f"\n- Env(s) {', '.join(f'`{e}`' for e in others)} of this run are not in"
                    f" these tables (§9 is about `{SEED_ENV}` tasks); summary.md has them."
                    if others
                    else ""
                ),
                "## 9.1 Completion rate by complexity\n\n"
                + t91.drop(columns=["planner"]).to_markdown(index=False),
                "## 9.2 Cost and latency on medium tasks\n\n"
                "`tokens`, `P50 s`, `P99 s` and `cost/task` are over all episodes, failed ones "
                "included (a planner that fails early looks cheap and fast there); `tokens per "
                "completed` is the mean over completed episodes and `cost per success` all the "
                "cost divided by the completions.\n\n" + t92.to_markdown(index=False),
                "## 9.3 Failure-mode distribution (share of failed episodes)\n\n"
                + t93.drop(columns=["key"]).to_markdown(index=False),
                "## Post-conditions: recall and precision (the article's 15-20 % claim)\n\n"
                + checks_text,
                "Figures: `figures/completion.*` (9.1), `figures/pareto_tokens.*` and "
                "`figures/latency_percentiles.*` (9.2), `figures/failure_modes.*` (9.3).",
            ]
        )
        + "\n"
    )
    (out_dir / "seed_tables.md").write_text(text, encoding="utf-8")
    t91.to_csv(out_dir / "seed_table_9_1.csv", index=False)
    t92.to_csv(out_dir / "seed_table_9_2.csv", index=False)
    t93.to_csv(out_dir / "seed_table_9_3.csv", index=False)
    if checks is not None:
        checks.to_csv(out_dir / "seed_table_checks.csv", index=False)
    return text


@study("seed_tables")
class SeedTables(Study):
    """A plain run's records, rendered as this study's tables (one cell)."""

    def render(
        self, records: pd.DataFrame, config: Mapping[str, Any], out_dir: Path, *, seed: int
    ) -> str:
        return render(records, dict(config), out_dir, seed=seed)
