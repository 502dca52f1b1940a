"""The ``report`` task family: the seed article's competitor-report task.

The agent must find each competitor's annual report for a given year, parse it, extract revenue
and profit, and write a summary. Branches (one per competitor) are independent until the
summary, so medium and complex tasks can run in parallel. Two traps look right locally and fail
later: a *stale press release* that a vague query ranks first (its figures are two years old),
and, through the ``password_protected`` fault, a report PDF that cannot be opened so another
source (the regulator's filing registry) is needed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from planarena.envs.base import (
    COMPLEXITIES,
    EpisodeTools,
    Grade,
    Task,
    check_share,
    task_id,
    wrap_tools,
)
from planarena.envs.faults import FaultInjector, FaultRule
from planarena.envs.grading import Fact, carries, check_grading, count_carried
from planarena.envs.report.oracle import ReportOracle
from planarena.envs.report.world import LATENCY, SPECS, ReportWorld, precise_queries
from planarena.envs.rng import derive_rng
from planarena.envs.tools import LatencyProfile, ToolCallRecord

# What callers import from here (``planarena.envs.report.env``, the config's target): the env,
# its grader, and the world's tools and latency it runs with.
__all__ = ["LATENCY", "SPECS", "ReportEnv", "ReportWorld", "generate_tasks", "grade"]

ENV_NAME = "report"
COMPANIES = (
    "Acme",
    "Globex",
    "Initech",
    "Umbrella",
    "Hooli",
    "Vandelay",
    "Cyberdyne",
    "Soylent",
    "Wonka",
    "Tyrell",
    "Stark",
    "Wayne",
    "Oscorp",
    "Massive",
    "Gringotts",
    "Nakatomi",
)
YEARS = (2023, 2024, 2025)
FIXED_BRANCHES: dict[str, tuple[int, int]] = {"simple": (1, 1), "medium": (2, 2), "complex": (3, 4)}
"""Companies per task at each complexity as first shipped, and the class's default, so a saved
config written before ``branches`` was a setting (an old run dir, a recording) keeps its tasks.
The shipped config (configs/env/report.yaml) sets overlapping ranges instead, so a task's
length (3 steps per company, then the summary) varies inside the family at every complexity
(docs/envs.md)."""


def check_branches(branches: Mapping[str, Sequence[int]]) -> dict[str, tuple[int, int]]:
    """``branches`` as ``{complexity: (low, high)}``, or a ValueError naming what is wrong."""
    if set(branches) != set(COMPLEXITIES):
        raise ValueError(f"branches: expected one [low, high] for each of {COMPLEXITIES}")
    out = {}
    for cx in COMPLEXITIES:
        pair = tuple(int(v) for v in branches[cx])
        if len(pair) != 2 or not 1 <= pair[0] <= pair[1] <= len(COMPANIES):
            raise ValueError(f"branches.{cx}: expected [low, high] with 1 <= low <= high <= 10")
        out[cx] = (pair[0], pair[1])
    return out


def _money(rng: Any, low: float, high: float, digits: int) -> str:
    return f"{rng.uniform(low, high):.{digits}f}"


def generate_tasks(
    n: int,
    *,
    seed: int,
    complexity: str,
    p_stale_trap: float = 0.5,
    unreachable_rate: float = 0.0,
    start: int = 0,
    companies_per_task: Mapping[str, tuple[int, int]] = FIXED_BRANCHES,
) -> list[Task]:
    """``n`` seeded tasks at one complexity (companies per task drawn from
    ``companies_per_task``), from task number ``start`` on."""
    if complexity not in COMPLEXITIES:
        raise ValueError(f"complexity must be one of {COMPLEXITIES}, got {complexity!r}")
    tasks = []
    for index in range(start, start + n):
        rng = derive_rng(seed, "task", ENV_NAME, complexity, index)
        low, high = companies_per_task[complexity]
        k = rng.randint(low, high)
        companies = rng.sample(COMPANIES, k)
        year = rng.choice(YEARS)
        branches = []
        for company in companies:
            revenue = float(_money(rng, 2, 90, 1))
            stale_revenue = float(_money(rng, 2, 90, 1))
            if f"{stale_revenue:.1f}" == f"{revenue:.1f}":  # a stale figure equal to the
                stale_revenue += 0.1  # current one is no trap (no draw, so no task moves)
            branches.append(
                {
                    "company": company,
                    "year": year,
                    "revenue": f"{revenue:.1f}",
                    "profit": f"{revenue * rng.uniform(0.04, 0.3):.2f}",
                    "stale_year": year - 2,
                    "stale_revenue": f"{stale_revenue:.1f}",
                    "stale_profit": f"{stale_revenue * rng.uniform(0.04, 0.3):.2f}",
                    "stale_trap": rng.random() < p_stale_trap,
                    "published": True,
                }
            )
        unreachable = derive_rng(seed, "unreachable", ENV_NAME, complexity, index).random() < (
            unreachable_rate
        )
        if unreachable:  # the last competitor has not published this year's report
            branches[-1]["published"] = False
        names = ", ".join(companies[:-1]) + (" and " if k > 1 else "") + companies[-1]
        goal = (
            f"Write a short report on the FY{year} annual revenue and profit of {names}, "
            f"based on each company's FY{year} annual report."
        )
        tasks.append(
            Task(
                task_id=task_id(ENV_NAME, complexity, index),
                env=ENV_NAME,
                complexity=complexity,
                goal=goal,
                world={"branches": branches},
                unreachable=unreachable,
            )
        )
    return tasks


def grade(
    task: Task, answer: str | None, calls: Sequence[ToolCallRecord], grading: str = "exact"
) -> Grade:
    """Progress = share of required figures stated: on a line naming the company and the year
    in the answer tool's wording (``exact``), or as facts in any wording (``facts``)."""
    branches = ReportWorld.of(task).branches
    trap_urls = {b.press_url for b in branches if b.stale_trap}
    touched = any(c.tool == "parse_pdf" and c.args.get("url") in trap_urls for c in calls)
    # evidence that a missing report is missing: the regulator's registry said so for the
    # unpublished branch (a search that finds nothing might just be a bad query)
    saw_missing = any(
        c.tool == "fetch_filing"
        and c.error_kind == "not_found"
        and any(
            not b.published
            and str(c.args.get("company", "")).lower() == b.company.lower()
            and c.args.get("year") == b.year
            for b in branches
        )
        for c in calls
    )
    if not answer:
        return Grade(
            False, 0.0, trap_touched=touched, saw_missing_data=saw_missing, detail="no answer"
        )
    if grading == "facts":
        facts = [Fact(b.company, f, float(v)) for b in branches for f, v in _figures(b)]
        found = count_carried(answer, facts)
        companies = [b.company for b in branches]  # each company's stretch is its own
        trap_in_answer = any(
            b.stale_trap
            and carries(answer, stale, [stale, Fact(b.company, "profit", 0.0)], companies)
            for b in branches
            for stale in [Fact(b.company, "revenue", float(b.stale_revenue))]
        )
        required = 2 * len(branches)
        return Grade(
            found == required and not trap_in_answer,
            found / required,
            trap_in_answer=trap_in_answer,
            trap_touched=touched,
            saw_missing_data=saw_missing,
            detail=f"{found}/{required} facts",
        )
    lines = answer.lower().splitlines()
    found = 0
    trap_in_answer = False
    for b in branches:
        mine = [ln for ln in lines if b.company.lower() in ln]
        current = [ln for ln in mine if str(b.year) in ln]
        found += any(f"revenue {b.revenue}" in ln for ln in current)
        found += any(f"profit {b.profit}" in ln for ln in current)
        if b.stale_trap and any(f"revenue {b.stale_revenue}" in ln for ln in mine):
            trap_in_answer = True
    required = 2 * len(branches)
    progress = found / required
    success = found == required and not trap_in_answer
    return Grade(
        success,
        progress,
        trap_in_answer=trap_in_answer,
        trap_touched=touched,
        saw_missing_data=saw_missing,
        detail=f"{found}/{required} facts",
    )


