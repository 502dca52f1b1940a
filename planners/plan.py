"""Parsing, validation and argument resolution for LLM-written plans.

Planners emit plans as JSON text in one of two shapes: the "seed" form (``id``/``tool``/
``args``/``depends_on``/conditions/``retry_limit``/``fallback``) and the "rag" form
(``step``/``action``/``query``/``purpose``). Both are normalized into one :class:`Plan` so
the executor never has to guess. The text is untrusted: it is size- and depth-checked
before parsing, repaired when slightly broken, and every structural problem surfaces as a
:class:`PlanError` with a machine-readable ``reason`` so benchmarks can count failure modes.
"""

import copy
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import json_repair
import networkx as nx
from planarena.envs import caches
from planarena.planners.formats import is_truncated, json_unclosed
from pydantic import BaseModel, ConfigDict

__all__ = [
    "DEFAULT_RETRY_LIMIT",
    "Plan",
    "PlanError",
    "PlanStep",
    "canonical_step_id",
    "find_placeholders",
    "parse_plan",
    "resolve_args",
]

DEFAULT_RETRY_LIMIT = 3
"""Used when a step gives no retry_limit (the seed article's example value)."""

PlanErrorReason = Literal[
    "malformed_json",
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


# ------------------------------------------------------------------ placeholders

# `{{step_1.result.url}}` (any id spelling) or the RAG form's `{dep_result}`.
_PLACEHOLDER_RE = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}|\{\s*dep_result\s*\}")
_INDEX_RE = re.compile(r"\[\s*(\d+)\s*\]")
_DEP_RESULT = "dep_result"


def _split_placeholder(inner: str) -> tuple[str, list[str]]:
    """Parse the inside of `{{...}}` into (canonical step id, path parts)."""
    text = _INDEX_RE.sub(r".\1", inner)
    head, _, rest = text.partition(".")
    try:
        step_id = canonical_step_id(head)
    except PlanError:
        raise PlanError(
            "unresolvable_placeholder", f"placeholder {{{{{inner}}}}} does not name a step"
        ) from None
    parts = [p.strip() for p in rest.split(".")] if rest else []
    if any(not p for p in parts):
        raise PlanError(
            "unresolvable_placeholder", f"placeholder {{{{{inner}}}}} has an empty path"
        )
    return step_id, parts


