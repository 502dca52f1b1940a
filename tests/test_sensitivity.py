"""The sensitivity study: its design, its paired intervals and verdicts on hand-made records, and
tiny real runs through the one episode loop."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import CONFIGS
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf, open_dict
from planarena.experiments.analysis.stats import sign_test_p
from planarena.experiments.run.llm_factory import ConfigError
from planarena.experiments.run.prepare import prepare
from planarena.experiments.run.runner import run
from planarena.experiments.studies.registry import canonical
from planarena.experiments.studies.report import render_study, study_config
from planarena.experiments.studies.sensitivity import design_of, resolution, two_level
from planarena.experiments.studies.sensitivity_report import markdown
from planarena.experiments.studies.sensitivity_stats import (
    VERDICTS,
    Settings,
    analyse,
    groups_of,
    net_win_interval,
    verdict_of,
)

ALPHA = 0.05


# ---- the design ---------------------------------------------------------------------------


def _config(factors: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "planner": {"react": {}, "dfs": {}},
        "faults": {"rate_scale": 1.0},
        "llm": {"backend": "sim", "models": {"replanner": {"error_scale": 1.5}}},
        "sensitivity": {"factors": factors, **spec},
    }


FACTORS = {
    "evaluator_noise": [0.03, 0.1, 0.3],
    "p_trap": [0.1, 0.25, 0.5],
    "fault_rate_scale": [0.5, 1.0, 2.0],
    "replanner": {"key": "llm.models.replanner.error_scale", "levels": [1.0, 1.5, 3.0]},
    "dfs_nodes": {"key": "planner.dfs.max_nodes", "levels": [15, 40, 80]},
}


def test_the_design_is_the_centre_then_a_balanced_orthogonal_two_level_fraction() -> None:
    d = design_of(_config(FACTORS))
    assert d.labels[0] == "centre" and d.values[0]["p_trap"] == 0.25
    assert d.runs == 8 and len(d.labels) == 1 + 8 and len(set(d.labels)) == len(d.labels)
    signs = np.array([s[1:] for s in d.signs.values()])  # factors x runs, centre dropped
    assert (signs.sum(axis=1) == 0).all()  # each factor low in half the runs, high in half
    assert (signs @ signs.T == 8 * np.eye(len(FACTORS))).all()  # any two are orthogonal
    assert len({tuple(v.values()) for v in d.values}) == len(d.values)  # no run twice
    cells = d.cells()
    assert cells[1].overrides["planner.dfs.max_nodes"] in (15, 80)
    assert cells[1].overrides["llm.skill_overrides.p_trap"] in (0.1, 0.5)
    assert cells[1].overrides["faults.rate_scale"] in (0.5, 2.0)
    assert cells[1].columns["replanner"] in (1.0, 3.0)


def test_the_design_is_seeded() -> None:
    same = design_of(_config(FACTORS, design_seed=0)).values
    assert design_of(_config(FACTORS, design_seed=0)).values == same
    assert design_of(_config(FACTORS, design_seed=1)).values != same
    # few factors in many runs: no factor's column is another's or a product of two others
    table = two_level(4, 16, seed=0)
    for i, j, k in itertools.permutations(range(4), 3):
        assert not (table[:, i] == table[:, j] * table[:, k]).all()
        assert not (table[:, i] == -table[:, j] * table[:, k]).all()
    # the highest resolution of a regular design: V for 5 factors in 16 runs, IV up to 8,
    # III beyond (the default's 15 factors); IV for 15 in 32
    assert [resolution(two_level(k, 16, seed=3)) for k in (5, 6, 8, 9, 15)] == [5, 4, 4, 3, 3]
    assert resolution(two_level(15, 32, seed=0)) == 4


def test_a_factor_the_run_cannot_vary_is_left_out_and_named() -> None:
    factors = {
        **FACTORS,
        "mcts_iterations": {"key": "planner.mcts.iterations", "levels": [8, 16, 64]},
        "outages": {"key": "faults.no_such_knob", "levels": [1, 2, 3]},
    }
    d = design_of(_config(factors))
    assert set(d.left_out) == {"mcts_iterations", "outages"}
    assert "mcts is not in this run" in d.left_out["mcts_iterations"]
    assert "mcts_iterations" not in d.values[0]
    text = markdown(pd.DataFrame(), pd.DataFrame(), d, 5, Settings(), False)
    assert "Left out of this run's design" in text and "- outages:" in text


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"factors": {"p_trap": [0.1, 0.5]}}, "levels must be"),
        ({"factors": {"p_trap": [0.1, 0.2, 0.1]}}, "low and high levels are equal"),
        ({"factors": {"p_trap": [0.1, 0.2, 0.5]}, "corners": []}, "sensitivity.corners: unknown"),
        ({"factors": {"p_trap": [0.1, 0.2, 0.5]}, "runs": 3}, "power of two"),
        ({"factors": {}}, "at least one factor"),
    ],
)
def test_a_bad_design_is_one_clear_line(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        design_of({"planner": {}, "llm": {}, "sensitivity": spec})


# ---- the paired intervals -----------------------------------------------------------------


def test_the_exact_cell_interval_excludes_zero_exactly_when_the_sign_test_rejects() -> None:
    for a, b in itertools.product(range(13), repeat=2):
        low, high = net_win_interval(a, b, 30, 1 - ALPHA)
        assert low <= (a - b) / 30 <= high
        assert (low > 0 or high < 0) == (sign_test_p(a, b) < ALPHA), (a, b)
    assert net_win_interval(1, 0, 100, 0.95)[0] < 0  # 1 task against 0 decides nothing
    assert net_win_interval(0, 0, 50, 0.95) == (0.0, 0.0)


def records_of(
    outcomes: dict[str, np.ndarray], env: str = "report", complexity: str = "simple"
) -> pd.DataFrame:
    """Records from ``outcomes[planner]``: a cells x tasks array of 0/1 successes."""
    rows = []
    for planner, table in outcomes.items():
        for c, t in itertools.product(range(table.shape[0]), range(table.shape[1])):
            rows.append(
                {"cell": f"c{c}", "env": env, "complexity": complexity, "seed": 0,
                 "task_id": f"t{t:02d}", "planner": planner, "success": bool(table[c, t])}
            )  # fmt: skip
    return pd.DataFrame(rows)


def verdicts_of(
    outcomes: dict[str, np.ndarray], levels: dict[str, Sequence[int]] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    records = records_of(outcomes)
    cells = [f"c{c}" for c in range(next(iter(outcomes.values())).shape[0])]
    groups = groups_of(records, cells, list(outcomes), ["env", "complexity"])
    return analyse(groups, list(outcomes), levels or {}, Settings(ALPHA, 500, 0))


CELLS, TASKS = 10, 50


def pair(wins: dict[int, Sequence[int]], losses: dict[int, Sequence[int]]) -> pd.Series:
    """The verdict row of x vs y, where x alone succeeds on ``wins[cell]`` tasks and y alone
    on ``losses[cell]`` (both fail the rest)."""
    x, y = np.zeros((CELLS, TASKS)), np.zeros((CELLS, TASKS))
    for c, tasks in wins.items():
        x[c, list(tasks)] = 1
    for c, tasks in losses.items():
        y[c, list(tasks)] = 1
    return verdicts_of({"x": x, "y": y})[0].iloc[0]


def test_every_verdict_is_reachable_from_hand_made_records() -> None:
    every = range(CELLS)
    holds = pair({c: range(20) for c in every}, {})
    assert (holds.verdict, holds.leader, holds.cells_a, holds.cells_b) == ("holds", "x", 10, 0)
    # pooled alone: 5 tasks a cell (never significant in one cell), other tasks in each cell
    pooled = pair({c: range(5 * c, 5 * c + 5) for c in every}, {})
    assert (pooled.verdict, pooled.cells_a, pooled.pooled_sign) == ("holds", 0, 1)
    # 20 to 0 in one cell, 2 the other way in each of the rest: no pooled ordering
    depends = pair({0: range(20)}, {c: range(20 + 2 * c, 22 + 2 * c) for c in range(1, 10)})
    assert (depends.verdict, depends.leader, depends.cells_a, depends.pooled_sign) == (
        "depends", "x", 1, 0,
    )  # fmt: skip
    flips = pair({0: range(20)}, {1: range(20, 40)})
    assert (flips.verdict, flips.cells_a, flips.cells_b, flips.leader) == ("flips", 1, 1, "")
    # 4 to 0 in every cell: the bootstrap alone would call it (a resample misses all 4 tasks
    # with chance 0.016), the exact sign test over tasks does not (p = 0.125)
    unresolved = pair({c: range(4) for c in range(CELLS)}, {})
    assert unresolved.verdict == "unresolved" and unresolved.pooled_low > 0
    assert unresolved.pooled_sign == 0 and unresolved.p_pooled == sign_test_p(4, 0)
    tie = pair({}, {})
    assert tie.verdict == "tie"
    assert {holds.verdict, depends.verdict, flips.verdict, unresolved.verdict, tie.verdict} == set(
        VERDICTS
    )


def test_one_discordant_task_against_none_is_unresolved_not_holds() -> None:
    """Finding 7: tot > topo 'held' on 1 vs 0 discordant tasks. The same task in every cell,
    or one task in one cell: nothing is significant."""
    assert pair({c: [7] for c in range(CELLS)}, {}).verdict == "unresolved"
    one = pair({3: [7]}, {})
    assert one.verdict == "unresolved" and one.cells_a == 0 and one.pooled_sign == 0
    # the same outcomes on every task, although the completion rates move across cells
    x = np.zeros((CELLS, TASKS))
    x[:, : TASKS // 2] = 1
    assert verdicts_of({"x": x, "y": x.copy()})[0].iloc[0].verdict == "tie"
    # equal completion in every cell on different tasks is no tie
    assert pair({c: [0] for c in range(CELLS)}, {c: [1] for c in range(CELLS)}).verdict == (
        "unresolved"
    )


def test_a_cell_against_a_pooled_ordering_keeps_it_from_holding() -> None:
    """x is better pooled (4 tasks in each of 9 cells), y significantly better in the tenth."""
    got = pair({c: range(4 * c, 4 * c + 4) for c in range(9)}, {9: range(36, 50)})
    assert got.pooled_sign == 1 and got.cells_b == 1 and got.cells_a == 0
    assert got.verdict == "depends"


def test_the_cell_intervals_are_corrected_for_the_number_of_cells() -> None:
    """8 to 0 in one cell: p = 0.008, significant alone, not over 10 cells (0.005); pooled
    over the cells (the same 8 tasks, 8 to 0) it is."""
    x = np.zeros((CELLS, TASKS))
    x[0, :8] = 1
    verdict, cells, _ = verdicts_of({"x": x, "y": np.zeros((CELLS, TASKS))})
    assert cells.iloc[0].p_value < ALPHA and cells.iloc[0].significant == 0
    assert verdict.iloc[0].cells_a == 0 and verdict.iloc[0].pooled_sign == 1
    _, alone, _ = verdicts_of({"x": x[:1], "y": np.zeros((1, TASKS))})
    assert alone.iloc[0].significant == 1  # one cell: no correction


def test_a_factor_that_reverses_an_ordering_is_named() -> None:
    """x beats y on 20 tasks where factor f is low and y beats x where it is high; g is
    balanced against f and moves nothing."""
    f = [0, -1, -1, 1, 1, -1, -1, 1, 1]
    g = [0, -1, 1, -1, 1, -1, 1, -1, 1]
    x, y = np.zeros((9, TASKS)), np.zeros((9, TASKS))
    for c, s in enumerate(f):
        if s == -1:
            x[c, :20] = 1
        elif s == 1:
            y[c, 20:40] = 1
    _, _, factors = verdicts_of({"x": x, "y": y}, {"f": f, "g": g})
    got = factors.set_index("factor")
    assert bool(got.loc["f"].reverses) and bool(got.loc["f"].moves)
    assert got.loc["f"].at_low > 0 > got.loc["f"].at_high
    assert not got.loc["g"].reverses and not got.loc["g"].moves
    # x ahead at both levels, by 10 tasks at the low level and 40 at the high: moved only
    x, y = np.zeros((9, TASKS)), np.zeros((9, TASKS))
    for c, level in enumerate(f):
        x[c, : 40 if level == 1 else 10] = 1
    _, _, factors = verdicts_of({"x": x, "y": y}, {"f": f, "g": g})
    moved = factors.set_index("factor").loc["f"]
    assert bool(moved.moves) and not bool(moved.reverses) and moved.at_low > 0


def test_envs_are_never_pooled_in_a_verdict() -> None:
    """x beats y on env a and y beats x on env b by as much: pooled they would tie."""
    x, y = np.zeros((4, TASKS)), np.zeros((4, TASKS))
    x[:, :20] = 1
    records = pd.concat(
        [records_of({"x": x, "y": y}, env="a"), records_of({"x": y, "y": x}, env="b")]
    )
    groups = groups_of(records, [f"c{c}" for c in range(4)], ["x", "y"], ["env", "complexity"])
    got = analyse(groups, ["x", "y"], {}, Settings(ALPHA, 200, 0))[0].set_index("env")
    assert got.loc["a"].verdict == "holds" and got.loc["a"].leader == "x"
    assert got.loc["b"].verdict == "holds" and got.loc["b"].leader == "y"


def test_verdict_of_reads_only_significance() -> None:
    assert verdict_of([1, 0, -1], 1, False) == "flips"
    assert verdict_of([0, 0], 1, False) == "holds"
    assert verdict_of([0, -1], 1, False) == "depends"
    assert verdict_of([0, 1], 0, False) == "depends"
    assert verdict_of([0, 0], 0, False) == "unresolved"
    assert verdict_of([0, 0], 0, True) == "tie"


# ---- real runs ----------------------------------------------------------------------------


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


def test_the_default_study_covers_every_family_with_50_tasks_and_every_required_factor() -> None:
    with initialize_config_dir(version_base="1.3", config_dir=str(CONFIGS)):
        cfg = compose("config", overrides=["experiment=sensitivity"])
    config = canonical(OmegaConf.to_container(cfg, resolve=True))
    assert config["n_tasks"] >= 50
    assert set(config["env"]) == {"report", "rag", "pipeline", "web_nav", "code_gen", "research"}
    keys = {f.key for f in design_of(config).factors}
    assert {
        "llm.skill_overrides.evaluator_noise", "llm.skill_overrides.judge_correlation",
        "llm.skill_overrides.p_trap", "llm.skill_overrides.p_miss_signal",
        "llm.skill_overrides.check_coverage", "llm.models.replanner.error_scale",
        "llm.skill_overrides.rollout_optimism", "faults.rate_scale", "planner.dfs.max_nodes",
        "planner.mcts.iterations", "planner.bfs.beam_width", "planner.tot.beam_width",
    } <= keys  # fmt: skip
    assert len(design_of(config).labels) <= 17  # the centre and 16 runs: the time budget


def test_a_cell_sets_planner_knobs_and_the_replanner_model() -> None:
    with initialize_config_dir(version_base="1.3", config_dir=str(CONFIGS)):
        cfg = compose(
            "config",
            overrides=["experiment=sensitivity", "planner=[dfs]", "env=[report]", "n_tasks=1",
                       "complexity=simple"],
        )  # fmt: skip
    prepared = prepare(cfg)
    design = design_of(canonical(prepared.container))
    for ctx, values in zip(prepared.contexts, design.values, strict=True):
        assert ctx.planners["dfs"].max_nodes == values["dfs_max_nodes"]  # type: ignore[attr-defined]
        assert ctx.models["replanner"].error_scale == values["replanner_error_scale"]
    assert "mcts_iterations" in design.left_out


def test_a_bad_factor_is_a_config_error() -> None:
    with initialize_config_dir(version_base="1.3", config_dir=str(CONFIGS)):
        cfg = compose("config", overrides=["experiment=sensitivity", "planner=[react]"])
    with open_dict(cfg):
        OmegaConf.update(cfg, "sensitivity.factors", {"p_trap": [0.1, 0.5]}, merge=False)
    with pytest.raises(ConfigError, match="study=sensitivity: sensitivity.factors.p_trap"):
        prepare(cfg)


def test_a_tiny_study_runs_end_to_end(tmp_path: Path) -> None:
    line = run_study(
        tmp_path,
        [
            "experiment=sensitivity",
            "planner=[react,plan_execute_replan,dfs]",
            "env=[report,rag]",
            "n_tasks=3",
            "complexity=[simple]",
        ],
        {
            "sensitivity.factors": {
                "p_trap": [0.0, 0.25, 0.9],
                "fault_rate_scale": [0, 1, 2],
                "dfs_max_nodes": {"key": "planner.dfs.max_nodes", "levels": [5, 40, 80]},
            },
            "sensitivity.n_boot": 200,
        },
    )
    csv = pd.read_csv(tmp_path / "sensitivity.csv")
    assert {"planner_a", "planner_b", "env", "complexity", "cells", "pooled_diff", "pooled_low",
            "pooled_high", "cells_a", "cells_b", "verdict", "factor"} <= set(csv)  # fmt: skip
    assert len(csv) == 3 * 2 and set(csv.verdict) <= set(VERDICTS)  # pairs x envs, not pooled
    assert (csv.cells == 1 + 4).all()
    counts = csv.verdict.value_counts()
    assert ", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS) in line
    pairs = pd.read_csv(tmp_path / "sensitivity_pairs.csv")
    assert len(pairs) == len(csv) * 5 and (pairs.n == 3).all()
    assert ((pairs.low <= pairs["diff"]) & (pairs["diff"] <= pairs.high)).all()
    factors = pd.read_csv(tmp_path / "sensitivity_factors.csv")
    assert set(factors.factor) == {"p_trap", "fault_rate_scale", "dfs_max_nodes"}
    text = (tmp_path / "sensitivity.md").read_text()
    for section in ("## Verdicts", "## By assumption", "## Design", "## report: simple"):
        assert section in text
    episodes = pd.read_json(tmp_path / "episodes.jsonl", lines=True)
    assert (episodes.failure_mode != "harness_error").all()
    assert episodes["cell"].nunique() == 5  # every cell's records kept
