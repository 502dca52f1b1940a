"""planarena-report and the numbers behind it, checked against a reader's own recomputation.

A real small run is made once per session (shared with test_trace_view and test_notebook
through a fixed dir under pytest's basetemp, since each one costs a few seconds).
"""

from __future__ import annotations

import json
import math
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from planarena.experiments.analysis import report
from planarena.experiments.analysis.figures import FIGURE_NAMES, FIGURE_VARIANTS
from planarena.experiments.analysis.report import duplicate_episodes, load_runs, main, resolve_seed
from planarena.experiments.records import runs
from planarena.experiments.records.columns import EPISODE_COLUMNS
from planarena.experiments.records.store import load_records

BIN = Path(sys.executable).parent
OUTPUTS = ("summary.csv", "summary.md", "summary.tex")


@pytest.fixture(scope="module")
def run_dir(small_run_dir: Path) -> Path:
    return small_run_dir


def wilson(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Textbook Wilson score interval, written out independently of analysis.stats."""
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def test_summary_numbers_equal_a_readers_recomputation(run_dir: Path) -> None:
    raw = pd.read_json(run_dir / "episodes.jsonl", lines=True)
    summary = pd.read_csv(run_dir / "summary.csv", engine="python")  # Python float(): exact
    keys = ["planner", "env", "complexity"]
    assert len(summary) == raw.groupby(keys).ngroups  # one row per cell, nothing pooled
    for (planner, env, complexity), cell in raw.groupby(keys):
        row = summary[
            (summary["planner"] == planner)
            & (summary["env"] == env)
            & (summary["complexity"] == complexity)
        ]
        assert len(row) == 1
        row = row.iloc[0]
        n, wins = len(cell), int(cell["success"].sum())
        latency = cell["latency_s"].to_numpy()
        assert row["n"] == n and row["successes"] == wins
        assert row["completion_rate"] == wins / n
        low, high = wilson(wins, n)
        assert row["completion_ci_low"] == pytest.approx(low, abs=1e-12)
        assert row["completion_ci_high"] == pytest.approx(high, abs=1e-12)
        # exact equality: same numpy method on the same floats, CSV read back round-trip
        assert row["latency_p50"] == np.percentile(latency, 50, method="linear")
        assert row["latency_p99"] == np.percentile(latency, 99, method="linear")
        assert row["latency_p50_ci_low"] <= row["latency_p50"] <= row["latency_p50_ci_high"]
        assert row["tokens_mean"] == pytest.approx(cell["tokens_total"].mean(), rel=1e-12)


def test_report_reproduces_the_runs_files_byte_for_byte(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Same code path as the ``planarena-report`` script, in-process (saves ~1.5 s of imports);
    the run itself was written by another process, so this is a cross-process comparison."""
    assert (BIN / "planarena-report").exists()  # the console script is installed
    out = tmp_path / "report"
    assert main([str(run_dir), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| planner" in printed and "plan_execute_replan" in printed
    for name in OUTPUTS:
        assert (out / name).read_bytes() == (run_dir / name).read_bytes(), name
    figures = sorted(p.name for p in (run_dir / "figures").iterdir())
    assert len(figures) == 2 * len(FIGURE_NAMES) * len(FIGURE_VARIANTS)  # pdf + png each
    assert sorted(p.name for p in (out / "figures").iterdir()) == figures
    for name in figures:
        assert (out / "figures" / name).read_bytes() == (run_dir / "figures" / name).read_bytes()
    assert not (out / "episodes.jsonl").exists()  # a report never writes records


def wide_copy(run_dir: Path, dest: Path) -> Path:
    """A copy of a run dir whose records carry a large column no table reads (a long text,
    nested data): what a report must not hold for every episode."""
    shutil.copytree(run_dir / ".hydra", dest / ".hydra")
    shutil.copy(run_dir / "traces.jsonl", dest / "traces.jsonl")
    rows = [json.loads(line) for line in (run_dir / "episodes.jsonl").read_text().splitlines()]
    (dest / "episodes.jsonl").write_text(
        "".join(
            json.dumps({**r, "blob": "x" * 20_000, "nested": {"a": [1, None]}}) + "\n" for r in rows
        )
    )
    return dest


def test_report_holds_only_the_columns_it_reads_and_writes_the_same_files(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The frame the tables and figures get holds the records' columns they read (repeated
    strings as categoricals), not the large unused ones; every file is the run's own, and
    the merged Parquet holds every column, as the whole records frame gives it."""
    wide = wide_copy(run_dir, tmp_path / "wide")
    seen: list[pd.DataFrame] = []
    render = report.render

    def spy(df: pd.DataFrame, *args: Any, **kwargs: Any) -> str:
        seen.append(df)
        return render(df, *args, **kwargs)

    monkeypatch.setattr(report, "render", spy)
    out = tmp_path / "report"
    assert main([str(wide), "--out", str(out), "--parquet"]) == 0
    keys = json.loads((run_dir / "episodes.jsonl").read_text().splitlines()[0]).keys()
    (df,) = seen
    assert set(df.columns) == {c for c in EPISODE_COLUMNS if c in keys} | {"run_dir", "overrides"}
    if int(pd.__version__.split(".")[0]) >= 3:
        assert isinstance(df["planner"].dtype, pd.CategoricalDtype)
    names = [*OUTPUTS, *(f"figures/{p.name}" for p in (run_dir / "figures").iterdir())]
    for name in names:
        assert (out / name).read_bytes() == (run_dir / name).read_bytes(), name
    whole = load_records(wide / "episodes.jsonl")  # what was merged before: the whole frame
    whole["run_dir"] = "../wide"
    whole["overrides"] = df["overrides"].iloc[0]
    whole.to_parquet(tmp_path / "whole.parquet", index=False)
    merged = pd.read_parquet(out / "episodes.parquet")
    pd.testing.assert_frame_equal(merged, pd.read_parquet(tmp_path / "whole.parquet"))
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []  # copies removed


def test_merging_dirs_needs_out_and_pools_their_episodes(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main([str(run_dir), str(run_dir)])
    assert exc.value.code == 2
    assert "--out is required" in capsys.readouterr().err
    df = load_runs([run_dir, run_dir])
    assert len(df) == 2 * len(load_runs([run_dir]))
    # the same episodes twice pool one condition into a cell: reported, not hidden
    assert duplicate_episodes(df) == len(df) // 2
    assert duplicate_episodes(load_runs([run_dir])) == 0
    assert resolve_seed(df, None) == 0 and resolve_seed(df, 7) == 7


def test_a_dir_given_twice_is_one_line_not_a_traceback(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``planarena-report RUN RUN --out OUT`` warned that the cells pool the copies, then
    stopped with a ValueError traceback in the comparisons (duplicate episodes)."""
    with pytest.raises(SystemExit) as exc:
        main([str(run_dir), str(run_dir), "--out", str(tmp_path / "out")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "repeat the keys" in err and "give each run once" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out" / "summary.md").exists()


def test_a_run_with_no_episode_is_one_line_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An empty episodes.jsonl (a job killed before its first episode): it raised KeyError
    'episode table is missing required columns'."""
    (tmp_path / "episodes.jsonl").write_text("")
    with pytest.raises(SystemExit) as exc:
        main([str(tmp_path)])
    assert exc.value.code == 2
    assert "no episode recorded" in capsys.readouterr().err


def test_a_report_on_harness_errors_warns(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """planarena-report counted harness_error episodes as failures without a word (the
    runner exits 1 for them; a report of the same records said nothing)."""
    run = tmp_path / "run"
    shutil.copytree(run_dir / ".hydra", run / ".hydra")
    rows = [json.loads(x) for x in (run_dir / "episodes.jsonl").read_text().splitlines()]
    rows[0].update(success=False, failure_mode="harness_error", stop_reason="harness_error")
    (run / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main([str(run), "--out", str(tmp_path / "out")]) == 0
    assert "WARNING: 1 harness_error episode(s)" in capsys.readouterr().err
    assert "WARNING: 1 harness_error" in (tmp_path / "out" / "summary.md").read_text()


def test_missing_records_fail_loudly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([str(tmp_path)])
    assert exc.value.code == 2
    assert "no episodes.jsonl" in capsys.readouterr().err


def test_sweep_job_dirs_load_in_job_number_order(tmp_path: Path) -> None:
    for job, planner in ((10, "late"), (2, "early")):
        d = tmp_path / str(job)
        d.mkdir()
        record = {
            "planner": planner,
            "env": "report",
            "complexity": "simple",
            "task_id": "t",
            "seed": 0,
            "trial": 0,
        }
        (d / "episodes.jsonl").write_text(json.dumps(record) + "\n")
    df = load_runs([tmp_path])
    assert list(df["planner"]) == ["early", "late"]


def test_sweep_jobs_named_by_overrides_load_in_launch_order(tmp_path: Path) -> None:
    for num, planner in ((0, "react"), (1, "plan_execute")):
        d = tmp_path / f"planner={planner}"
        (d / ".hydra").mkdir(parents=True)
        (d / ".hydra" / "hydra.yaml").write_text(f"hydra:\n  job:\n    num: {num}\n")
        record = {"planner": planner, "env": "e", "complexity": "simple", "task_id": "t"}
        (d / "episodes.jsonl").write_text(json.dumps({**record, "seed": 0, "trial": 0}) + "\n")
    assert list(load_runs([tmp_path])["planner"]) == ["react", "plan_execute"]


def test_a_damaged_records_file_is_one_line_naming_file_and_line(
    tmp_path: Path, small_run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A record line that is not JSON, in the middle of the file, stops planarena-report with
    one line naming the file and the line, and exit status 2 (no traceback)."""
    from planarena.experiments.analysis.report import main

    lines = (small_run_dir / "episodes.jsonl").read_text().splitlines()
    damaged = tmp_path / "run"
    damaged.mkdir()
    (damaged / "episodes.jsonl").write_text("\n".join([*lines[:2], '{"broken', *lines[2:4]]) + "\n")
    with pytest.raises(SystemExit) as stop:
        main([str(damaged)])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "episodes.jsonl:3" in err and "Traceback" not in err


def test_an_unknown_planner_in_planner_order_is_one_line_naming_the_known_ones(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--planner-order react,foo``: a typo stops the report (exit 2, nothing written), the
    message naming the planners the records have, instead of being dropped silently."""
    out = tmp_path / "report"
    with pytest.raises(SystemExit) as stop:
        main([str(run_dir), "--planner-order", "react,foo", "--out", str(out)])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "no planner foo" in err and "(planners: react, plan_execute_replan, dfs, mcts)" in err
    assert not (out / "summary.md").exists()
    # every name known (a trailing comma is no name): the order is applied
    assert main([str(run_dir), "--planner-order", "dfs,react,", "--out", str(out)]) == 0
    md = (out / "summary.md").read_text(encoding="utf-8")
    assert md.index("| dfs ") < md.index("| react ")


def test_a_swept_key_a_run_does_not_override_is_the_value_that_run_used(tmp_path: Path) -> None:
    """A default run beside one made with ``n_tasks=4 llm.skill=weak``: the default run's
    ``config.n_tasks`` and ``llm.skill`` are its configured values (run.json, else
    .hydra/config.yaml), written as an override writes them, not blank."""
    import yaml

    def make(name: str, overrides: list[str], config: dict[str, Any], file: str) -> None:
        d = tmp_path / name
        (d / ".hydra").mkdir(parents=True)
        (d / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
        if file == "run.json":
            (d / "run.json").write_text(json.dumps({"config": config, "config_id": "x"}))
        else:
            (d / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
        record = {"planner": "react", "env": "report", "complexity": "simple", "task_id": "t"}
        (d / "episodes.jsonl").write_text(json.dumps({**record, "seed": 0, "trial": 0}) + "\n")

    make("a_default", [], {"n_tasks": 20, "llm": {"skill": "strong"}}, "run.json")
    make("b_swept", ["n_tasks=4", "llm.skill=weak"], {"n_tasks": 4}, "run.json")
    make("c_default", ["executor.parallel=true"], {"n_tasks": 7, "executor": {}}, "config.yaml")
    df = load_runs([tmp_path / "a_default", tmp_path / "b_swept", tmp_path / "c_default"])
    assert list(df["config.n_tasks"]) == ["20", "4", "7"]
    assert list(df["llm.skill"]) == ["strong", "weak", ""]  # c's files do not record it
    assert list(df["executor.parallel"]) == ["", "", "true"]  # no file of a or b has it
    # a notebook's experiments.load (summarize keeps the columns it finds): not blanks
    from planarena.experiments import load
    from planarena.experiments.records.runs import with_swept_columns

    loaded = load(str(tmp_path / "*_*"))
    assert list(loaded["config.n_tasks"]) == ["20", "4", "7"]
    assert list(with_swept_columns(loaded)["config.n_tasks"]) == ["20", "4", "7"]
    assert runs.run_config_value(tmp_path / "a_default", "llm") == "{skill:strong}"
    assert runs._override_text([True, None, 0.5]) == "[true,null,0.5]"
