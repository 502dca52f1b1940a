"""The schema of a ``traces.jsonl`` line: one model per event kind the planners and the runner emit.

The run writes its traces as plain dicts (this module changes nothing of what is written); the
models here say what each event holds, so a reader (the trace view, an analysis notebook) can
rely on it, and a test that validates every trace line of a run of every planner and env fails
when an event grows a field nobody documented. Each event model forbids unknown fields; the
union is discriminated on ``event``. ``docs/records.md`` describes every field in words.

Bump :data:`TRACE_SCHEMA_VERSION` with any change of what a trace line holds.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

TRACE_SCHEMA_VERSION = 2
"""Version of the trace-line layout these models describe."""


class _Strict(BaseModel):
    """Unknown fields are refused and values are not coerced (``"1"`` is not an int)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


# --------------------------------------------------------------------------- LLM calls


class LlmCall(_Strict):
    """One LLM call of the episode (``planners.llm.base.EpisodeLLM``), simulated seconds."""

    event: Literal["llm"]
    role: str
    model: str
    t0: float
    t1: float
    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int | None = None  # a model profile's hidden reasoning, in completion_tokens
    finish_reason: str | None = None
    replayed: Literal[True] | None = None
    queue_s: float | None = None
    # what an HTTP backend adds (``openai_backend``): the model that answered when it is not
    # the one asked for, tool calls the model returned, SDK retries, and with
    # ``llm.write_text`` the prompt sent and the text received
    served_model: str | None = None
    tool_calls: list[Any] | None = None
    retries: int | None = None
    prompt: Any = None
    completion: str | None = None


# --------------------------------------------------------------------------- plans


class PlanStepRef(_Strict):
    """A step of a plan as the trace keeps it: its id, tool and dependencies (no arguments)."""

    id: str
    tool: str
    depends_on: list[str]


class Plan(_Strict):
    """A plan accepted by the executor (after repair and normalization, if any)."""

    event: Literal["plan"]
    t: float
    repaired: bool
    normalizations: list[str]
    steps: list[PlanStepRef]


class Replan(_Strict):
    """A revised remainder accepted after a step failed."""

    event: Literal["replan"]
    t: float
    repaired: bool
    normalizations: list[str]
    steps: list[PlanStepRef]


class PlanRejected(_Strict):
    """A plan the parser refused (``reason`` is the :class:`PlanError` reason)."""

    event: Literal["plan_rejected"]
    reason: str
    message: str
    t: float


class ReplanRejected(_Strict):
    """A replan the parser refused, or one reusing an executed step id."""

    event: Literal["replan_rejected"]
    reason: str
    message: str
    t: float


class ReplanUnreachable(_Strict):
    """The replanner answered with no steps: it judged the goal out of reach."""

    event: Literal["replan_unreachable"]
    t: float


# --------------------------------------------------------------------------- execution


class Step(_Strict):
    """One plan step run to its end (success, or the failure that ended it)."""

    event: Literal["step"]
    id: str
    tool: str
    t0: float
    t1: float
    ok: bool
    failure: str | None
    error_kind: str | None


class Retry(_Strict):
    """A transient tool error retried after ``wait_s`` simulated seconds."""

    event: Literal["retry"]
    id: str
    tool: str
    error_kind: str
    wait_s: float
    t: float


class Fallback(_Strict):
    """A step switched from its tool to its fallback tool (after its errors, or because a
    pre-condition about its own tool failed: ``reason`` ``precondition``)."""

    model_config = ConfigDict(populate_by_name=False)

    event: Literal["fallback"]
    id: str
    from_: str = Field(alias="from")
    to: str
    t: float
    reason: Literal["precondition"] | None = None


class Rerun(_Strict):
    """A run of a static plan failed: it runs again from its first step (plan_execute_rerun)."""

    event: Literal["rerun"]
    attempt: int
    after: str
    detail: str
    fresh_plan: bool
    wait_s: float
    t: float


class Skip(_Strict):
    """A step not run because a step it depends on failed (without replanning)."""

    event: Literal["skip"]
    id: str
    t: float


# --------------------------------------------------------------------------- search


