"""The post-run phase in bounded memory: records copied to Parquet a chunk at a time, the
tables computed from the columns they read (repeated strings as categoricals), and every
output the same as from the whole records frame."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from planarena.experiments.analysis import tables
from planarena.experiments.analysis.cells import group_positions, iter_groups, task_codes
from planarena.experiments.analysis.reliability import _trace_fields
from planarena.experiments.records import store as records
from planarena.experiments.records.columns import CATEGORY_COLUMNS, EPISODE_COLUMNS
from planarena.experiments.records.store import as_categories, load_records, write_parquet

KEEP = (*EPISODE_COLUMNS, "detail")
CATEGORIES = (*CATEGORY_COLUMNS, "detail")


def record(i: int, **extra: Any) -> dict[str, Any]:
    """An episode record with every kind of column: strings repeated and unique, ints,
    floats, a bool, a null-only column (an unpriced model's cost) and one the tables skip."""
    rng = random.Random(i)
    success = rng.random() < 0.6
    return {
        "planner": ("react", "plan_execute", "bfs")[i % 3],
        "env": ("web", "report")[i % 2],
        "complexity": ("medium", "simple", "complex")[(i % 66 // 6) % 3],
        "task_id": f"t{(i * 7) % 11:03d}",  # first seen out of sorted order
        "seed": 0,
        "trial": (i // 66) % 2,
        "llm": "sim:strong",
        "faults": "default",
        "config_id": "abc",
        "success": success,
        "progress": 1.0 if success else rng.random(),
        "failure_mode": "none" if success else rng.choice(["dead_end", "harness_error"]),
        "tokens_prompt": rng.randrange(100, 900),
        "tokens_completion": rng.randrange(10, 90),
        "tokens_total": rng.randrange(110, 990),
        "tokens_planner": rng.randrange(0, 50),
        "llm_calls": rng.randrange(1, 9),
        "tool_calls": rng.randrange(1, 9),
        "retries": rng.randrange(0, 3),
        "fallbacks": 0,
        "replans": rng.randrange(0, 2),
        "faults_injected": rng.randrange(0, 2),
        "exposed_faults": rng.choice(["", "outage", "outage+stale"]),
        "latency_s": rng.lognormvariate(1.0, 0.5),
        "cost_usd": None,
        "detail": "" if success else "KeyError: x",
        "wall_s": rng.random(),
        **extra,
    }


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def whole(path: Path, tmp: Path) -> pd.DataFrame:
    """What the runner wrote before: the whole records frame, to Parquet, read back."""
    load_records(path).to_parquet(tmp / "whole.parquet", index=False)
    return pd.read_parquet(tmp / "whole.parquet")


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(records, "CHUNK_ROWS", 4)
    monkeypatch.setattr(records, "ROW_GROUP_ROWS", 8)


def test_records_parquet_written_in_chunks_equals_the_whole_frame(
    tmp_path: Path, small_chunks: None
) -> None:
    path = write_jsonl(tmp_path / "episodes.jsonl", [record(i) for i in range(23)])
    frame = write_parquet(path, tmp_path / "episodes.parquet", columns=KEEP, categories=CATEGORIES)
    written = pd.read_parquet(tmp_path / "episodes.parquet")
    expected = whole(path, tmp_path)
    pd.testing.assert_frame_equal(written, expected)  # columns, order, dtypes, values
    assert written.equals(expected)
    assert pq.ParquetFile(tmp_path / "episodes.parquet").num_row_groups == 3  # 8 + 8 + 7
    # the frame: the columns the tables read and detail, nothing else, as categoricals
    full = load_records(path)
    pd.testing.assert_frame_equal(
        frame, as_categories(full[[c for c in full.columns if c in KEEP]], CATEGORIES)
    )
    assert "wall_s" not in frame.columns and "config_id" not in frame.columns
    if int(pd.__version__.split(".")[0]) >= 3:
        assert isinstance(frame["planner"].dtype, pd.CategoricalDtype)
        assert list(frame["planner"].cat.categories) == ["bfs", "plan_execute", "react"]
        assert frame["task_id"].dtype == full["task_id"].dtype  # unique: kept as strings


def test_records_parquet_of_chunks_that_differ_is_the_whole_frames(
    tmp_path: Path, small_chunks: None
) -> None:
    rows = [record(i) for i in range(14)]
    rows[9]["note"] = "a key only a later record has"
    for r in rows[4:8]:
        r["cost_usd"] = 0.5  # a column null in the other chunks
    rows[12]["tokens_total"] = None  # an int column with a gap in the last chunk
    path = write_jsonl(tmp_path / "episodes.jsonl", rows)
    frame = write_parquet(path, tmp_path / "episodes.parquet", columns=KEEP, categories=CATEGORIES)
    expected = whole(path, tmp_path)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "episodes.parquet"), expected)
    full = load_records(path)
    pd.testing.assert_frame_equal(
        frame, as_categories(full[[c for c in full.columns if c in KEEP]], CATEGORIES)
    )


def test_records_parquet_of_one_chunk_no_records_and_a_torn_line(
    tmp_path: Path, small_chunks: None
) -> None:
    empty = write_jsonl(tmp_path / "episodes.jsonl", [])
    assert write_parquet(empty, tmp_path / "a.parquet").empty
    assert pd.read_parquet(tmp_path / "a.parquet").equals(whole(empty, tmp_path))
    path = tmp_path / "torn.jsonl"
    path.write_text("".join(json.dumps(record(i)) + "\n" for i in range(3)) + '{"planner": "re')
    frame = write_parquet(path, tmp_path / "b.parquet")
    assert len(frame) == 3
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "b.parquet"), whole(path, tmp_path))
    pd.testing.assert_frame_equal(frame, load_records(path))  # columns=None: all of them


