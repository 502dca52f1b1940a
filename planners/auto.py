"""``planner=auto``: pick a strategy per task from what is visible before acting, then run it.

The choice comes from a *decision map* measured by ``planarena experiment=decision_map`` and
shipped as a small versioned data file (``planners/data/decision_map.json``, with the
assumptions it was measured under). Auto reads only what any planner may read before its first
action:

- the goal's structure: how many entities it names (``items``: bullet lines, a ``A > B > C``
  path, snake_case identifiers, names and a listed enumeration; the largest of these counts)
  and whether it declares dependencies (``deps``: "(after x)", "depends on", "dependencies");
- the number of tools in the toolbox's catalogue (``tools``; the shipped map does not key on it,
  since on the shipped families it names a pair of families);
- the configured token budget of the episode (``budget``) and the configured model profile
  (``model``: ``llm.skill`` for the simulated LLM, or set ``planner.auto.model_profile``).

It never reads the env's oracle, the fault rules, the task's complexity label or its id. The
map's most specific entry matching these features names a strategy, which auto builds from its
shipped planner config (``configs/planner/<name>.yaml``, with ``planner.auto.settings.<name>``
merged on top) and runs on the task. The choice and why go into the trace (event
``auto_choice``) and from there into the record (``auto_choice``, ``auto_reason``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from planarena.configs import CONFIG_DIR
from planarena.envs.tools import Toolbox
from planarena.planners.base import Planner, PlannerResult, TaskView
from planarena.planners.llm.base import EpisodeLLM
from planarena.planners.params import checked

MAP_FORMAT = "planarena.decision_map/1"
"""The data file's format tag; a file of another format is refused when auto is built."""

SHIPPED_MAP = Path(__file__).resolve().parent / "data" / "decision_map.json"
"""The map ``experiment=decision_map`` measured, copied into the package (docs/decision-map.md)."""

ITEM_BINS: tuple[tuple[str, int, int], ...] = (
    ("1", 0, 1),
    ("2", 2, 2),
    ("3-4", 3, 4),
    ("5-8", 5, 8),
    ("9+", 9, 10**9),
)
"""Buckets of the goal's entity count (label, low, high), shared by auto and the study."""

WILDCARD = None
"""A map entry's field that matches any value (JSON ``null``)."""

_BULLET = re.compile(r"^\s*(?:[-*]|\d+[.)])\s+\S", re.M)
_DEPS = re.compile(r"\(after\s|\bdepends?\s+on\b|\bdependencies\b", re.I)
_IDENT = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
_NAME = re.compile(r"\b[A-Z][A-Za-z0-9]*(?:\s+[A-Z0-9][A-Za-z0-9]*)*")
_SENTENCE = re.compile(r"(?<=[.?!:])\s+")
_ENUM = re.compile(r":\s*([^\n.?!]+)")


@dataclass(frozen=True)
class Features:
    """What auto decides from: all of it visible before the first action."""

    items: int
    deps: bool
    tools: int
    budget: int | None
    model: str

    @property
    def items_bin(self) -> str:
        return items_bin(self.items)

    def describe(self) -> str:
        """``items=3 deps=no tools=6 budget=none model=strong`` (the record's reason starts so)."""
        budget = "none" if self.budget is None else str(self.budget)
        deps = "yes" if self.deps else "no"
        return (
            f"items={self.items} deps={deps} tools={self.tools} budget={budget} model={self.model}"
        )


def items_bin(items: int) -> str:
    """The bucket label of an entity count (:data:`ITEM_BINS`)."""
    for label, low, high in ITEM_BINS:
        if low <= items <= high:
            return label
    return ITEM_BINS[-1][0]


