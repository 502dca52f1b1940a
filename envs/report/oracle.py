"""Ground truth for the report family: the correct remaining steps given observations."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from planarena.envs.base import Task
from planarena.envs.oracle import (
    REPORT_UNREACHABLE,
    SUBMIT_ANSWER,
    GoldStep,
    Obs,
    Ref,
    check_pool,
)
from planarena.envs.report.world import (
    Branch,
    ReportWorld,
    fact_line,
    precise_queries,
    slug,
    vague_query,
)

SEARCH_TOOLS = ("search_web", "search_web_backup")
# The figures the report states for each company (its answer's facts): what a careful model
# checks an extract for, whichever of them a fault may null.
FIGURES = ("revenue", "profit")


@dataclass
class _BranchState:
    bad_queries: set[str]
    good_url: str | None = None
    stale_first: bool = False
    protected: bool = False
    doc: str | None = None  # observation key of a parse/fetch of the right year
    stale_doc: str | None = None
    data: str | None = None  # observation key of an extract of the right year
    stale_data: str | None = None
    no_report: bool = False  # a precise search showed no report for the year
    filing_missing: bool = False  # the registry has no filing for the year


class ReportOracle:
    """Reads the task's world; answers what remains to be done correctly."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.world = ReportWorld.of(task)
        self.branches = self.world.branches
        self._tool_names = frozenset(spec.name for spec in self.world.catalogue())

    def tool_names(self) -> frozenset[str]:
        return self._tool_names

    def hallucinated_tools(self) -> list[str]:
        return ["get_financials", "download_report", "web_lookup", "summarize_report"]

    def subtle(self, observation: Obs) -> bool:
        """A parsed or extracted document of the wrong year, or an extract with a null figure
        (a "200 but wrong" payload): plausible at a glance, wrong on a careful read."""
        o = observation
        if o.error is not None or not isinstance(o.result, dict):
            return False
        if o.tool == "parse_pdf":
            hit = self.world.urls.get(str(o.args.get("url")))
            return hit is not None and hit[1]
        if o.tool == "extract_data":
            doc = self.world.docs.get(str(o.args.get("doc_id")))
            nulls = None in (o.result.get("revenue"), o.result.get("profit"))
            return doc is not None and (doc[1] or nulls)
        return False

    def _states(
        self, observations: Sequence[Obs], overlooked: frozenset[str] = frozenset()
    ) -> tuple[dict[str, _BranchState], set[str]]:
        states = {b.company: _BranchState(bad_queries=set()) for b in self.branches}
        dead_tools = {
            o.tool
            for o in observations
            if o.error == "invalid_api_key"
            or (o.error == "precondition" and f"api_key_valid.{o.tool}" in str(o.result))
        }
        for o in observations:
            if o.tool in SEARCH_TOOLS:
                query = str(o.args.get("query", ""))
                for b in self.branches:
                    if b.company.lower() not in query.lower():
                        continue
                    st = states[b.company]
                    if o.error == "empty_result":
                        st.bad_queries.add(query)
                    elif o.error is None and isinstance(o.result, dict):
                        urls = [r.get("url") for r in o.result.get("results", [])]
                        if b.report_url in urls:
                            st.good_url = b.report_url
                        elif str(b.year) in query:
                            st.no_report = True
                        if urls and urls[0] == b.press_url:
                            st.stale_first = True
            elif o.tool == "parse_pdf":
                hit = self.world.urls.get(str(o.args.get("url")))
                if hit is None:
                    continue
                b, stale = hit
                stale = stale and o.key not in overlooked
                st = states[b.company]
                if o.error == "password_protected" and not stale:
                    st.protected = True
                elif o.error is None:
                    if stale:
                        st.stale_doc = o.key
                    else:
                        st.doc = o.key
            elif o.tool == "fetch_filing" and o.error is None:
                states[o.result["company"]].doc = o.key
            elif o.tool == "fetch_filing" and o.error == "not_found":
                name = str(o.args.get("company", "")).lower()
                for b in self.branches:
                    if b.company.lower() == name and o.args.get("year") == b.year:
                        states[b.company].filing_missing = True
            elif o.tool == "extract_data" and o.error is None:
                doc = self.world.docs.get(str(o.args.get("doc_id")))
                figures = isinstance(o.result, dict) and None not in (
                    o.result.get("revenue"),
                    o.result.get("profit"),
                )
                figures = figures or o.key in overlooked
                if doc is not None and figures:  # a "200 but wrong" payload is no data
                    b, stale = doc
                    stale = stale and o.key not in overlooked
                    if stale:
                        states[b.company].stale_data = o.key
                    else:
                        states[b.company].data = o.key
        return states, dead_tools

    def remaining(
        self, observations: Sequence[Obs], overlooked: frozenset[str] = frozenset()
    ) -> list[GoldStep]:
        """The correct remaining steps, branch by branch, then the summary (empty when done).

        Where a model holds stale figures for the next branch, the attractive wrong move is to
        accept them and move on (the trap of the first step); where it holds a summary built on
        stale figures, the attractive wrong move is to submit it.
        """
        if self.answer(observations) is not None:
            return []
        states, dead = self._states(observations, overlooked)
        if overlooked and all(st.data is not None for st in states.values()):
            last_data = max(
                i for i, o in enumerate(observations) for st in states.values() if o.key == st.data
            )
            if any(
                o.tool == "generate_summary" and o.error is None
                for o in observations[last_data + 1 :]
            ):
                return []  # it believes the report it holds is complete
        for b in self.branches:
            st = states[b.company]
            if st.no_report and st.filing_missing and st.data is None:
                reason = f"{b.company} has published no FY{b.year} report or filing"
                return [GoldStep("unreachable", REPORT_UNREACHABLE, {"reason": reason})]
        steps = self._remaining(states, dead, frozenset())
        first = next((b for b in self.branches if states[b.company].data is None), None)
        if first is not None and steps:
            st = states[first.company]
            if st.stale_data is not None or (st.stale_doc is not None and st.doc is None):
                accepted = self._remaining(states, dead, frozenset({first.company}))
                if accepted:
                    steps[0].trap_plan = accepted
        summarized = any(o.tool == "generate_summary" and o.error is None for o in observations)
        if summarized and steps and steps[0].trap_plan is None:
            steps[0].trap_plan = [GoldStep("submit", SUBMIT_ANSWER, {})]
        return steps

    def _remaining(
        self, states: dict[str, _BranchState], dead: set[str], accept_stale: frozenset[str]
    ) -> list[GoldStep]:
        """Gold steps from the branch states; ``accept_stale`` branches count stale figures
        as done (the shape of the trap plan)."""
        steps: list[GoldStep] = []
        data_refs: list[Ref] = []
        data_deps: list[str] = []
        live_search = [t for t in SEARCH_TOOLS if t not in dead]
        for b in self.branches:
            st = states[b.company]
            if st.data is not None or (b.company in accept_stale and st.stale_data):
                key = st.data if st.data is not None else st.stale_data
                assert key is not None
                data_refs.append(Ref(key))
                data_deps.append(key)
                continue
            doc_key: str
            if st.doc is not None or (b.company in accept_stale and st.stale_doc):
                doc_key = st.doc or st.stale_doc or ""
            else:
                doc_steps = self._doc_steps(b, st, live_search)
                steps += doc_steps
                doc_key = doc_steps[-1].key
            extract = GoldStep(
                f"extract:{slug(b.company)}",
                "extract_data",
                {"doc_id": Ref(doc_key, ("doc_id",)), "fields": ["revenue", "profit"]},
                deps=[doc_key],
                post=["result.revenue != null", f"result.year == {b.year}"],
                checks=check_pool(FIGURES, [f"result.year == {b.year}"]),
            )
            steps.append(extract)
            data_refs.append(Ref(extract.key))
            data_deps.append(extract.key)
        steps.append(
            GoldStep(
                "summary",
                "generate_summary",
                {"data": data_refs},
                deps=data_deps,
                post=["result.summary != null"],
                checks=check_pool(["summary"]),
            )
        )
        return steps

    def _doc_steps(self, b: Branch, st: _BranchState, live_search: list[str]) -> list[GoldStep]:
        """The steps that get a branch's document, the last one making it: parse the report
        found, else fetch the filing (the PDF is protected, no search engine is left or the
        report does not exist), else search for the report and parse what it finds."""
        s, y = slug(b.company), b.year
        # the extract reads the document's doc_id; the parse reads the search's first url
        doc_checks = check_pool(["doc_id"], [f"result.year == {y}"])
        search_checks = check_pool(["url"], ["result.count > 0"])
        if st.good_url is not None and not st.protected:
            parse = GoldStep(
                f"parse:{s}",
                "parse_pdf",
                {"url": st.good_url},
                post=[f"result.year == {y}"],
                checks=list(doc_checks),
            )
            if st.stale_first and st.stale_doc is None:
                parse.trap = GoldStep(
                    f"parse:{s}",
                    "parse_pdf",
                    {"url": b.press_url},
                    post=[f"result.year == {y}"],
                    checks=list(doc_checks),
                )
            return [parse]
        if st.protected or not live_search or st.no_report:
            fetch = GoldStep(
                f"filing:{s}",
                "fetch_filing",
                {"company": b.company, "year": y},
                post=[f"result.year == {y}"],
                checks=list(doc_checks),
            )
            return [fetch]
        queries = [q for q in precise_queries(b) if q not in st.bad_queries]
        query = queries[0] if queries else precise_queries(b)[-1]
        tool = live_search[0]
        fallback = live_search[1] if len(live_search) > 1 else None
        search = GoldStep(
            f"search:{s}",
            tool,
            {"query": query},
            post=["result.count > 0"],
            pre=[f"api_key_valid.{tool} == true"],
            fallback=fallback,
            checks=list(search_checks),
        )
        if b.stale_trap and st.stale_doc is None:
            search.trap = GoldStep(
                f"search:{s}",
                tool,
                {"query": vague_query(b)},
                post=["result.count > 0"],
                pre=[f"api_key_valid.{tool} == true"],
                fallback=fallback,
                checks=list(search_checks),
            )
        parse = GoldStep(
            f"parse:{s}",
            "parse_pdf",
            {"url": Ref(search.key, ("url",))},
            deps=[search.key],
            post=[f"result.year == {y}"],
            checks=list(doc_checks),
        )
        return [search, parse]

    def answer(self, observations: Sequence[Obs]) -> str | None:
        """The finished report, once a summary with every right figure has been observed."""
        for o in reversed(observations):
            if o.tool == "generate_summary" and o.error is None and isinstance(o.result, dict):
                text = str(o.result.get("summary", ""))
                if all(
                    f"revenue {b.revenue}" in text and f"profit {b.profit}" in text
                    for b in self.branches
                ):
                    return text
        return None

    def partial_answer(self, observations: Sequence[Obs]) -> str:
        """What a model that stops early would write: the figures it has seen so far."""
        for o in reversed(observations):
            if o.tool == "generate_summary" and o.error is None and isinstance(o.result, dict):
                return str(o.result.get("summary", ""))
        lines = []
        for o in observations:
            if o.tool == "extract_data" and o.error is None and isinstance(o.result, dict):
                r = o.result
                lines.append(
                    fact_line(
                        str(r.get("company")),
                        int(r.get("year", 0)),
                        str(r.get("revenue")),
                        str(r.get("profit")),
                    )
                )
        return "\n".join(lines) if lines else "I could not find the figures."
