"""``planarena-report``: re-render tables and figures from existing episode records.

Nothing is rerun: the records (``episodes.jsonl``) of one run dir, of a sweep dir holding job
subdirs, or of several dirs merged, are read as :func:`planarena.experiments.records.runs.load`
reads them and written out as ``summary.md/.csv/.tex`` and ``figures/`` exactly as the runner writes
them, so a report on a run dir reproduces the runner's files byte for byte. Like the runner, it
holds only the records' columns the tables and figures read (a chunk of records is parsed at a
time); the merged ``episodes.parquet`` (``--parquet``, and a sweep's aggregate) is copied from the
records a row group at a time.

The bootstrap seed defaults to the records' own ``seed`` (the smallest one if several runs
with different seeds are merged), which is what the runner used; ``--seed`` overrides it.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from collections.abc import Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from planarena.experiments.analysis.cells import swept_keys
from planarena.experiments.analysis.report_html import write_merged_report_html
from planarena.experiments.analysis.tables import (
    completion_heading,
    format_completion_table,
    write_summaries,
)
from planarena.experiments.records.columns import CATEGORY_COLUMNS, EPISODE_COLUMNS
from planarena.experiments.records.runs import (
    override_column,
    parse_overrides,
    with_run_defaults,
    with_swept_columns,
)
from planarena.experiments.records.schema import RecordsError, measured
from planarena.experiments.records.store import (
    concat_records,
    merge_parquet,
    read_run,
    record_files,
    run_overrides,
)

EPISODE_KEYS: tuple[str, ...] = ("planner", "env", "complexity", "task_id", "seed", "trial")
"""Columns that identify an episode within one run; repeats across runs are reported."""


def _natural_key(text: str) -> list[tuple[int, int | str]]:
    """Sort '2' before '10' so sweep job dirs keep their job-number order."""
    return [(0, int(t)) if t.isdigit() else (1, t) for t in re.split(r"(\d+)", text) if t]


def _job_number(run_dir: Path) -> float:
    """A sweep job's ``hydra.job.num`` from its ``.hydra/hydra.yaml`` (sweep job dirs are
    named by their overrides, so their names do not give the launch order); inf if absent."""
    hydra_yaml = run_dir / ".hydra" / "hydra.yaml"
    if not hydra_yaml.is_file():
        return float("inf")
    import yaml

    try:
        num = (yaml.safe_load(hydra_yaml.read_text(encoding="utf-8")) or {})["hydra"]["job"]["num"]
    except (KeyError, TypeError, yaml.YAMLError):
        return float("inf")
    return float(num) if isinstance(num, int) else float("inf")


def report_columns(overrides: Iterable[str | None]) -> list[str]:
    """The record columns a report reads: those the tables and figures read
    (:data:`~planarena.experiments.records.columns.EPISODE_COLUMNS`) and those the runs'
    ``overrides`` name (:func:`~planarena.experiments.analysis.cells.table_columns` keeps them,
    :func:`with_swept_columns` and :func:`duplicate_episodes` look at them). Every other column is
    left unparsed."""
    wanted = list(EPISODE_COLUMNS)
    for text in overrides:
        for key in parse_overrides(text):
            wanted += [key, override_column(key)]
    return list(dict.fromkeys(wanted))


@dataclass
class Runs:
    """The episodes of a report's dirs as it reads them, and how to copy them whole.

    ``frame`` holds the columns the report reads; ``added`` names its columns that are not
    records' (``run_dir``, ``overrides``, the swept ones); ``copies`` are the Parquet copies of
    the records files with their row counts, in ``frame``'s row order (empty unless asked)."""

    dirs: list[Path]
    frame: pd.DataFrame
    added: list[str] = field(default_factory=list)
    copies: list[tuple[Path, int]] = field(default_factory=list)