def test_the_frame_alone_is_the_written_ones_and_nothing_is_written(
    tmp_path: Path, small_chunks: None
) -> None:
    """``write_parquet(path, None, ...)``, what planarena-report reads with: the same frame as
    with a file, no file; a large unused column is not in it."""
    rows = [record(i, blob="x" * 5000, nested={"a": [i, None]}) for i in range(23)]
    path = write_jsonl(tmp_path / "episodes.jsonl", rows)
    alone = write_parquet(path, None, columns=KEEP, categories=CATEGORIES)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["episodes.jsonl"]
    written = write_parquet(path, tmp_path / "a.parquet", columns=KEEP, categories=CATEGORIES)
    pd.testing.assert_frame_equal(alone, written)
    assert "blob" not in alone.columns and "nested" not in alone.columns
    rows[13]["cost_usd"] = 0.5  # a kept column no longer null in one chunk: read whole
    path = write_jsonl(tmp_path / "episodes.jsonl", rows)
    full = load_records(path)
    pd.testing.assert_frame_equal(
        write_parquet(path, None, columns=KEEP, categories=CATEGORIES),
        as_categories(full[[c for c in full.columns if c in KEEP]], CATEGORIES),
    )


def _merge_parts(
    tmp_path: Path, jobs: list[list[dict[str, Any]]]
) -> tuple[list[tuple[Path, dict[str, Any]]], pd.DataFrame]:
    """Parquet copies of each job's records with ``run_dir`` and a swept column to set, and
    what the whole frames concatenated with them set write (read back)."""
    parts: list[tuple[Path, dict[str, Any]]] = []
    wholes = []
    for j, rows in enumerate(jobs):
        path = write_jsonl(tmp_path / f"job{j}.jsonl", rows)
        write_parquet(path, tmp_path / f"job{j}.parquet", columns=KEEP)
        extra = {
            "run_dir": pd.Series([f"job{j}"] * len(rows)).array,
            "llm.skill": pd.Series(["weak", "strong"][j % 2] for _ in rows).array,
        }
        parts.append((tmp_path / f"job{j}.parquet", extra))
        wholes.append(load_records(path).assign(**{k: list(v) for k, v in extra.items()}))
    pd.concat(wholes, ignore_index=True).to_parquet(tmp_path / "whole.parquet", index=False)
    return parts, pd.read_parquet(tmp_path / "whole.parquet")


def test_merged_parquet_is_the_whole_frames_concat(tmp_path: Path, small_chunks: None) -> None:
    jobs = [[record(i + 100 * j, run_dir="absolute") for i in range(11 + j)] for j in range(3)]
    parts, expected = _merge_parts(tmp_path, jobs)
    assert records.merge_parquet(parts, tmp_path / "merged.parquet")
    merged = pd.read_parquet(tmp_path / "merged.parquet")
    pd.testing.assert_frame_equal(merged, expected)  # run_dir replaced in place, skill added
    assert list(merged.columns)[-1] == "llm.skill"
    assert set(merged["run_dir"]) == {"job0", "job1", "job2"}
    assert pq.ParquetFile(tmp_path / "merged.parquet").num_row_groups == 5  # 36 rows, 8 a group


