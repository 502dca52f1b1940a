"""``planarena-report``: re-render tables and figures from existing episode records.

Nothing is rerun: the records (``episodes.jsonl``) of one run dir, of a sweep dir holding job
subdirs, or of several dirs merged, are read with :func:`experiments.records.load` and
written out as ``summary.md/.csv/.tex`` and ``figures/`` exactly as the runner writes them,
so a report on a run dir reproduces the runner's files byte for byte.

The bootstrap seed defaults to the records' own ``seed`` (the smallest one if several runs
with different seeds are merged), which is what the runner used; ``--seed`` overrides it.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from experiments.figures import write_figures
from experiments.metrics import swept_keys, with_swept_columns
from experiments.records import RecordsError, load, measured
from experiments.tables import completion_heading, format_completion_table, write_summaries

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


def load_runs(dirs: Sequence[str | Path]) -> pd.DataFrame:
    """Episodes of every dir, in argument order, then jobs in launch order.

    :func:`experiments.records.load` lists a sweep's job dirs lexicographically ("10" before
    "2"); rows are stably re-sorted by job number (``.hydra/hydra.yaml``), then job dir in
    natural order, so planners appear in the order the jobs ran, which fixes the row order of
    every table and figure.
    """
    if not dirs:
        raise ValueError("give at least one run or sweep dir")
    frames = []
    groups: dict[str, int] = {}
    for d in dirs:
        frame = load(d)
        # job dirs of one sweep given one by one (as the aggregation callback does) rank as
        # that sweep, so they come out in the same order as when the sweep dir is given
        path = Path(d)
        in_sweep = (path.parent / "multirun.yaml").is_file() and _job_number(path) < float("inf")
        frame["_arg"] = groups.setdefault(str(path.parent if in_sweep else path), len(groups))
        frames.append(frame)
    df = pd.concat(frames, ignore_index=True)
    keys = {r: (_job_number(Path(r)), _natural_key(r)) for r in df["run_dir"].unique()}
    ranks = {r: i for i, r in enumerate(sorted(keys, key=lambda r: keys[r]))}
    df["_rank"] = df["run_dir"].map(ranks)
    df = df.sort_values(["_arg", "_rank"], kind="stable").drop(columns=["_arg", "_rank"])
    return with_swept_columns(df.reset_index(drop=True))


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
    parquet: bool = False,
) -> str:
    """Write summaries and figures (and optionally the merged Parquet) into ``out_dir``.

    Returns the completion table as text. With ``parquet`` the merged episodes (minus the
    machine-specific absolute ``run_dir``, which becomes relative to ``out_dir``) go to
    ``episodes.parquet``; ``episodes.jsonl`` is never written here, so re-aggregating a
    sweep dir cannot count its episodes twice.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    order = list(planner_order) if planner_order else None
    if parquet:
        merged = df.copy()
        if "run_dir" in merged.columns:
            merged["run_dir"] = [
                Path(os.path.relpath(Path(r).resolve(), out_dir.resolve())).as_posix()
                for r in merged["run_dir"]
            ]
        merged.to_parquet(out_dir / "episodes.parquet", index=False)
    summary = write_summaries(df, out_dir, seed=seed, planner_order=order)
    write_figures(measured(df), out_dir, seed=seed, planner_order=order, summary=summary)
    return format_completion_table(summary)


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
    try:
        df = load_runs(args.dirs)
    except (FileNotFoundError, RecordsError) as exc:  # a missing or damaged file: one line
        parser.exit(2, f"planarena-report: {exc}\n")
    warn_duplicates(df)
    order = [p.strip() for p in args.planner_order.split(",")] if args.planner_order else None
    table = render(
        df, args.out, seed=resolve_seed(df, args.seed), planner_order=order, parquet=args.parquet
    )
    print(f"{completion_heading(df)} — {args.out}\n{table}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
