"""Parsing, validation and argument resolution for LLM-written plans.

Planners emit plans as JSON text in one of two shapes: the "seed" form (``id``/``tool``/
``args``/``depends_on``/conditions/``retry_limit``/``fallback``) and the "rag" form
(``step``/``action``/``query``/``purpose``). Both are normalized into one :class:`Plan` so
the executor never has to guess. The text is untrusted: it is size- and depth-checked
before parsing, repaired when slightly broken, and every structural problem surfaces as a
:class:`PlanError` with a machine-readable ``reason`` so benchmarks can count failure modes.

Its parts: :mod:`~planarena.planners.plan_model` (the plan and its error),
:mod:`~planarena.planners.plan_text` (text to JSON) and :mod:`~planarena.planners.plan_refs`
(placeholders); this module validates the JSON into a plan and keeps recent outcomes.
"""

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple, NoReturn

import networkx as nx
from planarena.envs import caches
from planarena.planners.formats import PLAN_REVISION, PLAN_REVISIONS, is_truncated
from planarena.planners.plan_model import (
    DEFAULT_RETRY_LIMIT,
    Plan,
    PlanError,
    PlanStep,
    canonical_step_id,
)
from planarena.planners.plan_prose import load_prose
from planarena.planners.plan_refs import (
    canonicalize_placeholders,
    find_placeholders,
    name_placeholders,
    resolve_args,
    stray_placeholders,
    template_name,
    template_step_id,
    uses_dep_result,
)
from planarena.planners.plan_text import check_depth, load_json, value_depth

__all__ = [
    "DEFAULT_RETRY_LIMIT",
    "Plan",
    "PlanError",
    "PlanStep",
    "canonical_step_id",
    "find_placeholders",
    "PLAN_FORMATS",
    "READING_NOTE",
    "parse_plan",
    "resolve_args",
]


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


def _conditions(
    raw: Mapping[str, Any], field: str, step_id: str, notes: list[str], reading: "_Reading | None"
) -> list[str]:
    """A step's pre- or post-conditions; with a revision-3 ``reading``, each joined with
    ``&&`` or ``||`` read as ``and`` or ``or`` (:func:`read_condition`), a repair."""
    written = _str_list(raw.get(field), field, step_id, notes)
    if reading is None:
        return written
    out = []
    for condition in written:
        read = read_condition(condition, reading.revision)
        if read != condition:
            notes.append(f"{READING_NOTE}: {C_OPERATORS} in {step_id}: {condition!r} -> {read!r}")
        out.append(read)
    return out


