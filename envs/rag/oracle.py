"""Ground truth for the rag family: the correct remaining steps given observations.

The right plan for a multi-hop question is the article's: ``retrieve`` the crag, then
``retrieve_conditional`` with ``{dep_result}`` filled from that step, then ``synthesize`` from
every result. Once the crag has been observed, the conditional query names it in plain words
(how a model acting step by step writes it). Each retrieval of a fact that also exists in an
outdated near-duplicate has a ``trap``: the same step with a vague query, which ranks the old
page first. Holding an old page it noticed, the attractive wrong move is to go on with it
(``trap_plan``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from planarena.envs.base import Task
from planarena.envs.oracle import REPORT_UNREACHABLE, GoldStep, Obs, Ref, check_pool
from planarena.envs.rag.index import corpus, first_crag, split_conditional
from planarena.envs.rag.world import (
    SLOTS,
    Branch,
    RagWorld,
    nearest_queries,
    nearest_vague,
    required_facts,
)

RETRIEVALS = ("retrieve", "retrieve_conditional")
POST = ["result.count > 0", "result.top_year >= 2024"]


def slot_post(slot: str) -> list[str]:
    kind = SLOTS[slot]["kind"] if slot != "nearest" else "nearest_crag"
    return [*POST, f'result.top_kind == "{kind}"']


def slot_checks(slot: str) -> list[str]:
    """The checks a careful model could write on a retrieval: the documents the synthesis
    reads, and the question's conditions (something found, current, of the asked kind)."""
    return check_pool(["documents"], slot_post(slot))


@dataclass
class _Part:
    """What the model holds for one part of the question (the nearest crag, or one fact)."""

    good: str | None = None  # observation key of a retrieval that answers it
    stale: str | None = None  # observation key of a noticed outdated answer
    bad_queries: set[str] = field(default_factory=set)
    misses: int = 0  # careful retrievals that came back without it


# (station, "nearest") or (crag, slot) -> what the model holds of that part
Parts = dict[tuple[str, str], _Part]
# parts whose noticed outdated answer counts as held (a crag is None before the first hop)
Accepted = frozenset[tuple[str | None, str]]


def _top(o: Obs) -> dict[str, Any] | None:
    if o.error is not None or not isinstance(o.result, dict):
        return None
    docs = o.result.get("documents") or []
    if not docs or not isinstance(docs[0], dict):
        return None
    return corpus().by_id.get(docs[0].get("doc_id"))


def _asked(query: str) -> str | None:
    """Which fact a query asks for, by the words it ends with."""
    for slot, s in SLOTS.items():
        if any(query.endswith(a) for a in (*s["asks"], s["vague"])):
            return slot
    return None


