"""Length trends inside a family: tasks of every shipped family vary in length at a
complexity, and the trend statistic reads the family x length cell, so a change of families
along the length axis is not taken for a trend."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf
from planarena.experiments.studies.length_trend import family_cells, trend_row, within_slope

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "env"
ONE_QUESTION_KIND = {"rag"}  # its question kinds fix the hops per complexity (docs/envs.md)


def _records(gap: dict[str, dict[int, float]], n: int = 40, seed: int = 0) -> pd.DataFrame:
    """react and plan_execute_replan on ``n`` tasks per family x length; react succeeds with
    probability 0.5 + gap/2, the other with 0.5 - gap/2 (a mean gap of ``gap``)."""
    rng = np.random.default_rng(seed)
    rows = []
    for env, by_steps in gap.items():
        for steps, g in by_steps.items():
            for t in range(n):
                task = f"{env}/{steps}-{t}"
                for planner, p in (("react", 0.5 + g / 2), ("plan_execute_replan", 0.5 - g / 2)):
                    success = float(rng.random() < p)
                    rows.append(
                        {"env": env, "steps": steps, "task": task, "planner": planner,
                         "success": success}
                    )  # fmt: skip
    return pd.DataFrame(rows)


def _trend(gap: dict[str, dict[int, float]]) -> dict[str, float]:
    cells = family_cells(_records(gap), "react", "plan_execute_replan")
    return trend_row(cells, seed=1, n_boot=400, alpha=0.05)


def test_families_that_differ_but_are_flat_inside_show_no_trend() -> None:
    """Short tasks from a family where react leads by 40 points, long ones from a family
    where it trails: binned by length, react's lead falls; inside each family it is flat."""
    row = _trend({"a": {3: 0.4, 4: 0.4, 5: 0.4}, "b": {11: -0.3, 12: -0.3, 13: -0.3}})
    assert row["low_pp"] <= 0 <= row["high_pp"], row
    assert abs(row["slope_pp"]) < 3


def test_a_gap_that_grows_inside_every_family_is_found_with_its_size() -> None:
    row = _trend(
        {
            "a": {3: 0.0, 5: 0.1, 7: 0.2, 9: 0.3},  # +5 pp per step
            "b": {8: -0.2, 10: -0.1, 12: 0.0, 14: 0.1},  # +5 pp per step
        }
    )
    assert row["low_pp"] > 0, row
    assert 3 < row["slope_pp"] < 7
    assert row["families_same_sign"] == 2 and row["cells"] == 8


def test_a_family_with_one_length_carries_no_trend() -> None:
    row = _trend({"a": {3: 0.0, 5: 0.2}, "flat": {7: 0.9}})
    assert row["cells"] == 2 and row["families"] == 1
    only = _trend({"flat": {7: 0.9}, "other": {9: -0.5}})
    assert only["cells"] == 0 and np.isnan(only["slope_pp"])


def test_the_slope_weights_cells_by_their_tasks() -> None:
    cells = pd.DataFrame(
        {"env": ["a", "a", "a"], "steps": [1, 2, 3], "n_tasks": [1, 1, 1000],
         "diff": [0.0, 0.0, 1.0]}
    )  # fmt: skip
    # by hand: 2.994 / 4.991 = 0.600 per step; unweighted the three cells give 0.5
    assert within_slope(cells) == pytest.approx(0.600, abs=0.001)
    assert within_slope(cells.assign(n_tasks=1)) == pytest.approx(0.5)


@pytest.mark.parametrize(
    "config", sorted(p.stem for p in CONFIGS.glob("*.yaml") if p.stem not in ONE_QUESTION_KIND)
)
def test_every_shipped_family_varies_length_inside_a_complexity(config: str) -> None:
    """As shipped (configs/env): at least one complexity with two lengths, and at least
    three lengths over the family."""
    env = instantiate(OmegaConf.load(CONFIGS / f"{config}.yaml"))
    lengths: dict[str, set[int]] = {}
    for cx in ("simple", "medium", "complex"):
        tasks = env.generate(40, seed=0, complexity=cx)
        lengths[cx] = {len(env.oracle(t).remaining([])) for t in tasks}
    assert max(len(v) for v in lengths.values()) >= 2, lengths
    assert len(set().union(*lengths.values())) >= 3, lengths
    assert len(lengths["simple"]) >= 2 or config == "file", lengths  # stock_check: an example


def test_a_recording_made_before_the_setting_replays_on_its_own_tasks() -> None:
    """The shipped 0.5B recording's config has no ``branches``: its replay pins the ranges
    it was made at, which are the class's default (a saved config keeps its tasks)."""
    from hydra import compose, initialize_config_dir
    from planarena.envs.report.env import ReportEnv
    from planarena.experiments.run import recording

    rec = Path(__file__).parent / "data" / "recordings" / "qwen2.5-coder-0.5b"
    overrides = recording.recorded_overrides(rec)
    pins = recording.family_pins(rec, overrides)
    assert any(p.startswith("++env.report.branches=") for p in pins), pins
    kept = [o for o in overrides if not o.startswith("llm")]
    with initialize_config_dir(config_dir=str(CONFIGS.parent), version_base="1.3"):
        replayed = instantiate(compose(config_name="config", overrides=kept + pins).env.report)
        shipped = instantiate(compose(config_name="config", overrides=kept).env.report)
    for cx in ("simple", "medium", "complex"):
        goals = [t.goal for t in replayed.generate(10, seed=0, complexity=cx)]
        assert goals == [t.goal for t in ReportEnv().generate(10, seed=0, complexity=cx)]
    spread = [t.goal for t in shipped.generate(10, seed=0, complexity="simple")]
    assert spread != [t.goal for t in ReportEnv().generate(10, seed=0, complexity="simple")]
