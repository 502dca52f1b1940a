"""The ``report`` task family: the seed article's competitor-report task.

The agent must find each competitor's annual report for a given year, parse it, extract revenue
and profit, and write a summary. Branches (one per competitor) are independent until the
summary, so medium and complex tasks can run in parallel. Two traps look right locally and fail
later: a *stale press release* that a vague query ranks first (its figures are two years old),
and, through the ``password_protected`` fault, a report PDF that cannot be opened so another
source (the regulator's filing registry) is needed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from planarena.envs import caches
from planarena.envs.base import (
    COMPLEXITIES,
    EpisodeTools,
    Grade,
    Task,
    check_share,
    register,
    task_id,
    wrap_tools,
)
from planarena.envs.faults import FaultRule
from planarena.envs.rng import derive_rng
from planarena.envs.tools import (
    LatencyProfile,
    Toolbox,
    ToolCallRecord,
    ToolError,
    ToolSpec,
    validate_args,
)

if TYPE_CHECKING:  # the oracle module imports this one
    from planarena.envs.report.oracle import ReportOracle

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
BRANCHES = {"simple": (1, 1), "medium": (2, 2), "complex": (3, 4)}

SPECS = (
    ToolSpec(
        "search_web",
        "Web search; returns ranked results (url, title, year) and the top url.",
        {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    ),
    ToolSpec(
        "search_web_backup",
        "Backup web search engine (slower; its own API key).",
        {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    ),
    ToolSpec(
        "parse_pdf",
        "Download and parse a PDF; returns doc_id, company, year, title.",
        {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]},
    ),
    ToolSpec(
        "fetch_filing",
        "Fetch a company's annual filing from the regulator's registry (slow, never "
        "encrypted); returns doc_id, company, year.",
        {
            "type": "object",
            "properties": {"company": {"type": "string"}, "year": {"type": "integer"}},
            "required": ["company", "year"],
        },
    ),
    ToolSpec(
        "extract_data",
        "Extract figures (revenue, profit in B USD) from a parsed document by doc_id.",
        {
            "type": "object",
            "properties": {"doc_id": {"type": "string"}, "fields": {"type": "array"}},
            "required": ["doc_id"],
        },
    ),
    ToolSpec(
        "generate_summary",
        "Write the report from a list of extracted records {company, year, revenue, profit}.",
        {"type": "object", "properties": {"data": {"type": "array"}}, "required": ["data"]},
    ),
)

# Median latencies (log-normal, heavy right tail): a search API answers in a second or two;
# downloading and parsing a 150-page annual report, or running extraction over it, takes
# several seconds; the regulator's registry is slow.
LATENCY = {
    "search_web": LatencyProfile(1.5, 0.6),
    "search_web_backup": LatencyProfile(2.5, 0.6),
    "parse_pdf": LatencyProfile(5.0, 0.7),
    "fetch_filing": LatencyProfile(6.0, 0.5),
    "extract_data": LatencyProfile(3.0, 0.5),
    "generate_summary": LatencyProfile(2.0, 0.4),
}


def slug(company: str) -> str:
    return company.lower()


def fact_line(company: str, year: int, revenue: str, profit: str) -> str:
    """The one line format the summary tool writes; the grader reads values, not the format."""
    return f"{company} FY{year}: revenue {revenue} B USD; profit {profit} B USD"


@dataclass(frozen=True)
class Branch:
    company: str
    year: int
    revenue: str
    profit: str
    stale_year: int
    stale_revenue: str
    stale_profit: str
    stale_trap: bool  # a stale press release exists and vague queries rank it first
    published: bool = True  # False: this year's report does not exist (the goal is unreachable)

    @property
    def report_url(self) -> str:
        return f"https://ir.{slug(self.company)}.example/annual-report-{self.year}.pdf"

    @property
    def press_url(self) -> str:
        return f"https://news.example/{slug(self.company)}-full-year-{self.stale_year}-results.pdf"

    @property
    def report_doc(self) -> str:
        return f"doc:{slug(self.company)}:{self.year}"

    @property
    def press_doc(self) -> str:
        return f"press:{slug(self.company)}:{self.stale_year}"

    @property
    def filing_doc(self) -> str:
        return f"filing:{slug(self.company)}:{self.year}"


def branches_of(task: Task) -> list[Branch]:
    return [Branch(**b) for b in task.world["branches"]]


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
) -> list[Task]:
    """``n`` seeded tasks at one complexity (simple: 1 branch, medium: 2, complex: 3-4), from
    task number ``start`` on."""
    if complexity not in COMPLEXITIES:
        raise ValueError(f"complexity must be one of {COMPLEXITIES}, got {complexity!r}")
    tasks = []
    for index in range(start, start + n):
        rng = derive_rng(seed, "task", ENV_NAME, complexity, index)
        low, high = BRANCHES[complexity]
        k = rng.randint(low, high)
        companies = rng.sample(COMPANIES, k)
        year = rng.choice(YEARS)
        branches = []
        for company in companies:
            revenue = float(_money(rng, 2, 90, 1))
            stale_revenue = float(_money(rng, 2, 90, 1))
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


class ReportWorld(Toolbox):
    """The world's tools over the task's plain data. Raises ToolError for world-level errors."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.branches = branches_of(task)
        self.by_company = {b.company.lower(): b for b in self.branches}
        self.urls: dict[str, tuple[Branch, bool]] = {}
        self.docs: dict[str, tuple[Branch, bool]] = {}
        for b in self.branches:
            if b.published:
                self.urls[b.report_url] = (b, False)
                self.docs[b.report_doc] = (b, False)
                self.docs[b.filing_doc] = (b, False)
            if b.stale_trap:
                self.urls[b.press_url] = (b, True)
                self.docs[b.press_doc] = (b, True)
        self._specs = {s.name: s for s in SPECS}

    @classmethod
    def of(cls, task: Task) -> ReportWorld:
        """The world of ``task``, built once for the task object: the toolbox, the fault
        exposure, the oracle and the grader of an episode read one world (it holds no state
        a call changes). The last task's world is kept (cheap to build: no more is)."""
        global _LAST_WORLD
        if _LAST_WORLD is None or _LAST_WORLD.task is not task:
            _LAST_WORLD = cls(task)
        return _LAST_WORLD

    def catalogue(self) -> list[ToolSpec]:
        return list(SPECS)

    async def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        spec = self._specs.get(name)
        if spec is None:
            raise ToolError("unknown_tool", f"no tool named {name!r}")
        validate_args(spec, args)
        return getattr(self, f"_{name}")(**args)

    def _search(self, query: str) -> dict[str, Any]:
        text = query.lower()
        hits = [b for b in self.branches if b.company.lower() in text]
        years = {int(y) for y in re.findall(r"\b(20\d\d)\b", text)}
        results: list[dict[str, Any]] = []
        for b in hits:
            report = {
                "url": b.report_url,
                "title": f"{b.company} Annual Report {b.year} (PDF)",
                "year": b.year,
            }
            press = {
                "url": b.press_url,
                "title": f"{b.company} reports record full-year results",
                "year": b.stale_year,
            }
            precise = b.year in years
            if not b.published:
                results += [press] if b.stale_trap else []
            elif not b.stale_trap:
                results.append(report)
            elif precise:
                results += [report, press]
            else:  # a vague query: the fresher-looking press release ranks first
                results += [press, report]
        return {
            "query": query,
            "count": len(results),
            "results": results,
            "url": results[0]["url"] if results else None,
        }

    def _search_web(self, query: str) -> dict[str, Any]:
        return self._search(query)

    def _search_web_backup(self, query: str) -> dict[str, Any]:
        return self._search(query)

    def _parse_pdf(self, url: str) -> dict[str, Any]:
        if url not in self.urls:
            raise ToolError("not_found", f"404: no document at {url}")
        b, stale = self.urls[url]
        if stale:
            return {
                "doc_id": b.press_doc,
                "company": b.company,
                "year": b.stale_year,
                "title": f"{b.company} reports record full-year results",
            }
        return {
            "doc_id": b.report_doc,
            "company": b.company,
            "year": b.year,
            "title": f"{b.company} Annual Report {b.year}",
        }

    def _fetch_filing(self, company: str, year: int) -> dict[str, Any]:
        b = self.by_company.get(company.lower())
        if b is None or b.year != year or not b.published:
            raise ToolError("not_found", f"no filing for {company} FY{year}")
        return {
            "doc_id": b.filing_doc,
            "company": b.company,
            "year": b.year,
            "title": f"{b.company} annual filing {b.year}",
        }

    def _extract_data(self, doc_id: str, fields: list[Any] | None = None) -> dict[str, Any]:
        if doc_id not in self.docs:
            raise ToolError("not_found", f"unknown doc_id {doc_id!r}; parse or fetch it first")
        b, stale = self.docs[doc_id]
        if stale:
            return {
                "company": b.company,
                "year": b.stale_year,
                "revenue": b.stale_revenue,
                "profit": b.stale_profit,
            }
        return {"company": b.company, "year": b.year, "revenue": b.revenue, "profit": b.profit}

    def _generate_summary(self, data: list[Any]) -> dict[str, Any]:
        lines = []
        for item in data:
            if not isinstance(item, dict) or not {"company", "year", "revenue", "profit"} <= set(
                item
            ):
                raise ToolError("bad_args", "each data item needs company, year, revenue, profit")
            lines.append(
                fact_line(
                    str(item["company"]),
                    int(item["year"]),
                    str(item["revenue"]),
                    str(item["profit"]),
                )
            )
        return {"summary": "\n".join(lines), "items": len(lines)}


