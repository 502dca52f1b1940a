"""Task families declared in YAML: one file describes a whole env, no Python written.

A family file (``envs/families/<name>.yaml``, or any path) declares the tools (description,
JSON-schema args, latency, the fault kinds that apply, a fallback), the world facts that
pre-/post-conditions can read, the task template (a layered DAG of required tool calls, with
alternative ways to make a call and locally attractive traps), the facts the final answer
must contain and the sizes per complexity. :class:`FamilyEnv` turns it into an
:class:`planarena.envs.base.Env`: seeded tasks, a world toolbox, a grader, the fault rules mapped onto
the family's tools, exposure, and :class:`FamilyOracle`, which answers the simulated LLM's one
question (which steps remain, done right) from the declaration alone.

The format is documented with a complete example in ``envs/README.md``. A malformed file fails
when it is loaded (before any episode runs) with :class:`FamilyError`, whose message names the
file, the key and what was expected.

Semantics in one paragraph: a task is a list of *nodes* (one required tool call each) in
layers; a node may be made by any of its *ways* (tool + args, tried in order: a way whose
arguments meet a permanent fault, e.g. ``empty_result``, is replaced by the next), and through
its tool's declared fallback. Args may reference a parent's result (``{ref: parent, path:
[...]}``), which a plan writes as a placeholder. A node may carry one *trap*: a ``dead_end``
(an attractive call whose result shows the path goes nowhere: it costs time, the agent must
go back) or a ``decoy`` (an attractive call whose result looks like the node's but carries
wrong facts; only a careful read or a post-condition tells; a child called on a decoy's
output may reveal it). The last layer's results carry the facts; the answer tool, called with
them, writes the answer the grader reads.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from planarena.envs.base import (
    COMPLEXITIES,
    EpisodeTools,
    Grade,
    Task,
    register,
    task_id,
    wrap_tools,
)
from planarena.envs.faults import FaultInjector, FaultRule
from planarena.envs.oracle import REPORT_UNREACHABLE, SUBMIT_ANSWER, GoldStep, Obs, Ref
from planarena.envs.rng import derive_rng
from planarena.envs.tools import (
    LatencyProfile,
    Toolbox,
    ToolCallRecord,
    ToolError,
    ToolSpec,
    args_key,
)
from planarena.envs.tools import validate_args as _validate_args
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

FAMILIES_DIR = Path(__file__).resolve().parent / "families"
BUILTIN = ("pipeline", "web_nav", "code_gen", "research")

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
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\}")
_JSON_TYPES = {"string", "integer", "number", "array", "object", "boolean"}


class FamilyError(ValueError):
    """A family declaration that cannot be used: names the file, the key and the problem."""


# --------------------------------------------------------------------------- declaration


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
    layers: list[LayerDecl] = Field(min_length=1)


class AnswerDecl(_Strict):
    tool: str
    arg: str = "items"
    facts: list[str] = Field(min_length=1)  # result fields of the last layer the answer states
    label: str = "name"  # result field that names an item (on the same line as its facts)


class UnreachableDecl(_Strict):
    where: Literal["first", "last"] = "last"
    message: str = "no such resource exists"


class FactsDecl(_Strict):
    static: dict[str, Any] = Field(default_factory=dict)  # constant world facts
    done: str | None = None  # name of a fact {node name: bool}, true once a node's call succeeded


class FamilyDecl(_Strict):
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
        if not _IDENT.match(value):
            raise ValueError("must be an identifier (letters, digits, underscores)")
        return value

    @model_validator(mode="after")
    def _references(self, info: ValidationInfo) -> FamilyDecl:
        """Cross-references (:func:`reference_problems`); :func:`load_declaration` defers
        them (context ``defer_references``) to report them with every other problem."""
        if info.context and info.context.get(_DEFER):
            return self
        problems = reference_problems(self.model_dump())
        if problems:
            raise ValueError("; ".join(f"{k}: {v}" for k, v in problems))
        return self


_DEFER = "defer_references"


def _as_map(value: Any) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def reference_problems(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The cross-field problems of a family, as (key, what was expected): a size for every
    complexity, and every tool, template, fallback and fault field named exists.

    ``data`` is a validated declaration's dump or, when fields failed validation, the file's
    raw mapping (shorthand nodes, bare layers and defaults read as the model reads them;
    parts of the wrong type are skipped: their field errors name them), so these problems are
    reported together with the field errors."""
    problems: list[tuple[str, str]] = []
    sizes = data.get("sizes")
    if isinstance(sizes, dict):
        missing = [c for c in COMPLEXITIES if c not in sizes]
        if missing:
            problems.append(("sizes", f"needs an entry for every complexity, missing {missing}"))
    tools = _as_map(data.get("tools"))
    for name, t in tools.items():
        t = _as_map(t)
        if not _IDENT.match(str(name)):
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
                        (
                            f"tools.{name}.faults.{kind}.args_key",
                            f"expected args of {name}, not {a!r}",
                        )
                    )
    answer = _as_map(data.get("answer"))
    if "answer" in data and isinstance(data["answer"], dict):
        tool = tools.get(answer.get("tool"))
        arg = answer.get("arg", "items")
        if not isinstance(tool, dict) or tool.get("kind", "lookup") != "answer":
            problems.append(("answer.tool", "expected a declared tool with kind: answer"))
        elif arg not in _as_map(_as_map(tool.get("args")).get("properties")):
            problems.append(("answer.arg", f"expected an argument of {answer.get('tool')}"))
    templates = _as_map(data.get("templates"))
    for tname, node in templates.items():
        node = _as_map(node)
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
                    (
                        f"templates.{tname}.traps[{i}].tool",
                        f"expected a declared tool, not {tool!r}",
                    )
                )
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