def test_merged_parquet_of_parts_that_differ_is_refused(tmp_path: Path, small_chunks: None) -> None:
    """Types the whole frames' concat would unify: nothing written, the caller reads whole."""
    jobs = [[record(i) for i in range(9)], [record(i, note="only here") for i in range(9)]]
    parts, _ = _merge_parts(tmp_path, jobs)
    assert not records.merge_parquet(parts, tmp_path / "merged.parquet")
    jobs[1] = [{**record(i), "tokens_total": None} for i in range(9)]  # ints become floats
    parts, _ = _merge_parts(tmp_path, jobs)
    assert not records.merge_parquet(parts, tmp_path / "merged.parquet")
    assert not any(p.name.startswith((".merged", "merged")) for p in tmp_path.iterdir())


def sweep_records() -> list[dict[str, Any]]:
    """Records as a sweep's aggregate reads them: swept faults (with the faults=none
    baseline on the same tasks), a swept override (``llm.skill``, given a column of its own),
    trials, another seed, columns the tables do not read, an infrastructure_error."""
    rows = []
    for i in range(132):
        rows.append(record(i, overrides="faults=default", run_dir="d0"))
        other = record(i + 1000)  # other outcomes on the same task
        outcome = {k: other[k] for k in ("success", "failure_mode", "latency_s", "detail")}
        rows.append(record(i, **outcome, faults="none", exposed_faults="", run_dir="d1"))
        rows[-1]["overrides"] = "faults=none"
        rows.append(
            record(i, seed=1, overrides="faults=default seed=1 llm.skill=weak", run_dir="d2")
        )
    rows[5]["failure_mode"] = "infrastructure_error"
    return rows


