"""The sensitivity grid: its design, its verdicts on hand-made tables, and a tiny real run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from conftest import CONFIGS
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf, open_dict
from planarena.experiments.run.runner import run
from planarena.experiments.studies.report import render_study, study_config
from planarena.experiments.studies.sensitivity import (
    VERDICTS,
    _markdown,
    by_factor,
    cell_label,
    design,
    verdicts,
)


def test_design_has_centre_one_at_a_time_and_corners() -> None:
    factors = {"a": [0, 1, 2], "b": [10, 20, 30], "c": [5, 6, 7]}
    cells = design(factors, ["a", "b"])
    assert cells[0] == {"a": 1, "b": 20, "c": 6}
    # centre + 2 other levels per factor + 4 corners, no duplicates
    assert len(cells) == 1 + 3 * 2 + 4
    assert {"a": 0, "b": 30, "c": 6} in cells
    assert len({cell_label(c) for c in cells}) == len(cells)


def _table(rows: list[tuple[str, str, float]]) -> pd.DataFrame:
    return pd.DataFrame(
        [{"cell": c, "complexity": "simple", "planner": p, "completion": v} for c, p, v in rows]
    )


def test_verdicts_hold_mostly_flip_by_hand() -> None:
    cells = [f"c{i}" for i in range(10)]
    always = [(c, "x", 0.9) for c in cells] + [(c, "y", 0.5) for c in cells]
    once = [(c, "x", 0.9 if i else 0.1) for i, c in enumerate(cells)] + [
        (c, "y", 0.5) for c in cells
    ]
    half = [(c, "x", 0.9 if i % 2 else 0.1) for i, c in enumerate(cells)] + [
        (c, "y", 0.5) for c in cells
    ]
    tie = [(c, "x", 0.5) for c in cells] + [(c, "y", 0.5) for c in cells]
    got = [verdicts(_table(t), ["x", "y"]).iloc[0] for t in (always, once, half, tie)]
    assert [g.verdict for g in got] == ["holds", "mostly", "flips", "tie"]
    assert (got[0].a_better, got[0].b_better) == (10, 0)
    assert (got[1].a_better, got[1].b_better) == (9, 1)
    assert (got[3].a_better, got[3].b_better) == (0, 0)  # ties decide nothing
    assert got[1].against_leader == "c0"
    assert got[3].leader == "" and got[3].against_leader == ""


def test_a_pair_tied_in_every_cell_is_a_tie_not_an_ordering_that_holds() -> None:
    """x and y complete equally often everywhere: no ordering, so not one that holds. A pair
    tied in all cells but one, where x is better, still holds."""
    cells = [f"c{i}" for i in range(6)]
    rows = [(c, "x", 0.75) for c in cells] + [(c, "y", 0.75) for c in cells]
    rows += [(c, "z", 0.5) for c in cells]
    rows += [(c, "w", 0.75 if i else 0.5) for i, c in enumerate(cells)]
    got = verdicts(_table(rows), ["x", "y", "z", "w"]).set_index(["planner_a", "planner_b"])
    assert got.loc[("x", "y")].verdict == "tie"
    assert (got.loc[("x", "y")].a_better, got.loc[("x", "y")].b_better) == (0, 0)
    assert got.loc[("x", "z")].verdict == "holds" and got.loc[("y", "z")].verdict == "holds"
    assert got.loc[("x", "w")].verdict == "holds"  # tied in 5 cells, x better in 1
    assert (got.loc[("x", "w")].a_better, got.loc[("x", "w")].b_better) == (1, 0)
    assert got.loc[("z", "w")].verdict == "holds"  # w better in 5 cells, tied in 1
    assert got.loc[("x", "y")].verdict not in ("holds", "mostly", "flips")
    # every verdict with decided cells has one side better somewhere
    decided = got[got.verdict != "tie"]
    assert ((decided.a_better + decided.b_better) > 0).all()
    # the Markdown's counts keep ties apart from the orderings that hold
    text = _markdown(
        _table(rows), verdicts(_table(rows), ["x", "y", "z", "w"]), [], 1, pd.DataFrame()
    )
    assert "5 holds, 0 mostly, 0 flips, 1 tie (pairs)" in text
    assert "| x | y | 0 | 0 | **tie** |" in text


def test_by_factor_names_reversed_pairs() -> None:
    factors = {"noise": [0, 1, 2]}
    cells = design(factors, [])
    rows = []
    for cell, x in zip(cells, (0.8, 0.9, 0.2), strict=True):
        rows += [(cell_label(cell), "x", x), (cell_label(cell), "y", 0.5)]
    out = by_factor(_table(rows), factors, cells, ["x", "y"])
    assert out.iloc[0].pairs_reversed == 1 and out.iloc[0].which == "x/y"


def run_study(out: Path, overrides: list[str], study: dict[str, Any]) -> str:
    """A study run through the one episode loop into ``out``, then its analysis from the
    records (what ``planarena experiment=...`` does); returns the printed line."""
    with initialize_config_dir(version_base="1.3", config_dir=str(CONFIGS)):
        cfg = compose("config", overrides=[*overrides, "progress=false", "workers=1"])
    with open_dict(cfg):
        for key, value in study.items():
            OmegaConf.update(cfg, key, value, merge=False)
    run(cfg, out)
    config = study_config(out)
    assert config is not None
    return render_study(out, config, out)


def test_a_tiny_grid_runs_end_to_end(tmp_path: Path) -> None:
    line = run_study(
        tmp_path,
        [
            "experiment=sensitivity",
            "planner=[react,plan_execute_replan]",
            "n_tasks=2",
            "complexity=[simple]",
        ],
        {
            "sensitivity.factors": {"p_trap": [0.0, 0.25, 0.9], "fault_rate_scale": [0, 1, 2]},
            "sensitivity.corners": ["p_trap", "fault_rate_scale"],
        },
    )
    assert "cells" in line
    csv = pd.read_csv(tmp_path / "sensitivity.csv")
    assert list(csv.columns) == [
        "planner_a", "planner_b", "env", "complexity", "cells", "a_better", "b_better", "verdict",
    ]  # fmt: skip
    assert csv.iloc[0].cells >= 8 and set(csv.verdict) <= set(VERDICTS)
    # a tied pair never counts as holding
    holds = csv[csv.verdict == "holds"]
    assert ((holds.a_better + holds.b_better) > 0).all()
    tie = csv[csv.verdict == "tie"]
    assert ((tie.a_better == 0) & (tie.b_better == 0)).all()
    counts = csv.verdict.value_counts()
    assert ", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS) in line
    assert "By assumption" in (tmp_path / "sensitivity.md").read_text()
    episodes = pd.read_json(tmp_path / "episodes.jsonl", lines=True)
    assert (episodes.failure_mode != "harness_error").all()
    assert episodes["cell"].nunique() == csv.iloc[0].cells  # every cell's records kept


def test_envs_are_never_pooled_in_a_verdict() -> None:
    """x beats y on one env and y beats x on the other by as much, in every cell: pooled, the
    two would tie everywhere; per env each ordering holds."""
    cells = [f"c{i}" for i in range(4)]
    rows = []
    for c in cells:
        rows += [
            {"cell": c, "env": "a", "complexity": "simple", "planner": "x", "completion": 0.9},
            {"cell": c, "env": "a", "complexity": "simple", "planner": "y", "completion": 0.5},
            {"cell": c, "env": "b", "complexity": "simple", "planner": "x", "completion": 0.5},
            {"cell": c, "env": "b", "complexity": "simple", "planner": "y", "completion": 0.9},
        ]
    got = verdicts(pd.DataFrame(rows), ["x", "y"]).set_index("env")
    assert len(got) == 2
    assert got.loc["a"].verdict == "holds" and got.loc["a"].a_better == 4
    assert got.loc["b"].verdict == "holds" and got.loc["b"].b_better == 4
    text = _markdown(pd.DataFrame(rows), got.reset_index(), [], 1, pd.DataFrame())
    assert "## a: simple" in text and "## b: simple" in text


def test_a_grid_over_two_envs_keeps_them_apart(tmp_path: Path) -> None:
    """``experiment=sensitivity 'env=[report,rag]'``: each cell's completion is over one env's
    n_tasks tasks (it was over both envs' tasks pooled, n = 2 x n_tasks, with no env column)."""
    line = run_study(
        tmp_path,
        [
            "experiment=sensitivity",
            "planner=[react,plan_execute]",
            "env=[report,rag]",
            "n_tasks=2",
            "complexity=[simple]",
        ],
        {"sensitivity.factors": {"p_trap": [0.0, 0.25, 0.9]}, "sensitivity.corners": []},
    )
    cells = pd.read_csv(tmp_path / "sensitivity_cells.csv")
    assert set(cells.env) == {"report", "rag"}
    assert (cells.n == 2).all()
    assert len(cells) == 3 * 2 * 2  # cells x envs x planners
    csv = pd.read_csv(tmp_path / "sensitivity.csv")
    assert sorted(csv.env) == ["rag", "report"]
    factors = pd.read_csv(tmp_path / "sensitivity_factors.csv")
    assert sorted(factors.env) == ["rag", "report"]
    assert "pairs x envs x complexities" in line
    text = (tmp_path / "sensitivity.md").read_text()
    assert "## report: simple" in text and "## rag: simple" in text