def read_runs(
    dirs: Sequence[str | Path], *, every_column: bool = False, copies: Path | None = None
) -> Runs:
    """Episodes of every dir, in argument order, then jobs in launch order.

    :func:`planarena.experiments.records.store.record_files` lists a sweep's job dirs
    lexicographically ("10" before "2"); rows are stably re-sorted by job number
    (``.hydra/hydra.yaml``), then job dir in natural order, so planners appear in the order the jobs
    ran, which fixes the row order of every table and figure. Only :func:`report_columns` are kept
    (repeated strings as categoricals) unless ``every_column``; with ``copies`` (a dir) each records
    file is also copied whole to Parquet there in the same pass, for :func:`write_episodes_parquet`.
    """
    if not dirs:
        raise ValueError("give at least one run or sweep dir")
    listed = [(Path(d), record_files(d)) for d in dirs]
    columns = None
    categories: tuple[str, ...] = ()
    if not every_column:
        columns = report_columns(run_overrides(f.parent) for _, files in listed for f in files)
        categories = CATEGORY_COLUMNS
    frames = []
    groups: dict[str, int] = {}
    paths: list[Path] = []
    for path, files in listed:
        parts = []
        for f in files:
            copy = None if copies is None else copies / f"{len(paths)}.parquet"
            part = read_run(f, columns=columns, categories=categories, copy=copy)
            part["_part"] = len(paths)
            paths.append(copy or f)
            parts.append(part)
        frame = concat_records(parts, categories)
        # job dirs of one sweep given one by one (as the aggregation callback does) rank as
        # that sweep, so they come out in the same order as when the sweep dir is given
        in_sweep = (path.parent / "multirun.yaml").is_file() and _job_number(path) < float("inf")
        frame["_arg"] = groups.setdefault(str(path.parent if in_sweep else path), len(groups))
        frames.append(frame)
    df = concat_records(frames, categories)
    keys = {r: (_job_number(Path(r)), _natural_key(r)) for r in df["run_dir"].unique()}
    ranks = {r: i for i, r in enumerate(sorted(keys, key=lambda r: keys[r]))}
    df["_rank"] = df["run_dir"].map(ranks)
    df = df.sort_values(["_arg", "_rank"], kind="stable")
    part = df["_part"].to_numpy()
    counts = pd.Series(part).value_counts(sort=False)
    # a file's rows stay together (the sort keys are its dir's): the copies in the rows'
    # order; a file without records goes last (its empty copy makes the merge read whole)
    order = [int(i) for i in pd.unique(part)]
    order += [i for i in range(len(paths)) if i not in set(order)]
    df = df.drop(columns=["_arg", "_rank", "_part"]).reset_index(drop=True)
    before = set(df.columns)
    df = with_run_defaults(with_swept_columns(df), before)
    added = ["run_dir", *(["overrides"] if "overrides" in before else [])]
    added += [c for c in df.columns if c not in before]
    kept = [(paths[i], int(counts.get(i, 0))) for i in order] if copies is not None else []
    return Runs([Path(d) for d in dirs], df, added, kept)


def load_runs(dirs: Sequence[str | Path], *, every_column: bool = False) -> pd.DataFrame:
    """The episodes a report reads (:func:`read_runs`), in its row order."""
    return read_runs(dirs, every_column=every_column).frame


def _relative_run_dir(run_dir: str, out_dir: Path) -> str:
    """``run_dir`` relative to ``out_dir`` (the absolute one is machine-specific)."""
    return Path(os.path.relpath(Path(run_dir).resolve(), out_dir.resolve())).as_posix()


