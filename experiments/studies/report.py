"""``planarena-report``: tables and figures again from records, a study's analysis included.

A run dir whose ``run.json`` names a study gets the study's own files written again from its
records (the same function the job ran at its end, so the files come out the same), and its
summary tables are the reference cell's, as the job wrote them. Anything else (several dirs,
a sweep dir, a plain run) is :func:`planarena.experiments.analysis.report.main`'s.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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


def render_study(run_dir: Path, config: dict[str, Any], out_dir: Path) -> str:
    """The study's files from the run's records alone; returns its printed summary."""
    records = measured(load_records(run_dir / EPISODES))
    name = str(config["study"])
    return get(name).render(records, config, out_dir, seed=int(config.get("seed", 0)))


def main(argv: Sequence[str] | None = None) -> int:
    """The command: a study's run dir, or anything the analysis report takes."""
    args = report.build_parser().parse_args(argv)
    config = study_config(args.dirs[0]) if len(args.dirs) == 1 else None
    if config is None:
        return report.main(argv)
    run_dir = args.dirs[0]
    out = args.out or run_dir
    reference = cells_of(config)[0].label
    if reference:  # a grid: the summary tables are its reference cell's, as the job wrote
        df = report.read_runs([run_dir], every_column=True).frame
        df = df[df["cell"] == reference].reset_index(drop=True)
        seed = report.resolve_seed(df, args.seed)
        order = args.planner_order.split(",") if args.planner_order else list(config["planner"])
        table = report.render(df, out, seed=seed, planner_order=order)
        print(f"{report.completion_heading(df)} — {out} (cell {reference})\n{table}")
    else:
        status = report.main(argv)
        if status:
            return status
    print("\n" + render_study(run_dir, config, out))
    return 0


def cli() -> None:
    """The console command: :func:`main`, ended without the interpreter's teardown."""
    from planarena.experiments.process import run_and_exit

    run_and_exit(main)


if __name__ == "__main__":
    sys.exit(main())
