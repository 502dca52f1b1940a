"""The ``rag`` task family: the second source article's RAG plan-and-execute workflow.

Questions about rock climbing near Taipei (the nearest crag to a station, its easiest route and
grade, its season, how to get there) are answered from a shipped corpus of short guide pages
(``planarena.envs.rag.corpus``), retrieved with BM25 (``bm25s``, built in memory from the shipped file; no
download, no stemmer). Three tools:

- ``retrieve(query)``: BM25 over the whole corpus, top 3 documents;
- ``retrieve_conditional(query)``: retrieval conditioned on an earlier result: the query carries
  that result (a plan writes ``{dep_result}``, filled by the executor from the step it depends
  on) and the condition is the first crag the query names; only that crag's documents rank;
- ``synthesize(question, context)``: the answer, written only from the retrieval results in
  ``context``.

Multi-hop questions (medium, complex) need the conditional step: the crag is only known after
the first retrieval. Retrieval quality is a world property: some facts also exist in an
outdated near-duplicate (an old guide naming a crag closed since, or an old season or grade)
that ranks first for a vague query; its date (``top_year``) is the warning sign.

The article's three silent bugs are loud here. A query that still holds a placeholder
(``{dep_result}`` or any ``{name}``) is refused (``ERROR plan_logic``); a conditional query
that names no crag (``{dep_result}`` filled from the wrong step, or no dependency at all) is
refused; and ``synthesize`` refuses to answer a question part no context document supports (a
skipped or missing ``retrieve_conditional``), instead of writing a fluent answer without it.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

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
from planarena.envs.rag.corpus import DATA_FILE, STATIONS
from planarena.envs.rng import derive_rng
from planarena.envs.tools import (
    PLAN_LOGIC,
    LatencyProfile,
    Toolbox,
    ToolCallRecord,
    ToolError,
    ToolSpec,
    validate_args,
)

if TYPE_CHECKING:  # the oracle module imports this one
    from planarena.envs.rag.oracle import RagOracle

ENV_NAME = "rag"
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
    return f"climbing near {station}"


# ------------------------------------------------------------------------ the corpus


@dataclass(frozen=True)
class Corpus:
    docs: tuple[dict[str, Any], ...]
    by_id: dict[str, dict[str, Any]]
    crags: tuple[str, ...]  # every crag name, longest first (for matching)
    retriever: Any

    def scores(self, query: str) -> list[float]:
        import bm25s

        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)[0]
        if not tokens:
            return [0.0] * len(self.docs)
        return [float(s) for s in self.retriever.get_scores(tokens)]


@lru_cache(maxsize=1)
def corpus() -> Corpus:
    """The shipped corpus and its BM25 index (built once per process, in memory)."""
    import bm25s

    logging.getLogger("bm25s").setLevel(logging.WARNING)  # its index build logs at DEBUG
    docs = tuple(json.loads(line) for line in DATA_FILE.read_text("utf-8").splitlines() if line)
    texts = [f"{d['title']}. {d['text']}" for d in docs]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    crags = tuple(sorted({d["crag"] for d in docs if d["crag"]}, key=lambda c: (-len(c), c)))
    return Corpus(docs, {d["doc_id"]: d for d in docs}, crags, retriever)


def first_crag(text: str) -> str | None:
    """The crag a text names first (the condition of a conditional retrieval)."""
    low = text.lower()
    best: tuple[int, str] | None = None
    for crag in corpus().crags:
        at = low.find(crag.lower())
        if at >= 0 and (best is None or at < best[0]):
            best = (at, crag)
    return best[1] if best else None


def split_conditional(query: str) -> tuple[str, str]:
    """(the text that carries the condition, the words that are asked) of a conditional
    query: an earlier result filled in as JSON is the condition and the rest is asked;
    a query with no JSON in it (a crag named in plain words) is both."""
    at = query.find("{")
    if at >= 0:
        try:
            _, length = json.JSONDecoder().raw_decode(query[at:])
        except json.JSONDecodeError:
            return query, query
        rest = f"{query[:at]} {query[at + length :]}".strip()
        return query[at : at + length], rest or query
    return query, query


# an unfilled placeholder: {dep_result}, {{step_1.result}}, {anything} left in a query
_PLACEHOLDER = re.compile(r"\{\{?\s*[A-Za-z_][\w.\[\]]*\s*\}?\}")


def _check_filled(tool: str, query: str) -> None:
    m = _PLACEHOLDER.search(query)
    if m is not None:
        raise ToolError(
            PLAN_LOGIC,
            f"{tool}: the query still holds the placeholder {m.group(0)!r}; it must be "
            "filled from the result of the step it depends on before the call",
        )


_DOC_ID = re.compile(r"\bd\d{3}\b")


def _doc_view(doc: dict[str, Any]) -> dict[str, Any]:
    return {
        "doc_id": doc["doc_id"],
        "title": doc["title"],
        "date": doc["date"],
        "kind": doc["kind"],
        "text": doc["text"],
    }


# ------------------------------------------------------------------------ the world


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


# ------------------------------------------------------------------------ tasks


def _crags_with(kind: str, outdated: bool) -> list[str]:
    """Open crags that have (or have not) an outdated document of ``kind``."""
    docs = corpus().docs
    stale = {d["crag"] for d in docs if d["kind"] == kind and d["outdated"]}
    open_crags = [s[1] for s in STATIONS]
    return [c for c in open_crags if (c in stale) == outdated]


def _question(branches: list[dict[str, Any]]) -> str:
    b = branches[0]
    if len(branches) == 1 and b["station"] is None:
        return {
            "easiest": f"What is the easiest route at {b['crag']}, and what is its grade?",
            "season": f"When is the best season to climb at {b['crag']}?",
            "access": f"How do you get to {b['crag']} by public transport?",
        }[b["slots"][0]]
    if len(branches) == 1:
        return (
            f"What is the grade of the easiest route at the crag nearest to {b['station']} "
            "station? Name the crag, the route and its grade."
        )
    extra = SLOTS[b["slots"][1]]["what"]
    stations = " and to ".join(f"{x['station']} station" for x in branches)
    return (
        f"For a beginner trip, compare the crags nearest to {stations}: for each, name the "
        f"crag, its easiest route with its grade, and {extra}."
    )


def generate_tasks(
    n: int,
    *,
    seed: int,
    complexity: str,
    p_trap: float = 0.5,
    unreachable_rate: float = 0.0,
    start: int = 0,
) -> list[Task]:
    """``n`` seeded questions: simple (one fact about a named crag, 1 retrieval), medium (the
    nearest crag to a station, then its easiest route: 2 hops), complex (two stations, three
    facts each: 6 retrievals, 4 of them conditional)."""
    if complexity not in COMPLEXITIES:
        raise ValueError(f"complexity must be one of {COMPLEXITIES}, got {complexity!r}")
    trap_stations = [s[0] for s in STATIONS if s[3] is not None]
    plain_stations = [s[0] for s in STATIONS if s[3] is None]
    nearest = {s[0]: s[1] for s in STATIONS}
    tasks = []
    for index in range(start, start + n):
        rng = derive_rng(seed, "task", ENV_NAME, complexity, index)
        branches: list[dict[str, Any]] = []
        if complexity == "simple":
            slot = rng.choice(("easiest", "season", "access"))
            kind = SLOTS[slot]["kind"]
            trap = rng.random() < p_trap and bool(_crags_with(kind, True))
            crag = rng.choice(_crags_with(kind, trap))
            branches.append({"crag": crag, "station": None, "slots": [slot]})
        else:
            k = 1 if complexity == "medium" else 2
            slots = ["easiest"] if k == 1 else ["easiest", rng.choice(("season", "access"))]
            chosen: list[str] = []
            for _ in range(k):
                trap = rng.random() < p_trap
                pool = [s for s in (trap_stations if trap else plain_stations) if s not in chosen]
                chosen.append(rng.choice(pool))
            for station in chosen:
                branches.append(
                    {"crag": nearest[station], "station": station, "slots": list(slots)}
                )
        unreachable = derive_rng(seed, "unreachable", ENV_NAME, complexity, index).random() < (
            unreachable_rate
        )
        hidden: list[str] = []
        if unreachable:  # the corpus has nothing on the last part asked about the last crag
            last = branches[-1]
            kind = SLOTS[last["slots"][-1]]["kind"]
            hidden = [
                d["doc_id"]
                for d in corpus().docs
                if d["kind"] == kind and d["crag"] == last["crag"]
            ]
        tasks.append(
            Task(
                task_id=task_id(ENV_NAME, complexity, index),
                env=ENV_NAME,
                complexity=complexity,
                goal=_question(branches),
                world={"branches": branches, "hidden": hidden},
                unreachable=unreachable,
            )
        )
    return tasks


# ------------------------------------------------------------------------ grading


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


def _has_token(line: str, token: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(token.lower())}(?![\w])", line) is not None


def _missing_seen(task: Task, calls: Sequence[ToolCallRecord]) -> bool:
    """A retrieval about the hidden part (its crag, its words) came back without it."""
    if not task.world.get("hidden"):
        return False
    last = branches_of(task)[-1]
    slot = last.slots[-1]
    kind = SLOTS[slot]["kind"]
    asks = (*SLOTS[slot]["asks"], SLOTS[slot]["vague"])
    for c in calls:
        if c.tool not in ("retrieve", "retrieve_conditional") or not c.ok:
            continue
        query = str(c.args.get("query", ""))
        if first_crag(query) != last.crag or not any(query.endswith(a) for a in asks):
            continue
        result = c.result if isinstance(c.result, dict) else {}
        docs = [corpus().by_id.get(d.get("doc_id")) for d in result.get("documents", [])]
        if not any(d and d["kind"] == kind and d["crag"] == last.crag for d in docs):
            return True
    return False


def grade(task: Task, answer: str | None, calls: Sequence[ToolCallRecord]) -> Grade:
    """Progress = share of required facts in the answer (a grade on the line naming its
    route); an outdated fact on a line naming its crag is a trap in the answer."""
    touched = any(
        c.ok
        and c.tool in ("retrieve", "retrieve_conditional")
        and isinstance(c.result, dict)
        and c.result.get("documents")
        and corpus().by_id[c.result["documents"][0]["doc_id"]]["outdated"]
        for c in calls
    )
    saw_missing = _missing_seen(task, calls)
    if not answer:
        return Grade(
            False, 0.0, trap_touched=touched, saw_missing_data=saw_missing, detail="no answer"
        )
    lines = answer.lower().splitlines()
    required = required_facts(task)
    found = 0
    route_of = {crag: fact for slot, crag, fact in required if slot == "easiest"}
    for slot, crag, fact in required:
        if slot == "grade":
            route = route_of[crag].lower()
            found += any(route in ln and _has_token(ln, fact) for ln in lines)
        else:
            found += any(fact.lower() in ln for ln in lines)
    trap_in_answer = any(
        fact and any(crag.lower() in ln and fact.lower() in ln for ln in lines)
        for crag, fact in stale_facts(task)
    )
    progress = found / len(required)
    return Grade(
        found == len(required) and not trap_in_answer,
        progress,
        trap_in_answer=trap_in_answer,
        trap_touched=touched,
        saw_missing_data=saw_missing,
        detail=f"{found}/{len(required)} facts",
    )


# ------------------------------------------------------------------------ the env


@dataclass
class RagEnv:
    """Factory for tasks, toolboxes and the oracle of the rag family."""

    name: str = ENV_NAME
    p_trap: float = 0.5
    latency: dict[str, LatencyProfile] = field(default_factory=lambda: dict(LATENCY))

    def __post_init__(self) -> None:
        check_share("p_trap", self.p_trap)

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
            p_trap=self.p_trap,
            unreachable_rate=unreachable_rate,
            start=start,
        )

    def make_tools(
        self, task: Task, *, rules: Sequence[FaultRule], seed_keys: tuple[object, ...]
    ) -> EpisodeTools:
        return wrap_tools(RagWorld(task), latency=self.latency, rules=rules, seed_keys=seed_keys)

    def grade(self, task: Task, answer: str | None, calls: Sequence[ToolCallRecord]) -> Grade:
        return grade(task, answer, calls)

    def exposure(
        self, task: Task, *, rules: Sequence[FaultRule], seed_keys: tuple[object, ...]
    ) -> list[str]:
        """Episode- and argument-scoped faults on the calls a correct solution makes (the
        conditional queries as a model writes them, with the crag named)."""
        from planarena.envs.faults import FaultInjector

        injector = FaultInjector(RagWorld(task), rules, seed_keys=seed_keys)
        kinds: set[str] = set()
        for b in branches_of(task):
            tool = "retrieve" if b.station is None else "retrieve_conditional"
            if b.station is not None:
                first = {"query": nearest_queries(b.station)[0]}
                kinds.update(injector.predrawn("retrieve", first))
            for slot in b.slots:
                query = f"{b.crag} {SLOTS[slot]['asks'][0]}"
                kinds.update(injector.predrawn(tool, {"query": query}))
        return sorted(kinds)

    def oracle(self, task: Task) -> RagOracle:
        from planarena.envs.rag.oracle import RagOracle

        return RagOracle(task)


register(ENV_NAME, RagEnv)