_LAST_WORLD: ReportWorld | None = None  # ReportWorld.of's one task


def _forget_world() -> None:
    global _LAST_WORLD
    _LAST_WORLD = None


caches.register(_forget_world)


def grade(task: Task, answer: str | None, calls: Sequence[ToolCallRecord]) -> Grade:
    """Progress = share of required figures stated on a line naming the company and the year."""
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


@dataclass
class ReportEnv:
    """Factory for tasks, toolboxes and the oracle of the report family."""

    name: str = ENV_NAME
    p_stale_trap: float = 0.5
    latency: dict[str, LatencyProfile] = field(default_factory=lambda: dict(LATENCY))

    def __post_init__(self) -> None:
        check_share("p_stale_trap", self.p_stale_trap)

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
        )

    def make_tools(
        self, task: Task, *, rules: Sequence[FaultRule], seed_keys: tuple[object, ...]
    ) -> EpisodeTools:
        world = ReportWorld.of(task)
        return wrap_tools(world, latency=self.latency, rules=rules, seed_keys=seed_keys)

    def grade(self, task: Task, answer: str | None, calls: Sequence[ToolCallRecord]) -> Grade:
        return grade(task, answer, calls)

    def exposure(
        self, task: Task, *, rules: Sequence[FaultRule], seed_keys: tuple[object, ...]
    ) -> list[str]:
        from planarena.envs.faults import FaultInjector
        from planarena.envs.report.oracle import precise_queries

        world = ReportWorld.of(task)
        injector = FaultInjector(world, rules, seed_keys=seed_keys)
        kinds: set[str] = set()
        for b in world.branches:
            kinds.update(injector.predrawn("search_web", {"query": precise_queries(b)[0]}))
            if b.published:
                kinds.update(injector.predrawn("parse_pdf", {"url": b.report_url}))
        return sorted(kinds)

    def oracle(self, task: Task) -> ReportOracle:
        from planarena.envs.report.oracle import ReportOracle

        return ReportOracle(task)


register(ENV_NAME, ReportEnv)
