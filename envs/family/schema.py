"""The family file's format: one pydantic model per key, and the cross-references between keys.

A field's own check (a type, a range, a shorthand) lives on its model; a check across keys (a
tool named by a template exists, a fallback serves the tool it backs up) is
:func:`reference_problems`, which also reads a file whose fields did not validate, so the
loader can report every problem of a file at once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from planarena.envs.base import COMPLEXITIES
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

FaultKind = Literal[
    "http_503",
    "rate_limit_429",
    "timeout",
    "invalid_api_key",
    "empty_result",
    "password_protected",
    "wrong_result",
]
# A way whose arguments met one of these is abandoned for the next way (the arguments must
# change); transient kinds are retried on the same way.
PERMANENT_ARG_FAULTS = frozenset({"empty_result", "password_protected"})
IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_JSON_TYPES = {"string", "integer", "number", "array", "object", "boolean"}
# Validation context key: the loader checks cross-references itself, with the field errors.
DEFER_REFERENCES = "defer_references"


class FamilyError(ValueError):
    """A family declaration that cannot be used: names the file, the key and the problem."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LatencyDecl(_Strict):
    """Log-normal latency of a tool in simulated seconds (median, spread, cap)."""

    median_s: float = Field(gt=0)
    sigma: float = Field(default=0.6, ge=0)
    cap_s: float = Field(default=60.0, gt=0)


class FaultDecl(_Strict):
    """How one fault kind applies to a tool: which args identify the thing (``args`` scope)
    and which result fields a "200 but wrong" payload nulls."""

    args_key: list[str] | None = None
    corrupt_fields: list[str] | None = None


class ToolDecl(_Strict):
    """A tool of the family: what the planner sees of it and how the world serves it."""

    description: str = Field(min_length=1)
    args: dict[str, Any]  # JSON schema of the args object
    latency: LatencyDecl = LatencyDecl(median_s=1.0)
    faults: dict[FaultKind, FaultDecl] = Field(default_factory=dict)
    fallback: str | None = None  # a tool that serves the same calls (its own key and service)
    serves: str | None = None  # this tool answers the calls of another (a mirror or backup)
    kind: Literal["lookup", "answer"] = "lookup"
    requires_deps: bool = False  # a call before its node's parents succeeded fails: not_found

    @field_validator("faults", mode="before")
    @classmethod
    def _faults_list(cls, value: Any) -> Any:
        if isinstance(value, list):  # a plain list of kinds
            return {k: {} for k in value}
        if isinstance(value, dict):
            return {k: ({} if v is None else v) for k, v in value.items()}
        return value

    @field_validator("args")
    @classmethod
    def _schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        if value.get("type") != "object":
            raise ValueError("must be a JSON schema with type: object")
        props = value.get("properties")
        if not isinstance(props, dict) or not props:
            raise ValueError("must have properties: {name: {type: ...}}")
        for name, spec in props.items():
            if not isinstance(spec, dict) or spec.get("type") not in _JSON_TYPES:
                raise ValueError(
                    f"properties.{name}.type must be one of {sorted(_JSON_TYPES)}, got "
                    f"{spec.get('type') if isinstance(spec, dict) else spec!r}"
                )
        for name in value.get("required", []):
            if name not in props:
                raise ValueError(f"required names {name!r}, which is not in properties")
        return value


class WayDecl(_Strict):
    """One way to make a node's call: a tool and its args (templates, refs to parents)."""

    tool: str
    args: dict[str, Any]


class TrapDecl(_Strict):
    """A locally attractive wrong call in place of a node's."""

    kind: Literal["dead_end", "decoy"]
    where: Literal["first", "middle", "last", "any", "not_first", "not_last"] = "any"
    p: float = Field(default=0.5, ge=0.0, le=1.0)  # share of eligible nodes that get it
    names: list[str] = Field(min_length=1)  # labels (format strings over the node's vars)
    vars: dict[str, Any] = Field(default_factory=dict)
    tool: str | None = None  # default: the tool of the node's first way
    args: dict[str, Any] | None = None  # default: the node's first way's args, trap's vars
    result: dict[str, Any] | None = None  # decoy default: the node's result template redrawn
    override: dict[str, Any] = Field(default_factory=dict)  # fields set on top of that


