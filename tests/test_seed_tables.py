"""experiment=seed_tables: the §9 tables print rates exactly as the main summary tables do."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
from planarena.experiments.analysis.metrics import failure_distribution, summarize
from planarena.experiments.analysis.tables import completion_table, failure_table
from planarena.experiments.studies.seed_tables import ORDER, render, table_91, table_93

# successes out of 200 per planner x complexity: the seed-0 run's rates, with the
# half-percent values (26.5 %, 81.5 %, 82.5 %, 75.5 %, 90.5 %) that half-to-even integer
# rounding printed as 26 %, 82 %, 82 %, 76 %, 90 %
SUCCESSES = {
    "react": (181, 158, 151),
    "plan_execute": (96, 53, 30),
    "plan_execute_replan": (184, 165, 144),
    "tot": (184, 163, 158),
}
COMPLEXITIES = ("simple", "medium", "complex")
# the failed episodes' modes, cycled: shares such as 1/8 = 12.5 % per planner
MODES = (
    "dead_end",
    "false_success",
    "gave_up_after_tool_failure",
    "hallucinated_tool_call",
    "plan_logic_error",
    "precondition_unverified",
    "budget_exhausted",
    "correctly_reported_unreachable",
)


def episodes() -> pd.DataFrame:
    rows = []
    for planner, counts in SUCCESSES.items():
        for complexity, wins in zip(COMPLEXITIES, counts, strict=True):
            for i in range(200):
                success = i < wins
                rows.append(
                    {
                        "planner": planner,
                        "env": "report",
                        "complexity": complexity,
                        "task_id": f"t{i}",
                        "seed": 0,
                        "trial": 0,
                        "llm": "sim:strong",
                        "success": success,
                        "progress": 1.0 if success else 0.5,
                        "failure_mode": "none" if success else MODES[(i - wins) % len(MODES)],
                        "tokens_prompt": 100 + i,
                        "tokens_completion": 20,
                        "tokens_total": 120 + i,
                        "tokens_planner": 50,
                        "llm_calls": 3,
                        "tool_calls": 4,
                        "retries": 0,
                        "fallbacks": 0,
                        "replans": 0,
                        "faults_injected": i % 2,
                        "latency_s": 10.0 + (i % 17),
                        "cost_usd": 0.001,
                        "wall_s": 0.01,
                    }
                )
    return pd.DataFrame(rows)


RATE = re.compile(r"^(\S+%) \[(\S+), (\S+)\]")


def test_table_91_prints_each_rate_as_the_completion_table_does() -> None:
    df = episodes()
    summary = summarize(df, seed=0, n_boot=200, planner_order=ORDER)
    main = completion_table(summary)
    seed = table_91(summary).set_index("planner")
    for planner in ORDER:
        for complexity in COMPLEXITIES:
            ours = RATE.match(seed.at[planner, complexity])
            theirs = RATE.match(main.at[planner, complexity])
            assert ours and theirs
            assert ours.groups() == theirs.groups(), (planner, complexity)
    # distinct rates stay distinct: replan 82.5 % and ToT 81.5 % on medium tasks
    assert seed.at["plan_execute_replan", "medium"].startswith("82.5% ")
    assert seed.at["tot", "medium"].startswith("81.5% ")
    assert seed.at["plan_execute", "medium"].startswith("26.5% ")
    assert seed.at["react", "complex"].startswith("75.5% ")


def test_table_93_prints_each_share_as_the_failure_table_does() -> None:
    df = episodes()
    planners = ["react", "plan_execute", "plan_execute_replan"]
    main = failure_table(
        failure_distribution(df[df.planner.isin(planners)], planner_order=planners)
    ).set_index("planner")
    seed = table_93(df).set_index("key")
    for mode in MODES:
        for planner in planners:
            share = seed.at[mode, planner].split(" (article")[0]
            assert share == f"{main.at[planner, mode]}%", (mode, planner)
    assert seed.at["n_failed", "react"] == main.at["react", "n_failed"]


def test_rendered_markdown_shows_the_half_percent_rates(tmp_path: Path) -> None:
    text = render(episodes(), {"seed": 0, "llm": {}, "faults": {}}, tmp_path, seed=0)
    section = text.split("## 9.1")[1].split("## 9.2")[0]
    for rate in ("26.5%", "81.5%", "82.5%", "75.5%", "90.5%"):
        assert rate in section
    assert (tmp_path / "seed_tables.md").read_text(encoding="utf-8") == text


def test_the_tables_are_the_report_envs_when_the_run_has_several(tmp_path: Path) -> None:
    """``planarena experiment=seed_tables 'env=[report,rag]'``: §9 is about report tasks, so
    every table is computed from the report env's episodes alone and says so. The cells
    showed whichever env's row came first, 9.3 pooled both envs' failures, and the header
    read 'Env report ... n = 400' (both envs' episodes per planner x complexity)."""
    report = episodes()
    rag = report.assign(env="rag", success=False, failure_mode="dead_end")
    df = pd.concat([rag, report], ignore_index=True)  # rag first: its rows come first
    text = render(df, {"seed": 0, "llm": {}, "faults": {}}, tmp_path, seed=0)
    (tmp_path / "alone").mkdir()
    alone = render(report, {"seed": 0, "llm": {}, "faults": {}}, tmp_path / "alone", seed=0)
    for section in ("## 9.1", "## 9.2", "## 9.3"):
        ours = text.split(section)[1].split("\n\n")[1]
        assert ours == alone.split(section)[1].split("\n\n")[1], section
    assert "n = 200 tasks per planner x complexity" in text
    assert "n = 400" not in text
    assert "rag" in text.split("## 9.1")[0]  # the left-out env is named


def test_the_docs_page_is_rendered_from_its_shipped_run() -> None:
    """docs/seed-tables.md's tables are a render of docs/data/seed_tables/ (one run of
    experiment=seed_tables), never typed; the copy is that study's own output."""
    from planarena.experiments.studies.seed_tables_docs import DATA, SEED_TABLES

    page = SEED_TABLES.path.read_text(encoding="utf-8")
    assert "<!-- rendered: seed_tables -->" in page
    assert SEED_TABLES.render(page) == page
    table = pd.read_csv(DATA / "seed_table_9_1.csv")
    assert len(table) == 4 and "| ReAct " in page  # one row per architecture, in the page
