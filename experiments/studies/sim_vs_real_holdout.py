"""``sim_vs_real``'s cross-planner hold-out: a profile fitted on some planners' episodes only
(ReAct and Reflexion by default) predicts the others (the planners that write plans or plan
steps), which the fit never saw.

Calibration replays every episode its run dir's ``episodes.jsonl`` lists (on the fit split's
tasks), so the fit is restricted to the chosen planners by giving it a copy of the real run
dir whose ``episodes.jsonl`` holds only their records: the saved config, the family files a
recording carries (``../families``) and the response cache are the real run's own. The
calibration itself is the existing API (``planarena.experiments.calibrate.calibrate.calibrate``,
what ``planarena-calibrate`` runs, with its defaults: 200 resamples, seed 0, the fit split).
It is named by the config (``sim_vs_real.calibrate``) and resolved when the fit runs, as
Hydra resolves a ``_target_``: the studies layer does not import the calibration layer
(``tests/test_layers.py``), which sits above it and imports this package's ``held_out``.
"""

from __future__ import annotations

import json
import shutil
import tarfile
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hydra.utils import get_method

CALIBRATE = "planarena.experiments.calibrate.calibrate.calibrate"
"""The calibration entry point the hold-out fits with (``sim_vs_real.calibrate``)."""
CACHE_ARCHIVE = "llm_cache.tar.xz"
"""A recording's packed response cache, beside its run dir (``experiments/run/recording.py``)."""
FAMILIES = "families"
"""A recording's copies of its envs' family files, beside its run dir (read by a replay)."""
EPISODES = "episodes.jsonl"


def filtered_run(real_run: Path, planners: Sequence[str], dest: Path) -> tuple[Path, list[str]]:
    """A copy of ``real_run`` under ``dest`` whose ``episodes.jsonl`` holds only the records
    of ``planners`` (the config as it is; a recording's family files linked beside it, where
    a replay reads them); returns the copy and the planners whose records it holds."""
    run = dest / real_run.name
    (run / ".hydra").mkdir(parents=True)
    for name in ("config.yaml", "overrides.yaml"):
        if (real_run / ".hydra" / name).is_file():
            shutil.copyfile(real_run / ".hydra" / name, run / ".hydra" / name)
    keep, seen = set(planners), set()
    with (real_run / EPISODES).open() as src, (run / EPISODES).open("w") as out:
        for line in src:
            if line.strip() and json.loads(line).get("planner") in keep:
                out.write(line)
                seen.add(json.loads(line)["planner"])
    families = real_run.parent / FAMILIES
    if families.is_dir():
        (dest / FAMILIES).symlink_to(families.resolve(), target_is_directory=True)
    return run, [p for p in planners if p in seen]


@contextmanager
def response_cache(real_run: Path) -> Iterator[Path | None]:
    """A recording's packed response cache unpacked into a temporary dir (None when the run
    has no packed cache beside it: a simulated run, or a real run whose config names its
    cache dir)."""
    archive = real_run.parent / CACHE_ARCHIVE
    if not archive.is_file():
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="planarena-cache-") as tmp:
        with tarfile.open(archive, mode="r:xz") as tar:
            tar.extractall(tmp, filter="data")  # plain files only, inside tmp
        yield Path(tmp)


def fit_on_planners(
    real_run: Path, planners: Sequence[str], calibrate: str | None = None
) -> dict[str, Any]:
    """Fit a profile on ``planners``' episodes of ``real_run`` (its fit split) with the
    calibration named by ``calibrate`` (default :data:`CALIBRATE`); returns what the study's
    block keeps: the profile's ``fields``, the ``planners`` whose episodes were given to the
    fit, how many ``episodes`` it replayed and the fields it left ``not_identified``."""
    fit = get_method(calibrate or CALIBRATE)
    with tempfile.TemporaryDirectory(prefix="planarena-holdout-") as tmp:
        run, seen = filtered_run(real_run, planners, Path(tmp))
        is_sim = _backend(real_run) == "sim"
        with response_cache(real_run) as cache:
            cal = fit([run], cache=None if is_sim else cache, split="fit")
    if cal.table.empty:
        raise ValueError(
            f"sim_vs_real.holdout: no LLM request of {', '.join(planners)} on the fit split"
        )
    values, kept = cal.profile("holdout")
    values.pop("name", None)
    return {
        "fields": values,
        "planners": seen,
        "episodes": int(cal.episodes),
        "not_identified": [k.split(":")[0] for k in kept],
    }


def _backend(real_run: Path) -> str:
    import yaml

    config = yaml.safe_load((real_run / ".hydra" / "config.yaml").read_text()) or {}
    return str((config.get("llm") or {}).get("backend", "sim"))
