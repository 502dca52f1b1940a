"""experiment=compute_frontier: the frontier keeps only Pareto-efficient settings, every point
carries intervals, the leaders table reads each planner's best point within a token level, and
a tiny study runs end to end through the one episode loop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import CONFIGS
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf, open_dict
from planarena.experiments.analysis.figures.curves import pareto_front
from planarena.experiments.run.runner import run
from planarena.experiments.studies.compute_frontier import (
    Settings,
    best_within,
    label_points,
    leader_table,
    point_table,
)
from planarena.experiments.studies.registry import canonical, get
from planarena.experiments.studies.report import render_study, study_config


def test_dominated_points_are_excluded() -> None:
    points = [
        (1000.0, 0.2),  # 0: cheapest
        (2000.0, 0.1),  # 1: dearer and worse than 0: dominated
        (3000.0, 0.5),  # 2
        (3000.0, 0.4),  # 3: same cost, worse: dominated
        (5000.0, 0.5),  # 4: dearer, no better: dominated
        (8000.0, 0.7),  # 5
    ]
    assert pareto_front(points) == [0, 2, 5]  # the one front the figures draw too


def _synthetic() -> pd.DataFrame:
    """Records of two planners at three settings each over 20 tasks (complex)."""
    rows = []
    plan = {
        "a": [(1000, 4), (3000, 10), (6000, 8)],  # (tokens, successes of 20): the last dominated
        "b": [(2000, 2), (4000, 12), (9000, 18)],
    }
    for planner, settings in plan.items():
        for level, (tokens, wins) in enumerate(settings):
            for t in range(20):
                rows.append(
                    {
                        "planner": planner,
                        "env": "report",
                        "complexity": "complex",
                        "task_id": f"t{t}",
                        "cell": f"knobs={level}",
                        "success": t < wins,
                        "tokens_total": tokens + 10 * t,
                        "stop_reason": "answered" if t < wins else "gave_up",
                    }
                )
    return pd.DataFrame(rows)


def _settings() -> Settings:
    knobs = {p: [{"k": i} for i in range(3)] for p in ("a", "b")}
    return Settings(knobs, [], [2500, 5000, 20000], 200)


def test_points_carry_intervals_and_the_frontier_flag() -> None:
    tagged = label_points(_synthetic(), _settings())
    points = point_table(tagged, seed=0, n_boot=200)
    assert len(points) == 6
    for _, r in points.iterrows():
        assert r["completion_lo"] <= r["completion"] <= r["completion_hi"]
        assert r["tokens_lo"] <= r["tokens_mean"] <= r["tokens_hi"]
        assert r["tokens_lo"] < r["tokens_hi"]  # tokens vary over tasks: a real interval
    on = points[points["frontier"]]
    assert set(zip(on["planner"], on["point"], strict=True)) == {
        ("a", "k=0"), ("a", "k=1"), ("b", "k=0"), ("b", "k=1"), ("b", "k=2"),
    }  # fmt: skip


def test_leaders_are_each_planners_best_point_within_the_level() -> None:
    tagged = label_points(_synthetic(), _settings())
    points = point_table(tagged, seed=0, n_boot=200)
    assert list(best_within(points, 2500)["planner"]) == ["a", "b"]
    leaders = leader_table(tagged, points, [2500, 5000, 20000], seed=0, n_boot=200)
    by_level = {int(r["tokens_at_most"]): r for _, r in leaders.iterrows()}
    assert by_level[2500]["leader"] == "a" and by_level[2500]["leader_point"] == "k=0"
    assert by_level[5000]["leader"] == "b" and by_level[5000]["leader_point"] == "k=1"
    assert by_level[20000]["leader"] == "b" and by_level[20000]["leader_point"] == "k=2"
    # b at 18/20 against a at 10/20 on the same tasks: a paired interval that excludes 0
    top = by_level[20000]
    assert top["difference"] == pytest.approx(0.4)
    assert top["difference_lo"] > 0 and bool(top["separable"])
    # 12/20 against 10/20 (the first ten tasks shared): close, the interval includes 0
    close = by_level[5000]
    assert close["difference_lo"] <= 0 <= close["difference_hi"]
    assert not bool(close["separable"])


def test_a_planner_not_selected_has_no_cells_and_bad_grids_are_refused() -> None:
    config: dict[str, Any] = {
        "planner": {"react": {}, "bfs": {}},
        "compute_frontier": {
            "knobs": {"react": [{"max_turns": 5}], "mcts": [{"iterations": 2}]},
            "budgets": [5000],
            "leaders_at": [5000],
        },
    }
    cells = get("compute_frontier").cells(config)
    assert [c.label for c in cells] == ["knobs=0", "budget=5000"]
    assert dict(cells[0].overrides) == {"planner.react.max_turns": 5}
    assert dict(cells[1].overrides) == {"budget.max_tokens_per_episode": 5000}
    config["compute_frontier"]["knobs"]["react"] = []
    with pytest.raises(ValueError, match="non-empty list"):
        Settings.of(config)
    config["compute_frontier"]["knobs"]["react"] = [{"max_turns": 5}]
    config["compute_frontier"]["budgets"] = [0]
    with pytest.raises(ValueError, match="budgets"):
        Settings.of(config)


def test_the_default_grid_comes_from_yaml_and_covers_every_search_planner() -> None:
    with initialize_config_dir(version_base="1.3", config_dir=str(CONFIGS)):
        cfg = compose("config", overrides=["experiment=compute_frontier"])
    config = canonical(OmegaConf.to_container(cfg, resolve=True))
    s = Settings.of(config)
    assert {"bfs", "dfs", "mcts", "tot", "react", "plan_execute_replan"} <= set(s.knobs)
    assert s.leaders_at == [5000, 20000, 80000]
    assert config["complexity"] == ["complex"]


def test_a_tiny_study_runs_end_to_end(tmp_path: Path) -> None:
    overrides = [
        "experiment=compute_frontier",
        "planner=[plan_execute_replan,tot]",
        "env=[report]",
        "n_tasks=3",
        "progress=false",
        "workers=1",
        "figures=false",
    ]
    with initialize_config_dir(version_base="1.3", config_dir=str(CONFIGS)):
        cfg = compose("config", overrides=overrides)
    with open_dict(cfg):
        OmegaConf.update(
            cfg,
            "compute_frontier.knobs",
            {
                "plan_execute_replan": [{"max_replans": 0}, {"max_replans": 2}],
                "tot": [{"beam_width": 1}, {"beam_width": 3}],
            },
            merge=False,
        )
        OmegaConf.update(cfg, "compute_frontier.budgets", [3000], merge=False)
        OmegaConf.update(cfg, "compute_frontier.n_boot", 100, merge=False)
    run(cfg, tmp_path)
    config = study_config(tmp_path)
    assert config is not None
    text = render_study(tmp_path, config, tmp_path)
    assert "| complex | 5k |" in text
    points = pd.read_csv(tmp_path / "compute_frontier_points.csv")
    assert set(points["planner"]) == {"plan_execute_replan", "tot"}
    assert len(points) == 6  # 2 settings + 1 budget, per planner
    assert points["frontier"].any()
    assert points[["completion_lo", "completion_hi", "tokens_lo", "tokens_hi"]].notna().all().all()
    leaders = pd.read_csv(tmp_path / "compute_frontier.csv")
    assert list(leaders["tokens_at_most"]) == [5000, 20000, 80000]
    for name in ("compute_frontier.png", "compute_frontier-1col.png"):
        assert (tmp_path / "figures" / name).stat().st_size > 0