C_OPERATORS_REVISION = 3
"""The first plan revision whose reader reads a condition's ``&&`` and ``||``."""
_QUOTED = re.compile(r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")
_AND, _OR = re.compile(r"\s*&&\s*"), re.compile(r"\s*\|\|\s*")


def read_condition(condition: str, revision: int) -> str:
    """A written condition as the plan reader of ``revision`` reads it: from revision 3,
    ``&&`` and ``||`` outside quotes are ``and`` and ``or`` (the boolean operators of most
    languages, with one reading; a small model joins comparisons so). Quoted text is kept as
    written, and so is everything else, ``!=`` and ``!`` included."""
    if revision < C_OPERATORS_REVISION or ("&&" not in condition and "||" not in condition):
        return condition
    parts = _QUOTED.split(condition)
    for i in range(0, len(parts), 2):  # the even parts lie outside quotes
        parts[i] = _OR.sub(" or ", _AND.sub(" and ", parts[i]))
    return "".join(parts)


def _pick(raw: Mapping[str, Any], keys: tuple[str, str], where: str) -> Any:
    """Read a field that has a seed and a rag spelling; both present must agree."""
    values = [raw[k] for k in keys if k in raw]
    if len(values) == 2 and values[0] != values[1]:
        raise PlanError("schema", f"{where} has conflicting {keys[0]!r} and {keys[1]!r}")
    return values[0] if values else None


SIGNATURE_NOTE = "tool written as a signature"
_SIGNATURE = re.compile(r"^\s*([A-Za-z_][\w.-]*)\s*\(.*\)\s*$", re.DOTALL)


def tool_as_read(tool: Any, tools: frozenset[str]) -> Any:
    """The tool a step names, as the parser reads it: a tool written as the prompt's signature
    line (``search_web(query: string)``) is that tool; anything else stays as written."""
    if isinstance(tool, str) and tool not in tools:
        m = _SIGNATURE.match(tool)
        if m is not None and m.group(1) in tools:
            return m.group(1)
    return tool


def _signature_tool(tool: str, tools: frozenset[str], step_id: str, notes: list[str]) -> str:
    """A tool written as the prompt's signature line is that tool (:func:`tool_as_read`), a
    repair like ReAct's function-call style; any other unknown name is an error."""
    read = tool_as_read(tool, tools)
    if read != tool:
        notes.append(f"{step_id}: {SIGNATURE_NOTE}")
        return read
    raise PlanError("unknown_tool", f"{step_id} uses unknown tool {tool!r}")


def _parse_step(
    raw: Any, index: int, tools: frozenset[str], notes: list[str], reading: "_Reading | None"
) -> PlanStep:
    """Validate one raw step's own fields (cross-step checks come later). The fields are read
    in a fixed order, so a step with several faults always reports the same one. With a
    ``reading`` (revision 2), the slips that have one reading are read (:func:`_read_names`)."""
    label = f"step #{index + 1}"
    if not isinstance(raw, dict):
        raise PlanError("schema", f"{label} is not an object")
    step_id = _step_id(raw, index, label, notes)
    tool = _pick(raw, ("tool", "action"), step_id)
    if not isinstance(tool, str) or not tool.strip():
        raise PlanError("schema", f"{step_id} has no tool/action string")
    if tool not in tools:
        tool = _signature_tool(tool, tools, step_id, notes)
    args = _step_args(raw, step_id, notes, keep_named=reading is not None)
    if reading is None:
        deps = _step_deps(raw, step_id, notes)
    else:
        args, deps = _read_names(raw, step_id, args, notes, reading)
    retry = _retry_limit(raw, step_id)
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
        pre_conditions=_conditions(raw, "pre_conditions", step_id, notes, reading),
        post_conditions=_conditions(raw, "post_conditions", step_id, notes, reading),
        retry_limit=retry,
        fallback=fallback,
        purpose=purpose,
    )


def _step_id(raw: Mapping[str, Any], index: int, label: str, notes: list[str]) -> str:
    """The step's canonical id; a step without one is named by its position."""
    raw_id = _pick(raw, ("id", "step"), label)
    if raw_id is None:
        step_id = f"step_{index + 1}"
        notes.append(f"missing id at position {index + 1} -> {step_id}")
        return step_id
    step_id = canonical_step_id(raw_id)
    if raw_id != step_id:
        notes.append(f"id {raw_id!r} -> {step_id}")
    return step_id


def _step_args(
    raw: Mapping[str, Any], step_id: str, notes: list[str], *, keep_named: bool = False
) -> dict[str, Any]:
    """The step's arguments, the RAG form's ``query`` among them, placeholder ids canonical."""
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
    return canonicalize_placeholders(args, step_id, notes, keep_named=keep_named)


def _step_deps(
    raw: Mapping[str, Any], step_id: str, notes: list[str], reading: "_Reading | None" = None
) -> list[str]:
    """The step's dependencies, canonical and without repeats (a single one may be bare).
    With a ``reading`` (revision 2), a dependency written as a template or naming a tool is
    read as the one step it can mean (:func:`_dep_slip`)."""
    raw_deps = raw.get("depends_on")
    if raw_deps is None:
        dep_list: list[Any] = []
    elif isinstance(raw_deps, list):
        dep_list = raw_deps
    else:
        dep_list = [raw_deps]
    deps: list[str] = []
    for dep in dep_list:
        slip = _dep_slip(dep, step_id, reading, notes) if reading is not None else None
        if slip is not None:
            canon = slip
        else:
            canon = canonical_step_id(dep)
            if dep != canon:
                notes.append(f"depends_on {dep!r} in {step_id} -> {canon}")
        if canon in deps:
            notes.append(f"duplicate depends_on {canon} in {step_id} dropped")
        else:
            deps.append(canon)
    return deps