class NodeDecl(_Strict):
    """A node template: one required call, its alternatives, checks and trap."""

    ways: list[WayDecl] = Field(min_length=1)
    names: list[str] | None = None  # this template's pool of node names (default: the family's)
    name: str | None = None  # or a name made from the node's context, e.g. "{parent.name} tests"
    vars: dict[str, Any] = Field(default_factory=dict)
    result: dict[str, Any]
    post: list[str] = Field(default_factory=list)
    pre: list[str] = Field(default_factory=list)
    traps: list[TrapDecl] = Field(default_factory=list)
    on_decoy: dict[str, Any] | None = None  # result when called on a decoy parent's output

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        if isinstance(value, dict) and "tool" in value and "ways" not in value:
            value = dict(value)
            value["ways"] = [{"tool": value.pop("tool"), "args": value.pop("args", {})}]
        return value


class LayerDecl(_Strict):
    """A layer of a task's DAG: its node template, width, repetition and links upward."""

    node: str | None = None  # template name (default: the graph's default template)
    width: int | tuple[int, int] | Literal["prev"] = 1  # prev: as wide as the layer before
    repeat: int | tuple[int, int] = 1
    # how a layer's nodes get parents in the layer before: random (fan_in of them), aligned
    # (the one at the same position), split (consecutive nodes share one parent), merge (each
    # node takes a consecutive group), all
    link: Literal["random", "aligned", "split", "merge", "all"] = "random"
    fan_in: tuple[int, int] = (1, 1)

    @model_validator(mode="before")
    @classmethod
    def _bare(cls, value: Any) -> Any:
        if isinstance(value, int) or (isinstance(value, list) and len(value) == 2):
            return {"width": value}
        return value

    @model_validator(mode="after")
    def _ranges(self) -> LayerDecl:
        for key in ("width", "repeat", "fan_in"):
            value = getattr(self, key)
            if isinstance(value, tuple) and not 0 <= value[0] <= value[1]:
                raise ValueError(f"{key}: expected [low, high] with 0 <= low <= high")
            if isinstance(value, int) and value < 1:
                raise ValueError(f"{key}: expected at least 1")
        return self


class SizeDecl(_Strict):
    """The layers of a task at one complexity."""

    layers: list[LayerDecl] = Field(min_length=1)


class AnswerDecl(_Strict):
    """The tool that writes the answer and the facts the grader looks for in it."""

    tool: str
    arg: str = "items"
    facts: list[str] = Field(min_length=1)  # result fields of the last layer the answer states
    label: str = "name"  # result field that names an item (on the same line as its facts)


class UnreachableDecl(_Strict):
    """Which layer loses a node when a task is made unreachable, and what the tool says."""

    where: Literal["first", "last"] = "last"
    message: str = "no such resource exists"


class FactsDecl(_Strict):
    """World facts that pre-/post-conditions can read."""

    static: dict[str, Any] = Field(default_factory=dict)  # constant world facts
    done: str | None = None  # name of a fact {node name: bool}, true once a node's call succeeded


class FamilyDecl(_Strict):
    """A whole family file, validated."""

    name: str
    description: str = ""
    goal: str
    vars: dict[str, Any] = Field(default_factory=dict)
    tools: dict[str, ToolDecl] = Field(min_length=1)
    facts: FactsDecl = FactsDecl()
    names: list[str] = Field(min_length=1)  # pool of node names
    templates: dict[str, NodeDecl] = Field(min_length=1)
    sizes: dict[Literal["simple", "medium", "complex"], SizeDecl]
    answer: AnswerDecl
    unreachable: UnreachableDecl | None = None
    hallucinated_tools: list[str] = Field(
        default_factory=lambda: ["lookup", "run", "fetch_data", "do_task"]
    )

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not IDENT.match(value):
            raise ValueError("must be an identifier (letters, digits, underscores)")
        return value

    @model_validator(mode="after")
    def _references(self, info: ValidationInfo) -> FamilyDecl:
        """Cross-references (:func:`reference_problems`); the loader defers them (context
        ``DEFER_REFERENCES``) to report them with every other problem."""
        if info.context and info.context.get(DEFER_REFERENCES):
            return self
        problems = reference_problems(self.model_dump())
        if problems:
            raise ValueError("; ".join(f"{k}: {v}" for k, v in problems))
        return self


# --------------------------------------------------------------------------- cross-references

Problems = list[tuple[str, str]]


