"""``planner=auto`` judged out of distribution: leave one family out.

The shipped map is measured on the same six families ``auto`` is then run on. Here, for each
family in turn, the map is rebuilt from a decision-map run's records of the *other* families
with only features any new toolset has (the goal's entity count and declared dependencies,
the model profile; never ``tools``), and auto's choice on each held-out task is scored with the
outcome of the chosen planner on that task in that cell (every planner ran every task, and a
planner's episode does not depend on who chose it). Against it:

- the best fixed planner *in hindsight* on the held-out family (the most completion there: an
  optimistic comparator no rule could know in advance);
- the best fixed planner *on the training families* (the fair comparator: what one would
  have picked without a map).

Both as paired differences over the held-out (task, cell) units with a task bootstrap.
``python -m planarena.experiments.studies.auto_lofo RUN_DIR`` writes ``auto_lofo.csv`` and
``auto_lofo.md`` into the run dir of ``experiment=decision_map``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from planarena.experiments.analysis.stats import derive_seed
from planarena.experiments.studies.decision_map import (
    FEATURE_LADDER,
    auto_map,
    task_table,
    with_tasks,
)
from planarena.experiments.studies.decision_map_core import Settings

LADDER = FEATURE_LADDER
"""Features a toolset never seen has: no ``tools`` (the study's own ladder)."""


def _units(part: pd.DataFrame) -> pd.DataFrame:
    """(task x cell) by planner: success."""
    frame = part.assign(unit=part["task"] + "@" + part["cell"].astype(str))
    return frame.pivot_table(index="unit", columns="planner", values="success", aggfunc="mean")


def _boot_diff(
    a: np.ndarray, b: np.ndarray, tasks: np.ndarray, n_boot: int, seed: int
) -> tuple[float, float, float]:
    """Mean of a - b with a task-cluster bootstrap 95 % interval (points)."""
    diff = a - b
    codes, inverse = np.unique(tasks, return_inverse=True)
    sums = np.bincount(inverse, weights=diff, minlength=len(codes))
    counts = np.bincount(inverse, minlength=len(codes)).astype(float)
    rng = np.random.default_rng(seed)
    picks = rng.multinomial(len(codes), np.full(len(codes), 1 / len(codes)), size=n_boot)
    boot = (picks @ sums) / (picks @ counts)
    low, high = np.percentile(boot, [2.5, 97.5])
    return 100 * float(diff.mean()), 100 * float(low), 100 * float(high)


def choices(held: pd.DataFrame, amap: Mapping[str, Any], planners: Sequence[str]) -> pd.Series:
    """Auto's choice per held-out unit (task@cell) from a map built without its family."""
    from planarena.planners.auto import Features, map_of

    dmap = map_of(amap, "leave-one-family-out map")
    first = held.drop_duplicates(["task", "cell"])
    out = {}
    for row in first.itertuples():
        features = Features(
            items=int(row.items), deps=bool(row.deps), tools=-1, budget=None, model=str(row.skill)
        )
        out[f"{row.task}@{row.cell}"] = dmap.choose(features, list(planners))[0]
    return pd.Series(out)


def leave_one_family_out(
    data: pd.DataFrame,
    planners: Sequence[str],
    s: Settings,
    config: Mapping[str, Any],
    seed: int,
) -> pd.DataFrame:
    """One row per held-out family (grid cells only: no token budget)."""
    grid = data[(data["dm_kind"] == "grid") & data["planner"].isin(planners)]
    rows = []
    for env in sorted(grid["env"].astype(str).unique()):
        train, held = grid[grid["env"] != env], grid[grid["env"] == env]
        amap = auto_map(train, planners, s, config, ladder=LADDER)
        picked = choices(held, amap, planners)
        units = _units(held)
        units = units.loc[picked.index.intersection(units.index)]
        auto = np.array([units.at[u, picked[u]] for u in units.index], dtype=float)
        tasks = np.array([u.split("@", 1)[0] for u in units.index])
        hindsight = str(units.mean().idxmax())
        trained = str(_units(train).mean().idxmax())
        row: dict[str, Any] = {
            "held_out": env,
            "units": len(units),
            "auto": round(100 * float(auto.mean()), 1),
            "auto_picks": ", ".join(
                f"{p} {n}" for p, n in picked.loc[units.index].value_counts().items()
            ),
        }
        for label, name in (("hindsight", hindsight), ("trained", trained)):
            mean, low, high = _boot_diff(
                auto, units[name].to_numpy(float), tasks, s.n_boot,
                derive_seed(seed, "auto-lofo", env, label),
            )  # fmt: skip
            row |= {
                f"best_{label}": name,
                f"best_{label}_completion": round(100 * float(units[name].mean()), 1),
                f"diff_{label}": round(mean, 1),
                f"diff_{label}_low": round(low, 1),
                f"diff_{label}_high": round(high, 1),
            }
        rows.append(row)
    return pd.DataFrame(rows)


def markdown(table: pd.DataFrame) -> str:
    lines = [
        "# planner=auto, leave one family out",
        "",
        "The map rebuilt from the other five families with features any toolset has (goal "
        "entities, declared dependencies, model profile; not the tool count); completion in "
        "percent over the held-out family's (task, cell) units of the grid; auto minus a fixed "
        "planner in points with a 95 % task-bootstrap interval.",
        "",
        "| held out | units | auto | auto's picks | best fixed in hindsight | auto minus it "
        "| best fixed on the other five | auto minus it |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in table.itertuples():
        lines.append(
            f"| {r.held_out} | {r.units} | {r.auto:.1f} % | {r.auto_picks} "
            f"| {r.best_hindsight} {r.best_hindsight_completion:.1f} % "
            f"| {r.diff_hindsight:+.1f} "
            f"[{r.diff_hindsight_low:+.1f}, {r.diff_hindsight_high:+.1f}] "
            f"| {r.best_trained} {r.best_trained_completion:.1f} % "
            f"| {r.diff_trained:+.1f} [{r.diff_trained_low:+.1f}, {r.diff_trained_high:+.1f}] |"
        )
    return "\n".join(lines) + "\n"


def write(run_dir: Path) -> Path:
    """``auto_lofo.csv`` and ``auto_lofo.md`` from a decision-map run dir."""
    from planarena.experiments.records.store import load_records
    from planarena.experiments.studies.report import study_config

    config = study_config(run_dir)
    if config is None or config.get("study") != "decision_map":
        raise ValueError(f"{run_dir}: not a run of experiment=decision_map")
    s = Settings.of(config)
    planners = [p for p in (config.get("planner") or {}) if p not in s.meta]
    records = load_records(run_dir / "episodes.jsonl")
    data = with_tasks(records, task_table(config), s)
    table = leave_one_family_out(data, planners, s, config, int(config.get("seed", 0)))
    table.to_csv(run_dir / "auto_lofo.csv", index=False)
    out = run_dir / "auto_lofo.md"
    out.write_text(markdown(table), encoding="utf-8")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m planarena.experiments.studies.auto_lofo",
        description="planner=auto judged on a family its map never saw, for each family.",
    )
    parser.add_argument("run_dir", type=Path, help="a run dir of experiment=decision_map")
    args = parser.parse_args(argv)
    try:
        out = write(args.run_dir)
    except (OSError, ValueError) as exc:
        print(f"auto_lofo: {exc}", file=sys.stderr)
        return 2
    print(out.read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