def _iter_strings(value: Any) -> Iterable[str]:
    """Every string value nested in dicts/lists (keys are not templated)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, Mapping):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list | tuple):
            stack.extend(reversed(item))


def _is_dep_result(match: re.Match[str]) -> bool:
    inner = match.group(1)
    return inner is None or inner == _DEP_RESULT


def find_placeholders(value: Any) -> list[tuple[str, list[str]]]:
    """All `{{step_N...}}` references in `value`, ids canonicalized, in reading order.

    `{dep_result}` is not listed (it names no step); malformed placeholders raise.
    """
    found: list[tuple[str, list[str]]] = []
    for text in _iter_strings(value):
        for match in _PLACEHOLDER_RE.finditer(text):
            if not _is_dep_result(match):
                found.append(_split_placeholder(match.group(1)))
    return found


# A `{name}` that is not a placeholder the executor fills (a misspelt `{dep_results}`, a
# `{previous_result}`): left in place it would reach the tool silently, so it is rejected.
_STRAY_PLACEHOLDER_RE = re.compile(r"\{\s*[A-Za-z_][\w.\-\[\]]*\s*\}")


def _stray_placeholders(value: Any) -> list[str]:
    return [
        stray
        for text in _iter_strings(value)
        for stray in _STRAY_PLACEHOLDER_RE.findall(_PLACEHOLDER_RE.sub("", text))
    ]


def _uses_dep_result(value: Any) -> bool:
    return any(
        _is_dep_result(m) for text in _iter_strings(value) for m in _PLACEHOLDER_RE.finditer(text)
    )


def _canonicalize_placeholders(value: Any, where: str, notes: list[str]) -> Any:
    """Rewrite ids inside placeholders to canonical form so executors need one spelling."""

    def fix(match: re.Match[str]) -> str:
        if _is_dep_result(match):
            return match.group(0)
        step_id, parts = _split_placeholder(match.group(1))
        new = "{{" + ".".join([step_id, *parts]) + "}}"
        if new != match.group(0):
            notes.append(f"placeholder {match.group(0)!r} in {where} -> {new!r}")
        return new

    if isinstance(value, str):
        return _PLACEHOLDER_RE.sub(fix, value)
    if isinstance(value, dict):
        return {k: _canonicalize_placeholders(v, where, notes) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonicalize_placeholders(v, where, notes) for v in value]
    return value


def _walk_path(value: Any, parts: list[str]) -> Any:
    """Follow dict keys / list indices; None when anything is missing."""
    for part in parts:
        if isinstance(value, Mapping):
            value = value.get(part)
        elif isinstance(value, list | tuple) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
        if value is None:
            return None
    return value


def _lookup(results: Mapping[str, Any], step_id: str, parts: list[str], label: str) -> Any:
    if step_id not in results or results[step_id] is None:
        raise PlanError("unresolvable_placeholder", f"{label}: {step_id} has no result")
    path = parts[1:] if parts and parts[0] == "result" else parts
    value = _walk_path(results[step_id], path)
    if value is None:
        raise PlanError(
            "unresolvable_placeholder",
            f"{label}: path {'.'.join(path) or '<result>'} missing or null in {step_id}'s result",
        )
    return value


def _as_text(value: Any) -> str:
    """Insert a dependency result into a query: strings as is, everything else compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def resolve_args(step: PlanStep, results: Mapping[str, Any]) -> dict[str, Any]:
    """Substitute placeholders in `step.args` from earlier results; never leave one unresolved.

    A string that is exactly one `{{...}}` placeholder keeps the value's type; embedded
    placeholders are formatted with str(). `{dep_result}` is the text of the step's
    dependencies' results joined by newlines.
    """

    def dep_text() -> str:
        if not step.depends_on:
            raise PlanError(
                "unresolvable_placeholder", f"{{dep_result}} in {step.id}, which has no depends_on"
            )
        texts = []
        for dep in step.depends_on:
            value = results.get(dep)
            if value is None:
                raise PlanError(
                    "unresolvable_placeholder", f"{{dep_result}} in {step.id}: {dep} has no result"
                )
            texts.append(_as_text(value))
        return "\n".join(texts)

    def value_of(match: re.Match[str]) -> Any:
        if _is_dep_result(match):
            return dep_text()
        step_id, parts = _split_placeholder(match.group(1))
        return _lookup(results, step_id, parts, f"placeholder {match.group(0)} in {step.id}")

    def resolve(value: Any) -> Any:
        if isinstance(value, str):
            whole = _PLACEHOLDER_RE.fullmatch(value.strip())
            if whole is not None:
                return copy.deepcopy(value_of(whole))
            return _PLACEHOLDER_RE.sub(lambda m: str(value_of(m)), value)
        if isinstance(value, Mapping):
            return {k: resolve(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [resolve(v) for v in value]
        return value

    return {key: resolve(value) for key, value in step.args.items()}


# ---------------------------------------------------------------- text -> JSON

_FENCE_RE = re.compile(r"```[ \t]*[A-Za-z0-9_+-]*[ \t]*\r?\n?(.*?)(?:```|\Z)", re.DOTALL)


_STRING_OR_ESCAPE_RE = re.compile(r'\\.|"(?:\\.|[^"\\])*"', re.DOTALL)
_NOT_BRACKET_RE = re.compile(r"[^\[\]{}]+")


def _check_depth(text: str, max_depth: int) -> None:
    """Linear bracket scan (outside strings) that stops as soon as max_depth is exceeded.

    Strings (and stray escapes) are cut out first in C, and an unterminated string hides
    the rest, as a scan would; a text with no more opening brackets than ``max_depth`` left
    cannot be too deep, which settles every ordinary plan without a Python loop."""
    outside = _STRING_OR_ESCAPE_RE.sub("", text)
    if (quote := outside.find('"')) >= 0:
        outside = outside[:quote]
    if outside.count("[") + outside.count("{") <= max_depth:
        return
    depth = 0
    for char in _NOT_BRACKET_RE.sub("", outside):  # the brackets alone, picked out in C
        if char in "[{":
            depth += 1
            if depth > max_depth:
                raise PlanError("too_deep", f"JSON nesting deeper than {max_depth}")
        elif char in "]}" and depth:
            depth -= 1


def _value_depth(value: Any) -> int:
    """Nesting depth of parsed JSON, iteratively (repair may change the structure)."""
    best = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
            best = max(best, depth + 1)
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
            best = max(best, depth + 1)
    return best


def _extract_json_text(text: str, notes: list[str]) -> str:
    """Drop markdown fences and prose around the JSON object."""
    candidate = text.strip()
    fence = _FENCE_RE.search(candidate)
    if fence is not None:
        candidate = fence.group(1).strip()
        notes.append("stripped code fence")
    if candidate and candidate[0] not in "{[":
        start = candidate.find("{")
        if start != -1:
            end = candidate.rfind("}")
            candidate = candidate[start : end + 1] if end > start else candidate[start:]
            notes.append("stripped surrounding prose")
    elif candidate.startswith("{"):
        end = candidate.rfind("}")
        if end != -1 and candidate[end + 1 :].strip():
            candidate = candidate[: end + 1]
            notes.append("stripped surrounding prose")
    return candidate


def _load_json(text: str, notes: list[str]) -> tuple[Any, bool]:
    """Strict json first; json_repair only on failure. Returns (value, repaired)."""
    candidate = _extract_json_text(text, notes)
    stripped = bool(notes)
    try:
        return json.loads(candidate), stripped
    except RecursionError:
        raise PlanError("too_deep", "JSON nesting too deep") from None
    except ValueError:
        pass
    if json_unclosed(candidate) or is_truncated(text):  # the formats' one tolerance policy
        raise PlanError("malformed_json", "plan JSON cut off: a truncated plan is not repaired")
    try:
        value = json_repair.loads(candidate)
    except RecursionError:
        raise PlanError("too_deep", "JSON nesting too deep") from None
    except Exception as exc:  # noqa: BLE001 - third-party repair on garbage may raise anything
        raise PlanError("malformed_json", f"could not repair JSON: {exc}") from None
    if not (isinstance(value, dict) and "steps" in value):
        raise PlanError("malformed_json", "text is not a JSON object with 'steps', even repaired")
    notes.append("repaired json")
    return value, True


# ------------------------------------------------------------------- validation


def _str_list(value: Any, field: str, where: str, notes: list[str]) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        notes.append(f"{field} in {where}: string -> list")
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise PlanError("schema", f"{field} in {where} must be a list of strings")


def _pick(raw: Mapping[str, Any], keys: tuple[str, str], where: str) -> Any:
    """Read a field that has a seed and a rag spelling; both present must agree."""
    values = [raw[k] for k in keys if k in raw]
    if len(values) == 2 and values[0] != values[1]:
        raise PlanError("schema", f"{where} has conflicting {keys[0]!r} and {keys[1]!r}")
    return values[0] if values else None


def _parse_step(raw: Any, index: int, tools: frozenset[str], notes: list[str]) -> PlanStep:
    """Validate one raw step's own fields (cross-step checks come later)."""
    label = f"step #{index + 1}"
    if not isinstance(raw, dict):
        raise PlanError("schema", f"{label} is not an object")
    raw_id = _pick(raw, ("id", "step"), label)
    if raw_id is None:
        step_id = f"step_{index + 1}"
        notes.append(f"missing id at position {index + 1} -> {step_id}")
    else:
        step_id = canonical_step_id(raw_id)
        if raw_id != step_id:
            notes.append(f"id {raw_id!r} -> {step_id}")
    tool = _pick(raw, ("tool", "action"), step_id)
    if not isinstance(tool, str) or not tool.strip():
        raise PlanError("schema", f"{step_id} has no tool/action string")
    if tool not in tools:
        raise PlanError("unknown_tool", f"{step_id} uses unknown tool {tool!r}")

    args = raw.get("args")
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise PlanError("schema", f"args of {step_id} must be an object")
    args = dict(args)
    if "query" in raw and raw["query"] is not None:
        if not isinstance(raw["query"], str):
            raise PlanError("schema", f"query of {step_id} must be a string")
        if "query" in args and args["query"] != raw["query"]:
            raise PlanError("schema", f"{step_id} has conflicting query and args.query")
        args["query"] = raw["query"]
    args = _canonicalize_placeholders(args, step_id, notes)

    raw_deps = raw.get("depends_on")
    if raw_deps is None:
        dep_list: list[Any] = []
    elif isinstance(raw_deps, list):
        dep_list = raw_deps
    else:
        dep_list = [raw_deps]
    deps: list[str] = []
    for dep in dep_list:
        canon = canonical_step_id(dep)
        if dep != canon:
            notes.append(f"depends_on {dep!r} in {step_id} -> {canon}")
        if canon in deps:
            notes.append(f"duplicate depends_on {canon} in {step_id} dropped")
        else:
            deps.append(canon)

    retry = raw.get("retry_limit")
    if retry is None:
        retry = DEFAULT_RETRY_LIMIT
    elif isinstance(retry, bool) or not isinstance(retry, int):
        raise PlanError("schema", f"retry_limit of {step_id} must be an integer, got {retry!r}")
    elif retry < 0:
        raise PlanError("negative_retry_limit", f"retry_limit of {step_id} is {retry}")

    fallback = raw.get("fallback")
    if fallback is not None:
        if not isinstance(fallback, str):
            raise PlanError("schema", f"fallback of {step_id} must be a string")
        if fallback not in tools:
            raise PlanError("unknown_fallback", f"{step_id} has unknown fallback {fallback!r}")

    purpose = raw.get("purpose")
    if purpose is not None and not isinstance(purpose, str):
        raise PlanError("schema", f"purpose of {step_id} must be a string")

    return PlanStep(
        id=step_id,
        tool=tool,
        args=args,
        depends_on=deps,
        pre_conditions=_str_list(raw.get("pre_conditions"), "pre_conditions", step_id, notes),
        post_conditions=_str_list(raw.get("post_conditions"), "post_conditions", step_id, notes),
        retry_limit=retry,
        fallback=fallback,
        purpose=purpose,
    )


def _check_dependencies(
    steps: list[PlanStep], completed: frozenset[str]
) -> dict[str, frozenset[str]]:
    """Refuse unknown, self and cyclic dependencies; returns each step's ancestors."""
    ids = {s.id for s in steps}
    for s in steps:
        for dep in s.depends_on:
            if dep == s.id:
                raise PlanError("self_dependency", f"{s.id} depends on itself")
            if dep not in ids and dep not in completed:
                raise PlanError("unknown_dependency", f"{s.id} depends on unknown step {dep}")
    graph = nx.DiGraph()
    graph.add_nodes_from(ids)
    graph.add_edges_from((d, s.id) for s in steps for d in s.depends_on if d in ids)
    try:
        order = list(nx.topological_sort(graph))
    except nx.NetworkXUnfeasible:
        cycle = nx.find_cycle(graph)
        path = " -> ".join([edge[0] for edge in cycle] + [cycle[-1][1]])
        raise PlanError("cyclic_dependency", f"dependency cycle: {path}") from None
    ancestors: dict[str, frozenset[str]] = {}  # per step (nx.ancestors of each, in one pass)
    for node in order:
        above: set[str] = set()
        for parent in graph.predecessors(node):
            above.add(parent)
            above |= ancestors[parent]
        ancestors[node] = frozenset(above)
    return ancestors


def _check_placeholders(
    steps: list[PlanStep], ancestors_of: dict[str, frozenset[str]], completed: frozenset[str]
) -> None:
    for s in steps:
        ancestors = ancestors_of[s.id]
        for ref, parts in find_placeholders(s.args):
            if ref not in ancestors and ref not in completed:
                shown = ".".join([ref, *parts])
                raise PlanError(
                    "unresolvable_placeholder",
                    f"{s.id} references {{{{{shown}}}}} but {ref} is not one of its dependencies",
                )
        stray = _stray_placeholders(s.args)
        if stray:
            raise PlanError(
                "unresolvable_placeholder",
                f"{s.id} has {stray[0]!r}, which no step fills: write {{dep_result}} (with "
                "depends_on) or {{{{step_N.result...}}}}",
            )
        if _uses_dep_result(s.args) and not s.depends_on:
            raise PlanError(
                "unresolvable_placeholder", f"{s.id} uses {{dep_result}} but has no depends_on"
            )


def parse_plan(
    text: str,
    tools: Iterable[str],
    *,
    completed: Iterable[str] = (),
    max_chars: int = 100_000,
    max_depth: int = 20,
) -> Plan:
    """Parse and validate planner output; raise PlanError (never anything else) if unusable.

    `completed` lists ids of steps already executed before a replan: the new plan may
    depend on them and reference their results.

    The same text is often parsed again (the plan every static planner is given for a
    prompt, a candidate a judge scored and then runs): the outcome is kept for the last
    :data:`PARSED_KEPT` distinct calls. A kept :class:`Plan` is shared, so it must be read
    only (tests check that episodes of every planner leave the kept plans as parsed).
    """
    if not isinstance(text, str):
        raise PlanError("schema", f"plan text must be a string, got {type(text).__name__}")
    # is_truncated is part of the key: a text cut at max_tokens is never repaired, an equal
    # text that was not cut may be
    tool_set, done = frozenset(tools), frozenset(completed)
    key = (text, is_truncated(text), tool_set, done, max_chars, max_depth)
    outcome = PARSED.get(key)
    if outcome is None:
        try:
            outcome = _parse_plan(text, tool_set, done, max_chars, max_depth)
        except PlanError as err:
            outcome = (err.reason, str(err))
        if len(PARSED) >= PARSED_KEPT:
            del PARSED[next(iter(PARSED))]  # the oldest
        PARSED[key] = outcome
    if isinstance(outcome, Plan):
        return outcome
    raise PlanError(*outcome)  # a fresh error (and traceback) for every caller


PARSED_KEPT = 256
"""Distinct parse_plan calls whose outcome (the plan, or the error's reason and message) is
kept, oldest out first. A text comes back within a few hundred parses (a judged candidate then
run; a job's planners run the same block of tasks in turn): the default job misses as often
(1,790 of its 5,130 parses) with 256 kept as with 2,048, and 256 hold about 7 MB, 2,048 30."""
PARSED: dict[tuple[Any, ...], Plan | tuple[Any, str]] = {}
caches.register(PARSED.clear)


def _parse_plan(
    text: str, tool_set: frozenset[str], completed: frozenset[str], max_chars: int, max_depth: int
) -> Plan:
    if len(text) > max_chars:
        raise PlanError("too_large", f"plan text has {len(text)} chars (max {max_chars})")
    _check_depth(text, max_depth)
    done = frozenset(canonical_step_id(c) for c in completed)

    notes: list[str] = []
    data, repaired = _load_json(text, notes)
    # JSON parsed strictly from the whole text is no deeper than the scan above allowed;
    # stripped or repaired JSON may be, so it is measured
    if (repaired or notes) and _value_depth(data) > max_depth:
        raise PlanError("too_deep", f"JSON nesting deeper than {max_depth}")
    if not isinstance(data, dict):
        raise PlanError("schema", f"plan must be a JSON object, got {type(data).__name__}")
    if "steps" not in data:
        raise PlanError("schema", "plan has no 'steps'")
    raw_steps = data["steps"]
    if not isinstance(raw_steps, list):
        raise PlanError("schema", "'steps' must be a list")
    if not raw_steps:
        raise PlanError("empty_plan", "plan has no steps")
    goal = data.get("goal")
    if goal is None:
        goal = ""
        notes.append("missing goal -> ''")
    elif not isinstance(goal, str):
        raise PlanError("schema", "goal must be a string")

    is_rag = any(isinstance(s, dict) and ("action" in s or "step" in s) for s in raw_steps)
    steps: list[PlanStep] = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_steps):
        step = _parse_step(raw, index, tool_set, notes)
        if step.id in seen:
            raise PlanError("duplicate_id", f"duplicate step id {step.id}")
        seen.add(step.id)
        steps.append(step)

    ancestors = _check_dependencies(steps, done)
    _check_placeholders(steps, ancestors, done)
    if is_rag and not any(s.tool == "synthesize" for s in steps):
        raise PlanError("missing_synthesize", "RAG plan has no synthesize step")

    return Plan(
        goal=goal,
        steps=steps,
        form="rag" if is_rag else "seed",
        repaired=repaired,
        normalizations=notes,
    )
