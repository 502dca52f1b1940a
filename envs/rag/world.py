"""The rag family's world: its three tools over the corpus, and what a question asks.

A question asks about crags (given by name, or as the nearest to a station) and, for each,
some *slots* (its easiest route, its season, its access): :data:`SLOTS` says which document
kind answers a slot and how careful and vague queries phrase it. The world's tools, the grader
and the oracle all read these, so this module is the one the others import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from planarena.envs.base import Task
from planarena.envs.rag.index import corpus, first_crag, split_conditional
from planarena.envs.tools import (
    PLAN_LOGIC,
    LatencyProfile,
    Toolbox,
    ToolError,
    ToolSpec,
    validate_args,
)

TOP_K = 3

SPECS = (
    ToolSpec(
        "retrieve",
        "BM25 search over the climbing-guide corpus; returns the top documents (doc_id, "
        "title, date, kind, text) and top_year/top_kind of the best one.",
        {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    ),
    ToolSpec(
        "retrieve_conditional",
        "Retrieval conditioned on an earlier result: the query must contain that result (in a "
        "plan write {dep_result} and depend on the step; it is filled before the call) or name "
        "the crag. Only documents about the first crag it names are ranked, by the other "
        "words of the query.",
        {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    ),
    ToolSpec(
        "synthesize",
        "Write the final answer to the question from retrieval results only (context: a list "
        "of retrieve/retrieve_conditional results); refuses a part no document supports.",
        {
            "type": "object",
            "properties": {"question": {"type": "string"}, "context": {"type": "array"}},
            "required": [],  # no context is the plan's mistake: refused as plan_logic below
        },
    ),
)

# A BM25 lookup over a few hundred documents is fast; writing an answer is an LLM call.
LATENCY = {
    "retrieve": LatencyProfile(0.4, 0.5),
    "retrieve_conditional": LatencyProfile(0.5, 0.5),
    "synthesize": LatencyProfile(3.0, 0.4),
}

# What a question asks about one crag (beside which crag is nearest a station): the doc kind
# that answers it, the words a careful query appends (in order of preference) and the vague
# words that rank an outdated near-duplicate first.
SLOTS: dict[str, dict[str, Any]] = {
    "easiest": {
        "kind": "beginner_routes",
        "asks": (
            "easiest beginner route current grades updated 2025",
            "beginner routes current grades updated",
            "current easiest route grade updated",
        ),
        "vague": "beginner routes",
        "what": "the easiest route and its grade",
    },
    "season": {
        "kind": "season",
        "asks": (
            "best season current advice updated",
            "climbing season current advice",
            "current season advice updated",
        ),
        "vague": "season",
        "what": "the best season",
    },
    "access": {
        "kind": "access",
        "asks": ("access approach bus trail", "getting to access approach", "access"),
        "vague": "access",
        "what": "how to get there",
    },
}


def nearest_queries(station: str) -> tuple[str, ...]:
    """Careful phrasings of the first hop, in order; an empty result calls for the next."""
    return (
        f"nearest open crag to {station} station current edition",
        f"{station} station crag guide current edition",
        f"{station} station nearest open crag current",
    )


def nearest_vague(station: str) -> str:
    """The hasty phrasing of the first hop: it ranks an old guide (a closed crag) first."""
    return f"climbing near {station}"


_PLACEHOLDER = re.compile(r"\{\{?\s*[A-Za-z_][\w.\[\]]*\s*\}?\}")


def _check_filled(tool: str, query: str) -> None:
    """Refuse a query that still holds a placeholder (the article's first silent bug)."""
    m = _PLACEHOLDER.search(query)
    if m is not None:
        raise ToolError(
            PLAN_LOGIC,
            f"{tool}: the query still holds the placeholder {m.group(0)!r}; it must be "
            "filled from the result of the step it depends on before the call",
        )


_DOC_ID = re.compile(r"\bd\d{3}\b")


def _doc_view(doc: dict[str, Any]) -> dict[str, Any]:
    """A document as a retrieval shows it (its facts and flags stay hidden)."""
    return {
        "doc_id": doc["doc_id"],
        "title": doc["title"],
        "date": doc["date"],
        "kind": doc["kind"],
        "text": doc["text"],
    }


def slot_facts(doc: dict[str, Any], slot: str) -> str:
    """The answer line a document supports for one question part."""
    f, crag = doc["facts"], doc["crag"]
    if slot == "nearest":
        return f"The nearest crag to {doc['station']} station is {f['crag']}."
    if slot == "easiest":
        return f"The easiest route at {crag} is {f['route']}, graded {f['grade']}."
    if slot == "season":
        return f"The best season at {crag} is {f['season']}."
    return f"To reach {crag}: {f['access']}."


@dataclass(frozen=True)
class Branch:
    """One crag the question is about: given by name, or as the nearest to a station."""

    crag: str
    station: str | None
    slots: tuple[str, ...]  # besides "nearest" (implied by a station)


def branches_of(task: Task) -> list[Branch]:
    """The task's branches (plain data in ``task.world``) as :class:`Branch` es."""
    return [Branch(b["crag"], b.get("station"), tuple(b["slots"])) for b in task.world["branches"]]


class RagWorld(Toolbox):
    """The world's tools over the shipped corpus and the task's hidden documents."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.branches = branches_of(task)
        self.hidden = frozenset(task.world.get("hidden", ()))
        self.corpus = corpus()
        self.found = 0
        self._specs = {s.name: s for s in SPECS}

    def catalogue(self) -> list[ToolSpec]:
        return list(SPECS)

    def facts(self) -> dict[str, Any]:
        return {**super().facts(), "index_ready": True, "documents_found": self.found}

    async def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        spec = self._specs.get(name)
        if spec is None:
            raise ToolError("unknown_tool", f"no tool named {name!r}")
        validate_args(spec, args)
        if name == "synthesize":
            if not args.get("context"):  # the article's bare synthesize step: nothing wired in
                raise ToolError(
                    PLAN_LOGIC,
                    "synthesize: no context; pass the retrieval results to answer from, e.g. "
                    'context: ["{{step_1.result}}", "{{step_2.result}}"]',
                )
            return self.synthesize(args["context"])
        return self.retrieve(args["query"], conditional=name == "retrieve_conditional")

    def rank(
        self, query: str, crag: str | None = None, exclude: frozenset[str] = frozenset()
    ) -> list[dict[str, Any]]:
        """Documents with a positive BM25 score, best first (ties by corpus order)."""
        scores = self.corpus.scores(query)
        ranked = sorted(
            (
                (-s, i)
                for i, s in enumerate(scores)
                if s > 0
                and self.corpus.docs[i]["doc_id"] not in self.hidden
                and (crag is None or self.corpus.docs[i]["crag"] == crag)
                and self.corpus.docs[i]["doc_id"] not in exclude
            ),
        )
        return [self.corpus.docs[i] for _, i in ranked]

    def retrieve(self, query: str, *, conditional: bool = False) -> dict[str, Any]:
        tool = "retrieve_conditional" if conditional else "retrieve"
        _check_filled(tool, query)
        condition, ask = None, query
        if conditional:
            carried, ask = split_conditional(query)
            condition = first_crag(carried)
            if condition is None:
                raise ToolError(
                    PLAN_LOGIC,
                    "retrieve_conditional: the query names no crag to condition on; fill "
                    "{dep_result} from the step that found the crag",
                )
        # a conditional retrieval does not return again what its query already carries
        exclude = frozenset(_DOC_ID.findall(query)) if conditional else frozenset()
        docs = self.rank(ask, condition, exclude)[:TOP_K]
        self.found += len(docs)
        result: dict[str, Any] = {
            "query": query if len(query) <= 200 else query[:200] + "...",
            "count": len(docs),
            "top_year": docs[0]["year"] if docs else None,
            "top_kind": docs[0]["kind"] if docs else None,
            "documents": [_doc_view(d) for d in docs],
        }
        if conditional:
            result["condition"] = condition
        return result

    def synthesize(self, context: list[Any]) -> dict[str, Any]:
        docs = []
        for item in context:
            if isinstance(item, dict) and isinstance(item.get("documents"), list):
                for d in item["documents"]:
                    meta = self.corpus.by_id.get(d.get("doc_id")) if isinstance(d, dict) else None
                    if meta is not None:
                        docs.append(meta)
        if not docs:
            raise ToolError(
                "bad_args", "synthesize: context must list retrieve/retrieve_conditional results"
            )
        lines, missing, sources = [], [], []
        for b in self.branches:
            crag: str | None = b.crag
            if b.station is not None:
                near = next(
                    (d for d in docs if d["kind"] == "nearest_crag" and d["station"] == b.station),
                    None,
                )
                if near is None:
                    missing.append(f"the nearest crag to {b.station} station")
                    continue
                crag = near["facts"]["crag"]
                lines.append(slot_facts(near, "nearest"))
                sources.append(near["doc_id"])
            for slot in b.slots:
                kind = SLOTS[slot]["kind"]
                doc = next((d for d in docs if d["kind"] == kind and d["crag"] == crag), None)
                if doc is None:
                    missing.append(f"{SLOTS[slot]['what']} at {crag}")
                    continue
                lines.append(slot_facts(doc, slot))
                sources.append(doc["doc_id"])
        if missing:
            raise ToolError(
                PLAN_LOGIC,
                "synthesize: no document in the context supports "
                + "; ".join(missing)
                + " (a retrieval step is missing, was skipped or found the wrong thing)",
            )
        return {"answer": "\n".join(lines), "sources": sources}


# The facts of a task's answer: what it must state, and what only an outdated page states (the
# grader reads both; the oracle knows an answer is done by the first).


def required_facts(task: Task) -> list[tuple[str, str, str]]:
    """(slot, crag, fact text) the answer must state."""
    by_id = corpus().docs
    out = []
    for b in branches_of(task):
        if b.station is not None:
            out.append(("nearest", b.crag, b.crag))
        for slot in b.slots:
            doc = next(
                d
                for d in by_id
                if d["kind"] == SLOTS[slot]["kind"] and d["crag"] == b.crag and not d["outdated"]
            )
            f = doc["facts"]
            if slot == "easiest":
                out += [("easiest", b.crag, f["route"]), ("grade", b.crag, f["grade"])]
            elif slot == "season":
                out.append(("season", b.crag, f["season"]))
            else:
                out.append(("access", b.crag, f"bus {f['bus']}"))
    return out


def stale_facts(task: Task) -> list[tuple[str, str]]:
    """(crag the line must name, fact) that only an outdated document states."""
    out = []
    docs = corpus().docs
    for b in branches_of(task):
        if b.station is not None:
            for d in docs:
                if d["kind"] == "nearest_crag" and d["station"] == b.station and d["outdated"]:
                    out.append((d["crag"], d["crag"]))
        for slot in b.slots:
            for d in docs:
                if d["kind"] == SLOTS[slot]["kind"] and d["crag"] == b.crag and d["outdated"]:
                    fact = d["facts"].get("route") or d["facts"].get("season") or ""
                    out.append((b.crag, fact))
    return out