def test_tables_from_the_columns_they_read_are_byte_identical(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    df = pd.DataFrame(sweep_records())
    compact = tables.tables_frame(df)
    assert "wall_s" not in compact.columns and "overrides" in compact.columns
    tables.write_summaries(df, tmp_path / "compact", seed=3)
    monkeypatch.setattr(tables, "tables_frame", lambda frame: frame)  # every column, as before
    tables.write_summaries(df, tmp_path / "whole", seed=3)
    text = (tmp_path / "whole" / "summary.md").read_text()
    assert "pass@k" in text and "llm.skill" in text
    assert "Needs the same tasks run with faults=none" not in text  # robustness computed
    for name in ("summary.csv", "summary.md", "summary.tex", "comparisons.csv"):
        assert (tmp_path / "compact" / name).read_bytes() == (
            tmp_path / "whole" / name
        ).read_bytes(), name


def test_finish_writes_what_the_whole_records_frame_gives(
    small_run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from planarena.experiments.run.runner import StudyWork, finish

    for d in ("batched", "parsed", "whole"):
        (tmp_path / d).mkdir()
        for name in ("episodes.jsonl", "traces.jsonl"):
            shutil.copy(small_run_dir / name, tmp_path / d / name)
    monkeypatch.setattr(records, "CHUNK_ROWS", 7)  # several chunks, a short last one
    monkeypatch.setattr(records, "ROW_GROUP_ROWS", 14)
    table, df = finish(tmp_path / "batched", 0, [], figures=False)
    # a study's job: its records parsed once, whole, and handed over
    parsed = load_records(tmp_path / "parsed" / "episodes.jsonl")
    analysed: list[pd.DataFrame] = []
    study = StudyWork(parsed, lambda frame: analysed.append(frame) or "analysed")
    table_p, df_p = finish(tmp_path / "parsed", 0, [], figures=False, study=study)
    assert table_p == table
    assert study.printed == "analysed" and len(analysed) == 1 and analysed[0] is parsed
    pd.testing.assert_frame_equal(df_p, df)
    # the reference: the whole frame, every column, to Parquet and to the tables
    full = load_records(tmp_path / "whole" / "episodes.jsonl")
    full.to_parquet(tmp_path / "whole" / "episodes.parquet", index=False)
    monkeypatch.setattr(tables, "tables_frame", lambda frame: frame)
    summary = tables.write_summaries(full, tmp_path / "whole", seed=0, planner_order=[])
    assert table == tables.format_completion_table(summary)
    for d in ("batched", "parsed"):
        for name in ("summary.csv", "summary.md", "summary.tex", "comparisons.csv"):
            written = (tmp_path / d / name).read_bytes()
            assert written == (tmp_path / "whole" / name).read_bytes(), (d, name)
        pd.testing.assert_frame_equal(
            pd.read_parquet(tmp_path / d / "episodes.parquet"),
            pd.read_parquet(tmp_path / "whole" / "episodes.parquet"),
        )
    # what the job reads after finish (and the figures get): the same values
    assert set(df.columns) == {c for c in full.columns if c in KEEP}
    for column in df.columns:
        assert df[column].astype(object).tolist() == full[column].astype(object).tolist()


def test_task_codes_and_group_positions_match_what_they_replace() -> None:
    rng = np.random.default_rng(5)
    n = 400
    frame = pd.DataFrame(
        {
            "seed": rng.integers(0, 12, n),  # 10 sorts before 2 as a string
            "task_id": [f"t{v}" for v in rng.integers(0, 30, n)],
            "planner": pd.Categorical(rng.choice(["b", "a", "c"], n)),
            "env": rng.choice(["y", "x"], n),
            "rate": rng.choice([1.5, 2.0, 10.25], n),
            "mixed": pd.Series(rng.choice([1, "1", "x", 2.0, True], n), dtype=object),
            "gaps": rng.choice([1.5, 2.0, np.nan], n),  # a missing key
        }
    )
    for keys in (
        ["seed"],
        ["seed", "task_id"],
        ["task_id", "env", "seed"],
        ["planner", "rate", "mixed"],
        ["gaps", "seed"],
    ):
        expected = pd.factorize(pd.MultiIndex.from_frame(frame[keys].astype(str)), sort=True)[0]
        assert np.array_equal(task_codes(frame, keys), expected), keys
    for by in (["planner"], ["env", "planner", "seed"]):
        got = group_positions(frame, by)
        want = list(iter_groups(frame, by))
        assert [k for k, _ in got] == [k for k, _ in want]
        for (_, at), (_, sub) in zip(got, want, strict=True):
            assert np.array_equal(at, sub.index.to_numpy())


def test_trace_fields_equal_the_parsed_line() -> None:
    tail = {
        "planner": "react",
        "task_id": "t1",
        "tool_calls": [{"args": {"planner": "x", "trial": 3}, "ok": False, "t1": 2.0}],
        "trial": 1,
    }
    for doc in (
        {"events": [{"planner": "nested", "trial": 9}], "grade": "1/2", **tail},
        {"events": [], **tail},
        {"planner": "react", "task_id": "t1", "tool_calls": []},  # no trial: an older trace
        {"trial": 2, "planner": "p", "task_id": "t", "tool_calls": []},  # keys not sorted
    ):
        line = (json.dumps(doc) + "\n").encode()  # in the dict's order: sorted but the last
        parsed = _trace_fields(line)
        assert all(
            parsed.get(k) == doc.get(k) for k in ("planner", "task_id", "tool_calls", "trial")
        )
    with pytest.raises(ValueError):
        _trace_fields(json.dumps({"events": [], **tail}).encode()[:-20])


def test_resampled_sums_equal_the_weighted_sums_bit_for_bit() -> None:
    from planarena.experiments.analysis.stats import resampled_sums, task_weights

    rng = np.random.default_rng(2)
    n = 3000  # several chunks of draws
    columns = [
        rng.integers(0, 5000, n).astype(np.float64),  # token sums: summed over the draws
        np.ones(n),  # one episode a task
        rng.integers(-1, 2, n).astype(np.float64),  # paired differences
        rng.integers(1, 4, n).astype(np.float64),  # episodes of tasks with trials
    ]
    for cols in (columns, [*columns, rng.random(n)]):  # a fraction: the matrix products
        got = list(resampled_sums(np.random.default_rng(9), cols, 1000))
        want = [[w @ x for x in cols] for w in task_weights(np.random.default_rng(9), n, 1000)]
        assert len(got) == len(want) > 1
        for g, w in zip(got, want, strict=True):
            for a, b in zip(g, w, strict=True):
                assert a.dtype == b.dtype and a.tobytes() == b.tobytes()  # -0.0 too
