"""``sim_vs_real``'s null profiles: is the fitted profile's agreement with the real run due to
the fit, or would an unfitted profile agree as well?

Every profile (the fitted one and each null) ran the same tasks with the same seeds, so each
statistic — Kendall tau-b of the planners by completion, tokens and LLM calls per episode, and
the failure-mode distance (the mean over planners of the total-variation distance between the
real and simulated failure-mode mixes) — is recomputed for every profile on the *same*
bootstrap resamples of the tasks, and the fitted profile's value minus a null's is read off
each resample: a paired interval. A statistic is evidence for the calibration only where the
fitted profile beats every null (tau higher, distance lower) with that paired interval clear
of 0 (:func:`evidence`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from planarena.experiments.analysis.stats import boot_rng, percentile_interval, task_weights
from planarena.experiments.studies.sim_vs_real_stats import (
    MEAN_ROW,
    _mode_counts,
    common_tasks,
    completion_gaps,
    failure_distance,
    kendall_tau_b,
    kendall_tau_b_rows,
    on_tasks,
    side_by_side,
    task_matrix,
    total_variation,
)

STATISTICS: Mapping[str, str] = {
    "completion": "τ_b by completion",
    "tokens": "τ_b by tokens per episode",
    "calls": "τ_b by LLM calls per episode",
    "distance": "failure-mode distance",
}
"""The statistics compared across profiles (short name to the label the page shows)."""

LOWER_IS_BETTER = frozenset({"distance"})
"""Statistics where the fitted profile beats a null by being lower (all others: higher)."""


@dataclass(frozen=True)
class ProfileComparison:
    """Every profile's statistics against the real run, and the tested profile's paired
    differences with every other."""

    tested: str
    """The profile under test (the fitted one, or the hold-out's)."""
    nulls: list[str]
    """The unfitted profiles it must beat."""
    others: list[str]
    """Profiles shown beside it that are not nulls (the fully fitted one in the hold-out)."""
    stats: pd.DataFrame
    """One row per profile x statistic: ``value`` with ``lo``/``hi`` (95 %), ``undefined``
    resamples, and for the distance ``chance_95``."""
    diffs: pd.DataFrame
    """One row per other profile x statistic: tested minus it (``diff``, ``lo``, ``hi``, paired
    over the same resamples), ``beats`` (the interval clear of 0 the right way), ``null``."""
    tasks: int
    planners: list[str]

    def evidence(self) -> dict[str, bool]:
        """Per statistic: whether the tested profile beats every null, each paired interval
        clear of 0 (False when there is no null)."""
        out = {}
        for name in STATISTICS:
            rows = self.diffs[(self.diffs["statistic"] == name) & self.diffs["null"]]
            out[name] = bool(len(rows)) and bool(rows["beats"].all())
        return out


MEASURES: Mapping[str, str] = {"completion": "success", "calls": "llm_calls"}


def compare_profiles(
    real: pd.DataFrame,
    sims: Mapping[str, pd.DataFrame],
    planners: Sequence[str],
    modes: Sequence[str],
    tokens: str,
    *,
    tested: str,
    nulls: Sequence[str],
    seed: int,
    n_boot: int,
    label: str = "held_out",
) -> ProfileComparison:
    """:class:`ProfileComparison` of ``sims`` (profile -> records) with ``real`` on the tasks
    every planner ran in every source. The resamples are :func:`tau_with_interval`'s for
    ``label`` (the same draws, so the tested profile's tau intervals are the ranking table's
    when the tasks are the same), shared by every profile and statistic."""
    sources = {"real": real, **sims}
    tasks = common_tasks(sources, planners)
    real = on_tasks(real, tasks)
    sims = {k: on_tasks(v, tasks) for k, v in sims.items()}
    columns = {"completion": "success", "tokens": tokens, "calls": "llm_calls"}
    weights = (
        np.concatenate(
            list(task_weights(boot_rng(seed, "sim_vs_real", "tau", label), len(tasks), n_boot))
        )
        if tasks
        else np.zeros((0, 0))
    )
    point: dict[tuple[str, str], float] = {}
    boot: dict[tuple[str, str], np.ndarray] = {}
    chance: dict[str, float] = {}
    for name, column in columns.items():
        if not tasks or len(planners) < 2:
            for prof in sims:
                point[(prof, name)], boot[(prof, name)] = math.nan, np.full(n_boot, np.nan)
            continue
        sr, nr = task_matrix(real, column, tasks, planners)
        with np.errstate(divide="ignore", invalid="ignore"):
            real_point, real_boot = sr.sum(0) / nr.sum(0), (weights @ sr) / (weights @ nr)
        for prof, df in sims.items():
            ss, ns = task_matrix(df, column, tasks, planners)
            with np.errstate(divide="ignore", invalid="ignore"):
                point[(prof, name)] = kendall_tau_b(real_point, ss.sum(0) / ns.sum(0))
                boot[(prof, name)] = kendall_tau_b_rows(real_boot, (weights @ ss) / (weights @ ns))
    if tasks and planners:
        real_counts = np.stack([_mode_counts(real, p, tasks, modes) for p in planners])
        for prof, df in sims.items():
            sim_counts = np.stack([_mode_counts(df, p, tasks, modes) for p in planners])
            point[(prof, "distance")] = float(
                total_variation(real_counts.sum(1), sim_counts.sum(1)).mean()
            )
            boot[(prof, "distance")] = total_variation(
                np.einsum("bt,ptm->bpm", weights, real_counts),
                np.einsum("bt,ptm->bpm", weights, sim_counts),
            ).mean(1)
            dist = failure_distance(
                {"real": real, "sim": df}, planners, modes, seed=seed, n_boot=n_boot
            ).set_index("planner")
            chance[prof] = float(dist.at[MEAN_ROW, "chance_95"])
    else:
        for prof in sims:
            point[(prof, "distance")], boot[(prof, "distance")] = math.nan, np.full(n_boot, np.nan)
    stat_rows: list[dict[str, Any]] = []
    for prof in sims:
        for name in STATISTICS:
            b = boot[(prof, name)]
            lo, hi = percentile_interval(b, 0.95)
            stat_rows.append(
                {
                    "profile": prof,
                    "statistic": name,
                    "value": point[(prof, name)],
                    "lo": lo,
                    "hi": hi,
                    "undefined": int(np.isnan(b).sum()),
                    "chance_95": chance.get(prof, math.nan) if name == "distance" else math.nan,
                }
            )
    diff_rows: list[dict[str, Any]] = []
    for other in sims:
        if other == tested:
            continue
        for name in STATISTICS:
            d = boot[(tested, name)] - boot[(other, name)]
            lo, hi = percentile_interval(d, 0.95)
            value = point[(tested, name)] - point[(other, name)]
            if math.isnan(value):
                beats, verdict = False, "undefined"
            elif name in LOWER_IS_BETTER:
                beats = hi < 0
                verdict = (
                    "tested better" if hi < 0 else "tested worse" if lo > 0 else "no difference"
                )
            else:
                beats = lo > 0
                verdict = (
                    "tested better" if lo > 0 else "tested worse" if hi < 0 else "no difference"
                )
            diff_rows.append(
                {
                    "profile": other,
                    "statistic": name,
                    "diff": value,
                    "lo": lo,
                    "hi": hi,
                    "beats": beats,
                    "verdict": verdict,
                    "null": other in nulls,
                }
            )
    return ProfileComparison(
        tested,
        [n for n in nulls if n in sims],
        [p for p in sims if p != tested and p not in nulls],
        pd.DataFrame(stat_rows),
        pd.DataFrame(
            diff_rows,
            columns=["profile", "statistic", "diff", "lo", "hi", "beats", "verdict", "null"],
        ),
        len(tasks),
        list(planners),
    )


# --------------------------------------------------------------------------- completion


def completion_by_planner(
    real: pd.DataFrame,
    sims: Mapping[str, pd.DataFrame],
    planners: Sequence[str],
    *,
    seed: int,
    n_boot: int,
) -> pd.DataFrame:
    """Per planner x profile: the real and simulated completion shares with their 95 %
    intervals (Wilson; a task bootstrap when a task ran more than once,
    :func:`side_by_side`) and sim minus real with its paired task-bootstrap interval
    (:func:`completion_gaps`), on the tasks every planner ran in every source."""
    tasks = common_tasks({"real": real, **sims}, planners)
    real = on_tasks(real, tasks)
    sims = {k: on_tasks(v, tasks) for k, v in sims.items()}
    table = side_by_side(
        {"real": real, **sims}, planners, [], "llm_calls", seed=seed, n_boot=n_boot
    )
    shares = table.set_index(["planner", "source"])
    rows = []
    for prof, df in sims.items():
        gaps, _ = completion_gaps(real, df, planners, seed=seed, n_boot=n_boot)
        gaps = gaps.set_index("planner")
        for p in planners:
            r, m = shares.loc[(p, "real")], shares.loc[(p, prof)]
            g = gaps.loc[p] if p in gaps.index else None
            rows.append(
                {
                    "planner": p,
                    "profile": prof,
                    "episodes": int(r["episodes"]),
                    "real": r["completion"],
                    "real_lo": r["completion_lo"],
                    "real_hi": r["completion_hi"],
                    "sim": m["completion"],
                    "sim_lo": m["completion_lo"],
                    "sim_hi": m["completion_hi"],
                    "diff": math.nan if g is None else g["gap"],
                    "diff_lo": math.nan if g is None else g["gap_lo"],
                    "diff_hi": math.nan if g is None else g["gap_hi"],
                }
            )
    return pd.DataFrame(rows)
