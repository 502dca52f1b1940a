"""analysis.tables: files exist, have the promised schema, and are reproducible."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from planarena.experiments.analysis.cells import COMPLEXITY_ORDER
from planarena.experiments.analysis.metrics import summarize
from planarena.experiments.analysis.tables import (
    completion_table,
    format_completion_table,
    write_summaries,
)
from planarena.experiments.records.columns import SUMMARY_COLUMNS

CELL_RE = re.compile(r"^\d+\.\d% \[\d+\.\d, \d+\.\d\] \(n=\d+\)$")


def make_episodes(envs: tuple[str, ...] = ("web",), seed: int = 11) -> pd.DataFrame:
    """Small synthetic episode table; complexity rows start unsorted on purpose."""
    rng = np.random.default_rng(seed)
    rows = []
    for planner in ("tree_search", "react"):
        for env in envs:
            for complexity in ("medium", "complex", "simple"):
                for i in range(8):
                    success = bool(rng.random() < 0.6)
                    rows.append(
                        {
                            "planner": planner,
                            "env": env,
                            "complexity": complexity,
                            "task_id": f"t{i % 4}",
                            "seed": 0,
                            "trial": i // 4,
                            "llm": "mock",
                            "success": success,
                            "progress": 1.0 if success else 0.5,
                            "failure_mode": "none" if success else "dead_end",
                            "tokens_prompt": 100 + i,
                            "tokens_completion": 20,
                            "tokens_total": 120 + i,
                            "tokens_planner": 50,
                            "llm_calls": 3,
                            "tool_calls": 4,
                            "retries": 0,
                            "fallbacks": 0,
                            "replans": 1,
                            "faults_injected": i % 2,
                            "latency_s": float(rng.lognormal(0.5, 0.4)),
                            "cost_usd": 0.001 * (i + 1),
                            "wall_s": float(rng.random()),
                        }
                    )
    return pd.DataFrame(rows)


def test_write_summaries_files_and_schema(tmp_path: Path) -> None:
    df = make_episodes()
    summary = write_summaries(df, tmp_path, seed=3)
    for name in ("summary.csv", "summary.md", "summary.tex"):
        assert (tmp_path / name).is_file()

    csv = pd.read_csv(tmp_path / "summary.csv")
    prefix = ["planner", "env", "complexity", *SUMMARY_COLUMNS]
    assert list(csv.columns[: len(prefix)]) == prefix
    assert {"tokens_planner_mean", "recovery_rate_conditional", "n_faulted"} <= set(csv.columns)
    # Full precision: the CSV round-trips the in-memory summary exactly.
    pd.testing.assert_frame_equal(csv, summary, check_dtype=False)

    md = (tmp_path / "summary.md").read_text(encoding="utf-8")
    for heading in ("## Completion rate", "## Cost and latency", "## Failure modes", "## Method"):
        assert heading in md
    assert "Wilson" in md and "linear" in md and "Hyndman-Fan type 7" in md
    tex = (tmp_path / "summary.tex").read_text(encoding="utf-8")
    for rule in ("\\toprule", "\\midrule", "\\bottomrule"):
        assert rule in tex
    assert "tree\\_search" in tex  # LaTeX special characters are escaped


def test_write_summaries_is_byte_identical(tmp_path: Path) -> None:
    df = make_episodes(envs=("web", "blocks"))
    write_summaries(df, tmp_path / "a", seed=1)
    write_summaries(df, tmp_path / "b", seed=1)
    for name in ("summary.csv", "summary.md", "summary.tex"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_complexity_order_everywhere(tmp_path: Path) -> None:
    df = make_episodes()
    summary = write_summaries(df, tmp_path)
    csv = pd.read_csv(tmp_path / "summary.csv")
    for frame in (summary, csv):
        for _, cell in frame.groupby("planner", sort=False):
            assert list(cell["complexity"]) == list(COMPLEXITY_ORDER)
    table = completion_table(summary)
    assert list(table.columns) == list(COMPLEXITY_ORDER)
    md = (tmp_path / "summary.md").read_text(encoding="utf-8")
    completion = md.split("## Completion rate", 1)[1]  # the summary above has a row per cell
    header = next(line for line in completion.splitlines() if "simple" in line)
    assert header.index("simple") < header.index("medium") < header.index("complex")


def test_completion_table_cells_and_rows() -> None:
    summary = summarize(make_episodes())
    table = completion_table(summary)
    assert list(table.index) == ["tree_search", "react"]  # first-appearance order
    assert all(CELL_RE.match(v) for v in table.to_numpy().ravel())
    row = summary.iloc[0]
    expected = (
        f"{100 * row['completion_rate']:.1f}% [{100 * row['completion_ci_low']:.1f}, "
        f"{100 * row['completion_ci_high']:.1f}] (n={row['n']})"
    )
    assert table.loc[row["planner"], row["complexity"]] == expected

    multi = completion_table(summarize(make_episodes(envs=("web", "blocks"))))
    assert multi.index.names == ["env", "planner"]
    assert list(multi.index) == [
        ("blocks", "tree_search"),
        ("blocks", "react"),
        ("web", "tree_search"),
        ("web", "react"),
    ]


def test_completion_table_rejects_ambiguous_summary() -> None:
    summary = summarize(make_episodes())
    with pytest.raises(ValueError):
        completion_table(pd.concat([summary, summary]))


def test_format_completion_table_is_github_style() -> None:
    text = format_completion_table(summarize(make_episodes()))
    lines = text.splitlines()
    assert lines[0].startswith("|") and "simple" in lines[0]
    assert set(lines[1]) <= set("|-: ")
    assert len(lines) == 4


def test_summary_has_paired_and_pass_k_sections(tmp_path: Path) -> None:
    from planarena.experiments.analysis.tables import paired_table, pass_k_table

    df = make_episodes()
    write_summaries(df, tmp_path)
    md = (tmp_path / "summary.md").read_text()
    assert "## Paired comparisons" in md and "## Consistency" in md
    assert "## Comparison matrix" in md and "pass@k" in md
    paired = paired_table(df, seed=0)
    assert set(paired["vs"]) == {"tree_search"} and set(paired["planner"]) == {"react"}
    row = paired[paired.complexity == "medium"].iloc[0]
    # by task (mean over its 2 trials), react minus tree_search, averaged over the 4 tasks
    part = df[df.complexity == "medium"]
    rates = part.groupby(["planner", "task_id"])["success"].mean().unstack("planner")
    want = 100 * (rates["react"] - rates["tree_search"]).mean()
    assert row.difference_pp.startswith(f"{want + 0.0:+.1f}")
    assert row.tasks == 4
    passk = pass_k_table(df)
    assert sorted(set(passk["k"])) == [1, 2]
    single = df[df.trial == 0]
    assert pass_k_table(single).empty  # one trial: no pass@k table
    write_summaries(single, tmp_path / "one")
    assert "Needs several trials" in (tmp_path / "one" / "summary.md").read_text()


def test_tex_tables_have_human_headers_and_fit_the_width(tmp_path: Path) -> None:
    write_summaries(make_episodes(), tmp_path)
    tex = (tmp_path / "summary.tex").read_text()
    assert tex.count("\\resizebox") == 4
    assert "\\begin{table*}" in tex
    header_lines = [ln for ln in tex.splitlines() if ln.startswith("Planner")]
    assert header_lines and all("\\_" not in ln for ln in header_lines)


def _tex_engine() -> list[str] | None:
    import shutil

    if shutil.which("pdflatex"):
        return ["pdflatex", "-halt-on-error", "-interaction=nonstopmode"]
    if shutil.which("tectonic"):
        return ["tectonic"]
    return None


@pytest.mark.skipif(_tex_engine() is None, reason="no pdflatex/tectonic on this machine")
def test_summary_tex_compiles_in_a_two_column_paper(tmp_path: Path) -> None:
    import subprocess

    write_summaries(make_episodes(envs=("web", "blocks")), tmp_path)
    doc = tmp_path / "paper.tex"
    doc.write_text(
        "\\documentclass[twocolumn]{article}\n\\usepackage{booktabs,graphicx}\n"
        "\\begin{document}\n\\input{summary.tex}\n\\end{document}\n"
    )
    engine = _tex_engine()
    assert engine is not None
    proc = subprocess.run(
        [*engine, "paper.tex"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "Overfull \\hbox" not in proc.stdout
    assert "Float too large" not in proc.stdout  # one table per env, so a page holds it


def test_left_out_episodes_are_counted_as_what_they_are(tmp_path: Path) -> None:
    """The Method paragraph counts infrastructure errors and cost-cap cuts apart: a cut
    episode was reported as an 'infrastructure_error episode (the LLM endpoint failed)'."""
    from planarena.experiments.analysis.tables import left_out_text

    df = pd.DataFrame(
        {
            "failure_mode": ["none", "infrastructure_error", "budget_exhausted", "dead_end"],
            "stop_reason": ["final", "infrastructure_error", "job_cost_cap", "final"],
        }
    )
    text = left_out_text(df)
    assert text.startswith("1 infrastructure_error episode(s)")
    assert "1 episode(s) the job's cost cap cut" in text
    assert left_out_text(df.iloc[[0, 3]]) == ""
    only_cut = left_out_text(df.iloc[[2]])
    assert "infrastructure_error" not in only_cut and "cost cap cut" in only_cut


def test_tables_of_records_with_no_measured_episode_say_so(tmp_path: Path) -> None:
    """Every record left out (a cost cap that cut the first episode, or an endpoint that
    failed at once): empty tables and a line saying why, no exception; and no figure."""
    from planarena.experiments.analysis.figures import write_figures

    df = make_episodes().assign(
        success=False, failure_mode="infrastructure_error", stop_reason="infrastructure_error"
    )
    summary = write_summaries(df, tmp_path, seed=0)
    assert summary.empty
    md = (tmp_path / "summary.md").read_text()
    assert "No measured episode" in md and f"{len(df)} infrastructure_error episode(s)" in md
    assert write_figures(df.iloc[0:0], tmp_path) == []


def test_harness_errors_are_flagged_at_the_top_of_summary_md(tmp_path: Path) -> None:
    """A harness_error is a bug of ours counted as the planner's failure: summary.md said
    nothing of it outside the failure-mode shares, so a lowered rate could reach a paper."""
    df = make_episodes()
    clean = write_summaries(df, tmp_path / "clean", seed=0)
    assert int(clean["harness_errors"].sum()) == 0
    assert "harness_error episode(s)" not in (tmp_path / "clean" / "summary.md").read_text()
    at = df.index[(df["planner"] == "react") & (df["complexity"] == "medium")][0]
    df.loc[at, ["success", "failure_mode"]] = [False, "harness_error"]
    write_summaries(df, tmp_path / "hit", seed=0)
    md = (tmp_path / "hit" / "summary.md").read_text()
    head = md.split("## Completion rate")[0]
    assert "WARNING: 1 harness_error episode(s)" in head
    assert "react medium (1)" in head