class SearchNode(_Strict):
    """One node of an explored search tree (``search.SearchResult.tree_records``)."""

    node: int
    parent: int | None
    action: Any
    score: float | None
    visits: int
    value: float | None
    depth: int
    pruned: bool
    terminal: bool


class SearchTree(_Strict):
    """The tree a search planner explored (ToT, BFS, DFS, MCTS)."""

    event: Literal["search_tree"]
    algorithm: str
    nodes_expanded: int
    nodes_pruned: int
    t: float
    nodes: list[SearchNode]


class LineRejected(_Strict):
    """An MCTS rollout line the parser refused."""

    event: Literal["line_rejected"]
    reason: str


# --------------------------------------------------------------------------- ReAct


class ParseError(_Strict):
    """A ReAct turn the parser could not read."""

    event: Literal["parse_error"]
    error: str


class HallucinatedTool(_Strict):
    """A ReAct turn that named a tool the env does not have."""

    event: Literal["hallucinated_tool"]
    tool: str


class AutoChoice(_Strict):
    """``planner=auto`` chose the strategy it runs (the record's ``auto_choice`` and
    ``auto_reason``), before its first action."""

    event: Literal["auto_choice"]
    choice: str
    reason: str


# --------------------------------------------------------------------------- episode ends


class BudgetExhausted(_Strict):
    """The episode's compute budget (or the job's cost cap) stopped it."""

    event: Literal["budget_exhausted"]
    detail: str


class InfrastructureErrorEvent(_Strict):
    """The LLM endpoint failed: the episode is not measured and runs again on resume."""

    event: Literal["infrastructure_error"]
    error: str


class HarnessError(_Strict):
    """An exception escaped the episode: a bug of ours, recorded with its traceback."""

    event: Literal["harness_error"]
    error: str
    traceback: str


Event = Annotated[
    LlmCall
    | Plan
    | Replan
    | PlanRejected
    | ReplanRejected
    | ReplanUnreachable
    | Step
    | Retry
    | Fallback
    | Skip
    | Rerun
    | SearchTree
    | LineRejected
    | ParseError
    | HallucinatedTool
    | AutoChoice
    | BudgetExhausted
    | InfrastructureErrorEvent
    | HarnessError,
    Field(discriminator="event"),
]
"""Any trace event, told apart by its ``event`` field."""

EVENT_MODELS: dict[str, type[BaseModel]] = {
    model.model_fields["event"].annotation.__args__[0]: model  # type: ignore[union-attr]
    for model in (
        LlmCall,
        Plan,
        Replan,
        PlanRejected,
        ReplanRejected,
        ReplanUnreachable,
        Step,
        Retry,
        Fallback,
        Skip,
        Rerun,
        SearchTree,
        LineRejected,
        ParseError,
        HallucinatedTool,
        AutoChoice,
        BudgetExhausted,
        InfrastructureErrorEvent,
        HarnessError,
    )
}
"""Each event kind's model, by the kind's name."""


# --------------------------------------------------------------------------- the line


class ToolCall(_Strict):
    """One tool call as the env saw it (``envs.tools.ToolCallRecord``), simulated seconds."""

    tool: str
    args: dict[str, Any]
    t0: float
    t1: float
    ok: bool
    error_kind: str | None
    injected: bool


class TraceLine(_Strict):
    """One line of ``traces.jsonl``: one episode's events and tool calls, in order."""

    planner: str
    task_id: str
    trial: int
    cell: str | None = None  # a study cell's label (absent in a plain run)
    grade: str
    events: list[Event]
    tool_calls: list[ToolCall]


_EVENT = TypeAdapter(Event)


def parse_event(event: dict[str, Any]) -> Event:
    """One trace event as its model; raises ``pydantic.ValidationError`` naming the field."""
    return _EVENT.validate_python(event)


def parse_trace(line: dict[str, Any]) -> TraceLine:
    """One ``traces.jsonl`` line (as ``json.loads`` gives it) as a :class:`TraceLine`; raises
    ``pydantic.ValidationError`` for an unknown event kind, a missing or unknown field, or a
    value of the wrong type."""
    return TraceLine.model_validate(line)
