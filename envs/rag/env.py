"""The rag env: seeded questions, the grader and :class:`RagEnv` (what ``env=rag`` makes).

A question asks about one crag by name (simple), the crag nearest a station and its easiest
route (medium: two hops), or the crags nearest two stations with three facts each (complex).
The grader reads the facts off the answer's lines; a fact only an outdated page states, on a
line naming its crag, is a trap in the answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
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
from planarena.envs.grading import check_grading, normalise, segments
from planarena.envs.rag.index import corpus, first_crag
from planarena.envs.rag.oracle import RagOracle
from planarena.envs.rag.tables import STATIONS
from planarena.envs.rag.world import (
    LATENCY,
    SLOTS,
    RagWorld,
    branches_of,
    nearest_queries,
    required_facts,
    stale_facts,
)
from planarena.envs.rng import derive_rng
from planarena.envs.tools import LatencyProfile, ToolCallRecord

ENV_NAME = "rag"


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


def _as(text: str, grading: str) -> str:
    """A fact's text as the policy compares it."""
    return normalise(text) if grading == "facts" else text.lower()


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


def grade(
    task: Task, answer: str | None, calls: Sequence[ToolCallRecord], grading: str = "exact"
) -> Grade:
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
    if grading == "facts":  # case, punctuation and spacing folded, per line and sentence
        lines = segments(answer)
    required = required_facts(task)
    found = 0
    route_of = {crag: fact for slot, crag, fact in required if slot == "easiest"}
    for slot, crag, fact in required:
        if slot == "grade":
            route = _as(route_of[crag], grading)
            found += any(route in ln and _has_token(ln, _as(fact, grading)) for ln in lines)
        else:
            found += any(_as(fact, grading) in ln for ln in lines)
    trap_in_answer = any(
        fact and any(_as(crag, grading) in ln and _as(fact, grading) in ln for ln in lines)
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


@dataclass
class RagEnv:
    """Factory for tasks, toolboxes and the oracle of the rag family."""

    name: str = ENV_NAME
    p_trap: float = 0.5
    grading: str = "facts"  # set from the run's ``grading`` (envs/grading.py)
    latency: dict[str, LatencyProfile] = field(default_factory=lambda: dict(LATENCY))

    def __post_init__(self) -> None:
        check_share("p_trap", self.p_trap)
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
            p_trap=self.p_trap,
            unreachable_rate=unreachable_rate,
            start=start,
        )

    def make_tools(
        self, task: Task, *, rules: Sequence[FaultRule], seed_keys: tuple[object, ...]
    ) -> EpisodeTools:
        return wrap_tools(RagWorld(task), latency=self.latency, rules=rules, seed_keys=seed_keys)

    def grade(self, task: Task, answer: str | None, calls: Sequence[ToolCallRecord]) -> Grade:
        return grade(task, answer, calls, self.grading)

    def exposure(
        self, task: Task, *, rules: Sequence[FaultRule], seed_keys: tuple[object, ...]
    ) -> list[str]:
        """Episode- and argument-scoped faults on the calls a correct solution makes (the
        conditional queries as a model writes them, with the crag named)."""
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
        return RagOracle(task)