def _validation_problems(exc: ValidationError) -> list[str]:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-"))
        msg = err["msg"].removeprefix("Value error, ")
        value = err.get("input")
        shown = "" if isinstance(value, (dict, list)) else f" (got {value!r})"
        lines.append(f"{loc or '<top>'}: {msg}{shown}")
    return lines


def _without_invalid_fields(raw: dict[str, Any], exc: ValidationError) -> FamilyDecl | None:
    """A declaration of ``raw`` with the fields that failed validation removed (each error's
    deepest key that the file has: a default, if any, takes its place), for the template
    dry run to find the problems the field errors would hide; None if none validates."""
    data = copy.deepcopy(raw)
    for _ in range(100):  # one removal a round: list indices stay right
        parent: Any = None
        key: Any = None
        node: Any = data
        for part in exc.errors()[0]["loc"]:
            in_dict = isinstance(node, dict) and part in node
            in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
            if not (in_dict or in_list):
                break
            parent, key, node = node, part, node[part]
        if parent is None:  # the error is the file's own (a required key is missing)
            return None
        del parent[key]
        try:
            return FamilyDecl.model_validate(data, context={_DEFER: True})
        except ValidationError as again:
            exc = again
    return None


def load_declaration(path: str | Path) -> FamilyDecl:
    """Read and validate a family file; raises :class:`FamilyError` naming, for every
    problem found, the file, the key and what was expected (one line each): the fields'
    errors, the cross-references (:func:`reference_problems`) and the template errors of a
    dry run of every complexity (on the fields that did validate). A template error ends its
    complexity's dry run, so two in one complexity are reported one after the other."""
    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise FamilyError(f"{p}: cannot read the family file: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise FamilyError(f"{p}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise FamilyError(
            f"{p}: <top>: expected a mapping of family keys, got {type(raw).__name__}"
        )
    problems: list[str] = []
    decl: FamilyDecl | None
    try:
        decl = FamilyDecl.model_validate(raw, context={_DEFER: True})
        references = reference_problems(decl.model_dump())
    except ValidationError as exc:
        problems += _validation_problems(exc)
        references = reference_problems(raw)
        decl = _without_invalid_fields(raw, exc)
    problems += [f"{k}: {v}" for k, v in references]
    if decl is not None:
        problems += _dry_run_problems(decl, quiet=bool(problems))
    if problems:
        raise FamilyError("\n".join(f"{p}: {line}" for line in dict.fromkeys(problems)))
    assert decl is not None
    return decl


def _dry_run_problems(decl: FamilyDecl, *, quiet: bool) -> list[str]:
    """Generate one task of every complexity the file sizes, so a template error (an unknown
    {var}, a ref to a missing field) is reported now, naming the key, not in the middle of a
    run. With ``quiet`` (other problems found) a failure that is not a template error is
    taken for their consequence and left out."""
    out: list[str] = []
    for c in COMPLEXITIES:
        if c not in decl.sizes:
            continue  # reference_problems: sizes needs an entry for every complexity
        try:
            generate(decl, 1, seed=0, complexity=c, unreachable_rate=1.0)
        except _TemplateError as exc:
            out.append(str(exc))
        except (ValueError, TypeError, KeyError, IndexError) as exc:  # a shape we did not foresee
            if not quiet:
                out.append(f"sizes.{c}: cannot generate a task: {exc!r}")
    return out


# --------------------------------------------------------------------------- templates


class _TemplateError(ValueError):
    pass


def slugify(text: str) -> str:
    out = re.sub(r"[^a-z0-9]+", "_", str(text).lower()).strip("_")
    return out or "x"


def _lookup(ctx: Mapping[str, Any], dotted: str, where: str) -> Any:
    value: Any = ctx
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            raise _TemplateError(f"{where}: unknown variable {{{dotted}}}")
        value = value[part]
    return value


def fmt(text: str, ctx: Mapping[str, Any], where: str) -> Any:
    """``{var}`` / ``{var.key}`` substitution (no attribute access, no expressions). A string
    that is one placeholder keeps the value's type."""
    whole = _FIELD.fullmatch(text)
    if whole:
        return _lookup(ctx, whole.group(1), where)
    return _FIELD.sub(lambda m: str(_lookup(ctx, m.group(1), where)), text)


def _gen(spec: Any, ctx: Mapping[str, Any], rng: Any, where: str) -> Any:
    """A value from a template: a literal, a format string, or a generator mapping."""
    if isinstance(spec, str):
        return fmt(spec, ctx, where)
    if isinstance(spec, list):
        return [_gen(v, ctx, rng, f"{where}[{i}]") for i, v in enumerate(spec)]
    if isinstance(spec, dict):
        keys = set(spec)
        if keys == {"int"}:
            lo, hi = _pair(spec["int"], where)
            return rng.randint(int(lo), int(hi))
        if keys <= {"float", "digits"} and "float" in keys:
            lo, hi = _pair(spec["float"], where)
            return round(rng.uniform(float(lo), float(hi)), int(spec.get("digits", 2)))
        if keys == {"choice"}:
            options = spec["choice"]
            if not isinstance(options, list) or not options:
                raise _TemplateError(f"{where}.choice: expected a non-empty list")
            return _gen(rng.choice(options), ctx, rng, where)
        if keys <= {"children", "distractors"} and "children" in keys:
            links = {}
            for child in ctx.get("_children", []):
                links[child["name"]] = fmt(str(spec["children"]), child, f"{where}.children")
            pool = list(ctx.get("_distractors", []))
            for name in pool[: int(spec.get("distractors", 0))]:
                links[name] = f"{ctx.get('_base', '')}/{slugify(name)}"
            return dict(sorted(links.items()))
        if keys == {"ref"} or keys == {"ref", "path"}:
            return _RefSpec(str(spec["ref"]), tuple(spec.get("path", ())))
        return {k: _gen(v, ctx, rng, f"{where}.{k}") for k, v in spec.items()}
    return spec


def _pair(value: Any, where: str) -> tuple[Any, Any]:
    if (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
        and value[0] <= value[1]
    ):
        return value[0], value[1]
    raise _TemplateError(f"{where}: expected [low, high] with low <= high, got {value!r}")


@dataclass(frozen=True)
class _RefSpec:
    target: str  # "parent" (the first parent) or "parent<k>"
    path: tuple[str, ...]


def _draw(value: int | tuple[int, int], rng: Any) -> int:
    if isinstance(value, tuple):
        return rng.randint(value[0], value[1])
    return value


def _where_ok(where: str, layer: int, last: int) -> bool:
    return {
        "any": True,
        "first": layer == 0,
        "last": layer == last,
        "middle": 0 < layer < last,
        "not_first": layer > 0,
        "not_last": layer < last,
    }[where]


def generate(
    decl: FamilyDecl,
    n: int,
    *,
    seed: int,
    complexity: str,
    unreachable_rate: float = 0.0,
    start: int = 0,
) -> list[Task]:
    """``n`` seeded tasks of the family at one complexity (plain data in ``Task.world``), from
    task number ``start`` on."""
    if complexity not in COMPLEXITIES:
        raise ValueError(f"complexity must be one of {COMPLEXITIES}, got {complexity!r}")
    return [
        _one_task(decl, seed, complexity, index, unreachable_rate)
        for index in range(start, start + n)
    ]


def _one_task(
    decl: FamilyDecl, seed: int, complexity: str, index: int, unreachable_rate: float
) -> Task:
    rng = derive_rng(seed, "task", decl.name, complexity, index)
    tvars: dict[str, Any] = {}
    for k, spec in decl.vars.items():
        tvars[k] = _gen(spec, tvars, rng, f"vars.{k}")
    default = next(iter(decl.templates))
    # layers: (template, link, fan_in) x widths
    layers: list[tuple[str, LayerDecl, int]] = []
    for layer in decl.sizes[complexity].layers:  # type: ignore[index]
        for _ in range(_draw(layer.repeat, rng)):
            if layer.width == "prev":
                width = layers[-1][2] if layers else 1
            else:
                width = _draw(layer.width, rng)
            layers.append((layer.node or default, layer, width))
    pools: dict[str, list[str]] = {}
    used: dict[str, int] = {}

    def next_name(tname: str) -> str:
        source = decl.templates[tname].names or decl.names
        pid = tname if decl.templates[tname].names else ""
        if pid not in pools:
            pools[pid] = list(source)
            rng.shuffle(pools[pid])
        k = used.get(pid, 0)
        used[pid] = k + 1
        pool = pools[pid]
        return pool[k % len(pool)] + (f" {k // len(pool) + 1}" if k >= len(pool) else "")

    nodes: list[dict[str, Any]] = []
    by_layer: list[list[int]] = []
    last = len(layers) - 1
    for li, (tname, layer, width) in enumerate(layers):
        ids = []
        for pos in range(width):
            i = len(nodes)
            parents: list[int] = []
            if li > 0:
                prev = by_layer[li - 1]
                if layer.link == "all":
                    parents = list(prev)
                elif layer.link == "aligned":
                    parents = [prev[min(pos, len(prev) - 1)]]
                elif layer.link == "split":
                    parents = [prev[pos * len(prev) // width]]
                elif layer.link == "merge":
                    r = max(1, len(prev) // width)
                    parents = prev[pos * r : (pos + 1) * r if pos < width - 1 else len(prev)]
                else:
                    k = min(len(prev), rng.randint(*layer.fan_in))
                    parents = sorted(rng.sample(prev, k))
            nodes.append(
                {
                    "key": f"n{i}",
                    "template": tname,
                    "layer": li,
                    "pos": pos,
                    "name": (name := next_name(tname)),
                    "slug": slugify(name),
                    "parents": [f"n{p}" for p in parents],
                }
            )
            ids.append(i)
        by_layer.append(ids)
    by_key = {nd["key"]: nd for nd in nodes}
    # vars (parents first: layers are in order)
    for nd in nodes:
        tpl = decl.templates[nd["template"]]
        if tpl.name is not None:
            nd["name"] = str(
                fmt(tpl.name, _node_ctx(tvars, nd, by_key), f"templates.{nd['template']}.name")
            )
            nd["slug"] = slugify(nd["name"])
        ctx = _node_ctx(tvars, nd, by_key)
        nd["vars"] = {}
        for k, spec in tpl.vars.items():
            nd["vars"][k] = _gen(spec, ctx, rng, f"templates.{nd['template']}.vars.{k}")
            ctx[k] = nd["vars"][k]
    # traps
    for nd in nodes:
        tpl = decl.templates[nd["template"]]
        nd["trap"] = None
        for ti, trap in enumerate(tpl.traps):
            if not _where_ok(trap.where, nd["layer"], last) or rng.random() >= trap.p:
                continue
            where = f"templates.{nd['template']}.traps[{ti}]"
            ctx = _node_ctx(tvars, nd, by_key)
            label = fmt(rng.choice(trap.names), ctx, f"{where}.names")
            tctx = {**ctx, "name": label, "slug": slugify(label), "node": dict(ctx)}
            tv: dict[str, Any] = {}
            for k, spec in trap.vars.items():
                tv[k] = _gen(spec, tctx, rng, f"{where}.vars.{k}")
                tctx[k] = tv[k]
            nd["trap"] = {"index": ti, "kind": trap.kind, "name": label, "vars": tv}
            break
    # children (for link lists), then results
    children: dict[str, list[dict[str, Any]]] = {nd["key"]: [] for nd in nodes}
    for nd in nodes:
        ctx = _node_ctx(tvars, nd, by_key)
        for p in nd["parents"][:1]:
            children[p].append(ctx)
            if nd["trap"] is not None:
                children[p].append({**ctx, "name": nd["trap"]["name"], **nd["trap"]["vars"]})
    taken = {nd["name"] for nd in nodes}
    distractor_pool = [
        n
        for pool in [decl.names, *(t.names or [] for t in decl.templates.values())]
        for n in pool
        if n not in taken
    ]
    for nd in nodes:
        tpl = decl.templates[nd["template"]]
        where = f"templates.{nd['template']}"
        ctx = _node_ctx(tvars, nd, by_key)
        ctx["_children"] = children[nd["key"]]
        rng.shuffle(distractor_pool)
        ctx["_distractors"] = list(distractor_pool)
        ctx["_base"] = str(tvars.get("base", ""))
        nd["result"] = _gen(tpl.result, ctx, rng, f"{where}.result")
        if nd["trap"] is not None:
            trap = tpl.traps[nd["trap"]["index"]]
            twhere = f"{where}.traps[{nd['trap']['index']}]"
            tctx = {**ctx, "name": nd["trap"]["name"], "slug": slugify(nd["trap"]["name"])}
            tctx.update(nd["trap"]["vars"])
            tctx["node"] = {k: v for k, v in ctx.items() if not k.startswith("_")}
            tctx["_children"] = []
            base = trap.result if trap.result is not None else tpl.result
            res = _gen(base, tctx if trap.result is not None else ctx, rng, f"{twhere}.result")
            for k, spec in trap.override.items():
                res[k] = _gen(spec, tctx, rng, f"{twhere}.override.{k}")
            nd["trap"]["result"] = res
            nd["trap"]["ctx"] = {k: v for k, v in tctx.items() if not k.startswith("_")}
    # ways and trap calls with args resolved (refs to parents' results)
    for nd in nodes:
        tpl = decl.templates[nd["template"]]
        where = f"templates.{nd['template']}"
        ctx = _node_ctx(tvars, nd, by_key)
        nd["ways"] = [
            {
                "tool": w.tool,
                "args": _resolve_args(
                    w.args, ctx, nd, by_key, rng, f"{where}.ways[{wi}].args", None
                ),
            }
            for wi, w in enumerate(tpl.ways)
        ]
        trap = nd["trap"]
        if trap is not None:
            tdecl = tpl.traps[trap["index"]]
            twhere = f"{where}.traps[{trap['index']}]"
            spec = tdecl.args if tdecl.args is not None else tpl.ways[0].args
            trap["tool"] = tdecl.tool or tpl.ways[0].tool
            trap["args"] = _resolve_args(spec, trap["ctx"], nd, by_key, rng, f"{twhere}.args", None)
        # calls of this node on a decoy parent's output (the decoy revealed)
        nd["on_decoy"] = []
        for p in nd["parents"]:
            ptrap = by_key[p]["trap"]
            if ptrap is None or ptrap["kind"] != "decoy" or tpl.on_decoy is None:
                continue
            args = _resolve_args(
                tpl.ways[0].args, ctx, nd, by_key, rng, f"{where}.ways[0].args", (p, ptrap)
            )
            if args == nd["ways"][0]["args"]:
                continue  # the call does not read the parent's output
            res = _gen(tpl.on_decoy, ctx, rng, f"{where}.on_decoy")
            nd["on_decoy"].append(
                {"parent": p, "tool": tpl.ways[0].tool, "args": args, "result": res}
            )
    # unreachable: one node of the declared layer does not exist
    missing = None
    if decl.unreachable is not None:
        u = derive_rng(seed, "unreachable", decl.name, complexity, index)
        if u.random() < unreachable_rate:
            layer = 0 if decl.unreachable.where == "first" else last
            missing = f"n{by_layer[layer][u.randrange(len(by_layer[layer]))]}"
    sinks = [f"n{i}" for i in by_layer[last]]
    for s in sinks:
        for f in [*decl.answer.facts, decl.answer.label]:
            if f not in by_key[s]["result"]:
                raise _TemplateError(
                    f"answer.facts: expected {f!r} among the result fields of the last layer's "
                    f"template {by_key[s]['template']!r}"
                )
    dag = "\n".join(
        f"- {nd['name']}"
        + (
            f" (after {', '.join(by_key[p]['name'] for p in nd['parents'])})"
            if nd["parents"]
            else ""
        )
        for nd in nodes
    )
    chain = [by_key[sinks[0]]]
    while chain[-1]["parents"]:
        chain.append(by_key[chain[-1]["parents"][0]])
    first = _node_ctx(tvars, nodes[0], by_key)
    target = _node_ctx(tvars, by_key[sinks[0]], by_key)
    gctx = {
        **tvars,
        "dag": dag,
        "items": ", ".join(by_key[s]["name"] for s in sinks),
        "roots": ", ".join(by_key[f"n{i}"]["name"] for i in by_layer[0]),
        "n": len(nodes),
        "path": " > ".join(nd["name"] for nd in reversed(chain[:-1])),
        "start": {k: v for k, v in first.items() if not k.startswith("_")},
        "target": {k: v for k, v in target.items() if not k.startswith("_")},
    }
    goal = fmt(decl.goal, gctx, "goal")
    for nd in nodes:
        if nd["trap"] is not None:
            nd["trap"].pop("ctx", None)
    return Task(
        task_id=task_id(decl.name, complexity, index),
        env=decl.name,
        complexity=complexity,
        goal=str(goal),
        world={"nodes": nodes, "sinks": sinks, "missing": missing, "vars": tvars},
        unreachable=missing is not None,
    )


def _node_ctx(tvars: Mapping[str, Any], nd: Mapping[str, Any], by_key: Mapping[str, Any]) -> dict:
    ctx: dict[str, Any] = {
        **tvars,
        "name": nd["name"],
        "slug": nd["slug"],
        "i": int(nd["key"][1:]),
        "layer": nd["layer"],
        "pos": nd["pos"],
        **nd.get("vars", {}),
    }
    if nd["parents"]:
        p = by_key[nd["parents"][0]]
        ctx["parent"] = {"name": p["name"], "slug": p["slug"], **p.get("vars", {})}
    return ctx


def _resolve_args(
    spec: Mapping[str, Any],
    ctx: Mapping[str, Any],
    nd: Mapping[str, Any],
    by_key: Mapping[str, Any],
    rng: Any,
    where: str,
    decoy: tuple[str, dict[str, Any]] | None,
) -> dict[str, Any]:
    """Literal args; a ``{ref: parent, path}`` becomes ``{"$ref": key, "path", "value"}`` so
    the oracle can write a Ref and the world can index the literal value."""
    out: dict[str, Any] = {}
    for k, v in spec.items():
        value = _gen(v, ctx, rng, f"{where}.{k}")
        if isinstance(value, _RefSpec):
            m = re.fullmatch(r"parent(\d*)", value.target)
            if m is None:
                raise _TemplateError(f"{where}.{k}.ref: expected parent or parent<k>")
            idx = int(m.group(1) or 0)
            if idx >= len(nd["parents"]):
                raise _TemplateError(f"{where}.{k}.ref: the node has no {value.target}")
            pkey = nd["parents"][idx]
            path = tuple(str(fmt(p, ctx, f"{where}.{k}.path")) for p in value.path)
            source = by_key[pkey]["result"]
            if decoy is not None and decoy[0] == pkey:
                source = decoy[1]["result"]
            lit: Any = source
            for part in path:
                lit = lit.get(part) if isinstance(lit, dict) else None
            if lit is None:
                raise _TemplateError(
                    f"{where}.{k}.path: {list(path)} is not in the parent's result "
                    f"(fields: {sorted(source) if isinstance(source, dict) else source!r})"
                )
            out[k] = {"$ref": pkey, "path": list(path), "value": lit}
        else:
            out[k] = value
    return out


def literal(args: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (v["value"] if isinstance(v, dict) and "$ref" in v else v) for k, v in args.items()}


# --------------------------------------------------------------------------- the world


@dataclass
class _Entry:
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
        self.entries: dict[tuple[str, str], _Entry] = {}
        for nd in self.nodes.values():
            for wi, way in enumerate(nd["ways"]):
                self._add(
                    way["tool"], literal(way["args"]), _Entry(nd["key"], "right", nd["result"], wi)
                )
            trap = nd["trap"]
            if trap is not None:
                key = self.key(trap["tool"], literal(trap["args"]))
                if key not in self.entries:  # a trap never shadows a right call
                    self.entries[key] = _Entry(nd["key"], "trap", trap["result"])
            for r in nd["on_decoy"]:
                key = self.key(r["tool"], literal(r["args"]))
                if key not in self.entries:
                    self.entries[key] = _Entry(nd["key"], "reveal", r["result"], parent=r["parent"])

    def canonical(self, tool: str) -> str:
        spec = self.decl.tools.get(tool)
        return spec.serves if spec is not None and spec.serves else tool

    def key(self, tool: str, args: Mapping[str, Any]) -> tuple[str, str]:
        return (self.canonical(tool), args_key(args))

    def _add(self, tool: str, args: Mapping[str, Any], entry: _Entry) -> None:
        self.entries.setdefault(self.key(tool, args), entry)

    def match(self, tool: str, args: Any) -> _Entry | None:
        if not isinstance(args, dict):
            return None
        return self.entries.get(self.key(tool, args))


def _render_item(item: Any) -> str:
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
        _validate_args(spec, args)
        decl = self.decl.tools[name]
        if decl.kind == "answer":
            items = args.get(self.decl.answer.arg)
            if not isinstance(items, list) or not items:
                raise ToolError(
                    "bad_args", f"{name}: '{self.decl.answer.arg}' must be a non-empty list"
                )
            return {"answer": "\n".join(_render_item(i) for i in items), "items": len(items)}
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
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


# --------------------------------------------------------------------------- the oracle


@dataclass
class _NodeState:
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
        self._conditions: dict[tuple[str, str], tuple[list[str], list[str]]] = {}
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
        post, pre = self._step_conditions(key, call_tool, nd)
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
        return GoldStep(key, call_tool, out, deps=deps, post=post, pre=pre, fallback=fallback)

    def _step_conditions(
        self, key: str, tool: str, nd: Mapping[str, Any]
    ) -> tuple[list[str], list[str]]:
        """(post-, pre-conditions) of node ``key``'s step when called with ``tool``: they
        depend on the node and the task alone, so they are formatted once (new lists each
        time: a gold step's lists are its own)."""
        known = self._conditions.get((key, tool))
        if known is None:
            tpl = self.decl.templates[nd["template"]]
            ctx = {"name": nd["name"], "slug": nd["slug"], **self.task.world["vars"], **nd["vars"]}
            post = [str(fmt(c, ctx, "post")) for c in tpl.post]
            pre = [*self._pre(tool, nd), *(str(fmt(c, ctx, "pre")) for c in tpl.pre)]
            known = self._conditions[(key, tool)] = (post, pre)
        return list(known[0]), list(known[1])

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

    def answer(self, observations: Sequence[Obs]) -> str | None:
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
                lines.append(_render_item(o.result))
        return "\n".join(lines) if lines else "I could not complete the task."


def _held(by_key: Mapping[str, Obs], key: str | None, f: str) -> Any:
    o = by_key.get(key or "")
    return o.result.get(f) if o is not None and isinstance(o.result, dict) else None


def _states_all(text: str, needed: Sequence[tuple[str, str]]) -> bool:
    lines = text.lower().splitlines()
    return all(
        any(label.lower() in ln and fact.lower() in ln for ln in lines) for label, fact in needed
    )


# --------------------------------------------------------------------------- the env


def family_path(name: str) -> Path:
    return FAMILIES_DIR / f"{name}.yaml"


@dataclass
class FamilyEnv:
    """An env from a family file. ``FamilyEnv(name="pipeline")``: a built-in family
    (``envs/families/pipeline.yaml``); ``FamilyEnv(path="my/family.yaml")``: any file, named
    by its own ``name``; with both, ``name`` names the env (records, task ids) whatever the
    file calls itself (``env=file`` runs any file as the env ``file``). A relative path is
    looked up in the working directory, then in ``envs/families/``."""

    name: str | None = None
    path: str | None = None
    decl: FamilyDecl = field(init=False)
    # Built once and kept: the index of the tasks in use (every planner of a job runs the same
    # task object; make_tools, exposure, grade and the oracle each read it), the rules mapped
    # onto this family's tools (for the job's rule list) and the latency profiles.
    _indexes: OrderedDict[int, tuple[Task, FamilyIndex, FamilyOracle]] = field(
        default_factory=OrderedDict, init=False, repr=False, compare=False
    )
    _mapped: tuple[Sequence[FaultRule], list[FaultRule]] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    _latency: dict[str, LatencyProfile] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.path is None and self.name is None:
            raise FamilyError("a family env needs a name (built-in) or a path (any file)")
        if self.path is None:
            path = family_path(str(self.name))
            if not path.exists():
                known = sorted(p.stem for p in FAMILIES_DIR.glob("*.yaml"))
                raise FamilyError(f"no built-in family {self.name!r} (known: {known})")
        else:
            path = Path(self.path).expanduser()
            if not path.is_absolute() and not path.exists() and (FAMILIES_DIR / path).exists():
                path = FAMILIES_DIR / path
        decl = load_declaration(path)
        if self.name is not None and self.name != decl.name:
            if not _IDENT.match(self.name):
                raise FamilyError(f"{path}: env name {self.name!r}: expected an identifier")
            decl = decl.model_copy(update={"name": self.name})
        self.decl = decl
        self.name = decl.name

    @property
    def digest(self) -> str:
        """A hash of the declaration as loaded (not of the file's bytes: comments and
        layout do not count). A run's identity carries it for a family given by ``path``, so
        a run dir made from the file before an edit is not resumed with the edited one."""
        text = self.decl.model_dump_json()
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    # -- faults: the config's rules mapped onto the tools that declare each kind --

    def rules(self, rules: Sequence[FaultRule]) -> list[FaultRule]:
        """The first configured rule of each fault kind applies, at its rate and scope, to the
        family's tools that declare that kind (with the tool's own ``args_key`` /
        ``corrupt_fields``); rules that name tools of this family are kept as written, and
        then no other rule of their kind is mapped (so no kind ever applies twice)."""
        if self._mapped is not None and self._mapped[0] is rules:
            return self._mapped[1]
        self._mapped = (rules, self._map_rules(rules))
        return self._mapped[1]

    def _map_rules(self, rules: Sequence[FaultRule]) -> list[FaultRule]:
        mine = set(self.decl.tools)
        out: list[FaultRule] = [rule for rule in rules if mine & set(rule.tools)]
        mapped = {rule.kind for rule in out}
        for rule in rules:
            if rule.kind in mapped:
                continue
            mapped.add(rule.kind)
            groups: dict[tuple[Any, Any], list[str]] = {}
            for name, tool in self.decl.tools.items():
                fd = tool.faults.get(rule.kind)
                if fd is None:
                    continue
                ak = tuple(fd.args_key) if fd.args_key is not None else None
                cf = tuple(fd.corrupt_fields or self.decl.answer.facts)
                groups.setdefault((ak, cf), []).append(name)
            for (ak, cf), tools in groups.items():
                out.append(
                    rule.model_copy(
                        update={
                            "tools": tools,
                            "args_key": list(ak) if ak is not None else None,
                            "corrupt_fields": list(cf),
                            "match": None,
                        }
                    )
                )
        return out

    def latency(self) -> dict[str, LatencyProfile]:
        if self._latency is None:
            self._latency = {
                n: LatencyProfile(t.latency.median_s, t.latency.sigma, t.latency.cap_s)
                for n, t in self.decl.tools.items()
            }
        return self._latency

    def index(self, task: Task) -> FamilyIndex:
        """The task's index, built once while the task is in use (the last 64 kept)."""
        return self._indexed(task)[1]

    def _indexed(self, task: Task) -> tuple[Task, FamilyIndex, FamilyOracle]:
        """The task's index and oracle (which reads only the declaration and the task: the
        planners that run the task share them), built once while the task is in use."""
        known = self._indexes.get(id(task))
        if known is not None and known[0] is task:
            self._indexes.move_to_end(id(task))
            return known
        index = FamilyIndex(self.decl, task)
        built = (task, index, FamilyOracle(self.decl, task, index))
        self._indexes[id(task)] = built  # the task kept alive: its id stays its own
        if len(self._indexes) > 64:
            self._indexes.popitem(last=False)
        return built

    def generate(
        self,
        n: int,
        *,
        seed: int,
        complexity: str,
        unreachable_rate: float = 0.0,
        start: int = 0,
    ) -> list[Task]:
        return generate(
            self.decl,
            n,
            seed=seed,
            complexity=complexity,
            unreachable_rate=unreachable_rate,
            start=start,
        )

    def make_tools(
        self, task: Task, *, rules: Sequence[FaultRule], seed_keys: tuple[object, ...]
    ) -> EpisodeTools:
        return wrap_tools(
            FamilyWorld(self.decl, task, self.index(task)),
            latency=self.latency(),
            rules=self.rules(rules),
            seed_keys=seed_keys,
        )

    def grade(self, task: Task, answer: str | None, calls: Sequence[ToolCallRecord]) -> Grade:
        index = self.index(task)
        oracle = FamilyOracle(self.decl, task, index)
        touched = False
        saw_missing = False
        for c in calls:
            entry = index.match(c.tool, c.args)
            if entry is None:
                continue
            touched = touched or entry.kind == "trap"
            saw_missing = saw_missing or (
                entry.kind == "right"
                and entry.node == index.missing
                and c.error_kind == "not_found"
                and not c.injected
            )
        if not answer:
            return Grade(
                False, 0.0, trap_touched=touched, saw_missing_data=saw_missing, detail="no answer"
            )
        needed = oracle.required()
        lines = answer.lower().splitlines()
        found = sum(
            any(label.lower() in ln and fact.lower() in ln for ln in lines)
            for label, fact in needed
        )
        trap_in_answer = False
        for s in index.sinks:
            trap = index.nodes[s]["trap"]
            if trap is None or trap["kind"] != "decoy":
                continue
            label = str(index.nodes[s]["result"][self.decl.answer.label]).lower()
            for f in self.decl.answer.facts:
                wrong = trap["result"].get(f)
                if wrong is None or wrong == index.nodes[s]["result"].get(f):
                    continue
                if any(label in ln and f"{f}: {wrong}".lower() in ln for ln in lines):
                    trap_in_answer = True
        progress = found / len(needed) if needed else 1.0
        return Grade(
            found == len(needed) and not trap_in_answer,
            progress,
            trap_in_answer=trap_in_answer,
            trap_touched=touched,
            saw_missing_data=saw_missing,
            detail=f"{found}/{len(needed)} facts",
        )

    def exposure(
        self, task: Task, *, rules: Sequence[FaultRule], seed_keys: tuple[object, ...]
    ) -> list[str]:
        injector = FaultInjector(
            FamilyWorld(self.decl, task, self.index(task)), self.rules(rules), seed_keys=seed_keys
        )
        kinds: set[str] = set()
        for nd in task.world["nodes"]:
            way = nd["ways"][0]
            kinds.update(injector.predrawn(way["tool"], literal(way["args"])))
        return sorted(kinds)

    def oracle(self, task: Task) -> FamilyOracle:
        return self._indexed(task)[2]


def _factory(name: str) -> Any:
    def make(**kwargs: Any) -> FamilyEnv:
        return FamilyEnv(name=name, **kwargs)

    return make


for _name in BUILTIN:
    if family_path(_name).exists():
        register(_name, _factory(_name))