def write_episodes_parquet(runs: Runs, out_dir: Path) -> None:
    """The merged ``episodes.parquet``: every record column of every episode, ``run_dir``
    relative to ``out_dir``, the overrides and swept columns, rows in the report's order.

    Copied from the records files' Parquet copies (:func:`read_runs` with ``copies``) a chunk
    at a time, the added columns taken from the report's frame (one file's ``run_dir`` is one
    value); runs whose columns or types differ are read whole instead (their concat unifies
    the types), as every run was before."""
    out_dir = Path(out_dir)
    dest = out_dir / "episodes.parquet"
    if runs.copies:
        frame = runs.frame
        parts: list[tuple[Path, dict[str, Any]]] = []
        at = 0
        for copy, n in runs.copies:
            rows = frame.iloc[at : at + n]
            run_dir = _relative_run_dir(rows["run_dir"].iloc[0], out_dir) if n else ""
            extra = {"run_dir": pd.Series([run_dir] * n).array}  # the dtype a list got before
            extra |= {c: rows[c].array for c in runs.added if c != "run_dir"}
            parts.append((copy, extra))
            at += n
        if merge_parquet(parts, dest):
            return
    merged = read_runs(runs.dirs, every_column=True).frame
    relative = {r: _relative_run_dir(r, out_dir) for r in pd.unique(merged["run_dir"])}
    merged["run_dir"] = [relative[r] for r in merged["run_dir"]]
    merged.to_parquet(dest, index=False)


def resolve_seed(df: pd.DataFrame, seed: int | None) -> int:
    """Explicit seed, else the records' seed (the smallest when several are merged)."""
    if seed is not None:
        return int(seed)
    if "seed" in df.columns and df["seed"].notna().any():
        return int(df["seed"].min())
    return 0


def duplicate_episodes(df: pd.DataFrame) -> int:
    """Episodes whose identifying keys (and swept config values) repeat, e.g. a run merged
    twice: their cells would pool copies, so we warn. Swept values (seed, faults, llm,
    overrides) are group keys of every table, so a sweep over them is not a duplicate."""
    keys = [k for k in EPISODE_KEYS if k in df.columns]
    keys += [k for k in swept_keys(df) if k not in keys]
    return int(df.duplicated(keys).sum()) if keys else 0


def render(
    df: pd.DataFrame,
    out_dir: Path,
    *,
    seed: int,
    planner_order: Sequence[str] | None = None,
) -> str:
    """Write summaries, figures and ``report.html`` (the page over them and every episode's
    trace) into ``out_dir``; returns the completion table as text.

    ``episodes.jsonl`` is never written here, so re-aggregating a sweep dir cannot count its
    episodes twice (the merged records go to ``episodes.parquet``:
    :func:`write_episodes_parquet`).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    order = list(planner_order) if planner_order else None
    summary = write_summaries(df, out_dir, seed=seed, planner_order=order)
    from planarena.experiments.analysis.figures import write_figures  # matplotlib: when drawn

    write_figures(measured(df), out_dir, seed=seed, planner_order=order, summary=summary)
    if "run_dir" in df.columns and len(df):  # the page beside them: every run's records
        write_merged_report_html([Path(d) for d in pd.unique(df["run_dir"])], out_dir)
    return format_completion_table(summary)


def scratch_dir(out_dir: Path) -> tempfile.TemporaryDirectory[str]:
    """A dir in ``out_dir`` for the records' Parquet copies, removed on exit: beside the merged
    file they become, not in a /tmp that may be held in memory."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return tempfile.TemporaryDirectory(prefix=".planarena-copies-", dir=out_dir)


def known_planners(df: pd.DataFrame) -> list[str]:
    """The records' planners in order of first appearance."""
    return list(map(str, pd.unique(df["planner"]))) if "planner" in df.columns else []


def unknown_planners(order: Sequence[str] | None, df: pd.DataFrame) -> list[str]:
    """The names of ``order`` (``--planner-order``) that no record's planner has: a typo
    would otherwise be dropped silently and the table keep its default order."""
    known = set(known_planners(df))
    return [p for p in dict.fromkeys(order or ()) if p not in known]