READING_NOTE = "read one way"
"""How every note of a revision-2 reading starts: a slip with exactly one reading, a repair."""
TEMPLATE_DEP = "dependency written as a template"
TOOL_DEP = "dependency names a tool"
TOOL_PLACEHOLDER = "placeholder names a tool"
RESULT_PLACEHOLDER = "placeholder names result"
IMPLIED_DEP = "dependency implied by a placeholder"
C_OPERATORS = "condition joined with && or ||"
READINGS = (TEMPLATE_DEP, TOOL_DEP, TOOL_PLACEHOLDER, RESULT_PLACEHOLDER, IMPLIED_DEP, C_OPERATORS)
"""The slips revision 2 reads (docs/planners.md#plan-revisions), as their notes name them."""


class _Reading(NamedTuple):
    """What revision 2 reads a step's names against: the tools, the steps before it (whose
    tools are known) and the completed steps of a replan (whose tools the parser is not
    told)."""

    tools: frozenset[str]
    earlier: Sequence[PlanStep]
    done: frozenset[str]
    revision: int = 2  # the reader's revision (from 3 a condition's && and || are read)


class _Candidates(NamedTuple):
    """The steps a name in one step can mean: its dependencies, or with none the earlier
    steps; ``unknown`` when one of them is a step whose tool is not known (a completed step,
    or a dependency on a later step)."""

    step_id: str
    deps: list[str]
    steps: list[PlanStep]
    unknown: bool


def _one_step_using(tool: str, steps: Sequence[PlanStep], unknown: bool) -> tuple[str, str]:
    """The one step of ``steps`` that uses ``tool`` (and ``""``), or ``""`` and why there is
    not exactly one (``unknown``: a step whose tool is not known is among ``steps``)."""
    using = [s.id for s in steps if s.tool == tool]
    if unknown:
        return "", "and a step whose tool is not known may use it"
    if len(using) != 1:
        return "", f"which {len(using)} candidate steps use ({', '.join(using) or 'none'})"
    return using[0], ""


def _dep_slip(dep: Any, step_id: str, reading: _Reading, notes: list[str]) -> str | None:
    """A dependency as revision 2 reads it where revision 1 would not: one written as a
    template of a step id (``{{step_1.id}}``, ``step_1.id``, ``{{step_1.result.url}}``) is
    that step; a tool's name, bare or as a template's head, is the one earlier step that uses
    it. None for anything else (read as revision 1 reads it)."""
    if not isinstance(dep, str):
        return None
    name = dep if dep in reading.tools else template_name(dep)
    if name is None:
        return None
    if name in reading.tools:
        found, why = _one_step_using(name, reading.earlier, bool(reading.done))
        if not found:
            raise PlanError("schema", f"unrecognized step id {dep!r}: names tool {name!r}, {why}")
        notes.append(f"{READING_NOTE}: {TOOL_DEP}: {dep!r} in {step_id} -> {found}")
        return found
    found = template_step_id(dep)
    if found is not None:
        notes.append(f"{READING_NOTE}: {TEMPLATE_DEP}: {dep!r} in {step_id} -> {found}")
    return found


def _read_names(
    raw: Mapping[str, Any],
    step_id: str,
    args: dict[str, Any],
    notes: list[str],
    reading: _Reading,
) -> tuple[dict[str, Any], list[str]]:
    """Revision 2: the step's dependencies, and its placeholders that name a tool or
    ``result`` read as the one step they can mean. Errors come in revision 1's order: a
    placeholder that cannot be read is reported before a dependency that cannot."""
    try:
        deps = _step_deps(raw, step_id, notes, reading)
    except PlanError:
        name_placeholders(args, _unread)  # revision 1 reads args first
        raise

    def read(head: str, shown: str) -> str:
        return _read_head(head, shown, _candidates(step_id, deps, reading), reading.tools, notes)

    return name_placeholders(args, read), deps


def _candidates(step_id: str, deps: list[str], reading: _Reading) -> _Candidates:
    """The steps a name in the step can mean (asked only for a placeholder naming no step)."""
    if not deps:
        return _Candidates(step_id, deps, list(reading.earlier), bool(reading.done))
    known = {s.id: s for s in reading.earlier}
    steps = [known[d] for d in deps if d in known]
    return _Candidates(step_id, deps, steps, len(steps) < len(deps))


