"""``dry_run=true``: what a job would cost, from a short pass with the simulated LLM.

Before anything is spent, every planner of the job runs the first :data:`SAMPLE_TASKS` tasks
of each env x complexity (trial 0: the very tasks the job starts with, with its faults and
per-episode budgets) against the simulated LLM. Per planner x env x complexity, the mean LLM
calls, prompt and completion tokens of an episode are scaled to the job's episodes in that
cell (``n_tasks`` x ``trials``) and priced at the configured model's prices: ``llm.prices`` of
``llm.model`` for a real model (every role calls it), the model profiles' prices for the
simulator. The estimate is printed; no request is sent (no API key is needed), no run dir
written.

The simulator's tokens are ``o200k_base`` counts of its own prompts and completions: a real
model's tokenizer, verbosity and skill differ (a weaker model replans and retries more), so the
estimate is an order of magnitude, not a quote.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf
from planarena.configs import CONFIG_DIR
from planarena.experiments.run.episode import run_episode
from planarena.experiments.run.llm_factory import (
    BackendFactory,
    llm_label,
    model_price,
    model_profiles,
)

if TYPE_CHECKING:
    from planarena.experiments.run.jobs import Job
    from planarena.experiments.run.prepare import Prepared

SAMPLE_TASKS = 3
"""Tasks per env x complexity the dry run simulates (the job's first ones, trial 0)."""

SIM_CONFIG = CONFIG_DIR / "llm" / "sim.yaml"


def sample(jobs: Sequence[Job], k: int = SAMPLE_TASKS) -> list[Job]:
    """The jobs of the first ``k`` tasks of each env x complexity, trial 0, every planner."""
    first: dict[tuple[str, str], list[str]] = defaultdict(list)
    for job in jobs:
        ids = first[(job.env_name, job.ref.complexity)]
        if job.ref.task_id not in ids:
            ids.append(job.ref.task_id)
    return [
        j
        for j in jobs
        if j.trial == 0 and j.ref.task_id in first[(j.env_name, j.ref.complexity)][:k]
    ]


def sim_config(llm: Mapping[str, Any]) -> dict[str, Any]:
    """The simulator that stands in: the job's own for ``llm=sim``, else ``llm=sim``'s
    defaults (configs/llm/sim.yaml)."""
    if llm.get("backend", "sim") == "sim":
        return dict(llm)
    loaded = OmegaConf.to_container(OmegaConf.load(SIM_CONFIG), resolve=True)
    assert isinstance(loaded, dict)
    return {str(k): v for k, v in loaded.items()}


async def _simulate(cfg: DictConfig, prepared: Prepared, jobs: list[Job], sim: dict) -> list:
    """The sampled jobs' records, each run through the one episode loop under its cell's
    context with the simulator standing in for the configured model."""
    del cfg
    factory = BackendFactory(sim)
    stand_in = {
        "backend_for": factory.for_episode,
        "models": model_profiles(sim),
        "llm_label": llm_label(sim),
    }
    contexts = [replace(ctx, **stand_in) for ctx in prepared.contexts]
    records = []
    for job in jobs:
        record, _ = await run_episode(contexts[job.cell], job)
        records.append(record)
    return records


@dataclass
class Estimate:
    """The scaled totals of one planner (or of the whole job)."""

    episodes: float = 0.0
    llm_calls: float = 0.0
    tokens_prompt: float = 0.0
    tokens_completion: float = 0.0
    cost_usd: float | None = 0.0  # None: the configured model has no price

    def add(self, other: Estimate) -> None:
        self.episodes += other.episodes
        self.llm_calls += other.llm_calls
        self.tokens_prompt += other.tokens_prompt
        self.tokens_completion += other.tokens_completion
        if self.cost_usd is None or other.cost_usd is None:
            self.cost_usd = None
        else:
            self.cost_usd += other.cost_usd


@dataclass
class DryRun:
    """What :func:`tally` found: per planner and in total, and how it was sampled."""

    planners: dict[str, Estimate]
    total: Estimate
    sampled: int  # episodes simulated
    episodes: int  # episodes of the configured job
    sim_label: str
    model: str  # the configured model (a real one's name, or the simulator's label)
    price: tuple[float, float] | None  # a real model's USD per million tokens (in, out)
    real: bool


def tally(cfg: DictConfig, prepared: Prepared) -> DryRun:
    """Simulate the sample and scale it, per planner x env x complexity, to the job."""
    llm = prepared.container["llm"]
    sim = sim_config(llm)
    jobs = sample(prepared.jobs)
    records = asyncio.run(_simulate(cfg, prepared, jobs, sim))
    full: dict[tuple[str, str, str], int] = defaultdict(int)  # the job's episodes per cell
    for job in prepared.jobs:
        full[(job.planner_name, job.env_name, job.ref.complexity)] += 1
    cells: dict[tuple[str, str, str], Estimate] = defaultdict(Estimate)
    for job, r in zip(jobs, records, strict=True):
        cells[(job.planner_name, job.env_name, job.ref.complexity)].add(
            Estimate(1, r.llm_calls, r.tokens_prompt, r.tokens_completion, r.cost_usd)
        )
    real = llm.get("backend", "sim") != "sim"
    price = model_price(llm) if real else None
    planners: dict[str, Estimate] = {}
    for (planner, env, complexity), cell in cells.items():
        scale = full[(planner, env, complexity)] / cell.episodes
        scaled = Estimate(
            full[(planner, env, complexity)],
            cell.llm_calls * scale,
            cell.tokens_prompt * scale,
            cell.tokens_completion * scale,
            None if cell.cost_usd is None else cell.cost_usd * scale,
        )
        if real:  # every role calls the configured model, at its prices
            scaled.cost_usd = None
            if price is not None:
                cost = scaled.tokens_prompt * price[0] + scaled.tokens_completion * price[1]
                scaled.cost_usd = cost / 1e6
        planners.setdefault(planner, Estimate()).add(scaled)
    total = Estimate()
    for estimate_ in planners.values():
        total.add(estimate_)
    return DryRun(
        planners=planners,
        total=total,
        sampled=len(jobs),
        episodes=len(prepared.jobs),
        sim_label=llm_label(sim),
        model=str(llm.get("model")) if real else llm_label(sim),
        price=price,
        real=real,
    )


def _n(value: float) -> str:
    return f"{round(value):,}"


def _usd(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.2f}"


def estimate(cfg: DictConfig, prepared: Prepared) -> str:
    """Run the sample with the simulator and return the printed estimate."""
    from tabulate import tabulate

    dry = tally(cfg, prepared)
    rows = [*dry.planners.items(), ("total", dry.total)]
    table = [
        [
            name,
            _n(e.episodes),
            _n(e.llm_calls),
            _n(e.tokens_prompt),
            _n(e.tokens_completion),
            _usd(e.cost_usd),
        ]
        for name, e in rows
    ]
    headers = ["planner", "episodes", "LLM calls", "prompt tokens", "completion tokens", "USD"]
    n_tasks, trials = int(cfg.n_tasks), int(cfg.trials)
    if dry.price is not None:
        prices = (
            f"{dry.model} at ${dry.price[0]:g} input / ${dry.price[1]:g} output per million "
            "tokens (llm.prices), for every role"
        )
    elif dry.real:
        prices = f"none: llm.model={dry.model} has no entry in llm.prices, so its cost is unknown"
    else:
        prices = "the simulator's model profiles (llm.models), as its records are priced"
    lines = [
        f"planarena dry run: an estimate for {dry.model}; no LLM request sent, nothing written.",
        "",
        tabulate(table, headers, tablefmt="github", colalign=("left",) + ("right",) * 5),
        "",
        f"Sampled: every planner on the first {min(SAMPLE_TASKS, n_tasks)} of {n_tasks} tasks "
        f"of each env x complexity (trial 0), {dry.sampled} episode(s) with the simulated LLM "
        f"({dry.sim_label}); scaled per planner x env x complexity to the job's "
        f"{dry.episodes:,} episode(s) ({n_tasks} tasks x {trials} trial(s) per cell).",
        f"Prices: {prices}.",
        "Tokens are the simulator's o200k_base counts of its own prompts and completions: a "
        "real model's tokenizer, verbosity and skill differ, so this is an order of "
        "magnitude, not a quote.",
    ]
    cap = (cfg.get("budget") or {}).get("max_cost_usd")
    total = dry.total.cost_usd
    if cap is not None and total is not None:
        share = min(1.0, float(cap) / total) if total else 1.0
        verdict = (
            "the estimate is within it"
            if share >= 1.0
            else f"the job would stop at the cap (the estimate is {_usd(total)}: it would "
            f"spend about {share:.0%} of it, in job order)"
        )
        lines.append(f"Job cost cap: budget.max_cost_usd={float(cap):g}: {verdict}.")
    return "\n".join(lines)