def goal_items(goal: str, tool_names: Sequence[str] = ()) -> int:
    """How many entities the goal names: the largest of its bullet lines, its longest
    ``A > B > C`` path, its snake_case identifiers (tool names aside), its capitalised names
    (not a sentence's first word) and its longest enumeration after a colon. A proxy for the
    task's length that needs nothing but the text."""
    bullets = len(_BULLET.findall(goal))
    path = max((line.count(" > ") + 1 for line in goal.splitlines() if " > " in line), default=0)
    tools = set(tool_names)
    idents = {m for m in _IDENT.findall(goal) if m not in tools}
    names: set[str] = set()
    for sentence in _SENTENCE.split(goal):
        parts = sentence.split(maxsplit=1)
        if len(parts) > 1:
            names |= set(_NAME.findall(parts[1]))
    enum = max(
        (seg.count(",") + seg.count(" and ") + 1 for seg in _ENUM.findall(goal) if seg.strip()),
        default=0,
    )
    return max(1, bullets, path, len(idents), len(names), enum)


def goal_deps(goal: str) -> bool:
    """Whether the goal declares dependencies between its steps."""
    return bool(_DEPS.search(goal))


def features_of(
    goal: str, tool_names: Sequence[str], budget: int | None, model: str | None
) -> Features:
    """The features of a task as auto sees it (the study bins its tasks with the same call)."""
    return Features(
        items=goal_items(goal, tool_names),
        deps=goal_deps(goal),
        tools=len(tool_names),
        budget=budget,
        model=model or "",
    )


# --------------------------------------------------------------------------- the map


class MapError(ValueError):
    """A decision map file that cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class Entry:
    """One rule of the map: the features it applies to (None: any) and the strategy."""

    model: str | None
    budget: int | None | str
    tools: int | None
    items: str | None
    deps: bool | None
    choice: str
    why: str

    def matches(self, f: Features, budget_level: int | None | str) -> bool:
        return (
            (self.model is None or self.model == f.model)
            and (self.budget == "any" or self.budget == budget_level)
            and (self.tools is None or self.tools == f.tools)
            and (self.items is None or self.items == f.items_bin)
            and (self.deps is None or self.deps == f.deps)
        )

    def specificity(self) -> int:
        return sum(x is not None for x in (self.model, self.tools, self.items, self.deps)) + (
            self.budget != "any"
        )

    def key(self) -> str:
        def show(x: object) -> str:
            return "*" if x is None or x == "any" else str(x).lower()

        budget = "none" if self.budget is None else show(self.budget)

        return "/".join(
            f"{k}={show(v)}"
            for k, v in (
                ("model", self.model),
                ("budget", budget),
                ("tools", self.tools),
                ("items", self.items),
                ("deps", self.deps),
            )
        )


@dataclass(frozen=True)
class DecisionMap:
    """The map as loaded: its entries (most specific first), the budget levels it measured,
    the model profile assumed when none is configured, and the last-resort strategy."""

    version: str
    entries: tuple[Entry, ...]
    budget_levels: tuple[int, ...]
    default_model: str
    fallback: str
    source: str

    def budget_level(self, budget: int | None) -> int | None:
        """The measured budget closest (in ratio) to a configured one; None for no budget."""
        if budget is None or not self.budget_levels:
            return None
        return min(self.budget_levels, key=lambda b: (abs(math.log(b / budget)), b))

    def choose(self, f: Features, allowed: Sequence[str]) -> tuple[str, str]:
        """(strategy, why) for features ``f``: the most specific matching entry whose choice
        is ``allowed``; the map's fallback otherwise."""
        level = self.budget_level(f.budget)
        for entry in self.entries:
            if entry.choice in allowed and entry.matches(f, level):
                return entry.choice, f"map entry {entry.key()}: {entry.why}"
        return self.fallback, "no map entry matches: the map's fallback"