def _unread(head: str, shown: str) -> NoReturn:
    """A placeholder naming no step, refused as revision 1 refuses it."""
    raise PlanError("unresolvable_placeholder", f"placeholder {shown} does not name a step")


def _read_head(
    head: str, shown: str, cands: _Candidates, tools: frozenset[str], notes: list[str]
) -> str:
    """The step a placeholder's head means: ``result`` the step's one dependency; a tool the
    one candidate step using it. Anything else is refused, as revision 1 refuses it."""
    what = f"placeholder {shown} in {cands.step_id}"
    if head in tools:
        found, why = _one_step_using(head, cands.steps, cands.unknown)
        if not found:
            raise PlanError("unresolvable_placeholder", f"{what} names tool {head!r}, {why}")
        kind = TOOL_PLACEHOLDER
    elif head == "result" and len(cands.deps) == 1:
        found, kind = cands.deps[0], RESULT_PLACEHOLDER
    elif head == "result":
        why = f"{what} names result, and {cands.step_id} has {len(cands.deps)} dependencies"
        raise PlanError("unresolvable_placeholder", why)
    else:
        _unread(head, shown)
    notes.append(f"{READING_NOTE}: {kind}: {shown} in {cands.step_id} -> {found}")
    return found


def _imply_dependencies(
    steps: list[PlanStep],
    ancestors: Mapping[str, frozenset[str]],
    done: frozenset[str],
    notes: list[str],
) -> tuple[list[PlanStep], dict[str, frozenset[str]]] | None:
    """Revision 2: a placeholder naming another step of the plan that the step does not come
    after makes that step a dependency (the result is needed, so it runs first); the steps
    and their ancestors then. None when no placeholder implies one, or when the implied
    dependencies would loop (then the placeholder is refused, as revision 1 refuses it)."""
    ids = {s.id for s in steps}
    out, found = [], []
    for s in steps:
        refs = [r for r, _ in find_placeholders(s.args) if r in ids and r != s.id]
        missing = [r for r in dict.fromkeys(refs) if r not in ancestors[s.id] and r not in done]
        found += [
            f"{READING_NOTE}: {IMPLIED_DEP}: {s.id} needs {r}'s result -> {r}" for r in missing
        ]
        out.append(s.model_copy(update={"depends_on": [*s.depends_on, *missing]}) if missing else s)
    if not found:
        return None
    try:
        implied = _check_dependencies(out, done)
    except PlanError:
        return None
    notes.extend(found)
    return out, implied


