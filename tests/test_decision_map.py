"""experiment=decision_map: its cells, the winners per point with paired intervals, the verdict
logic on synthetic records, the heat maps (a tie is never coloured), the map planner=auto reads,
and a tiny study end to end through the one episode loop."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import CONFIGS
from hydra import compose, initialize_config_dir
from matplotlib.colors import to_rgba
from matplotlib.patches import Rectangle
from omegaconf import OmegaConf
from planarena.experiments.analysis.figures.decision_map import TIE_COLOR, decision_figure
from planarena.experiments.run.runner import run
from planarena.experiments.studies.decision_map import (
    Settings,
    cells_of,
    choose_group,
    per_task,
    point_table,
    rank_point,
)
from planarena.experiments.studies.decision_map_verdicts import verdicts
from planarena.experiments.studies.registry import canonical
from planarena.experiments.studies.report import render_study, study_config
from planarena.experiments.studies.sequential_replay import main as replay_main
from planarena.experiments.studies.sequential_replay import with_positions
from planarena.planners.auto import AutoPlanner, load_map

PLANNERS = ["react", "plan_execute", "plan_execute_replan", "tot"]


def settings(**kw: Any) -> Settings:
    base: dict[str, Any] = {
        "skills": ["strong", "weak"],
        "fault_rates": [0.5, 1.0, 2.0],
        "correlations": [],
        "budgets": [],
        "plan_format": None,
        "format_skills": [],
        "steps_edges": [3, 5, 8, 12],
        "meta": ["auto"],
        "alpha": 0.05,
        "n_boot": 200,
    }
    return Settings(**{**base, **kw})


def synthetic(outcome: Any, n: int = 30, s: Settings | None = None) -> pd.DataFrame:
    """Records of PLANNERS on n short (3 steps) and n long (10 steps) tasks in every grid
    cell; ``outcome(planner, skill, rate, steps, t)`` says who succeeds."""
    s = s or settings()
    rows = []
    for skill in s.skills:
        for rate in s.fault_rates:
            cell = f"skill={skill} faults={rate:g}"
            for steps in (3, 10):
                for t in range(n):
                    env = "e1" if t % 2 else "e2"
                    for p in PLANNERS:
                        ok = bool(outcome(p, skill, rate, steps, t))
                        rows.append(
                            {
                                "planner": p, "env": env, "complexity": "x", "seed": 0,
                                "task_id": f"s{steps}-{t}", "task": f"{env}/s{steps}-{t}",
                                "cell": cell, "dm_kind": "grid", "skill": skill,
                                "fault_rate_scale": rate, "judge_correlation": None,
                                "token_budget": 0, "plan_format": "json", "steps": steps,
                                "steps_bin": s.bin_of(steps), "success": float(ok),
                                "cost_usd": 0.01 * (1 + PLANNERS.index(p)),
                                "latency_s": 10.0 + t, "tokens_total": 1000,
                                "failure_mode": "none" if ok else "dead_end",
                            }
                        )  # fmt: skip
    data = pd.DataFrame(rows)
    # the reference cell first, as the study orders its cells
    ref = "skill=strong faults=1"
    return pd.concat([data[data["cell"] == ref], data[data["cell"] != ref]], ignore_index=True)


def test_a_point_is_ranked_on_the_tasks_every_planner_ran_each_point_on_its_own() -> None:
    """The table aggregates every point in one pass; each row must be what ranking that
    point's records alone gives, on the tasks all its planners ran (one lacks some here)."""

    def outcome(p: str, skill: str, rate: float, steps: int, t: int) -> bool:
        return (t + PLANNERS.index(p)) % 3 != 0

    s = settings()
    data = synthetic(outcome, n=12, s=s)
    gone = (data["planner"] == "tot") & data["task_id"].isin(["s10-0", "s10-5", "s3-7"])
    data = data[~gone & ~((data["planner"] == "react") & (data["task_id"] == "s10-6"))]
    table = point_table(data, PLANNERS, ["steps_bin"], s, seed=3)
    assert len(table) == len(s.skills) * len(s.fault_rates) * 2
    assert list(dict.fromkeys(table["cell"])) == list(dict.fromkeys(data["cell"]))  # as met
    for row in table.itertuples(index=False):
        part = data[(data["cell"] == row.cell) & (data["steps_bin"] == row.steps_bin)]
        tasks = per_task(part, PLANNERS)
        assert all(len(t) == (12 - 3 if row.steps_bin != "<=3" else 11) for t in tasks.values())
        alone = rank_point(tasks, 3, s.n_boot, 1.0 - s.alpha, (row.cell, row.steps_bin))
        assert {k: getattr(row, k) for k in alone} == alone