def _figures(b: Any) -> list[tuple[str, Any]]:
    return [("revenue", b.revenue), ("profit", b.profit)]


@dataclass
class ReportEnv:
    """Factory for tasks, toolboxes and the oracle of the report family."""

    name: str = ENV_NAME
    p_stale_trap: float = 0.5
    branches: Mapping[str, Sequence[int]] = field(default_factory=lambda: dict(FIXED_BRANCHES))
    grading: str = "facts"  # set from the run's ``grading`` (envs/grading.py)
    latency: dict[str, LatencyProfile] = field(default_factory=lambda: dict(LATENCY))

    def __post_init__(self) -> None:
        check_share("p_stale_trap", self.p_stale_trap)
        self.branches = check_branches(self.branches)
        check_grading(self.grading)

    def generate(
        self,
        n: int,
        *,
        seed: int,
        complexity: str,
        unreachable_rate: float = 0.0,
        start: int = 0,
    ) -> list[Task]:
        return generate_tasks(
            n,
            seed=seed,
            complexity=complexity,
            p_stale_trap=self.p_stale_trap,
            unreachable_rate=unreachable_rate,
            start=start,
            companies_per_task=self.branches,
        )

    def make_tools(
        self, task: Task, *, rules: Sequence[FaultRule], seed_keys: tuple[object, ...]
    ) -> EpisodeTools:
        world = ReportWorld.of(task)
        return wrap_tools(world, latency=self.latency, rules=rules, seed_keys=seed_keys)

    def grade(self, task: Task, answer: str | None, calls: Sequence[ToolCallRecord]) -> Grade:
        return grade(task, answer, calls, self.grading)

    def exposure(
        self, task: Task, *, rules: Sequence[FaultRule], seed_keys: tuple[object, ...]
    ) -> list[str]:
        world = ReportWorld.of(task)
        injector = FaultInjector(world, rules, seed_keys=seed_keys)
        kinds: set[str] = set()
        for b in world.branches:
            kinds.update(injector.predrawn("search_web", {"query": precise_queries(b)[0]}))
            if b.published:
                kinds.update(injector.predrawn("parse_pdf", {"url": b.report_url}))
        return sorted(kinds)

    def oracle(self, task: Task) -> ReportOracle:
        return ReportOracle(task)