def _retry_limit(raw: Mapping[str, Any], step_id: str) -> int:
    """The step's retry limit: a non-negative integer, the default when absent."""
    retry = raw.get("retry_limit")
    if retry is None:
        return DEFAULT_RETRY_LIMIT
    if isinstance(retry, bool) or not isinstance(retry, int):
        raise PlanError("schema", f"retry_limit of {step_id} must be an integer, got {retry!r}")
    if retry < 0:
        raise PlanError("negative_retry_limit", f"retry_limit of {step_id} is {retry}")
    return retry


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
        stray = stray_placeholders(s.args)
        if stray:
            raise PlanError(
                "unresolvable_placeholder",
                f"{s.id} has {stray[0]!r}, which no step fills: write {{dep_result}} (with "
                "depends_on) or {{{{step_N.result...}}}}",
            )
        if uses_dep_result(s.args) and not s.depends_on:
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
    plan_format: str = "json",
    revision: int = PLAN_REVISION,
) -> Plan:
    """Parse and validate planner output; raise PlanError (never anything else) if unusable.

    `completed` lists ids of steps already executed before a replan: the new plan may
    depend on them and reference their results. `plan_format` is the format the plan was
    asked in: ``json`` (a Plan JSON object) or ``text`` (numbered steps in prose,
    :mod:`~planarena.planners.plan_prose`); both are validated by the same rules.
    `revision` is the plan reader's (:data:`~planarena.planners.formats.PLAN_REVISIONS`):
    1 reads a text as the shipped recording was read; 2 also reads the slips that have one
    reading (a dependency or placeholder naming a tool, ``{{result...}}``, a template step
    id, a placeholder's missing dependency), each noted as a repair (docs/planners.md).

    The same text is often parsed again (the plan every static planner is given for a
    prompt, a candidate a judge scored and then runs): the outcome is kept for the last
    :data:`PARSED_KEPT` distinct calls. A kept :class:`Plan` is shared, so it must be read
    only (tests check that episodes of every planner leave the kept plans as parsed).
    """
    if not isinstance(text, str):
        raise PlanError("schema", f"plan text must be a string, got {type(text).__name__}")
    # is_truncated is part of the key: a text cut at max_tokens is never repaired, an equal
    # text that was not cut may be
    if plan_format not in PLAN_FORMATS:
        raise ValueError(f"plan_format must be one of {PLAN_FORMATS}, got {plan_format!r}")
    if revision not in PLAN_REVISIONS:
        raise ValueError(f"revision must be one of {PLAN_REVISIONS}, got {revision!r}")
    tool_set, done = frozenset(tools), frozenset(completed)
    key = (text, is_truncated(text), tool_set, done, max_chars, max_depth, plan_format, revision)
    outcome = PARSED.get(key)
    if outcome is None:
        try:
            outcome = _parse_plan(text, tool_set, done, max_chars, max_depth, plan_format, revision)
        except PlanError as err:
            outcome = (err.reason, str(err))
        if len(PARSED) >= PARSED_KEPT:
            del PARSED[next(iter(PARSED))]  # the oldest
        PARSED[key] = outcome
    if isinstance(outcome, Plan):
        return outcome
    raise PlanError(*outcome)  # a fresh error (and traceback) for every caller


PLAN_FORMATS = ("json", "text")
"""The formats a plan can be asked in (``planner.<name>.plan_format``)."""

PARSED_KEPT = 256
"""Distinct parse_plan calls whose outcome (the plan, or the error's reason and message) is
kept, oldest out first. A text comes back within a few hundred parses (a judged candidate then
run; a job's planners run the same block of tasks in turn), so keeping more would miss no less
often and only hold more memory (the measurements are in docs/performance.md)."""
PARSED: dict[tuple[Any, ...], Plan | tuple[Any, str]] = {}
caches.register(PARSED.clear)


def _parse_plan(
    text: str,
    tool_set: frozenset[str],
    completed: frozenset[str],
    max_chars: int,
    max_depth: int,
    plan_format: str = "json",
    revision: int = PLAN_REVISION,
) -> Plan:
    if len(text) > max_chars:
        raise PlanError("too_large", f"plan text has {len(text)} chars (max {max_chars})")
    check_depth(text, max_depth)
    done = frozenset(canonical_step_id(c) for c in completed)

    notes: list[str] = []
    # the format hook: prose is read into the same raw steps a Plan JSON holds
    if plan_format == "text":
        data, repaired = load_prose(text, notes, revision=revision)
    else:
        data, repaired = load_json(text, notes)
    # JSON parsed strictly from the whole text is no deeper than the scan above allowed;
    # stripped or repaired JSON may be, so it is measured
    if (repaired or notes) and value_depth(data) > max_depth:
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
        reading = _Reading(tool_set, steps, done, revision) if revision >= 2 else None
        step = _parse_step(raw, index, tool_set, notes, reading)
        if step.id in seen:
            raise PlanError("duplicate_id", f"duplicate step id {step.id}")
        seen.add(step.id)
        steps.append(step)

    ancestors = _check_dependencies(steps, done)
    if revision >= 2:
        implied = _imply_dependencies(steps, ancestors, done, notes)
        if implied is not None:
            steps, ancestors = implied
    _check_placeholders(steps, ancestors, done)
    if is_rag and not any(s.tool == "synthesize" for s in steps):
        raise PlanError("missing_synthesize", "RAG plan has no synthesize step")

    return Plan(
        goal=goal,
        steps=steps,
        form="rag" if is_rag else "seed",
        # a tool written as its signature deviates from the format: a repair, as in ReAct
        # and so is every slip revision 2 reads
        repaired=repaired
        or any(n.endswith(SIGNATURE_NOTE) or n.startswith(READING_NOTE) for n in notes),
        normalizations=notes,
    )
