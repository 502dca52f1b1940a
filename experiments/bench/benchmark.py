"""Throughput and memory benchmark: ``python -m planarena.experiments.bench.benchmark``.

Printed as Markdown tables:

1. the default ``planarena`` job (``--sizes``, default 20 = the default run), each in a fresh
   process and with each ``--workers`` value (default ``1`` and ``auto``): wall time,
   episodes/s, CPU seconds, the peak resident memory of the largest process and the peak
   of all the job's processes together (PSS);
2. ``planarena planner=react env=report complexity=simple n_tasks=N`` for N in
   ``--react-sizes`` (default 1k, 10k, 100k episodes): end-to-end episodes/s and peak memory,
   to show whether memory stays flat in the number of episodes;
3. with ``--n N``, per planner and complexity, in-process: episodes/s of the simulator +
   planner + grader (default faults, strong skill), so a slow planner is visible on its own;
4. with ``--instructions``, the CPU instructions an episode costs (valgrind's callgrind),
   for the default job's mix and for ReAct: a count that does not drift with the machine's
   speed, to compare two versions of the code exactly.

Wall-clock numbers depend on the machine; run it on the machine you report.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import OmegaConf
from planarena.configs import default_choices
from planarena.envs.faults import FaultConfig
from planarena.envs.report.env import ReportEnv
from planarena.experiments.run.episode import simulate
from planarena.planners.llm.profiles import SKILLS, ModelProfile

from .timing import timed

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
PLANNERS = default_choices("planner")  # the default planner set, as config.yaml defines it


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


PSS_EVERY_S = 0.5
"""How often the job's PSS is sampled: reading ``smaps_rollup`` walks a process's page
tables under its memory lock, and at 50 ms it slowed a job by a third."""


def _tree(pid: int) -> list[int]:
    """``pid`` and its live descendants (from /proc; empty when not on Linux)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            children = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        todo += [int(c) for c in children]
    return out


def _pss_mb(pids: list[int]) -> float:
    """Proportional set size of ``pids`` together: pages the processes share (forked
    workers) are split between them rather than counted once per process."""
    total = 0
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
                    break
        except OSError:
            continue
    return total / 1024