def _as_map(value: Any) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def reference_problems(data: Mapping[str, Any]) -> Problems:
    """The cross-field problems of a family, as (key, what was expected): a size for every
    complexity, and every tool, template, fallback and fault field named exists.

    ``data`` is a validated declaration's dump or, when fields failed validation, the file's
    raw mapping (shorthand nodes, bare layers and defaults read as the model reads them;
    parts of the wrong type are skipped: their field errors name them), so these problems are
    reported together with the field errors."""
    problems: Problems = []
    sizes = data.get("sizes")
    if isinstance(sizes, dict):
        missing = [c for c in COMPLEXITIES if c not in sizes]
        if missing:
            problems.append(("sizes", f"needs an entry for every complexity, missing {missing}"))
    tools = _as_map(data.get("tools"))
    for name, t in tools.items():
        problems += _tool_problems(name, _as_map(t), tools)
    if "answer" in data and isinstance(data["answer"], dict):
        problems += _answer_problems(data["answer"], tools)
    templates = _as_map(data.get("templates"))
    for tname, node in templates.items():
        problems += _template_problems(tname, _as_map(node), tools)
    if templates:
        default = next(iter(templates))
        for c, size in _as_map(sizes).items():
            for i, layer in enumerate(_as_list(_as_map(size).get("layers"))):
                name = _as_map(layer).get("node") or default
                if name not in templates:
                    problems.append(
                        (f"sizes.{c}.layers[{i}].node", f"expected one of {sorted(templates)}")
                    )
    return problems


def _tool_problems(name: Any, t: dict[Any, Any], tools: dict[Any, Any]) -> Problems:
    """A tool's name, its fallback (which must serve it back), what it serves, and the args
    its fault scopes name."""
    problems: Problems = []
    if not IDENT.match(str(name)):
        problems.append((f"tools.{name}", "expected a tool name that is an identifier"))
    fallback = t.get("fallback")
    if fallback is not None:
        fb = tools.get(fallback)
        if not isinstance(fb, dict):
            problems.append(
                (f"tools.{name}.fallback", f"expected a declared tool, not {fallback!r}")
            )
        elif fb.get("serves") != name:
            problems.append(
                (f"tools.{fallback}.serves", f"expected {name!r} (it is {name}'s fallback)")
            )
    serves = t.get("serves")
    if serves is not None and serves not in tools:
        problems.append((f"tools.{name}.serves", f"expected a declared tool, not {serves!r}"))
    faults = t.get("faults")
    if isinstance(faults, list):
        faults = {k: {} for k in faults if isinstance(k, str)}
    props = _as_map(_as_map(t.get("args")).get("properties"))
    for kind, fd in _as_map(faults).items():
        for a in _as_list(_as_map(fd).get("args_key")):
            if a not in props:
                problems.append(
                    (f"tools.{name}.faults.{kind}.args_key", f"expected args of {name}, not {a!r}")
                )
    return problems


def _answer_problems(answer: dict[Any, Any], tools: dict[Any, Any]) -> Problems:
    """The answer tool exists, is of kind answer and has the answer's argument."""
    tool = tools.get(answer.get("tool"))
    arg = answer.get("arg", "items")
    if not isinstance(tool, dict) or tool.get("kind", "lookup") != "answer":
        return [("answer.tool", "expected a declared tool with kind: answer")]
    if arg not in _as_map(_as_map(tool.get("args")).get("properties")):
        return [("answer.arg", f"expected an argument of {answer.get('tool')}")]
    return []


def _template_problems(tname: Any, node: dict[Any, Any], tools: dict[Any, Any]) -> Problems:
    """The tools a template's ways and traps call are declared."""
    problems: Problems = []
    ways = (
        node.get("ways")
        if "ways" in node
        else [{"tool": node.get("tool")}]
        if "tool" in node
        else []
    )
    for i, way in enumerate(_as_list(ways)):
        tool = _as_map(way).get("tool")
        if isinstance(way, dict) and tool not in tools:
            problems.append(
                (f"templates.{tname}.ways[{i}].tool", f"expected a declared tool, not {tool!r}")
            )
    for i, trap in enumerate(_as_list(node.get("traps"))):
        tool = _as_map(trap).get("tool")
        if tool is not None and tool not in tools:
            problems.append(
                (f"templates.{tname}.traps[{i}].tool", f"expected a declared tool, not {tool!r}")
            )
    return problems