def verdict(table: pd.DataFrame, rule: str) -> str:
    return str(table.loc[table["rule"] == rule, "verdict"].iloc[0])


def test_the_article_ladder_confirmed_where_the_records_say_so() -> None:
    def outcome(p: str, skill: str, rate: float, steps: int, t: int) -> bool:
        if steps <= 3:
            return True  # every strategy completes short tasks: ReAct suffices
        return p in ("plan_execute_replan", "tot") or t % 5 == 0  # long: replanning wins

    table = verdicts(synthetic(outcome), PLANNERS, settings(), seed=0)
    assert verdict(table, "ladder 1") == "confirmed"
    assert verdict(table, "ladder 2") == "confirmed"
    assert verdict(table, "decision 1") == "confirmed"
    assert verdict(table, "decision 3") == "confirmed"
    assert verdict(table, "decision 3 flip").startswith("not tested")  # no plan_execute_rerun
    assert verdict(table, "decision 4").startswith("not tested")  # no plan format cells
    assert "pooled difference" in table.loc[table["rule"] == "ladder 2", "numbers"].iloc[0]


def test_an_ordering_the_other_way_is_not_confirmed_and_a_skill_split_depends() -> None:
    def react_wins(p: str, skill: str, rate: float, steps: int, t: int) -> bool:
        return p == "react" or t % 4 == 0

    table = verdicts(synthetic(react_wins), PLANNERS, settings(), seed=0)
    assert verdict(table, "ladder 2") == "not confirmed"
    assert verdict(table, "ladder 1") == "confirmed"  # ReAct is not worse: it is better

    def by_skill(p: str, skill: str, rate: float, steps: int, t: int) -> bool:
        winner = "plan_execute_replan" if skill == "strong" else "react"
        return p == winner or t % 4 == 0

    table = verdicts(synthetic(by_skill), PLANNERS, settings(), seed=0)
    assert verdict(table, "ladder 2").startswith("depends on skill weak")


def test_too_few_differing_tasks_are_unresolved() -> None:
    def nearly_equal(p: str, skill: str, rate: float, steps: int, t: int) -> bool:
        return not (p == "react" and t == 0 and rate == 1.0)

    table = verdicts(synthetic(nearly_equal, n=8), PLANNERS, settings(), seed=0)
    assert verdict(table, "ladder 2") == "unresolved at this n"


def test_a_point_names_its_winner_and_whether_the_runner_up_is_separable() -> None:
    data = synthetic(lambda p, *_a: p == "tot" or _a[-1] % 3 == 0)
    part = data[(data["cell"] == "skill=strong faults=1") & (data["steps"] == 10)]
    ranked = rank_point(per_task(part, PLANNERS), 0, 200, 0.95, ("k",))
    assert ranked["completion_best"] == "tot" and ranked["completion_separable"]
    assert ranked["completion_low"] > 0
    assert ranked["cost_best"] == "react"  # cheapest per completed task among completers
    same = synthetic(lambda *_a: True)
    part = same[(same["cell"] == "skill=strong faults=1") & (same["steps"] == 10)]
    ranked = rank_point(per_task(part, PLANNERS), 0, 200, 0.95, ("k",))
    assert not ranked["completion_separable"]
    assert ranked["completion_low"] == ranked["completion_high"] == 0.0


def test_the_map_picks_the_cheapest_of_the_close_and_inseparable() -> None:
    data = synthetic(lambda p, *_a: p != "plan_execute")
    part = data[data["steps"] == 10]
    choice, why, numbers = choose_group(per_task(part, PLANNERS), 0.95)  # type: ignore[misc]
    assert choice == "react"  # everyone but plan_execute completes all; react is cheapest
    assert "cheapest" in why and numbers["leader"] in PLANNERS


def _points() -> pd.DataFrame:
    base = {"dm_kind": "grid", "skill": "strong", "fault_rate_scale": 1.0, "n_tasks": 30}
    return pd.DataFrame(
        [
            {**base, "steps_bin": "<=3", "completion_best": "react", "completion": 0.9,
             "completion_second": "tot", "completion_diff": 0.2, "completion_separable": True},
            {**base, "steps_bin": "4-5", "completion_best": "tot", "completion": 0.8,
             "completion_second": "react", "completion_diff": 0.05,
             "completion_separable": False},
        ]
    )  # fmt: skip


