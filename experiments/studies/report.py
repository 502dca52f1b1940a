"""``planarena-report``: tables and figures again from records, a study's analysis included.

A run dir whose ``run.json`` names a study, or a sweep dir whose jobs are shards of one study,
gets the study's own files written again from its records (the same function the job ran at
its end, so the files come out the same), and its summary tables are the reference cell's, as
the job wrote them. Anything else is :func:`planarena.experiments.analysis.report.main`'s.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from planarena.experiments.analysis import report
from planarena.experiments.records import EPISODES, RUN_FILE, load_records, measured
from planarena.experiments.studies.registry import cells_of, get


def study_config(run_dir: Path) -> dict[str, Any] | None:
    """The run's configuration (from ``run.json``) when it names a study, else None."""
    path = run_dir / RUN_FILE
    if not path.is_file():
        return None
    try:
        config = json.loads(path.read_text(encoding="utf-8")).get("config") or {}
    except (OSError, json.JSONDecodeError):
        return None  # the analysis report says what is wrong with the dir
    return config if config.get("study") else None


SHARD_KEYS = ("shard", "shards")


def render_study(
    run_dir: Path, config: dict[str, Any], out_dir: Path, records: pd.DataFrame | None = None
) -> str:
    """The study's files from the run's records alone (``records``: the job's, already
    parsed by ``load_records``); returns its printed summary."""
    if records is None:
        return render_study_runs([run_dir], config, out_dir)
    return _render(measured(records), config, out_dir)


def render_study_runs(run_dirs: Sequence[Path], config: dict[str, Any], out_dir: Path) -> str:
    """The study's files from the records of several runs of it (a sweep's shards)."""
    frames = [measured(load_records(d / EPISODES)) for d in run_dirs]
    return _render(frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True),
                   config, out_dir)  # fmt: skip


def _render(records: pd.DataFrame, config: dict[str, Any], out_dir: Path) -> str:
    name = str(config["study"])
    return get(name).render(records, config, out_dir, seed=int(config.get("seed", 0)))


def shared_study(run_dirs: Sequence[Path]) -> dict[str, Any] | None:
    """The study config that ``run_dirs`` are shards of (their configs equal but for the
    shard keys), else None."""
    configs = [study_config(d) for d in run_dirs]
    if not configs or any(c is None for c in configs):
        return None
    bare = [{k: v for k, v in c.items() if k not in SHARD_KEYS} for c in configs if c]
    return bare[0] if all(b == bare[0] for b in bare) else None


def job_dirs(path: Path) -> list[Path]:
    """A sweep dir's job dirs (those with records), or the dir itself."""
    if (path / RUN_FILE).is_file():
        return [path]
    return sorted(p.parent for p in path.glob(f"*/{RUN_FILE}") if (p.parent / EPISODES).exists())


def main(argv: Sequence[str] | None = None) -> int:
    """The command: a study's run dir (or a sweep of its shards), or anything the analysis
    report takes."""
    args = report.build_parser().parse_args(argv)
    runs = job_dirs(args.dirs[0]) if len(args.dirs) == 1 else []
    config = shared_study(runs) if runs else None
    if config is None:
        return report.main(argv)
    out = args.out or args.dirs[0]
    order = [p for p in args.planner_order.split(",") if p] if args.planner_order else None
    print(write_study(runs, config, out, seed=args.seed, planner_order=order))
    return 0


def write_study(
    runs: Sequence[Path],
    config: dict[str, Any],
    out: Path,
    *,
    seed: int | None = None,
    planner_order: Sequence[str] | None = None,
) -> str:
    """A study's summary tables and figures (its reference cell's records, as the job wrote
    them) and its own files, from the records of ``runs``; returns what to print."""
    reference = cells_of(config)[0].label
    df = report.read_runs(list(runs), every_column=True).frame
    if reference:  # a grid: the job's own tables are its reference cell's
        df = df[df["cell"] == reference].reset_index(drop=True)
    order = list(planner_order or config["planner"])
    table = report.render(df, out, seed=report.resolve_seed(df, seed), planner_order=order)
    where = f" (cell {reference})" if reference else ""
    heading = f"{report.completion_heading(df)} — {out}{where}\n{table}"
    return heading + "\n\n" + render_study_runs(runs, config, out)


def cli() -> None:
    """The console command: :func:`main`, ended without the interpreter's teardown."""
    from planarena.experiments.process import run_and_exit

    run_and_exit(main)


if __name__ == "__main__":
    sys.exit(main())
