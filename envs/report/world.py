"""The report family's world: its tools over one task's plain data, and what they are asked.

The world holds the competitors' annual reports, the regulator's filings and, for a branch
with the stale-press-release trap, a two-year-old press release that a vague query ranks
first. The env, its grader and the oracle all read one world of a task
(:meth:`ReportWorld.of`), so this module is the one the others import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from planarena.envs import caches
from planarena.envs.base import Task
from planarena.envs.tools import LatencyProfile, Toolbox, ToolError, ToolSpec, validate_args

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
    """A company's name as its urls and doc ids write it."""
    return company.lower()


def fact_line(company: str, year: int, revenue: str, profit: str) -> str:
    """The one line format the summary tool writes; the grader reads values, not the format."""
    return f"{company} FY{year}: revenue {revenue} B USD; profit {profit} B USD"


@dataclass(frozen=True)
class Branch:
    """One competitor of a task: its true figures and those of its stale press release."""

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
    """The task's branches (plain data in ``task.world``) as :class:`Branch` es."""
    return [Branch(**b) for b in task.world["branches"]]


def precise_queries(b: Branch) -> list[str]:
    """Phrasings a careful model would use, in order; an empty result calls for the next."""
    c, y = b.company, b.year
    return [
        f"{c} annual report {y}",
        f"{c} {y} annual report pdf",
        f"{c} investor relations annual report {y}",
        f"{c} financial statements {y}",
    ]


def vague_query(b: Branch) -> str:
    """The locally attractive query: short, no year; it ranks the stale press release first."""
    return f"{b.company} latest financial results"


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