class RagOracle:
    """Reads the task's world; answers what remains to be done correctly."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.world = RagWorld(task)
        self.branches = self.world.branches
        self._tool_names = frozenset(spec.name for spec in self.world.catalogue())
        docs = corpus().docs
        self._stale_near = {
            d["station"] for d in docs if d["kind"] == "nearest_crag" and d["outdated"]
        }
        self._stale_slot = {(d["crag"], d["kind"]) for d in docs if d["outdated"]}
        self._closed = {d["crag"] for d in docs if d["kind"] == "access" and d["outdated"]}
        self._held_crag: dict[str, str] = {}  # observation key -> the crag it found (_read)

    def tool_names(self) -> frozenset[str]:
        return self._tool_names

    def hallucinated_tools(self) -> list[str]:
        return ["vector_search", "search_docs", "rerank", "answer_question"]

    def subtle(self, observation: Obs) -> bool:
        """A retrieval whose best document is an outdated page (its date is the only sign),
        or an answer that came back empty (a "200 but wrong" payload)."""
        o = observation
        if o.tool == "synthesize":
            return o.error is None and isinstance(o.result, dict) and not o.result.get("answer")
        top = _top(o) if o.tool in RETRIEVALS else None
        return top is not None and top["outdated"]

    # --- reading the observations ----------------------------------------------------------

    def _crag_of(self, b: Branch, parts: Parts, accept: Accepted) -> str | None:
        if b.station is None:
            return b.crag
        near = parts[(b.station, "nearest")]
        key = near.good or (near.stale if (b.station, "nearest") in accept else None)
        return self._held_crag.get(key) if key else None

    def _read(self, observations: Sequence[Obs], overlooked: frozenset[str]) -> Parts:
        parts: Parts = {}
        self._held_crag = {}
        for b in self.branches:
            subject = b.station or b.crag
            parts[(subject, "nearest")] = _Part()
        for o in observations:
            if o.tool not in RETRIEVALS:
                continue
            query = str(o.args.get("query", ""))
            top = _top(o)
            slot = _asked(query)
            if slot is None:  # a first hop: which station does it ask about?
                station = next(
                    (b.station for b in self.branches if b.station and b.station in query), None
                )
                if station is None:
                    continue
                part = parts[(station, "nearest")]
                if top is None or top["kind"] != "nearest_crag" or top["station"] != station:
                    part.bad_queries.add(query)  # an error, or a page about something else
                elif top["outdated"] and o.key not in overlooked:
                    part.stale = o.key
                    self._held_crag[o.key] = top["crag"]
                else:
                    part.good = o.key
                    self._held_crag[o.key] = top["crag"]
                continue
            carried, _ = (
                split_conditional(query)
                if o.tool == "retrieve_conditional"
                else (
                    query,
                    query,
                )
            )
            crag = first_crag(carried)
            if crag is None:
                continue
            part = parts.setdefault((crag, slot), _Part())
            kind = SLOTS[slot]["kind"]
            if o.error is not None:
                if o.error == "empty_result":
                    part.bad_queries.add(query)
            elif top is None or top["kind"] != kind or top["crag"] != crag:
                part.bad_queries.add(query)
                part.misses += 1
            elif top["outdated"] and crag not in self._closed and o.key not in overlooked:
                part.stale = o.key
            else:  # a closed crag has only old pages: a model on that line takes them
                part.good = o.key
        return parts

    # --- what remains ----------------------------------------------------------------------

    def remaining(
        self, observations: Sequence[Obs], overlooked: frozenset[str] = frozenset()
    ) -> list[GoldStep]:
        """The correct remaining steps, branch by branch, then the synthesis (empty when an
        answer is in hand)."""
        if self._answered(observations):
            return []
        parts = self._read(observations, overlooked)
        for b in self.branches:  # careful retrievals keep coming back without the fact
            crag = self._crag_of(b, parts, frozenset())
            for slot in b.slots:
                part = parts.get((crag or "", slot))
                tried = part is not None and all(
                    f"{crag} {a}" in part.bad_queries for a in SLOTS[slot]["asks"]
                )
                # two careful phrasings found other pages, or every phrasing is spent
                if (
                    part is not None
                    and part.good is None
                    and (part.misses >= 2 or (part.misses >= 1 and tried))
                ):
                    what = SLOTS[slot]["what"]
                    reason = f"the guides have nothing on {what} at {crag}"
                    return [GoldStep("unreachable", REPORT_UNREACHABLE, {"reason": reason})]
        steps = self._remaining(parts, frozenset())
        noticed = self._first_noticed(parts)
        if noticed is not None and steps:
            accepted = self._remaining(parts, frozenset({noticed}))
            if accepted:
                steps[0].trap_plan = accepted
        return steps

    def _answered(self, observations: Sequence[Obs]) -> bool:
        return any(
            o.tool == "synthesize"
            and o.error is None
            and isinstance(o.result, dict)
            and o.result.get("answer")
            for o in observations
        )

    def _first_noticed(self, parts: Parts) -> tuple[str | None, str] | None:
        """The first part for which the model holds only a noticed outdated answer."""
        for b in self.branches:
            if b.station is not None:
                near = parts[(b.station, "nearest")]
                if near.good is None:
                    return (b.station, "nearest") if near.stale else None
            crag = self._crag_of(b, parts, frozenset())
            for slot in b.slots:
                part = parts.get((crag or "", slot))
                if part is None or part.good is None:
                    return (crag, slot) if part is not None and part.stale else None
        return None

    def _remaining(self, parts: Parts, accept: Accepted) -> list[GoldStep]:
        """Gold steps from what the model holds; ``accept`` parts count a noticed outdated
        answer as held (the shape of the trap plan)."""
        steps: list[GoldStep] = []
        context: list[Ref] = []
        deps: list[str] = []
        for i, b in enumerate(self.branches):
            near_key: str | None = None
            crag = self._crag_of(b, parts, accept)
            if b.station is not None:
                near = parts[(b.station, "nearest")]
                held = near.good or (near.stale if (b.station, "nearest") in accept else None)
                if held is not None:
                    near_key = held
                else:
                    step = self._nearest_step(i, b.station, near)
                    steps.append(step)
                    near_key = step.key
                context.append(Ref(near_key))
                deps.append(near_key)
            for slot in b.slots:
                part = parts.get((crag or "", slot), _Part())
                held = part.good or (part.stale if (crag, slot) in accept else None)
                if held is not None:
                    context.append(Ref(held))
                    deps.append(held)
                    continue
                step = self._slot_step(i, b, slot, crag, part, near_key)
                steps.append(step)
                context.append(Ref(step.key))
                deps.append(step.key)
        steps.append(
            GoldStep(
                "synthesize",
                "synthesize",
                {"question": self.task.goal, "context": context},
                deps=list(dict.fromkeys(deps)),
                post=["result.answer != null"],
                pre=["documents_found > 0"],
                checks=check_pool(["answer"]),
            )
        )
        return steps

    def _nearest_step(self, i: int, station: str, near: _Part) -> GoldStep:
        """The first hop of branch ``i``: retrieve the crag nearest ``station``, by the first
        careful phrasing not seen to fail; its trap is the vague query that ranks an old
        guide first."""
        queries = [q for q in nearest_queries(station) if q not in near.bad_queries]
        query = queries[0] if queries else nearest_queries(station)[-1]
        step = GoldStep(
            f"nearest:{i}",
            "retrieve",
            {"query": query},
            post=slot_post("nearest"),
            pre=["index_ready == true"],
            checks=slot_checks("nearest"),
        )
        vague = nearest_vague(station)
        # a query seen to find nothing tempts no one
        if station in self._stale_near and near.stale is None and vague not in near.bad_queries:
            step.trap = GoldStep(
                step.key,
                "retrieve",
                {"query": vague},
                post=slot_post("nearest"),
                pre=["index_ready == true"],
                checks=slot_checks("nearest"),
            )
        return step

    def _slot_step(
        self, i: int, b: Branch, slot: str, crag: str | None, part: _Part, near_key: str | None
    ) -> GoldStep:
        """The retrieval of one fact about the crag of branch ``i`` (conditional on the first
        hop when the crag is found there); its trap is the vague query, where an outdated
        twin of the page exists."""
        s = SLOTS[slot]
        asks = [a for a in s["asks"] if f"{crag} {a}" not in part.bad_queries]
        ask = asks[0] if asks else s["asks"][-1]
        tool = "retrieve" if b.station is None else "retrieve_conditional"
        # the crag known: name it; planned ahead: filled from the step that finds it
        named = crag if crag is not None else "{dep_result}"
        query, vague = f"{named} {ask}", f"{named} {s['vague']}"
        step_deps = [near_key] if near_key else []
        step = GoldStep(
            f"{slot}:{i}",
            tool,
            {"query": query},
            deps=step_deps,
            post=slot_post(slot),
            pre=["index_ready == true"],
            checks=slot_checks(slot),
        )
        trap_crag = crag if crag is not None else b.crag
        outdated_twin = (trap_crag, s["kind"]) in self._stale_slot
        tempting = vague not in part.bad_queries and trap_crag not in self._closed
        if outdated_twin and part.stale is None and tempting:
            step.trap = GoldStep(
                step.key,
                tool,
                {"query": vague},
                deps=step_deps,
                post=slot_post(slot),
                pre=["index_ready == true"],
                checks=slot_checks(slot),
            )
        return step

    # --- answers ---------------------------------------------------------------------------

    def answer(self, observations: Sequence[Obs]) -> str | None:
        """The finished answer, once a synthesis stating every required fact is observed."""
        facts = [f.lower() for _, _, f in required_facts(self.task)]
        for o in reversed(observations):
            if o.tool == "synthesize" and o.error is None and isinstance(o.result, dict):
                text = str(o.result.get("answer") or "")
                if text and all(f in text.lower() for f in facts):
                    return text
        return None

    def partial_answer(self, observations: Sequence[Obs]) -> str:
        """What a model that stops early writes: the last synthesis, else the best page."""
        for o in reversed(observations):
            answer = o.result.get("answer") if isinstance(o.result, dict) else None
            if o.tool == "synthesize" and o.error is None and answer:
                return str(answer)
        for o in reversed(observations):
            top = _top(o) if o.tool in RETRIEVALS else None
            if top is not None:
                return f"{top['title']}: {top['text']}"
        return "I could not find the answer in the guides."
