"""The ``sim_vs_real`` study: the simulator with a fitted profile against a recorded real run.

``planarena experiment=sim_vs_real [sim_vs_real.real_run=DIR] [sim_vs_real.profile=FILE]``.

A simulated result is worth as much as its answer to "would a real model rank the planners the
same way?". This study replays a real-model run's episodes with the simulator playing a skill
profile fitted to that model (``planarena-calibrate``), and compares the two on the run's
held-out tasks (:func:`held_out`; calibration fits on the other half, so the simulator is never
scored on the tasks it was fitted to): per planner completion (Wilson 95 %), tokens and LLM
calls per episode (task-bootstrap 95 %) and failure-mode shares; the rank correlation of the
planners by completion (Kendall tau-b, with a paired task-bootstrap interval), and by tokens,
LLM calls and progress per episode (which still rank the planners when every planner completes
the same share, 0 % with a small model); per planner the
completion gap (paired, task bootstrap) and the failure modes whose shares differ most, each
mapped to the simulator mechanism it points to (:data:`sim_vs_real_stats.MECHANISMS`).

The job's planners, envs, complexities, tasks, seed, trials, faults and budgets are the real
run's, copied from its ``.hydra/config.yaml`` (:mod:`sim_vs_real_config`). The simulator runs
all of the real run's tasks (it is cheap); only the held-out ones enter the comparison, and tau
on the fitted half is printed beside it as the in-sample figure.

The job runs one cell per profile, on the same tasks with the same seeds: the fitted profile
first (the job's reference), then each unfitted null of ``sim_vs_real.nulls`` (``strong``,
``weak`` and a crude two-field profile by default), then, with ``sim_vs_real.holdout=planners``,
a profile fitted on the ReAct-family planners' episodes only (:mod:`sim_vs_real_holdout`). The
page compares each with the real run, and the fitted profile with each null paired over the
same task resamples (:mod:`sim_vs_real_nulls`): a ranking is evidence for the calibration only
where the fitted profile beats every null with the paired interval clear of 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
from planarena.experiments.studies.registry import Cell, Study, study
from planarena.experiments.studies.sim_vs_real_config import (
    FITTED,
    HOLDOUT,
    Settings,
    check_config,
    held_out,
)

__all__ = ["SimVsReal", "held_out", "profile_cells"]


def profile_cells(s: Settings) -> list[Cell]:
    """One cell per profile: the fitted one (no override: ``llm.skill`` is its file), each
    null, and the hold-out's profile (its fitted fields over ``strong``'s)."""
    cells = [Cell(FITTED, {"profile": FITTED})]
    cells += [Cell(n.name, {"profile": n.name}, n.cell_overrides()) for n in s.nulls]
    if s.holdout is not None:
        fitted = s.holdout_fitted
        if not fitted or not fitted.get("fields"):
            raise ValueError(
                "sim_vs_real.holdout=planners: no hold-out fit in the config; run it as "
                "planarena experiment=sim_vs_real (or call mirror_into on the config first)"
            )
        overrides = {"llm.skill": "strong"}
        overrides.update({f"llm.skill_overrides.{k}": v for k, v in fitted["fields"].items()})
        cells.append(Cell(HOLDOUT, {"profile": HOLDOUT}, overrides))
    return cells


@study("sim_vs_real")
class SimVsReal(Study):
    """The simulator with a fitted profile against a recorded real run, on held-out tasks."""

    def cells(self, config: Mapping[str, Any]) -> list[Cell]:
        s = Settings.of(config)
        check_config(config, s)
        return profile_cells(s)

    def render(
        self, records: pd.DataFrame, config: Mapping[str, Any], out_dir: Path, *, seed: int
    ) -> str:
        from planarena.experiments.studies.sim_vs_real_report import write_comparison

        s = Settings.of(config)
        check_config(config, s)
        return write_comparison(records, config, s, out_dir, seed=seed)
