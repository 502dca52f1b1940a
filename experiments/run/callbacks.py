"""Hydra callbacks: aggregate a multirun's jobs into its sweep dir.

Registered in ``configs/config.yaml`` under ``hydra.callbacks``. After the last job of a
``planarena -m ...`` sweep, :class:`AggregateSweep` merges the ``episodes.jsonl`` of every job
that finished and writes ``episodes.parquet``, ``summary.md/.csv/.tex`` and ``figures/`` into
the sweep dir, the same way a single job does (and as ``planarena-report SWEEP_DIR --parquet``
would when every job finished). A job that failed (its ``status.json`` says so, or it has none:
killed, or still running elsewhere) is left out and named; the sweep then exits non-zero.

Everything heavy is imported when the aggregate runs, not when Hydra builds the callback
(which it does for every single run too).
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig
from planarena.experiments.records import EPISODES, RUN_FILE, STATUS_FILE

UNCLEAN = ("harness_errors", "infrastructure_errors", "cost_cap")
"""Statuses of jobs whose records are valid but incomplete: aggregated, named, exit 1."""


def job_outcomes(sweep_dir: Path) -> tuple[list[Path], dict[Path, str]]:
    """Job dirs that finished (in natural order), and the others with why they did not."""
    from planarena.experiments.analysis.report import _natural_key

    finished: list[Path] = []
    failed: dict[Path, str] = {}
    seen: dict[str | None, Path] = {}
    dirs = {p.parent for p in sweep_dir.glob(f"*/{EPISODES}")}
    dirs |= {p.parent for p in sweep_dir.glob(f"*/{STATUS_FILE}")}
    for d in sorted(dirs, key=lambda p: _natural_key(p.name)):
        status_file = d / STATUS_FILE
        if not status_file.exists():
            failed[d] = "no status.json: killed, or still running"
            continue
        status = json.loads(status_file.read_text())
        if status.get("status") in ("ok", *UNCLEAN) and (d / EPISODES).exists():
            same = seen.get(config_id(d))
            if same is not None:  # e.g. seed=0 then seed=0,trials=1 (the default) extended
                print(
                    f"WARNING: job {d.name} has the configuration of job {same.name} "
                    "(the same config_id, so the same episodes): counted once",
                    file=sys.stderr,
                )
                continue
            seen.setdefault(config_id(d), d)
            finished.append(d)
            if status.get("status") in UNCLEAN:
                print(f"WARNING: {d.name}: {status.get('message')}", file=sys.stderr)
        else:
            failed[d] = str(status.get("message") or status.get("status"))
    return finished, failed


def config_id(job_dir: Path) -> str | None:
    """The fingerprint of the configuration a job dir's records were made by (run.json)."""
    try:
        return str(json.loads((job_dir / RUN_FILE).read_text())["config_id"])
    except (OSError, ValueError, KeyError):
        return str(job_dir)  # unknown: a job of its own


class AggregateSweep(Callback):
    """Merge the records of a sweep's finished jobs into sweep-level tables and figures."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Runs once, after every job. Exits non-zero (after aggregating the rest) when a job
        failed, recorded harness or infrastructure errors, or stopped at its cost cap."""
        if config.get("dry_run"):  # every job printed its estimate; nothing to aggregate
            return
        from planarena.experiments.studies.report import shared_study, write_study

        sweep_dir = Path(str(config.hydra.sweep.dir))
        finished, failed = job_outcomes(sweep_dir)
        for d, why in failed.items():
            print(f"WARNING: job {d.name} left out of the aggregate: {why}", file=sys.stderr)
        study = shared_study(finished) if finished and not failed else None
        if study is not None:  # a study's shards: its tables and analysis from them all
            print("\n" + write_study(finished, study, sweep_dir))
        elif finished:
            try:
                table = aggregate(finished, sweep_dir, figures=config.get("figures") is not False)
            except Exception:  # a bug of ours: shown, and the sweep must not exit 0 (Hydra
                traceback.print_exc()  # turns a callback's exception into a warning)
                print(f"planarena: the sweep aggregate of {sweep_dir} failed", file=sys.stderr)
                sys.exit(1)
            print(f"\nSweep — {sweep_dir}\n{table}")
        else:
            print(
                f"WARNING: no finished job under {sweep_dir}; nothing to aggregate", file=sys.stderr
            )
        harness = [d for d in finished if _status(d) in UNCLEAN]
        if failed or harness:
            names = ", ".join(d.name for d in [*failed, *harness])
            print(
                f"planarena: {len(failed) + len(harness)} job(s) did not end cleanly: {names}",
                file=sys.stderr,
            )
            sys.exit(1)


def _status(job_dir: Path) -> str:
    return str(json.loads((job_dir / STATUS_FILE).read_text()).get("status"))


def aggregate(jobs: list[Path], sweep_dir: Path, *, figures: bool = True) -> str:
    """The sweep's ``episodes.parquet``, ``summary.*`` and (with ``figures``) ``figures/`` from
    the records of ``jobs``; returns the completion table under a heading naming its interval
    (Wilson, or the task bootstrap when trials repeat). Reads them as ``planarena-report
    SWEEP_DIR --parquet`` does: the tables from the columns they read, the merged Parquet
    copied a row group at a time (not every column of every episode held at once)."""
    from planarena.experiments.analysis.report import (
        read_runs,
        render,
        resolve_seed,
        scratch_dir,
        warn_duplicates,
        write_episodes_parquet,
    )

    with scratch_dir(sweep_dir) as scratch:
        runs = read_runs(jobs, copies=Path(scratch))
        df = runs.frame
        warn_duplicates(df)
        write_episodes_parquet(runs, sweep_dir)
    seed = resolve_seed(df, None)
    from planarena.experiments.analysis.tables import (
        completion_heading,
        format_completion_table,
        write_summaries,
    )

    if not figures:  # tables only, as the jobs did
        table = format_completion_table(write_summaries(df, sweep_dir, seed=seed))
    else:
        table = render(df, sweep_dir, seed=seed)
    return f"{completion_heading(df)}\n{table}"