def command(*overrides: str) -> dict[str, float]:
    """One ``planarena`` job in a fresh process: wall seconds, episodes written, CPU seconds
    of the whole process tree, the peak resident memory of its largest process
    (``ru_maxrss`` from ``wait4``) and the peak of all its processes together (their PSS,
    sampled every :data:`PSS_EVERY_S` from /proc: worker processes count), and its exit
    status."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable,
            "-m",
            "planarena.experiments.run.runner",
            f"hydra.run.dir={tmp}",
            "progress=false",
            *overrides,
        ]
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        together = 0.0
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            together = max(together, _pss_mb(_tree(proc.pid)))
            time.sleep(PSS_EVERY_S)
        wall = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) not in (0, 1):  # 1: harness errors (recorded)
            raise RuntimeError(f"planarena {' '.join(overrides)} failed with status {status}")
        with (Path(tmp) / "episodes.jsonl").open("rb") as fh:
            episodes = sum(1 for _ in fh)
    return {
        "episodes": episodes,
        "wall_s": round(wall, 2),
        "episodes_per_s": round(episodes / wall, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "episodes_per_cpu_s": round(episodes / max(usage.ru_utime + usage.ru_stime, 1e-9), 1),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "peak_pss_all_mb": round(together, 1),
    }


def whole_command(sizes: list[int], workers: list[str]) -> list[dict[str, object]]:
    """The default job (every planner, env and complexity) at growing ``n_tasks``."""
    return [
        {"n_tasks": n, "workers": w, **command(f"n_tasks={n}", f"workers={w}")}
        for n in sizes
        for w in workers
    ]


def studies(names: Sequence[str]) -> list[dict[str, object]]:
    """``planarena experiment=NAME`` at its defaults (``workers=auto``), analysis included:
    what a study costs on this machine, as episodes per CPU-second."""
    return [{"study": name, **command(f"experiment={name}")} for name in names]


def react_scaling(sizes: list[int], workers: list[str]) -> list[dict[str, object]]:
    """``planarena planner=react env=report complexity=simple n_tasks=N``: end-to-end
    episodes/s and peak memory at growing N (one job per size; one env, so N episodes)."""
    return [
        {
            "n_tasks": n,
            "workers": w,
            **command(
                "planner=react", "env=report", "complexity=simple", f"n_tasks={n}", f"workers={w}"
            ),
        }
        for n in sizes
        for w in workers
    ]


INSTRUCTION_JOBS = {
    "full job's mix (preset=full: every planner, env and complexity)": (("preset=full",), (1, 3)),
    "planner=react env=report complexity=simple": (
        ("planner=react", "env=report", "complexity=simple"),
        (100, 400),
    ),
}
"""What ``--instructions`` measures: overrides, and the two ``n_tasks`` whose difference is
counted (so start-up, tables and the tokenizer's load cancel out)."""


def _instructions(overrides: Sequence[str]) -> tuple[int, int]:
    """(instructions, episodes) of one ``planarena`` job under callgrind (one process:
    ``workers=1``, no figures; valgrind follows no child). String hashing is seeded
    (``PYTHONHASHSEED=0``): with a random seed, sets and dicts of strings iterate in another
    order each run. Two runs of one job (react, ``n_tasks=1``, 8.55 G instructions) differed
    by 2.8 M with two seeds and by 1.6 M with the seed fixed: what is left varies with the
    clock (times written into records) and the memory layout, not the code."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "valgrind.log"
        cmd = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={tmp}/callgrind.out",
            f"--log-file={log}",
            sys.executable,
            "-m",
            "planarena.experiments.run.runner",
            f"hydra.run.dir={tmp}/run",
            "progress=false",
            "workers=1",
            "figures=false",
            *overrides,
        ]
        env = {**os.environ, "PYTHONHASHSEED": "0"}  # str hashes: the same instructions
        subprocess.run(
            cmd, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
        )
        found = re.search(r"Collected : (\d+)", log.read_text())
        if found is None:
            raise RuntimeError(f"valgrind printed no instruction count for {' '.join(overrides)}")
        with (Path(tmp) / "run" / "episodes.jsonl").open("rb") as fh:
            return int(found.group(1)), sum(1 for _ in fh)


def instructions_per_episode() -> list[dict[str, object]]:
    """Instructions an episode costs, by difference of two job sizes run side by side."""
    from concurrent.futures import ThreadPoolExecutor

    rows = []
    for name, (overrides, (small, large)) in INSTRUCTION_JOBS.items():
        with ThreadPoolExecutor(2) as pool:  # each job is one process: both cores
            (i_a, n_a), (i_b, n_b) = pool.map(
                _instructions, [(*overrides, f"n_tasks={n}") for n in (small, large)]
            )
        rows.append(
            {
                "job": name,
                "episodes counted": n_b - n_a,
                "M instructions / episode": round((i_b - i_a) / (n_b - n_a) / 1e6, 2),
            }
        )
    return rows


def instructions_per_planner(planners: Sequence[str]) -> Iterator[dict[str, object]]:
    """Each planner's instructions per episode on the default envs and complexities (the
    difference of ``n_tasks=1`` and ``3``, as :func:`instructions_per_episode`), yielded as
    each is counted: the whole set takes most of an hour, and a stopped run keeps its rows."""
    from concurrent.futures import ThreadPoolExecutor

    for planner in planners:
        with ThreadPoolExecutor(2) as pool:
            (i_a, n_a), (i_b, n_b) = pool.map(
                _instructions, [(f"planner={planner}", f"n_tasks={n}") for n in (1, 3)]
            )
        yield {
            "planner": planner,
            "episodes counted": n_b - n_a,
            "M instructions / episode": round((i_b - i_a) / (n_b - n_a) / 1e6, 2),
        }


STARTUP_JOB = ("planner=react", "env=report", "complexity=simple", "n_tasks=10")
"""The small job whose start-up :func:`startup` measures (default figures on)."""


def startup(repeats: int = 3) -> list[dict[str, object]]:
    """Median wall and CPU seconds of what a user waits for before any episode matters:
    ``planarena --help``, a 10-episode job from scratch, and the same command again with
    nothing left to do."""
    runner = [sys.executable, "-m", "planarena.experiments.run.runner", "progress=false"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        fresh = [timed([*runner, *STARTUP_JOB, f"hydra.run.dir={tmp}/run{i}"])
                 for i in range(repeats)]  # fmt: skip
        again = [timed([*runner, *STARTUP_JOB, f"hydra.run.dir={tmp}/run0"])
                 for _ in range(repeats)]  # fmt: skip
    helped = [timed([sys.executable, "-m", "planarena.experiments.run.runner", "--help"])
              for _ in range(repeats)]  # fmt: skip
    for what, times in (
        ("`planarena --help`", helped),
        (f"`planarena {' '.join(STARTUP_JOB)}` (10 episodes, figures)", fresh),
        ("the same command again (nothing to do)", again),
    ):
        rows.append(
            {
                "command": what,
                "wall s (median)": round(statistics.median(t[0] for t in times), 2),
                "CPU s (median)": round(statistics.median(t[1] for t in times), 2),
            }
        )
    return rows


def markdown(rows: list[dict[str, object]]) -> str:
    return "\n".join(markdown_lines(rows))


def markdown_lines(rows: Iterable[dict[str, object]]) -> Iterator[str]:
    """A Markdown table a line at a time: the header with the first row, then each row as
    it comes (so a long measurement prints what it has)."""
    keys: list[str] = []
    for row in rows:
        if not keys:
            keys = list(row)
            yield "| " + " | ".join(keys) + " |"
            yield "|" + "---|" * len(keys)
        yield "| " + " | ".join(str(row[k]) for k in keys) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--n", type=int, default=0, help="in-process episodes per planner x complexity (0: skip)"
    )
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="*",
        default=[20],
        help="n_tasks values for the default job (20 is the default run)",
    )
    parser.add_argument(
        "--react-sizes",
        type=int,
        nargs="*",
        default=[1000, 10000, 100000],
        help="n_tasks values for planner=react complexity=simple",
    )
    parser.add_argument(
        "--workers",
        nargs="*",
        default=["1", "auto"],
        help="workers= values to measure each job with (1: one core; auto: one per core)",
    )
    parser.add_argument(
        "--studies",
        nargs="*",
        default=[],
        help="studies to run whole at their defaults, e.g. claims decision_map (minutes each)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count the CPU instructions an episode costs (valgrind; a few minutes)",
    )
    parser.add_argument(
        "--startup",
        action="store_true",
        help="also time --help, a 10-episode job and its no-op rerun (median of 3)",
    )
    parser.add_argument(
        "--instructions-per-planner",
        action="store_true",
        help="callgrind each default planner on its own (two jobs per planner; slow)",
    )
    parser.add_argument(
        "--planners",
        nargs="*",
        default=[],
        help="with --instructions-per-planner: these planners only (default: the default set)",
    )
    args = parser.parse_args()
    if args.startup:
        print("\n## Start-up (fresh processes; median of 3)\n")
        print(markdown(startup()))
    if args.n:
        print(f"## In-process throughput ({args.n} episodes per cell, faults=default, strong)\n")
        print(markdown(per_planner(args.n, args.seed)))
    if args.sizes:
        print("\n## The default `planarena` job (every planner x 3 complexities x n_tasks)\n")
        print(markdown(whole_command(args.sizes, args.workers)))
    if args.react_sizes:
        print("\n## `planarena planner=react env=report complexity=simple n_tasks=N`\n")
        print(markdown(react_scaling(args.react_sizes, args.workers)))
    if args.studies:
        print("\n## Studies at their defaults (`planarena experiment=NAME`)\n")
        print(markdown(studies(args.studies)))
    if args.instructions:
        print("\n## CPU instructions per episode (callgrind; the same on any day)\n")
        print(markdown(instructions_per_episode()))
    if args.instructions_per_planner:
        print("\n## CPU instructions per episode, per planner (callgrind)\n")
        for line in markdown_lines(instructions_per_planner(args.planners or PLANNERS)):
            print(line, flush=True)


if __name__ == "__main__":
    main()
