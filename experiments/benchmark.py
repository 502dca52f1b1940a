"""Throughput and memory benchmark: ``python -m experiments.benchmark``.

Two measurements, printed as Markdown tables:

1. per planner and complexity, in-process: episodes/s of the simulator + planner + grader
   (default faults, strong skill), so a slow planner is visible on its own;
2. the whole ``planarena`` command at growing ``n_tasks`` (each in a fresh process): wall time,
   episodes/s and the child's peak resident memory, to show how both grow with the work.

Wall-clock numbers depend on the machine; run it on the machine you report.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import OmegaConf

from envs.faults import FaultConfig
from envs.report import ReportEnv
from experiments.episode import simulate
from planners.llm.profiles import SKILLS, ModelProfile

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
PLANNERS = ["react", "plan_execute", "plan_execute_replan", "tot", "bfs", "dfs", "mcts", "topo"]


def per_planner(n: int, seed: int) -> list[dict[str, object]]:
    env = ReportEnv()
    rules = FaultConfig(
        **OmegaConf.to_container(OmegaConf.load(CONFIGS / "faults" / "default.yaml"))
    ).rules
    models = {"default": ModelProfile(name="sim-large")}
    rows = []
    for name in PLANNERS:
        planner = instantiate(OmegaConf.load(CONFIGS / "planner" / f"{name}.yaml"))
        for complexity in ("simple", "medium", "complex"):
            tasks = env.generate(n, seed=seed, complexity=complexity)
            tokens = 0
            start = time.perf_counter()
            for task in tasks:
                record, _ = simulate(
                    name,
                    planner,
                    env,
                    task,
                    skill=SKILLS["strong"],
                    rules=rules,
                    models=models,
                    seed=seed,
                )
                tokens += record.tokens_total
            wall = time.perf_counter() - start
            rows.append(
                {
                    "planner": name,
                    "complexity": complexity,
                    "episodes": n,
                    "episodes_per_s": round(n / wall, 1),
                    "mean_tokens": round(tokens / n),
                }
            )
    return rows


def whole_command(sizes: list[int]) -> list[dict[str, object]]:
    rows = []
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [
                sys.executable,
                "-m",
                "experiments.runner",
                f"n_tasks={n}",
                f"hydra.run.dir={tmp}",
                "progress=false",
            ]
            start = time.perf_counter()
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - start
            if status != 0:
                raise RuntimeError(f"planarena n_tasks={n} failed with status {status}")
            episodes = len((Path(tmp) / "episodes.jsonl").read_text().splitlines())
        rows.append(
            {
                "n_tasks": n,
                "episodes": episodes,
                "wall_s": round(wall, 2),
                "episodes_per_s": round(episodes / wall, 1),
                "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
            }
        )
    return rows


def markdown(rows: list[dict[str, object]]) -> str:
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20, help="episodes per planner x complexity")
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="*",
        default=[5, 20, 80],
        help="n_tasks values for the whole-command runs",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"## In-process throughput ({args.n} episodes per cell, faults=default, strong)\n")
    print(markdown(per_planner(args.n, args.seed)))
    if args.sizes:
        print("\n## The whole `planarena` command (8 planners x 3 complexities x n_tasks)\n")
        print(markdown(whole_command(args.sizes)))


if __name__ == "__main__":
    main()
