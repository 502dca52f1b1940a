"""The world of a family task: every call it knows, and the toolbox that serves them.

:class:`FamilyIndex` keys every call a task's nodes can be made by (its ways, its trap's
call, its calls on a decoy parent's output) by tool and arguments; the world, the oracle and
the grader all read one index, so they agree on what a call was.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from planarena.envs.base import Task
from planarena.envs.family.schema import FamilyDecl
from planarena.envs.family.templates import literal
from planarena.envs.tools import Toolbox, ToolError, ToolSpec, args_key, validate_args


@dataclass
class Entry:
    """What one known call is: the right call of a node (by one of its ways), its trap, or
    a call on a decoy parent's output that reveals the decoy."""

    node: str
    kind: Literal["right", "trap", "reveal"]
    result: Any
    way: int = 0
    parent: str | None = None  # reveal: the decoy's node


class FamilyIndex:
    """Every call the world knows, keyed by (canonical tool, args)."""

    def __init__(self, decl: FamilyDecl, task: Task) -> None:
        self.decl = decl
        self.task = task
        self.nodes: dict[str, dict[str, Any]] = {nd["key"]: nd for nd in task.world["nodes"]}
        self.sinks: list[str] = list(task.world["sinks"])
        self.missing: str | None = task.world.get("missing")
        self.children: dict[str, list[str]] = {k: [] for k in self.nodes}
        for nd in self.nodes.values():
            for p in nd["parents"]:
                self.children[p].append(nd["key"])
        self.entries: dict[tuple[str, str], Entry] = {}
        for nd in self.nodes.values():
            for wi, way in enumerate(nd["ways"]):
                self._add(
                    way["tool"], literal(way["args"]), Entry(nd["key"], "right", nd["result"], wi)
                )
            trap = nd["trap"]
            if trap is not None:
                key = self.key(trap["tool"], literal(trap["args"]))
                if key not in self.entries:  # a trap never shadows a right call
                    self.entries[key] = Entry(nd["key"], "trap", trap["result"])
            for r in nd["on_decoy"]:
                key = self.key(r["tool"], literal(r["args"]))
                if key not in self.entries:
                    self.entries[key] = Entry(nd["key"], "reveal", r["result"], parent=r["parent"])

    def canonical(self, tool: str) -> str:
        """The tool whose calls ``tool`` answers (a backup serves its primary's calls)."""
        spec = self.decl.tools.get(tool)
        return spec.serves if spec is not None and spec.serves else tool

    def key(self, tool: str, args: Mapping[str, Any]) -> tuple[str, str]:
        return (self.canonical(tool), args_key(args))

    def _add(self, tool: str, args: Mapping[str, Any], entry: Entry) -> None:
        self.entries.setdefault(self.key(tool, args), entry)

    def match(self, tool: str, args: Any) -> Entry | None:
        if not isinstance(args, dict):
            return None
        return self.entries.get(self.key(tool, args))


def render_item(item: Any) -> str:
    """One answer item as the answer tool writes it: ``field: value`` pairs on one line."""
    if isinstance(item, dict):
        return "; ".join(f"{k}: {v}" for k, v in item.items() if not isinstance(v, (dict, list)))
    return str(item)


class FamilyWorld(Toolbox):
    """The family's tools over one task. Stateful per episode: which nodes are done."""

    def __init__(self, decl: FamilyDecl, task: Task, index: FamilyIndex | None = None) -> None:
        self.decl = decl
        self.task = task
        self.index = index or FamilyIndex(decl, task)
        self._specs = {
            name: ToolSpec(name, t.description, t.args) for name, t in decl.tools.items()
        }
        self.done: set[str] = set()

    def catalogue(self) -> list[ToolSpec]:
        return list(self._specs.values())

    def facts(self) -> dict[str, Any]:
        facts: dict[str, Any] = {**super().facts(), **self.decl.facts.static}
        if self.decl.facts.done:
            facts[self.decl.facts.done] = {
                nd["slug"]: nd["key"] in self.done for nd in self.index.nodes.values()
            }
        return facts

    async def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        spec = self._specs.get(name)
        if spec is None:
            raise ToolError("unknown_tool", f"no tool named {name!r}")
        validate_args(spec, args)
        decl = self.decl.tools[name]
        if decl.kind == "answer":
            items = args.get(self.decl.answer.arg)
            if not isinstance(items, list) or not items:
                raise ToolError(
                    "bad_args", f"{name}: '{self.decl.answer.arg}' must be a non-empty list"
                )
            return {"answer": "\n".join(render_item(i) for i in items), "items": len(items)}
        entry = self.index.match(name, args)
        if entry is None:
            raise ToolError("not_found", f"{name}: nothing found for {args_key(args)}")
        nd = self.index.nodes[entry.node]
        if entry.kind == "right" and entry.node == self.index.missing:
            raise ToolError("not_found", f"{name}: {nd['name']}: {self.decl.unreachable.message}")  # type: ignore[union-attr]
        if entry.kind == "right" and decl.requires_deps:
            waiting = [p for p in nd["parents"] if p not in self.done]
            if waiting:
                names = ", ".join(self.index.nodes[p]["name"] for p in waiting)
                raise ToolError("not_found", f"{name}: upstream not ready: {names}")
        if entry.kind == "right":
            self.done.add(entry.node)
        return _copy(entry.result)


def _copy(value: Any) -> Any:
    """A deep copy of a plain-data result (an agent may change what it was given)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
