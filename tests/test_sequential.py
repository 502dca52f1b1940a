"""Sequential allocation (``sequential.stages``): a study's cells take their tasks in stages,
a settled cell takes no more, and every episode that runs is the one the full run records."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import CONFIGS
from hydra import compose, initialize_config_dir
from planarena.experiments.run.llm_factory import ConfigError
from planarena.experiments.run.runner import run, validate
from planarena.experiments.studies.registry import Cell, Study, study
from planarena.experiments.studies.sequential import Rule

# ---------------------------------------------------------------- the rule


def test_a_decisive_comparison_settles_and_a_close_one_does_not() -> None:
    rule = Rule(looks=2)
    assert rule.completion_settled([1.0] * 20)  # 20 wins of 20
    assert rule.completion_settled([-1.0] * 20)  # either sign
    assert not rule.completion_settled([1, 1, 1, -1, -1, 0, 0, 0, 0, 0])
    assert not rule.completion_settled([])


def test_a_tie_settles_only_once_its_bound_is_inside_the_margin() -> None:
    rule = Rule(looks=2, margin=0.05)
    assert not rule.completion_settled([0.0] * 20)  # no difference seen, but 20 tasks
    assert rule.completion_settled([0.0] * 200)  # bound on differing tasks about 2 %
    assert not Rule(looks=2, margin=0.0).completion_settled([0.0] * 200)


def test_more_looks_ask_for_more_evidence_at_each() -> None:
    d = [1.0] * 9 + [0.0] * 11  # 9 wins, no loss, of 20
    assert Rule(looks=1).completion_settled(d)
    assert not Rule(looks=50).completion_settled(d)
    assert Rule(looks=4).level == pytest.approx(0.05 / 4)


def test_a_threshold_is_what_the_interval_must_clear() -> None:
    rule = Rule(looks=1)
    assert rule.completion_settled([1.0] * 20, against=0.5)
    assert not rule.completion_settled([1.0] * 20, against=0.95)  # its low end is below
    assert rule.ratio_settled([0.7, 0.8, 0.75, 0.72, 0.78] * 4)
    assert not rule.ratio_settled([0.5, -0.5, 0.4, -0.45, 0.1, -0.05])
    assert not rule.ratio_settled([0.7, 0.8, 0.75, 0.72, 0.78] * 4, against=0.75)


# ---------------------------------------------------------------- the runner


@study("first_cell_settles_for_test")
class FirstCellSettles(Study):
    """Two cells of the same planners; the first is settled at every look."""

    def cells(self, config: Mapping[str, Any]) -> list[Cell]:
        del config
        return [Cell("a", {"k": "a"}), Cell("b", {"k": "b"}, {"faults.rate_scale": 2.0})]

    def settled_cells(
        self, records: pd.DataFrame, config: Mapping[str, Any], rule: Rule
    ) -> set[str]:
        del config, rule
        return {"a"} & set(records["cell"].astype(str))

    def render(
        self, records: pd.DataFrame, config: Mapping[str, Any], out_dir: Path, *, seed: int
    ) -> str:
        del config, out_dir, seed
        return f"{len(records)} records"


BASE = [
    "study=first_cell_settles_for_test",
    "planner=[react,plan_execute_replan]",
    "env=[report]",
    "complexity=[simple,medium]",
    "n_tasks=3",
    "progress=false",
    "figures=false",
]


def _compose(*extra: str) -> Any:
    with initialize_config_dir(version_base="1.3", config_dir=str(CONFIGS)):
        return compose("config", overrides=[*BASE, *extra])


def _records(path: Path) -> dict[tuple[Any, ...], dict[str, Any]]:
    out = {}
    for line in (path / "episodes.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        rec.pop("wall_s")
        out[(rec["cell"], rec["planner"], rec["task_id"], rec["trial"])] = rec
    return out


def test_a_settled_cell_stops_and_every_episode_is_the_full_runs(tmp_path: Path) -> None:
    run(_compose("sequential.stages=[1]", "workers=1"), tmp_path / "staged")
    run(_compose("workers=1"), tmp_path / "full")
    staged, full = _records(tmp_path / "staged"), _records(tmp_path / "full")
    index = {k: int(k[2].rsplit("-", 1)[1]) for k in full}
    assert {k for k in staged if k[0] == "a"} == {k for k in full if k[0] == "a" and index[k] < 1}
    assert {k for k in staged if k[0] == "b"} == {k for k in full if k[0] == "b"}
    assert all(staged[k] == full[k] for k in staged)  # config_id included: the same episode
    run(_compose("workers=1"), tmp_path / "staged")  # resumed without stages: completed
    assert _records(tmp_path / "staged") == full


def test_the_staged_records_do_not_depend_on_the_workers(tmp_path: Path) -> None:
    run(_compose("sequential.stages=[1,2]", "workers=1"), tmp_path / "one")
    run(_compose("sequential.stages=[1,2]", "workers=2"), tmp_path / "two")
    one = (tmp_path / "one" / "episodes.jsonl").read_text(encoding="utf-8").splitlines()
    two = (tmp_path / "two" / "episodes.jsonl").read_text(encoding="utf-8").splitlines()

    def strip(lines: list[str]) -> list[dict[str, Any]]:
        return [{k: v for k, v in json.loads(x).items() if k != "wall_s"} for x in lines]

    assert strip(one) == strip(two)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["study=null", "sequential.stages=[1]"], "only a study's cells"),
        (["sequential.stages=[2,1]"], "must increase"),
        (["sequential.stages=[3]"], "before n_tasks=3"),
        (["sequential.alpha=0"], "sequential.alpha"),
    ],
)
def test_a_bad_schedule_is_one_line_before_anything_runs(extra: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        validate(_compose(*extra))
    assert "\n" not in str(caught.value)


# ---------------------------------------------------------------- the replay on a full run


def _full_run(first: list[tuple[int, int]], rest: tuple[int, int], n: int = 40) -> pd.DataFrame:
    """One cell, one length bin, one family: planners a and b on ``n`` tasks; task i's
    (a, b) successes are ``first[i]`` for the first tasks and ``rest`` after."""
    rows = []
    for i in range(n):
        outcome = first[i] if i < len(first) else rest
        for planner, success in zip(("a", "b"), outcome, strict=True):
            rows.append(
                {
                    "cell": "c",
                    "planner": planner,
                    "env": "report",
                    "complexity": "simple",
                    "steps_bin": "3-4",
                    "task": f"report/t{i:04d}",
                    "position": i,
                    "success": float(success),
                    "cost_usd": 0.01,
                    "latency_s": 1.0,
                }
            )
    return pd.DataFrame(rows)


def test_the_replay_reads_only_each_looks_first_tasks() -> None:
    from planarena.experiments.studies.sequential_replay import replay

    rule = Rule(looks=2)
    # a wins each of the first 20 tasks, then b wins every later one: at 20 tasks the cell
    # is settled; read whole, it is a tie that no look settles
    decisive = _full_run([(1, 0)] * 20, (0, 1))
    stopped = replay(decisive, ["a", "b"], [10, 20], rule)
    assert stopped.to_dict("records") == [
        {"cell": "c", "stops_at": 10, "episodes": 20, "episodes_full": 80}
    ]
    close = _full_run([(1, 0), (0, 1)] * 10, (1, 0))  # 10 wins each in the first 20
    assert replay(close, ["a", "b"], [10, 20], rule)["stops_at"].tolist() == [40]


@study("render_fails_for_test")
class RenderFails(Study):
    """One cell; its analysis refuses the records as a study refuses a bad config."""

    def render(
        self, records: pd.DataFrame, config: Mapping[str, Any], out_dir: Path, *, seed: int
    ) -> str:
        del records, config, out_dir, seed
        raise ConfigError("render_fails_for_test.threshold: must be below 1")


def test_a_study_that_refuses_its_records_is_one_line_status_2_and_keeps_them(
    tmp_path: Path,
) -> None:
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict
    from planarena.experiments.run.runner import execute

    with initialize_config_dir(version_base="1.3", config_dir=str(CONFIGS)):
        overrides = [*BASE, "workers=1", "study=render_fails_for_test"]
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)  # as the command line's job has it
    with open_dict(cfg):
        del cfg["hydra"]
    try:
        code, message = execute(cfg, tmp_path, in_sweep=False)
    finally:
        HydraConfig.instance().cfg = None  # type: ignore[assignment]  # no other test sees it
    assert code == 2
    assert message == "planarena: render_fails_for_test.threshold: must be below 1"
    records = (tmp_path / "episodes.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(records) == 2 * 2 * 3  # planners x complexities x tasks: nothing lost
    assert (tmp_path / "summary.csv").is_file()  # the job's own tables were written first