def test_a_cell_without_a_separable_winner_is_grey_and_hatched_never_coloured() -> None:
    fig = decision_figure(_points(), "completion", ["strong"], [1.0], ["<=3", "4-5", "6-8"], 7.0)
    ax = fig.axes[0]
    rects = [p for p in ax.patches if isinstance(p, Rectangle)]
    faces = {(round(r.get_x() + 0.5), r.get_hatch()): r.get_facecolor() for r in rects}
    assert faces[(1, "///")] == to_rgba(TIE_COLOR)
    react = faces[(0, None)]
    assert react[:3] == to_rgba("#E69F00")[:3]  # react's colour, shaded by its margin
    labels = [t.get_text() for t in ax.texts]
    assert "tie\nToT≈ReAct" in labels and "no tasks" in labels
    assert any("article" in t for t in labels)  # the article's thresholds are drawn


def test_cells_reference_first_and_levels_the_run_lacks_are_named() -> None:
    with initialize_config_dir(version_base="1.3", config_dir=str(CONFIGS)):
        cfg = compose("config", overrides=["experiment=decision_map"])
    config = canonical(OmegaConf.to_container(cfg, resolve=True))
    config["decision_map"]["skills"] = ["strong", "no_such_skill"]
    s = Settings.of(config)
    assert "skill no_such_skill" in s.left_out
    cells = cells_of(config)
    assert cells[0].label == "skill=strong faults=1"
    assert dict(cells[0].overrides)["faults.rate_scale"] == 1.0
    assert {c.columns["dm_kind"] for c in cells} >= {"grid", "corr", "budget"}
    assert any(c.overrides.get("budget.max_tokens_per_episode") for c in cells)
    config["decision_map"]["oops"] = 1
    with pytest.raises(ValueError, match="decision_map.oops: unknown"):
        Settings.of(config)


def test_a_tiny_study_runs_end_to_end_and_its_map_drives_auto(tmp_path: Path) -> None:
    overrides = [
        "experiment=decision_map",
        "planner=[react,plan_execute_replan,auto]",
        "env=[rag]",
        "n_tasks=4",
        "progress=false",
        "workers=1",
        "figures=false",
        "decision_map.skills=[strong,weak]",
        "decision_map.fault_rates=[1.0,2.0]",
        "decision_map.judge_correlation=[]",
        "decision_map.budgets=[3000]",
        "decision_map.n_boot=100",
    ]
    with initialize_config_dir(version_base="1.3", config_dir=str(CONFIGS)):
        cfg = compose("config", overrides=overrides)
    run(cfg, tmp_path)
    config = study_config(tmp_path)
    assert config is not None
    text = render_study(tmp_path, config, tmp_path)
    assert "Decision map" in text
    table = pd.read_csv(tmp_path / "decision_map.csv")
    assert len(table) == 12 and table["verdict"].notna().all()
    points = pd.read_csv(tmp_path / "decision_map_points.csv")
    assert set(points["skill"]) == {"strong", "weak"}
    assert "auto" not in set(points["completion_best"])  # auto is compared, never ranked
    auto = pd.read_csv(tmp_path / "decision_map_auto.csv")
    assert set(auto["planner"]) == {"react", "plan_execute_replan"}
    trend = pd.read_csv(tmp_path / "decision_map_trend.csv")  # rag: one length a complexity
    assert set(trend["pair"]) == {"react-plan_execute_replan"} and set(trend["skill"]) == {
        "strong",
        "weak",
    }
    assert "Length within a family" in (tmp_path / "decision_map.md").read_text()
    # the sequential replay cuts each env x complexity at the tasks the env made first
    data = with_positions(pd.read_json(tmp_path / "episodes.jsonl", lines=True), config)
    assert data["complexity"].nunique() > 1
    assert (data["position"] == data["task_id"].str[-4:].astype(int)).all()
    assert replay_main([str(tmp_path), "--looks", "2"]) == 0
    for name in ("decision_map_completion.png", "decision_map_cost-1col.png"):
        assert (tmp_path / "figures" / name).stat().st_size > 0
    load_map.cache_clear()
    planner = AutoPlanner(map_path=str(tmp_path / "decision_map.json"))
    assert set(planner.planners) <= {"react", "plan_execute_replan"}
    records = pd.read_json(tmp_path / "episodes.jsonl", lines=True)
    mine = records[records["planner"] == "auto"]
    assert mine["auto_choice"].notna().all() and mine["auto_reason"].str.contains("items=").all()
    assert math.isfinite(float(np.nanmean(mine["success"])))


