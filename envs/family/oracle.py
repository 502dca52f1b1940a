"""The ground truth of a family task: which steps remain, done right, read from the declaration.

The simulated LLM asks one question of an oracle (which steps remain, given what the agent has
observed); :class:`FamilyOracle` answers it for any family file, with no Python of the
family's own: a node is done once a right call of it was observed, a decoy taken at face value
counts as done until a child's call reveals it, and a way whose arguments met a permanent
fault gives way to the next.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from planarena.envs.base import Task
from planarena.envs.family.schema import PERMANENT_ARG_FAULTS, FamilyDecl
from planarena.envs.family.templates import fmt
from planarena.envs.family.world import FamilyIndex, render_item
from planarena.envs.grading import Fact
from planarena.envs.oracle import (
    REPORT_UNREACHABLE,
    SUBMIT_ANSWER,
    GoldStep,
    Obs,
    Ref,
    check_pool,
)


@dataclass
class _NodeState:
    """What the model holds of one node, read from the observations."""

    done: str | None = None  # observation key that completed it (in the model's view)
    decoy: str | None = None  # observation key of its decoy, seen and not yet revealed
    revealed: bool = False
    trap_seen: bool = False
    failed_ways: set[int] = field(default_factory=set)


class FamilyOracle:
    """The right remaining steps of a family task, from the declaration alone."""

    def __init__(self, decl: FamilyDecl, task: Task, index: FamilyIndex | None = None) -> None:
        self.decl = decl
        self.task = task
        self.index = index or FamilyIndex(decl, task)
        self._tool_names = frozenset(decl.tools)
        # what depends on the declaration and the task alone, computed once per oracle
        self._facts_of: dict[str, set[str]] = {}
        # (node, tool) -> (post-conditions, pre-conditions, check pool)
        self._conditions: dict[tuple[str, str], tuple[list[str], list[str], list[str]]] = {}
        self._required: list[tuple[str, str]] | None = None

    def tool_names(self) -> frozenset[str]:
        return self._tool_names

    def hallucinated_tools(self) -> list[str]:
        return list(self.decl.hallucinated_tools)

    def _fact_fields(self, tool: str) -> set[str]:
        fields = self._facts_of.get(tool)
        if fields is None:
            t = self.decl.tools.get(tool)
            fields = set(self.decl.answer.facts)
            if t is not None and "wrong_result" in t.faults:
                fields |= set(t.faults["wrong_result"].corrupt_fields or [])
            self._facts_of[tool] = fields
        return fields

    def _nulls(self, o: Obs) -> bool:
        return isinstance(o.result, dict) and any(
            f in o.result and o.result[f] is None for f in self._fact_fields(o.tool)
        )

    def subtle(self, observation: Obs) -> bool:
        """A decoy's result (plausible, wrong facts) or a result with a needed field null."""
        o = observation
        if o.error is not None or not isinstance(o.result, dict):
            return False
        entry = self.index.match(o.tool, o.args)
        if entry is None:
            return False
        if entry.kind == "trap":
            return self.index.nodes[entry.node]["trap"]["kind"] == "decoy"
        return entry.kind == "right" and self._nulls(o)

    def _dead_tools(self, observations: Sequence[Obs]) -> set[str]:
        return {
            o.tool
            for o in observations
            if o.error == "invalid_api_key"
            or (o.error == "precondition" and f"api_key_valid.{o.tool}" in str(o.result))
        }

    def _states(
        self, observations: Sequence[Obs], overlooked: frozenset[str]
    ) -> tuple[dict[str, _NodeState], bool]:
        states = {k: _NodeState() for k in self.index.nodes}
        missing_seen = False
        for o in observations:
            entry = self.index.match(o.tool, o.args)
            if entry is None:
                continue
            st = states[entry.node]
            if o.error is not None:
                if entry.kind == "right":
                    if o.error in PERMANENT_ARG_FAULTS:
                        st.failed_ways.add(entry.way)
                    elif (
                        o.error == "not_found"
                        and entry.node == self.index.missing
                        and "upstream not ready" not in str(o.result)
                    ):
                        missing_seen = True
                continue
            if entry.kind == "right":
                if self._nulls(o) and o.key not in overlooked:
                    continue  # a "200 but wrong" payload is no result
                st.done = o.key
            elif entry.kind == "trap":
                trap = self.index.nodes[entry.node]["trap"]
                if trap["kind"] == "dead_end":
                    st.trap_seen = True
                elif not st.revealed:
                    st.decoy = o.key
                    if o.key in overlooked and st.done is None:
                        st.done = o.key
            elif entry.kind == "reveal" and entry.parent is not None:
                ps = states[entry.parent]
                ps.revealed = True
                if ps.done is not None and ps.done == ps.decoy:
                    ps.done = None
                ps.decoy = None
        return states, missing_seen

    def _answered(self, observations: Sequence[Obs], states: dict[str, _NodeState]) -> bool:
        """An answer was written that states every item as the model holds it."""
        if any(states[s].done is None for s in self.index.sinks):
            return False
        by_key = {o.key: o for o in observations}
        for o in reversed(observations):
            if self.decl.tools.get(o.tool) is None or self.decl.tools[o.tool].kind != "answer":
                continue
            if o.error is not None or not isinstance(o.result, dict):
                continue
            text = str(o.result.get("answer", ""))
            return all(
                all(
                    f"{f}: {_held(by_key, states[s].done, f)}" in text
                    for f in self.decl.answer.facts
                )
                for s in self.index.sinks
            )
        return False

    def remaining(
        self, observations: Sequence[Obs], overlooked: frozenset[str] = frozenset()
    ) -> list[GoldStep]:
        """The right remaining steps as the model sees them (``overlooked``: observations
        taken at face value), each node's trap on its step; holding a decoy, the trap plan
        is to go on with it; holding an answer, to submit it."""
        if self.answer(observations) is not None:
            return []
        states, missing_seen = self._states(observations, overlooked)
        if missing_seen:
            nd = self.index.nodes[self.index.missing or ""]
            return [
                GoldStep(
                    "unreachable",
                    REPORT_UNREACHABLE,
                    {"reason": f"{nd['name']}: {self.decl.unreachable.message}"},  # type: ignore[union-attr]
                )
            ]
        if overlooked and self._answered(observations, states):
            return []  # it believes the answer it holds is complete
        dead = self._dead_tools(observations)
        steps = self._build(states, dead)
        decoyed = next(
            (k for k, st in states.items() if st.decoy is not None and st.done is None), None
        )
        if decoyed is not None and steps:
            accepted = {k: _NodeState(**vars(st)) for k, st in states.items()}
            accepted[decoyed].done = accepted[decoyed].decoy
            alt = self._build(accepted, dead)
            if alt:
                steps[0].trap_plan = alt
        answered = any(
            o.error is None
            and self.decl.tools.get(o.tool) is not None
            and self.decl.tools[o.tool].kind == "answer"
            for o in observations
        )
        if answered and steps and steps[0].trap_plan is None:
            steps[0].trap_plan = [GoldStep("submit", SUBMIT_ANSWER, {})]
        return steps

    def _tool_for(self, tool: str, dead: set[str]) -> tuple[str, str | None]:
        """(tool to call, fallback to name) given the tools known to be dead."""
        fb = self.decl.tools[tool].fallback
        if tool in dead and fb is not None and fb not in dead:
            return fb, None
        return tool, (fb if fb is not None and fb not in dead else None)

    def _pre(self, tool: str, nd: Mapping[str, Any]) -> list[str]:
        t = self.decl.tools[tool]
        pre = []
        if "invalid_api_key" in t.faults:
            pre.append(f"api_key_valid.{tool} == true")
        if t.requires_deps and self.decl.facts.done:
            pre += [
                f"{self.decl.facts.done}.{self.index.nodes[p]['slug']} == true"
                for p in nd["parents"]
            ]
        return pre

    def _step(
        self,
        key: str,
        tool: str,
        args: Mapping[str, Any],
        nd: Mapping[str, Any],
        states: dict[str, _NodeState],
        dead: set[str],
    ) -> GoldStep:
        call_tool, fallback = self._tool_for(tool, dead)
        post, pre, checks = self._step_conditions(key, call_tool, nd)
        out: dict[str, Any] = {}
        deps: list[str] = []
        for k, v in args.items():
            if isinstance(v, dict) and "$ref" in v:
                p = v["$ref"]
                src = states[p].done or p
                out[k] = Ref(src, tuple(v["path"]))
                deps.append(src)
            else:
                out[k] = v
        for p in nd["parents"]:
            if states[p].done is None and p not in deps:
                deps.append(p)
        return GoldStep(
            key, call_tool, out, deps=deps, post=post, pre=pre, fallback=fallback, checks=checks
        )

    def _step_conditions(
        self, key: str, tool: str, nd: Mapping[str, Any]
    ) -> tuple[list[str], list[str], list[str]]:
        """(post-, pre-conditions, check pool) of node ``key``'s step when called with
        ``tool``: they depend on the node and the task alone, so they are formatted once (new
        lists each time: a gold step's lists are its own)."""
        known = self._conditions.get((key, tool))
        if known is None:
            tpl = self.decl.templates[nd["template"]]
            ctx = {"name": nd["name"], "slug": nd["slug"], **self.task.world["vars"], **nd["vars"]}
            post = [str(fmt(c, ctx, "post")) for c in tpl.post]
            pre = [*self._pre(tool, nd), *(str(fmt(c, ctx, "pre")) for c in tpl.pre)]
            checks = check_pool(self._needed_fields(key, nd), post)
            known = self._conditions[(key, tool)] = (post, pre, checks)
        return list(known[0]), list(known[1]), list(known[2])

    def _needed_fields(self, key: str, nd: Mapping[str, Any]) -> list[str]:
        """The fields of node ``key``'s result the task needs: the answer's facts when the
        answer states the node (a sink), and the fields its children's calls read through a
        reference. From the declaration's task alone: never from its fault declarations."""
        result = nd["result"] if isinstance(nd["result"], Mapping) else {}
        needed = [f for f in self.decl.answer.facts if key in self.index.sinks and f in result]
        for child in self.index.children[key]:
            for way in self.index.nodes[child]["ways"]:
                needed += [path[0] for path in _ref_paths(way["args"], key) if path]
        return list(dict.fromkeys(needed))

    def _build(self, states: dict[str, _NodeState], dead: set[str]) -> list[GoldStep]:
        steps: list[GoldStep] = []
        for key, nd in self.index.nodes.items():
            st = states[key]
            if st.done is not None:
                continue
            ways = [w for i, w in enumerate(nd["ways"]) if i not in st.failed_ways]
            way = ways[0] if ways else nd["ways"][-1]
            step = self._step(key, way["tool"], way["args"], nd, states, dead)
            trap = nd["trap"]
            fresh = (trap is not None) and not (st.trap_seen or st.decoy is not None or st.revealed)
            if fresh:
                step.trap = self._step(key, trap["tool"], trap["args"], nd, states, dead)
            steps.append(step)
        items = [Ref(states[s].done or s) for s in self.index.sinks]
        steps.append(
            GoldStep(
                "answer",
                self.decl.answer.tool,
                {self.decl.answer.arg: items},
                deps=[states[s].done or s for s in self.index.sinks],
                post=["result.answer != null"],
                checks=check_pool(["answer"]),
            )
        )
        return steps

    def required(self) -> list[tuple[str, str]]:
        """(label, 'field: value') pairs the answer must state."""
        if self._required is None:
            out = []
            for s in self.index.sinks:
                res = self.index.nodes[s]["result"]
                label = str(res[self.decl.answer.label])
                out += [(label, f"{f}: {res[f]}") for f in self.decl.answer.facts]
            self._required = out
        return list(self._required)

    def required_facts(self) -> list[Fact]:
        """The facts the answer must carry, typed (for ``grading=facts``)."""
        out = []
        for s in self.index.sinks:
            res = self.index.nodes[s]["result"]
            label = str(res[self.decl.answer.label])
            out += [Fact(label, f, res[f]) for f in self.decl.answer.facts]
        return out

    def answer(self, observations: Sequence[Obs]) -> str | None:
        """The last answer written that states every required fact, if any."""
        needed = self.required()
        for o in reversed(observations):
            t = self.decl.tools.get(o.tool)
            if t is None or t.kind != "answer" or o.error is not None:
                continue
            if not isinstance(o.result, dict):
                continue
            text = str(o.result.get("answer", ""))
            if _states_all(text, needed):
                return text
        return None

    def partial_answer(self, observations: Sequence[Obs]) -> str:
        """What a model that stops early writes: its last answer, else the items it saw."""
        for o in reversed(observations):
            t = self.decl.tools.get(o.tool)
            if (
                t is not None
                and t.kind == "answer"
                and o.error is None
                and isinstance(o.result, dict)
            ):
                return str(o.result.get("answer", ""))
        sinks = set(self.index.sinks)
        lines = []
        for o in observations:
            entry = self.index.match(o.tool, o.args)
            if (
                o.error is None
                and entry is not None
                and entry.node in sinks
                and entry.kind != "reveal"
            ):
                lines.append(render_item(o.result))
        return "\n".join(lines) if lines else "I could not complete the task."


def _ref_paths(args: Any, key: str) -> list[list[str]]:
    """The paths of every reference to node ``key`` in a way's args (nested ones too)."""
    if isinstance(args, Mapping):
        if args.get("$ref") == key:
            return [[str(p) for p in args.get("path", [])]]
        return [p for v in args.values() for p in _ref_paths(v, key)]
    if isinstance(args, list):
        return [p for v in args for p in _ref_paths(v, key)]
    return []


def _held(by_key: Mapping[str, Obs], key: str | None, f: str) -> Any:
    o = by_key.get(key or "")
    return o.result.get(f) if o is not None and isinstance(o.result, dict) else None


def _states_all(text: str, needed: Sequence[tuple[str, str]]) -> bool:
    lines = text.lower().splitlines()
    return all(
        any(label.lower() in ln and fact.lower() in ln for ln in lines) for label, fact in needed
    )
