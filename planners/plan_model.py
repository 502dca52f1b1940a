"""What a parsed plan is: :class:`Plan`, :class:`PlanStep`, :class:`PlanError` and the one
spelling of a step id.

The parser (:mod:`planarena.planners.plan`), the placeholder resolver
(:mod:`planarena.planners.plan_refs`) and the executor all build on these, so they sit below
every one of them.
"""

import re
from typing import Any, Literal

import networkx as nx
from pydantic import BaseModel, ConfigDict

DEFAULT_RETRY_LIMIT = 3
"""Used when a step gives no retry_limit (the seed article's example value)."""

PlanErrorReason = Literal[
    "malformed_json",
    "malformed_text",
    "too_large",
    "too_deep",
    "schema",
    "unknown_tool",
    "unknown_fallback",
    "unknown_dependency",
    "self_dependency",
    "cyclic_dependency",
    "duplicate_id",
    "negative_retry_limit",
    "unresolvable_placeholder",
    "missing_synthesize",
    "empty_plan",
]


class PlanError(ValueError):
    """A plan was rejected; `reason` is a stable category for metrics, str() is for humans."""

    def __init__(self, reason: PlanErrorReason, message: str) -> None:
        super().__init__(message)
        self.reason: str = reason

    def __repr__(self) -> str:
        return f"PlanError({self.reason!r}, {str(self)!r})"


class PlanStep(BaseModel):
    """One normalized step; identical shape whichever form the planner wrote."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    tool: str
    args: dict[str, Any] = {}
    depends_on: list[str] = []
    pre_conditions: list[str] = []
    post_conditions: list[str] = []
    retry_limit: int = DEFAULT_RETRY_LIMIT
    fallback: str | None = None
    purpose: str | None = None


class Plan(BaseModel):
    """A validated plan plus a record of what had to be fixed to get it (for analysis)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    goal: str
    steps: list[PlanStep]
    form: Literal["seed", "rag"]
    repaired: bool = False
    normalizations: list[str] = []

    def step(self, step_id: str) -> PlanStep:
        """Look a step up by id in any accepted spelling ("1", "Step 1", "step_1")."""
        try:
            wanted = canonical_step_id(step_id)
        except PlanError:
            raise KeyError(step_id) from None
        for candidate in self.steps:
            if candidate.id == wanted:
                return candidate
        raise KeyError(step_id)

    def graph(self) -> nx.DiGraph:
        """Dependency DAG over this plan's steps, edges dep -> step.

        Dependencies on already-completed steps (from a replan) are not nodes: they must
        not be scheduled again.
        """
        graph = nx.DiGraph()
        ids = {s.id for s in self.steps}
        for s in self.steps:
            graph.add_node(s.id)
        for s in self.steps:
            for dep in s.depends_on:
                if dep in ids:
                    graph.add_edge(dep, s.id)
        return graph


# --------------------------------------------------------------------------- ids

_ID_RE = re.compile(r"^(?:step|s)?[\s_\-#]*(\d{1,9})$", re.IGNORECASE)


def canonical_step_id(raw: object) -> str:
    """Map every spelling planners use (1, "1", "Step-1", "s1") to "step_<n>"."""
    if isinstance(raw, bool):
        raise PlanError("schema", f"step id must be an int or string, got {raw!r}")
    if isinstance(raw, int):
        if raw < 0 or raw >= 10**9:
            raise PlanError("schema", f"step id out of range: {raw!r}")
        return f"step_{raw}"
    if isinstance(raw, str):
        match = _ID_RE.match(raw.strip())
        if match:
            return f"step_{int(match.group(1))}"
        raise PlanError("schema", f"unrecognized step id {raw[:80]!r}")
    raise PlanError("schema", f"step id must be an int or string, got {type(raw).__name__}")
