"""The ``planarena`` command: a Hydra app that runs planners x envs x complexities x tasks.

Every job writes into its Hydra run directory: ``episodes.jsonl`` (one record per episode,
appended in a fixed order as episodes finish, so a crash loses nothing and a rerun resumes),
``traces.jsonl``, ``episodes.parquet``, and ``summary.md/.csv/.tex``; it prints the
completion table. The same command and seed give byte-identical records (``wall_s`` aside)
whatever ``concurrency`` is.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hydra
import pandas as pd
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig, ListConfig, OmegaConf

from envs.base import Env, Task
from envs.faults import FaultConfig
from experiments.episode import EpisodeRecord, run_episode
from experiments.llm_factory import BackendFactory, llm_label, model_profiles
from planners.base import Planner
from planners.llm.base import Budget


@dataclass(frozen=True)
class Job:
    index: int
    planner_name: str
    env_name: str
    task: Task
    trial: int

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.planner_name, self.env_name, self.task.task_id, self.trial)


def as_list(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple, ListConfig)):
        return list(value)
    if isinstance(value, str) and "," in value:
        return [v.strip() for v in value.split(",") if v.strip()]
    return [value]


def fault_config(cfg: DictConfig) -> FaultConfig:
    return FaultConfig(**OmegaConf.to_container(cfg.faults, resolve=True))  # type: ignore[arg-type]


def build_jobs(
    cfg: DictConfig, planners: dict[str, Planner], envs: dict[str, Env], faults: FaultConfig
) -> list[Job]:
    jobs: list[Job] = []
    complexities = [str(c) for c in as_list(cfg.complexity)]
    for env_name, env in envs.items():
        for complexity in complexities:
            tasks = env.generate(
                int(cfg.n_tasks),
                seed=int(cfg.seed),
                complexity=complexity,
                unreachable_rate=faults.unreachable_rate,
            )
            for planner_name in planners:
                for task in tasks:
                    for trial in range(int(cfg.trials)):
                        jobs.append(Job(len(jobs), planner_name, env_name, task, trial))
    return jobs


def read_done(path: Path) -> set[tuple[str, str, str, int]]:
    """Keys of episodes already recorded; a torn last line (a crash mid-write) is dropped."""
    done: set[tuple[str, str, str, int]] = set()
    if not path.exists():
        return done
    good: list[str] = []
    for line in path.read_text().splitlines():
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue
        good.append(line)
        done.add((r["planner"], r["env"], r["task_id"], int(r["trial"])))
    path.write_text("".join(f"{g}\n" for g in good))
    return done


class OrderedWriter:
    """Appends records in job order even when episodes finish out of order."""

    def __init__(self, episodes: Path, traces: Path | None, order: Sequence[int]) -> None:
        self.episodes = episodes.open("a", encoding="utf-8")
        self.traces = traces.open("a", encoding="utf-8") if traces else None
        self.order = list(order)
        self.next = 0
        self.buffer: dict[int, tuple[str, str]] = {}

    def put(self, index: int, record: EpisodeRecord, trace: dict[str, Any]) -> None:
        self.buffer[index] = (
            record.model_dump_json(),
            json.dumps(trace, default=str, sort_keys=True),
        )
        while self.next < len(self.order) and self.order[self.next] in self.buffer:
            line, trace_line = self.buffer.pop(self.order[self.next])
            self.episodes.write(line + "\n")
            self.episodes.flush()
            if self.traces is not None:
                self.traces.write(trace_line + "\n")
                self.traces.flush()
            self.next += 1

    def close(self) -> None:
        self.episodes.close()
        if self.traces is not None:
            self.traces.close()


def _progress(total: int, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(
        total=total,
        disable=not enabled,
        desc="episodes",
        unit="ep",
        file=sys.stderr,
        dynamic_ncols=True,
        leave=False,
    )


async def run_jobs(
    cfg: DictConfig,
    jobs: list[Job],
    planners: dict[str, Planner],
    envs: dict[str, Env],
    faults: FaultConfig,
    out_dir: Path,
) -> None:
    llm_cfg = OmegaConf.to_container(cfg.llm, resolve=True)
    assert isinstance(llm_cfg, dict)
    factory = BackendFactory(llm_cfg)
    models = model_profiles(llm_cfg)
    label = llm_label(llm_cfg)
    budget_cfg = cfg.get("budget") or {}
    budget = Budget(
        max_tokens=budget_cfg.get("max_tokens_per_episode"),
        max_calls=budget_cfg.get("max_llm_calls_per_episode"),
    )
    writer = OrderedWriter(
        out_dir / "episodes.jsonl",
        out_dir / "traces.jsonl" if cfg.write_traces else None,
        [j.index for j in jobs],
    )
    semaphore = asyncio.Semaphore(max(1, int(cfg.concurrency)))
    bar = _progress(len(jobs), bool(cfg.progress))

    async def one(job: Job) -> None:
        async with semaphore:
            env = envs[job.env_name]
            seed_keys = (int(cfg.seed), job.task.env, job.task.task_id, job.trial)
            backend = factory.for_episode(env, job.task, seed_keys)  # never keyed by planner
            record, trace = await run_episode(
                planner_name=job.planner_name,
                planner=planners[job.planner_name],
                env=env,
                task=job.task,
                backend=backend,
                llm_label=label,
                faults_label=faults.name,
                models=models,
                rules=faults.rules,
                seed=int(cfg.seed),
                trial=job.trial,
                budget=budget,
            )
            writer.put(job.index, record, trace)
            bar.update(1)

    try:
        if int(cfg.concurrency) <= 1:
            for job in jobs:
                await one(job)
        else:
            await asyncio.gather(*(one(job) for job in jobs))
    finally:
        writer.close()
        bar.close()


def instantiate_group(node: DictConfig | None) -> dict[str, Any]:
    if node is None:
        return {}
    return {name: instantiate(spec) for name, spec in node.items()}


def run(cfg: DictConfig, out_dir: Path) -> Path:
    """Run the configured sweep into ``out_dir``; returns the episodes file."""
    out_dir.mkdir(parents=True, exist_ok=True)
    parallel = OmegaConf.select(cfg, "executor.parallel")
    if parallel is not None:  # the ablation switch: one value for every plan planner
        for spec in cfg.planner.values():
            if "parallel" in spec:
                spec.parallel = bool(parallel)
    planners: dict[str, Planner] = instantiate_group(cfg.planner)
    envs: dict[str, Env] = instantiate_group(cfg.env)
    if not planners or not envs:
        raise ValueError("select at least one planner and one env")
    faults = fault_config(cfg)
    jobs = build_jobs(cfg, planners, envs, faults)
    episodes = out_dir / "episodes.jsonl"
    done = read_done(episodes) if cfg.resume else set()
    if not cfg.resume:
        for name in ("episodes.jsonl", "traces.jsonl"):
            (out_dir / name).unlink(missing_ok=True)
    todo = [j for j in jobs if j.key not in done]
    asyncio.run(run_jobs(cfg, todo, planners, envs, faults, out_dir))
    return episodes


def finish(out_dir: Path, seed: int, planner_order: Sequence[str]) -> tuple[str, pd.DataFrame]:
    """Parquet copy, summaries and figures; returns the completion table and the records."""
    from experiments.figures import write_figures
    from experiments.records import load_records
    from experiments.tables import format_completion_table, write_summaries

    df = load_records(out_dir / "episodes.jsonl")
    df.to_parquet(out_dir / "episodes.parquet", index=False)
    summary = write_summaries(df, out_dir, seed=seed, planner_order=list(planner_order))
    write_figures(df, out_dir, seed=seed, planner_order=list(planner_order), summary=summary)
    return format_completion_table(summary), df


@hydra.main(version_base="1.3", config_path="../configs", config_name="config")
def app(cfg: DictConfig) -> None:
    out_dir = Path(HydraConfig.get().runtime.output_dir)
    run(cfg, out_dir)
    table, df = finish(out_dir, int(cfg.seed), list(cfg.planner))
    print(f"\nCompletion rate (95% Wilson interval) — {out_dir}\n{table}")
    if cfg.get("report_extra") == "seed_tables":
        from experiments.seed_tables import render

        container = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(container, dict)
        print("\n" + render(df, container, out_dir, seed=int(cfg.seed)))
    harness_errors = int((df["failure_mode"] == "harness_error").sum())
    if harness_errors:
        print(
            f"WARNING: {harness_errors} harness_error episode(s); see traces.jsonl", file=sys.stderr
        )


def main() -> None:
    app()


if __name__ == "__main__":
    main()