def _entry(raw: Mapping[str, Any], where: str) -> Entry:
    try:
        deps = raw.get("deps")
        budget = raw.get("budget", "any")
        return Entry(
            model=None if raw.get("model") is None else str(raw["model"]),
            budget=budget if budget in (None, "any") else int(budget),
            tools=None if raw.get("tools") is None else int(raw["tools"]),
            items=None if raw.get("items") is None else str(raw["items"]),
            deps=None if deps is None else bool(deps),
            choice=str(raw["choice"]),
            why=str(raw.get("why", "")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise MapError(f"{where}: an entry lacks or mistypes a field ({exc})") from None


@lru_cache(maxsize=8)
def load_map(path: str) -> DecisionMap:
    """The decision map at ``path`` (JSON, format :data:`MAP_FORMAT`), checked."""
    file = Path(path)
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise MapError(f"{file}: cannot read the decision map ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise MapError(f"{file}: not JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(raw, dict) or raw.get("format") != MAP_FORMAT:
        raise MapError(f"{file}: not a decision map (format must be {MAP_FORMAT!r})")
    return map_of(raw, str(file))


def map_of(raw: Mapping[str, Any], source: str) -> DecisionMap:
    """A decision map from its JSON object (``source`` names it in errors)."""
    entries = [_entry(e, f"{source}: entries[{i}]") for i, e in enumerate(raw.get("entries", []))]
    entries.sort(key=lambda e: -e.specificity())  # stable: the file's order among equals
    fallback = raw.get("fallback")
    if not isinstance(fallback, str) or not fallback:
        raise MapError(f"{source}: fallback must name a planner")
    return DecisionMap(
        version=str(raw.get("version", "")),
        entries=tuple(entries),
        budget_levels=tuple(int(b) for b in raw.get("budget_levels", [])),
        default_model=str(raw.get("default_model", "strong")),
        fallback=fallback,
        source=source,
    )


def planner_from_config(name: str, settings: Mapping[str, Any] | None = None) -> Planner:
    """A planner built from its shipped config (``configs/planner/<name>.yaml``) with
    ``settings`` merged on top, as ``planner=<name>`` would build it."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    path = CONFIG_DIR / "planner" / f"{name}.yaml"
    if name == "auto" or not path.is_file():
        raise MapError(f"planner.auto: {name!r} is not a planner auto can run")
    spec = OmegaConf.merge(OmegaConf.load(path), OmegaConf.create(dict(settings or {})))
    planner = instantiate(spec)
    if not isinstance(planner, Planner):
        raise MapError(f"planner.auto: configs/planner/{name}.yaml does not build a planner")
    return planner


class AutoPlanner(Planner):
    """Chooses a strategy per task from the decision map, then runs it."""

    name = "auto"

    @checked
    def __init__(
        self,
        map_path: str | None = None,
        model_profile: str | None = None,
        candidates: list[str] | None = None,
        settings: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.map = load_map(str(Path(map_path) if map_path else SHIPPED_MAP))
        self.model = model_profile or self.map.default_model
        named = {e.choice for e in self.map.entries} | {self.map.fallback}
        pool = list(candidates) if candidates else sorted(named)
        self.settings = dict(settings or {})
        self.planners: dict[str, Planner] = {}
        for choice in pool:  # built now: a bad config stops the job before any episode
            if choice in named:
                self.planners[choice] = planner_from_config(choice, self.settings.get(choice))
        if self.map.fallback not in self.planners:
            self.planners[self.map.fallback] = planner_from_config(
                self.map.fallback, self.settings.get(self.map.fallback)
            )

    def features(self, task: TaskView, tools: Toolbox, llm: EpisodeLLM) -> Features:
        """The task's features: its goal, the tool catalogue, the budget and the model."""
        return features_of(task.goal, tools.names(), llm.budget.max_tokens, self.model)

    def choose(self, f: Features) -> tuple[str, str]:
        """(strategy, reason): the reason names every feature the choice read."""
        choice, why = self.map.choose(f, list(self.planners))
        return choice, f"{f.describe()} -> {why}"

    async def run(self, task: TaskView, tools: Toolbox, llm: EpisodeLLM) -> PlannerResult:
        choice, reason = self.choose(self.features(task, tools, llm))
        llm.trace.append({"event": "auto_choice", "choice": choice, "reason": reason})
        return await self.planners[choice].run(task, tools, llm)
