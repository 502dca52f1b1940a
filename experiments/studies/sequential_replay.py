"""Replay the sequential rule on a full decision-map run: which cells would have stopped early.

``python -m planarena.experiments.studies.sequential_replay RUN_DIR --looks 10 20 --margin 0.1``

No shipped study stops a cell early (``Study.settled_cells`` keeps its default), so whether
``sequential.stages`` would pay for a study like the decision map is a question about records,
answered here on a run that has every task. At each look ``k`` (tasks per env x complexity) a
cell's records are cut to each env x complexity's first ``k`` tasks, in the order the env
makes them (the prefix a staged run would have run), and at every point of the cell (each
length bin and each env x complexity, as the map ranks them) the completion leader is
compared with its runner-up under :class:`~planarena.experiments.studies.sequential.Rule`:
separable, or a tie within ``margin``. A cell stops at the first look where every point is
settled. The last look is the full run: a cell still open there runs every task.

It measures how often the rule would have stopped on those records, not a property of the
planners: the table it prints holds for the run it reads.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from planarena.experiments.records.store import write_parquet
from planarena.experiments.studies.decision_map import task_table, with_tasks
from planarena.experiments.studies.decision_map_core import Settings, completion_order, per_task
from planarena.experiments.studies.sequential import Rule

POINTS = {"bins": ("steps_bin",), "families": ("env", "complexity")}
"""How the decision map cuts a cell into points: by length bin, and by env x complexity."""


def with_positions(records: pd.DataFrame, config: Mapping[str, Any]) -> pd.DataFrame:
    """The ranked planners' records with each task's length bin and its position among its
    env x complexity's tasks (0 for the first the env makes)."""
    s = Settings.of(config)
    planners = [p for p in config.get("planner") or {} if p not in s.meta]
    tasks = task_table(config)
    n = int(config.get("n_tasks", 0))
    tasks = tasks.assign(position=tasks.groupby("env", sort=False).cumcount() % max(n, 1))
    data = with_tasks(records, tasks, s)
    return data[data["planner"].isin(planners) & (data["dm_kind"] != "format")]


def point_settled(point: pd.DataFrame, planners: Sequence[str], rule: Rule) -> bool:
    """The point's completion leader against its runner-up, paired on common tasks, is
    settled under ``rule`` (leader: highest completion, then lowest cost per completed task,
    then name, as the map ranks)."""
    tasks = per_task(point, planners)
    if len(tasks) < 2:
        return True  # nothing to compare
    best, second = completion_order(tasks)[0][:2]
    difference = tasks[best]["success"].to_numpy(float) - tasks[second]["success"].to_numpy(float)
    return rule.completion_settled(difference)


def replay(
    data: pd.DataFrame,
    planners: Sequence[str],
    looks: Sequence[int],
    rule: Rule,
    points: Sequence[str] = tuple(POINTS),
) -> pd.DataFrame:
    """Per cell: the look it stops at (its tasks per env x complexity) and the episodes it
    runs, against the full run's; a cell's comparisons are those of its ``points`` (keys of
    :data:`POINTS`)."""
    rows = []
    last = int(data["position"].max()) + 1
    for cell, part in data.groupby("cell", sort=False):
        stop = last
        for k in looks:
            prefix = part[part["position"] < k]
            if all(
                point_settled(point, planners, rule)
                for kind in points
                for _, point in prefix.groupby(list(POINTS[kind]), observed=True)
            ):
                stop = k
                break
        rows.append(
            {
                "cell": cell,
                "stops_at": stop,
                "episodes": int((part["position"] < stop).sum()),
                "episodes_full": len(part),
            }
        )
    return pd.DataFrame(rows)


def summary_row(
    table: pd.DataFrame, looks: Sequence[int], rule: Rule, points: Sequence[str]
) -> str:
    """The Markdown row docs/sweeps.md prints for one replay."""
    early = table[table["stops_at"].isin(looks)]
    counts = early["stops_at"].value_counts()
    at = ", ".join(f"{counts[k]} at {k} tasks" for k in looks if k in counts)
    share = table["episodes"].sum() / table["episodes_full"].sum()
    return (
        f"| {' and '.join(points)}; looks at {', '.join(map(str, looks))}, margin "
        f"{rule.margin:g}, alpha {rule.alpha:g} "
        f"| {len(early)} of {len(table)}{' (' + at + ')' if at else ''} | {100 * share:.1f} % |"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a full decision-map run's directory")
    parser.add_argument("--looks", type=int, nargs="+", required=True, help="tasks per look")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--margin", type=float, default=0.05)
    parser.add_argument(
        "--points",
        nargs="+",
        choices=list(POINTS),
        default=list(POINTS),
        help="which points of a cell must settle (default: both, as the map ranks them)",
    )
    args = parser.parse_args(argv)
    try:
        config = json.loads((args.run_dir / "run.json").read_text(encoding="utf-8"))["config"]
    except (OSError, ValueError, KeyError) as exc:
        print(f"sequential_replay: {args.run_dir}/run.json: {exc}", file=sys.stderr)
        return 2
    if config.get("study") != "decision_map":
        print(f"sequential_replay: {args.run_dir} is not a decision-map run", file=sys.stderr)
        return 2
    n = int(config.get("n_tasks", 0))
    if sorted(set(args.looks)) != list(args.looks) or args.looks[-1] >= n:
        print(
            f"sequential_replay: --looks must increase and stay below n_tasks={n}", file=sys.stderr
        )
        return 2
    rule = Rule(len(args.looks), args.alpha, args.margin)
    columns = ["cell", "planner", "env", "complexity", "task_id", "trial", "success"]
    records = write_parquet(
        args.run_dir / "episodes.jsonl",
        None,
        columns=[*columns, "cost_usd", "latency_s", "dm_kind"],
    )
    s = Settings.of(config)
    planners = [p for p in config.get("planner") or {} if p not in s.meta]
    table = replay(with_positions(records, config), planners, args.looks, rule, args.points)
    print(table.to_markdown(index=False))
    print()
    print("| rule | cells settled early | episodes |")
    print("| --- | --- | --- |")
    print(summary_row(table, args.looks, rule, args.points))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