def test_auto_is_judged_on_each_family_its_map_never_saw(tmp_path: Path) -> None:
    """Leave one family out: the map rebuilt from the other families without the tool count,
    auto's pick on each held-out task scored with that planner's outcome there, against the
    best fixed planner in hindsight and the one the other families would have picked."""
    from planarena.experiments.studies import auto_lofo

    overrides = [
        "experiment=decision_map", "planner=[react,plan_execute_replan]", "env=[rag,report,file]",
        "n_tasks=4", "progress=false", "workers=1", "figures=false",
        "decision_map.skills=[strong]", "decision_map.fault_rates=[1.0]",
        "decision_map.judge_correlation=[]", "decision_map.budgets=[]", "decision_map.n_boot=100",
    ]  # fmt: skip
    with initialize_config_dir(version_base="1.3", config_dir=str(CONFIGS)):
        cfg = compose("config", overrides=overrides)
    run(cfg, tmp_path)
    auto_lofo.write(tmp_path)
    table = pd.read_csv(tmp_path / "auto_lofo.csv")
    assert sorted(table["held_out"]) == ["file", "rag", "report"]
    assert (table["units"] == 12).all()  # 4 tasks x 3 complexities, one grid cell
    for label in ("hindsight", "trained"):
        assert (table[f"diff_{label}_low"] <= table[f"diff_{label}"]).all()
        assert (table[f"diff_{label}"] <= table[f"diff_{label}_high"]).all()
    assert set(table["best_trained"]) <= {"react", "plan_execute_replan"}
    assert "leave one family out" in (tmp_path / "auto_lofo.md").read_text()
    with pytest.raises(ValueError, match="not a run of experiment=decision_map"):
        auto_lofo.write(tmp_path / "nothing")


def test_the_docs_blocks_are_rendered_from_the_shipped_runs() -> None:
    """docs/decision-map.md's verdicts under both recovery budgets, the within-family length
    trend and auto's leave-one-family-out table are renders of docs/data/decision_map/,
    never typed."""
    from planarena.experiments.studies.decision_map_docs import DECISION_MAP
    from planarena.experiments.studies.planners_docs import PLANNERS
    from planarena.experiments.studies.rendered_docs import pages

    for page in (DECISION_MAP, PLANNERS):
        text = page.path.read_text(encoding="utf-8")
        assert all(f"<!-- rendered: {name} -->" in text for name in page.renderers)
        assert page.render(text) == text
    assert {p.path.name for p in pages()} >= {"decision-map.md", "planners.md"}


def test_every_cell_label_fits_its_cell_even_for_a_tie_of_two_long_names() -> None:
    base = {"cell": "x", "skill": "strong", "fault_rate_scale": 1.0, "dm_kind": "grid"}
    points = pd.DataFrame(
        [
            {**base, "steps_bin": "<=3", "cost_best": "plan_execute_rerun", "cost": 0.01,
             "cost_second": "plan_execute_replan", "cost_second_value": 0.0101,
             "cost_separable": False},
            {**base, "steps_bin": "4-5", "cost_best": "plan_execute_rerun", "cost": 0.01,
             "cost_second": "plan_execute_replan", "cost_second_value": 0.01001,
             "cost_separable": True},
        ]
    )  # fmt: skip
    skills, rates = ["strong", "weak", "weak_json", "reasoning"], [0.5, 1.0, 2.0]
    bins = ["<=3", "4-5", "6-8", "9-12", "13+"]  # the shipped map's panels and cells
    for width in (7.0, 3.4):
        fig = decision_figure(points, "cost", skills, rates, bins, width)
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        labels = [t for t in ax.texts if t.get_position() in ((0, 1), (1, 1))]
        assert len(labels) == 2
        for text in labels:
            x, y = text.get_position()
            cell = ax.transData.transform([(x - 0.5, y - 0.5), (x + 0.5, y + 0.5)])
            box = text.get_window_extent(renderer)
            assert cell[0][0] <= box.x0 and box.x1 <= cell[1][0], (width, text.get_text())
            assert cell[0][1] <= box.y0 and box.y1 <= cell[1][1], (width, text.get_text())
        assert "+<1%" in labels[1].get_text()  # a separable winner never reads "+0%"
