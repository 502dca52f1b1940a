"""experiment=scenarios: the per-family table (completion, cost per completed task, P99, with
intervals), the best by each metric, and the verdict against the article's pick."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from hydra import compose, initialize_config_dir
from planarena.experiments.studies.scenarios import render, scenario_table

from tests.conftest import ALL_PLANNERS, CONFIGS


def _records() -> pd.DataFrame:
    rows = []
    for planner, wins, cost, latency in (
        ("topo", 20, 0.01, 50.0),
        ("react", 10, 0.02, 90.0),
        ("plan_execute", 0, 0.01, 5.0),
    ):
        for i in range(20):
            rows.append(
                {
                    "env": "pipeline",
                    "planner": planner,
                    "complexity": "medium",
                    "task_id": f"pipeline-medium-{i:04d}",
                    "success": i < wins,
                    "cost_usd": cost,
                    "latency_s": latency + i,
                }
            )
    return pd.DataFrame(rows)


def test_the_table_has_intervals_and_infinite_cost_without_completions() -> None:
    table = scenario_table(_records(), seed=0).set_index("planner")
    assert table.loc["topo", "completion"] == 1.0
    assert abs(table.loc["react", "cost_per_completion"] - 0.04) < 1e-12
    assert table.loc["react", "cost_ci_low"] <= 0.04 <= table.loc["react", "cost_ci_high"]
    assert pd.isna(table.loc["plan_execute", "cost_per_completion"])  # nothing completed
    assert table.loc["topo", "p99_ci_low"] <= table.loc["topo", "latency_p99"]


def test_render_names_the_best_and_compares_with_the_article(tmp_path: Path) -> None:
    text = render(_records(), {}, tmp_path, seed=0)
    assert "best by completion: **topo**" in text
    # failing fast is not being fast: plan_execute (0 %) is not the P99 winner
    assert "best by P99 latency: **topo**" in text
    assert "**pipeline** — article: topological sort" in text and "Verdict: agrees" in text
    assert (tmp_path / "scenarios.md").exists() and (tmp_path / "scenarios.csv").exists()
    again = render(_records(), {}, tmp_path / "again", seed=0)
    assert again == text  # the same records give the same report


def test_the_experiment_config_covers_every_family_and_planner() -> None:
    with initialize_config_dir(str(CONFIGS), version_base="1.3"):
        cfg = compose("config", overrides=["experiment=scenarios"])
    assert cfg.study == "scenarios"
    assert {"pipeline", "web_nav", "code_gen", "research", "report"} <= set(cfg.env)
    assert len(cfg.planner) == len(ALL_PLANNERS)
