"""Hydra callbacks: aggregate a multirun's jobs into its sweep dir.

Registered in ``configs/config.yaml`` under ``hydra.callbacks``. After the last job of a
``planarena -m ...`` sweep, :class:`AggregateSweep` merges every job's ``episodes.jsonl`` and
writes ``episodes.parquet``, ``summary.md/.csv/.tex`` and ``figures/`` into the sweep dir,
the same way a single job does (and as ``planarena-report SWEEP_DIR --parquet`` would).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from experiments.report import load_runs, render, resolve_seed, warn_duplicates


class AggregateSweep(Callback):
    """Merge all job records of a sweep into sweep-level tables and figures."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Runs once, after every job; a sweep without records only gets a warning, so a
        failed sweep still reports its own error rather than ours."""
        sweep_dir = Path(str(config.hydra.sweep.dir))
        if not any(sweep_dir.glob("*/episodes.jsonl")):
            print(
                f"WARNING: no */episodes.jsonl under {sweep_dir}; nothing to aggregate",
                file=sys.stderr,
            )
            return
        df = load_runs([sweep_dir])
        warn_duplicates(df)
        table = render(df, sweep_dir, seed=resolve_seed(df, None), parquet=True)
        print(f"\nSweep completion rate (95% Wilson interval) — {sweep_dir}\n{table}")