def repeated_runs(df: pd.DataFrame) -> str:
    """Why the records cannot be tabulated together, "" when they can: episodes whose
    identifying keys and swept config values repeat (a dir given twice, or two runs of one
    configuration) would pool copies into a cell and make the pairing of planners on a task
    ambiguous; the report used to warn, then stop with a traceback in the comparisons."""
    keys = [k for k in EPISODE_KEYS if k in df.columns]
    keys += [k for k in swept_keys(df) if k not in keys]
    if not keys:
        return ""
    repeated = df.duplicated(keys, keep=False)
    dups = int(df.duplicated(keys).sum())
    if not dups:
        return ""
    dirs = ", ".join(map(str, pd.unique(df.loc[repeated, "run_dir"]))) if "run_dir" in df else ""
    return (
        f"{dups} episode(s) repeat the keys {list(EPISODE_KEYS)} and swept config values of "
        f"another (in {dirs}): a dir given twice, or runs of the same configuration; give each "
        "run once (the tables would pool the copies)"
    )


def warn_duplicates(df: pd.DataFrame) -> None:
    """Say loudly when merged records pool conditions into one table cell."""
    dups = duplicate_episodes(df)
    if dups:
        print(
            f"WARNING: {dups} episode(s) repeat the keys {list(EPISODE_KEYS)} and swept config "
            "values of another run (a dir given twice, or runs differing in a config value "
            "no override names); their table cells pool them. Compare runs by run_dir in a "
            "notebook instead.",
            file=sys.stderr,
        )


def build_parser() -> argparse.ArgumentParser:
    """The ``planarena-report`` command line."""
    parser = argparse.ArgumentParser(
        prog="planarena-report",
        description="Re-render summary.md/.csv/.tex and figures/ from existing episode records "
        "(a run dir, a sweep dir with job subdirs, or several dirs merged).",
    )
    parser.add_argument("dirs", nargs="+", type=Path, metavar="DIR")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output dir (default: the DIR itself; required when several DIRs are given)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="bootstrap seed (default: the records' seed, as the runner used)",
    )
    parser.add_argument(
        "--planner-order",
        default=None,
        help="comma-separated planner order (default: order of first appearance)",
    )
    parser.add_argument(
        "--parquet",
        action="store_true",
        help="also write the merged episodes.parquet into OUT",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; returns the exit status (0 on success)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.out is None:
        if len(args.dirs) > 1:
            parser.error("--out is required when several DIRs are given")
        args.out = args.dirs[0]
    order = [p.strip() for p in args.planner_order.split(",")] if args.planner_order else None
    order = [p for p in order if p] if order else None
    with scratch_dir(args.out) if args.parquet else nullcontext() as scratch:
        try:
            runs = read_runs(args.dirs, copies=Path(scratch) if scratch else None)
        except (FileNotFoundError, RecordsError) as exc:  # a missing or damaged file: one line
            parser.exit(2, f"planarena-report: {exc}\n")
        df = runs.frame
        if df.empty:  # an empty episodes.jsonl (a job killed before its first episode)
            names = ", ".join(map(str, args.dirs))
            parser.exit(2, f"planarena-report: no episode recorded under {names}\n")
        repeated = repeated_runs(df)
        if repeated:
            parser.exit(2, f"planarena-report: {repeated}\n")
        unknown = unknown_planners(order, df)
        if unknown:
            known = ", ".join(known_planners(df)) or "none"
            parser.exit(
                2,
                f"planarena-report: --planner-order: no planner {', '.join(unknown)} in the "
                f"records (planners: {known})\n",
            )
        if args.parquet:
            write_episodes_parquet(runs, args.out)
    table = render(df, args.out, seed=resolve_seed(df, args.seed), planner_order=order)
    harness = int((df["failure_mode"] == "harness_error").sum()) if "failure_mode" in df else 0
    if harness:  # the runner exits 1 for them; a report must not hide them in a rate
        print(
            f"WARNING: {harness} harness_error episode(s) (bugs of planarena, not the agent's "
            "failures) are counted as failures in these tables; see summary.md",
            file=sys.stderr,
        )
    print(f"{completion_heading(df)} — {args.out}\n{table}")
    return 0


def cli() -> None:
    """The console command: :func:`main`, ended without the interpreter's teardown."""
    from planarena.experiments.process import run_and_exit

    run_and_exit(main)


if __name__ == "__main__":
    raise SystemExit(main())
