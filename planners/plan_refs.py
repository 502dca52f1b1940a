"""Placeholders in a plan step's arguments: finding them, rewriting their ids to one spelling,
and resolving them from earlier steps' results.

A step refers to an earlier result as ``{{step_N.result.path}}`` (any id spelling) or, in the
RAG form, ``{dep_result}``; any other ``{name}`` would reach the tool unfilled, so the parser
rejects it.
"""

import copy
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from planarena.planners.plan_model import PlanError, PlanStep, canonical_step_id

# `{{step_1.result.url}}` (any id spelling) or the RAG form's `{dep_result}`.
_PLACEHOLDER_RE = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}|\{\s*dep_result\s*\}")
_INDEX_RE = re.compile(r"\[\s*(\d+)\s*\]")
_DEP_RESULT = "dep_result"


_TEMPLATE = re.compile(
    r"^\s*(?:\{\{\s*(?P<braced>[^{}.\[]+?)\s*(?:[.\[][^{}]*)?\}\}|(?P<bare>[^{}.\s]+)\.id)\s*$"
)


def template_name(text: str) -> str | None:
    """The name a dependency written as a template stands for, as written: the head of a
    placeholder (``{{step_1.id}}``, ``{{step_1}}``, ``{{search_web.result.url}}``) or of
    ``<name>.id``; None for any other text (read from plan revision 2)."""
    m = _TEMPLATE.match(text)
    return None if m is None else (m.group("braced") or m.group("bare")).strip()


def template_step_id(text: str) -> str | None:
    """The step id a dependency written as a template names (``{{step_1.id}}`` -> ``step_1``);
    None when it is no template or names no step id (a tool, say)."""
    name = template_name(text)
    if name is None:
        return None
    try:
        return canonical_step_id(name)
    except PlanError:
        return None


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


def stray_placeholders(value: Any) -> list[str]:
    """Every ``{name}`` in ``value`` that no step fills (the parser rejects them)."""
    return [
        stray
        for text in _iter_strings(value)
        for stray in _STRAY_PLACEHOLDER_RE.findall(_PLACEHOLDER_RE.sub("", text))
    ]


def uses_dep_result(value: Any) -> bool:
    """Whether ``value`` refers to ``{dep_result}`` (then the step needs a dependency)."""
    return any(
        _is_dep_result(m) for text in _iter_strings(value) for m in _PLACEHOLDER_RE.finditer(text)
    )


def _names_a_step(inner: str) -> bool:
    """Whether a placeholder's head (before the first dot) is a step id in some spelling."""
    head = _INDEX_RE.sub(r".\1", inner).partition(".")[0]
    try:
        canonical_step_id(head)
    except PlanError:
        return False
    return True


def canonicalize_placeholders(
    value: Any, where: str, notes: list[str], *, keep_named: bool = False
) -> Any:
    """Rewrite ids inside placeholders to canonical form so executors need one spelling.

    ``keep_named`` (plan revision 2) leaves a placeholder whose head is no step id as written,
    for :func:`name_placeholders` to read once every step of the plan is known."""

    def fix(match: re.Match[str]) -> str:
        if _is_dep_result(match):
            return match.group(0)
        if keep_named and not _names_a_step(match.group(1)):
            return match.group(0)
        step_id, parts = _split_placeholder(match.group(1))
        new = "{{" + ".".join([step_id, *parts]) + "}}"
        if new != match.group(0):
            notes.append(f"placeholder {match.group(0)!r} in {where} -> {new!r}")
        return new

    return _rewrite(value, fix)


def _rewrite(value: Any, fix: Callable[[re.Match[str]], str]) -> Any:
    """``value`` with every placeholder in its nested strings replaced by ``fix``'s text."""
    if isinstance(value, str):
        return _PLACEHOLDER_RE.sub(fix, value)
    if isinstance(value, dict):
        return {k: _rewrite(v, fix) for k, v in value.items()}
    if isinstance(value, list):
        return [_rewrite(v, fix) for v in value]
    return value


def name_placeholders(value: Any, read: Callable[[str, str], str]) -> Any:
    """Rewrite each placeholder whose head names no step (a tool, ``result``) to the step
    ``read(head, placeholder)`` returns, the head kept as the path's start when it is
    ``result`` (``{{result.url}}`` -> ``{{step_1.result.url}}``) and replaced when it is a
    tool (``{{search_web.result.url}}`` -> ``{{step_1.result.url}}``). ``read`` raises a
    :class:`PlanError` for a head that has no one reading (plan revision 2)."""

    def fix(match: re.Match[str]) -> str:
        if _is_dep_result(match) or _names_a_step(match.group(1)):
            return match.group(0)
        head, _, rest = _INDEX_RE.sub(r".\1", match.group(1)).partition(".")
        step_id = read(head.strip(), "{{" + match.group(1) + "}}")
        parts = [p.strip() for p in rest.split(".")] if rest else []
        if any(not p for p in parts):
            raise PlanError(
                "unresolvable_placeholder", f"placeholder {match.group(0)} has an empty path"
            )
        lead = [step_id, "result"] if head.strip() == "result" else [step_id]
        return "{{" + ".".join([*lead, *parts]) + "}}"

    return _rewrite(value, fix)


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
