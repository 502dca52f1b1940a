"""Where the recording stands: episodes, completions per planner (Wilson 95 % intervals) and
failure modes, from the runs ``record.sh`` left in WORK.

    python experiments/recordings/qwen2.5-coder-1.5b/status.py WORK

Each cell's largest finished run (``n_tasks=N`` ended with status 0, marked ``.done``) holds
its tasks 0 to N-1, so it alone is counted. Standard library only: it reads the records as
written, while the recording goes on.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

RUN = re.compile(r"^n(\d+)-(\w+)-(\w+)$")


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of k successes in n."""
    if n == 0:
        return math.nan, math.nan
    p = k / n
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    scale = 1 + z * z / n
    return (centre - half) / scale, (centre + half) / scale


def finished_runs(work: Path) -> dict[tuple[str, str], tuple[int, Path]]:
    """(complexity, env) -> (n_tasks, run dir) of each cell's largest finished run."""
    best: dict[tuple[str, str], tuple[int, Path]] = {}
    for run in (work / "runs").iterdir():
        m = RUN.match(run.name)
        if m is None or not (run / ".done").exists():
            continue
        n, cell = int(m.group(1)), (m.group(2), m.group(3))
        if n > best.get(cell, (0, run))[0]:
            best[cell] = (n, run)
    return best


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: status.py WORK", file=sys.stderr)
        return 2
    runs = finished_runs(Path(argv[0]))
    records = [
        json.loads(line)
        for _, run in runs.values()
        for line in (run / "episodes.jsonl").read_text().splitlines()
    ]
    print("| cell | tasks | episodes | completed |\n| --- | --- | --- | --- |")
    for (complexity, env), (n, _) in sorted(runs.items()):
        cell = [r for r in records if r["env"] == env and r["complexity"] == complexity]
        print(f"| {env} {complexity} | {n} | {len(cell)} | {sum(r['success'] for r in cell)} |")
    by_planner: dict[str, list[bool]] = defaultdict(list)
    for r in records:
        by_planner[r["planner"]].append(bool(r["success"]))
    print("\n| planner | completed | Wilson 95 % |\n| --- | --- | --- |")
    for planner, done in sorted(by_planner.items()):
        low, high = wilson(sum(done), len(done))
        print(f"| {planner} | {sum(done)} of {len(done)} | [{low:.2f}, {high:.2f}] |")
    modes = Counter(r.get("failure_mode") for r in records if not r["success"])
    print("\nfailure modes: " + ", ".join(f"{m} {k}" for m, k in modes.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
