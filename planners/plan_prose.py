"""The natural-language plan format: numbered steps in prose, read leniently into a Plan.

The article's fourth decision (JSON plan vs natural-language plan) needs a plan a model can
write without emitting valid JSON. A text plan is one numbered line per step, the tool and its
arguments, followed by labelled lines for what the JSON form holds in fields::

    Goal: "Write a short report on FY2023 revenue of Initech."
    Steps:
    1. search_web query="Initech annual report 2023"
       - requires: api_key_valid.search_web == true
       - check: result.url != null
       - fallback: search_web_backup
    2. parse_pdf url="{{step_1.result.url}}"
       - after: 1
       - check: result.doc_id != null

A step's number is its id (``3.`` is ``step_3``; a replan continues the numbering), an
argument's value is a JSON literal (``query="..."``, ``fields=["revenue"]``), ``after`` lists
the steps it depends on, ``requires`` / ``check`` hold one pre- / post-condition each,
``retries`` the retry limit (3 when absent), ``fallback`` the fallback tool, ``purpose`` a
note. ``Steps: none`` is the plan with no steps (a replanner's "the goal is out of reach").

:func:`load_prose` reads the text into the same raw step objects a Plan JSON holds, and
:func:`planarena.planners.plan.parse_plan` validates them exactly like JSON steps, so a text
plan and a JSON plan of the same steps are the same :class:`~.plan_model.Plan` (its ``form``
is ``seed``). It follows the tolerance policy of :mod:`planarena.planners.formats`: markdown
emphasis, bullets, code fences, prose around the plan, ``Step 1:`` / ``1)`` headers, label
synonyms (``depends on``, ``post-condition``), compact clauses on the step's own line
(``1. run_step step="a" (after 2; check: result.rows > 0)``), function-call style arguments
(``search_web(query="...")``), single-quoted or bare values are accepted and each is noted (the
plan counts as repaired); a text with no numbered step and no ``Steps: none`` is malformed,
and an output cut at ``max_tokens`` is never accepted (a cut prose plan looks complete).
Nothing is ever ``eval``-ed: a single-quoted value is read with :func:`ast.literal_eval`.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import json_repair
from planarena.envs.jsontext import encoder
from planarena.planners.formats import (
    PLAN_TEXT_FORMAT,
    OutputParseError,
    is_truncated,
    lenient_json,
)
from planarena.planners.plan_model import DEFAULT_RETRY_LIMIT, Plan, PlanError, canonical_step_id
from planarena.planners.plan_refs import template_name, template_step_id

__all__ = [
    "PLAN_TEXT_FORMAT",
    "load_prose",
    "plan_to_text",
    "render_plan_text",
    "run_on_text",
    "written_steps",
]


_VALUE_JSON = encoder(ensure_ascii=False)  # json.dumps(..., ensure_ascii=False), built once
_DECODER = json.JSONDecoder()

# --------------------------------------------------------------------------- rendering


def _number(step_id: Any, position: int) -> int:
    """A step id's number (``step_3`` -> 3); a step with an unreadable id by its position."""
    try:
        return int(canonical_step_id(step_id).removeprefix("step_"))
    except PlanError:
        return position


def _deps_text(deps: Any, position: int) -> str:
    items = deps if isinstance(deps, list) else [deps]
    return ", ".join(str(_number(d, position)) for d in items)


def _args_text(args: Any) -> str:
    if not isinstance(args, Mapping):
        return ""
    return " ".join(f"{k}={_VALUE_JSON(v)}" for k, v in args.items())


def render_plan_text(goal: str, steps: Sequence[Mapping[str, Any]], *, sloppy: bool = False) -> str:
    """Plan JSON step objects written as a text plan (the canonical form, which
    :func:`load_prose` reads with no note). ``sloppy`` writes the same plan as a model that
    half-follows the format does: a sentence before it, markdown, ``Step n:`` headers and
    label synonyms; it reads to the same steps, noted as repaired."""
    lines = []
    if sloppy:
        lines.append("Sure, here is the plan.")
    lines.append(f"Goal: {_VALUE_JSON(goal)}")
    if not steps:
        lines.append("Steps: none")
        return "\n".join(lines)
    lines.append("**Steps:**" if sloppy else "Steps:")
    labels = (
        ("Depends on", "Pre-condition", "Post-condition", "Retry limit", "Fallback tool")
        if sloppy
        else ("after", "requires", "check", "retries", "fallback")
    )
    for position, step in enumerate(steps, 1):
        n = _number(step.get("id"), position)
        head = f"**Step {n}:** `{step.get('tool')}`" if sloppy else f"{n}. {step.get('tool')}"
        args = _args_text(step.get("args"))
        lines.append(f"{head} {args}" if args else head)
        deps = step.get("depends_on")
        if deps:
            lines.append(f"   - {labels[0]}: {_deps_text(deps, position)}")
        for cond in step.get("pre_conditions") or ():
            lines.append(f"   - {labels[1]}: {cond}")
        for cond in step.get("post_conditions") or ():
            lines.append(f"   - {labels[2]}: {cond}")
        retry = step.get("retry_limit", DEFAULT_RETRY_LIMIT)
        if retry != DEFAULT_RETRY_LIMIT:
            lines.append(f"   - {labels[3]}: {retry}")
        if step.get("fallback") is not None:
            lines.append(f"   - {labels[4]}: {step['fallback']}")
        if step.get("purpose") is not None:
            lines.append(f"   - purpose: {step['purpose']}")
    return "\n".join(lines)


def run_on_text(goal: str, steps: Sequence[Mapping[str, Any]]) -> str:
    """The same steps run together into one paragraph, no numbering: the text form's
    malformed output (a model that ignored the requested format). No lenient reader can
    tell its steps, dependencies and checks apart, and :func:`load_prose` rejects it."""
    if not steps:
        return "I could not find a way to do this: " + " ".join(goal.split())
    calls = [f"{s.get('tool')} with {_args_text(s.get('args')) or 'no arguments'}" for s in steps]
    return "To do this I would call " + ", then ".join(calls) + ", and check the results."


def plan_to_text(plan: Plan) -> str:
    """A parsed plan written as a text plan (``load_prose`` reads it back to the same steps)."""
    return render_plan_text(plan.goal, [s.model_dump() for s in plan.steps])


# --------------------------------------------------------------------------- reading

_MARK = r"[ \t>*_`#~\-•]*"  # markdown and bullets around a label or a step's header
_STEP_HEAD = re.compile(
    rf"^{_MARK}(?:step[ \t_#-]*)?(?P<n>\d{{1,9}})[ \t*_`]*[.):][ \t*_`]*(?P<rest>.*)$",
    re.IGNORECASE,
)
_CANONICAL_HEAD = re.compile(r"^(\d{1,9})\. \S")
_LABELS: dict[str, str] = {
    "deps": r"after|depends[ \t_-]*on|dependencies|deps",
    "pre": r"requires|pre[ \t_-]*conditions?|before|only[ \t]+if",
    "post": r"check|checks|post[ \t_-]*conditions?|verify|expect",
    "retry": r"retries|retry[ \t_-]*limit|retry",
    "fallback": r"fallback(?:[ \t_-]*tool)?|backup",
    "purpose": r"purpose|why|note",
    "args": r"args|arguments|input",
}
_CANONICAL_LABEL = {
    "deps": "after",
    "pre": "requires",
    "post": "check",
    "retry": "retries",
    "fallback": "fallback",
    "purpose": "purpose",
}
_LABEL = re.compile(
    rf"^{_MARK}(?P<label>{'|'.join(f'(?P<{k}>{v})' for k, v in _LABELS.items())})\b"
    r"[ \t*_`]*(?P<colon>:?)[ \t*_`]*(?P<value>.*)$",
    re.IGNORECASE,
)
_GOAL = re.compile(rf"^{_MARK}goal[ \t*_`]*:[ \t*_`]*(?P<value>.*)$", re.IGNORECASE)
_STEPS = re.compile(rf"^{_MARK}steps[ \t*_`]*:?[ \t*_`]*(?P<value>.*)$", re.IGNORECASE)
_NONE = re.compile(r"^(?:none|no steps|nothing|-|—)\.?$", re.IGNORECASE)
_TOOL = re.compile(r"^[*_`'\"]*(?P<tool>[A-Za-z_][\w.-]*)[*_`'\"]*")
_KEY = re.compile(r"(?P<key>[A-Za-z_][\w-]*)[ \t]*[=:][ \t]*")
_BARE = re.compile(r"[^\s,;()]+")
_DEP = re.compile(r"(?:step[ \t_#-]*)?(\d{1,9})", re.IGNORECASE)
_NAME = re.compile(r"[A-Za-z_][\w.-]*")
_DASH = re.compile(r"^(?:--?|—|–)[ \t]+")
_RETRY = re.compile(r"^[*_`]*(-?\d+)[*_`]*")


def _closing(text: str, start: int) -> int:
    """Index of the bracket closing the one at ``start`` (quotes respected); -1 if none."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack: list[str] = []
    quote: str | None = None
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if quote is not None:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in pairs:
            stack.append(pairs[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
            if not stack:
                return i
    return -1


def _split_outside_quotes(text: str, sep: str) -> list[str]:
    parts, current, quote, depth = [], [], None, 0
    for ch in text:
        if quote is not None:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def _string_end(text: str, start: int) -> int:
    """Index of the quote closing the string that opens at ``start``; -1 if none."""
    quote, escaped = text[start], False
    for i in range(start + 1, len(text)):
        if escaped:
            escaped = False
        elif text[i] == "\\":
            escaped = True
        elif text[i] == quote:
            return i
    return -1


def _value(text: str, pos: int, where: str, notes: list[str]) -> tuple[Any, int]:
    """One argument value starting at ``pos``: a JSON literal, else a quoted or bracketed
    Python literal, else a bare word (a string). Returns (value, end)."""
    try:
        value, end = _DECODER.raw_decode(text, pos)
        if end >= len(text) or text[end] in " \t,;)":
            return value, end
    except ValueError:
        pass
    ch = text[pos]
    if ch in "'\"[{(":
        end = _string_end(text, pos) if ch in "'\"" else _closing(text, pos)
        if end < pos:
            raise PlanError("malformed_text", f"{where}: a value is never closed (cut off?)")
        literal = text[pos : end + 1]
        try:
            value = ast.literal_eval(literal)
            notes.append(f"{where}: python literal")
            return value, end + 1
        except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
            pass
        try:
            value = json_repair.loads(literal)
        except Exception:  # noqa: BLE001 - third-party repair on garbage may raise anything
            value = None
        if value in (None, ""):
            raise PlanError("malformed_text", f"{where}: cannot read the value {literal[:60]!r}")
        notes.append(f"{where}: repaired value")
        return value, end + 1
    bare = _BARE.match(text, pos)
    if bare is None:
        raise PlanError("malformed_text", f"{where}: no value at {text[pos : pos + 40]!r}")
    notes.append(f"{where}: bare value")
    return bare.group(0).strip("*_`"), bare.end()


def _label_kind(m: re.Match[str]) -> str:
    return next(k for k in _LABELS if m.group(k) is not None)


def _clause(
    step: dict[str, Any], text: str, where: str, notes: list[str], revision: int = 1
) -> bool:
    """Apply one labelled clause (``after: 1, 2``, ``check: ...``); False if not a label."""
    m = _LABEL.match(text)
    if m is None:
        return False
    kind, value = _label_kind(m), m.group("value").strip()
    canonical = text.startswith(f"   - {_CANONICAL_LABEL.get(kind, '')}: ")
    if not canonical and not text.startswith(f"{_CANONICAL_LABEL.get(kind, '')}: "):
        notes.append(f"{where}: label {m.group('label').strip()!r}")
    if kind == "args":
        _args(step, value, where, notes, revision)
    elif kind == "deps":
        if _NONE.match(value):
            return True
        step.setdefault("depends_on", []).extend(_after(value, where, revision))
    elif kind in ("pre", "post"):
        field = "pre_conditions" if kind == "pre" else "post_conditions"
        conditions = _split_outside_quotes(value, ";") if ";" in value else [value]
        if len(conditions) > 1:
            notes.append(f"{where}: several conditions on one line")
        step.setdefault(field, []).extend(c.strip("`") for c in conditions if c.strip("`"))
    elif kind == "retry":
        number = _RETRY.match(value)
        step["retry_limit"] = int(number.group(1)) if number else value
    elif kind == "fallback":
        name = value.strip("*_`'\" .")
        step["fallback"] = None if _NONE.match(name) or name.lower() in ("null", "none") else name
    else:
        step["purpose"] = value
    return True


def _after(value: str, where: str, revision: int) -> list[str]:
    """The dependencies an ``after`` line names: the step numbers in it. From revision 2, as
    the JSON form's reader reads them: an item spelled as a template (``{{step_1.id}}``,
    ``step_1.id``) is passed on as written, and so, where no number is, is a name (a tool,
    which :func:`~planarena.planners.plan.parse_plan` reads as the one step that uses it)."""
    if revision < 2:
        deps = [f"step_{int(n)}" for n in _DEP.findall(value)]
    else:
        items = [i.strip(" `*_") for i in value.split(",")]
        deps = []
        for item in items:
            if template_step_id(item) is not None:
                deps.append(item)
            else:
                deps.extend(f"step_{int(n)}" for n in _DEP.findall(item))
        if not deps:  # no step number: names and templates, for parse_plan to read
            deps = [i for i in items if _NAME.fullmatch(i) or template_name(i) is not None]
    if not deps:
        raise PlanError("malformed_text", f"{where}: {value[:60]!r} names no step number")
    return deps


def _clauses(
    step: dict[str, Any], text: str, where: str, notes: list[str], revision: int = 1
) -> None:
    """Clauses on a step's own line, ``;``-separated; a part without a label continues the
    clause before it (``check: a; b``)."""
    last: str | None = None
    for part in _split_outside_quotes(text, ";"):
        if _clause(step, part, where, notes, revision):
            m = _LABEL.match(part)
            last = _label_kind(m) if m is not None else None
        elif last is not None and last in _CANONICAL_LABEL:
            _clause(step, f"{_CANONICAL_LABEL[last]}: {part}", where, notes, revision)
        else:
            raise PlanError("malformed_text", f"{where}: cannot read {part[:60]!r}")


def _args(step: dict[str, Any], text: str, where: str, notes: list[str], revision: int = 1) -> None:
    """Arguments (and trailing clauses) of a step: ``k=v`` pairs, a JSON object, a
    parenthesised group of either, then ``(after ...; check: ...)`` or a dash and a note."""
    args = step.setdefault("args", {})
    pos, n = 0, len(text)
    while pos < n:
        while pos < n and text[pos] in " \t,":
            pos += 1
        if pos >= n:
            break
        rest = text[pos:]
        if rest.lower().startswith("with "):
            pos += 5
            continue
        label = _LABEL.match(rest)
        if (
            label is not None
            and label.group("args") is None
            and not rest[label.end("label") :].lstrip(" \t*_`").startswith("=")
        ):
            _clauses(step, rest, where, notes, revision)  # without brackets, to the line's end
            return
        if rest[0] == "(":
            end = _closing(text, pos)
            if end < 0:
                raise PlanError("malformed_text", f"{where}: '(' is never closed (cut off?)")
            inner = text[pos + 1 : end].strip()
            if _LABEL.match(inner):
                notes.append(f"{where}: clauses in brackets")
                _clauses(step, inner, where, notes, revision)
            else:
                notes.append(f"{where}: function-call style")
                _args(step, inner, where, notes, revision)
            pos = end + 1
            continue
        if rest[0] == "{":
            value, end = _value(text, pos, where, notes)
            if not isinstance(value, dict):
                raise PlanError("schema", f"{where}: arguments must be an object")
            notes.append(f"{where}: arguments as an object")
            args.update(value)
            pos = end
            continue
        dash = _DASH.match(rest)
        if dash is not None and args:
            step.setdefault("purpose", rest[dash.end() :].strip())
            notes.append(f"{where}: a note after the arguments")
            return
        key = _KEY.match(rest)
        if key is None:
            raise PlanError("malformed_text", f"{where}: cannot read {rest[:60]!r} as arguments")
        pos += key.end()
        if pos >= n:
            raise PlanError(
                "malformed_text", f"{where}: argument {key.group('key')!r} has no value"
            )
        if "=" not in key.group(0):
            notes.append(f"{where}: 'name: value' argument")
        args[key.group("key")], pos = _value(text, pos, where, notes)


def _goal(value: str, notes: list[str]) -> str:
    value = value.strip()
    if value.startswith('"'):
        try:
            goal, end = _DECODER.raw_decode(value)
            if isinstance(goal, str) and not value[end:].strip():
                return goal
        except ValueError:
            pass
    notes.append("goal as plain text")
    return value


def load_prose(text: str, notes: list[str], *, revision: int = 1) -> tuple[dict[str, Any], bool]:
    """A text plan as ``{"goal": ..., "steps": [raw step objects]}`` (what a Plan JSON
    holds), and whether anything beyond the canonical form was accepted (each such thing
    is noted). Raises :class:`PlanError` (``malformed_text``) for text that is not a plan.
    ``revision`` is the plan reader's (``parse_plan`` passes its own): from 2, an ``after``
    line's items are read as the JSON form's ``depends_on`` items are (:func:`_after`)."""
    goal: str | None = None
    empty = False
    steps: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    before = len(notes)
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        if line.lstrip().startswith("```"):
            notes.append("code fence")
            continue
        head = _STEP_HEAD.match(line)
        if head is not None and _TOOL.match(head.group("rest")):
            current = _step(head, line, notes, revision)
            steps.append(current)
            continue
        if current is None:
            if (g := _GOAL.match(line)) is not None and goal is None:
                goal = _goal(g.group("value"), notes)
            elif (s := _STEPS.match(line)) is not None:
                value = s.group("value").strip(" *_`")
                empty = empty or bool(_NONE.match(value))
                if line not in ("Steps:", "Steps: none"):
                    notes.append("steps header style")
            else:
                notes.append("prose around the plan")
            continue
        where = current["id"]
        if not _clause(current, line, where, notes, revision):
            notes.append(f"{where}: ignored line {line.strip()[:40]!r}")
    if is_truncated(text):
        raise PlanError("malformed_text", "plan text cut at max_tokens: not accepted")
    if not steps:
        if empty:
            raise PlanError("empty_plan", "plan has no steps")
        raise PlanError("malformed_text", "no numbered steps ('1. <tool> ...') in the plan text")
    if goal is None:
        goal = ""
        notes.append("missing goal -> ''")
    return {"goal": goal, "steps": steps}, len(notes) > before


def _step(head: re.Match[str], line: str, notes: list[str], revision: int = 1) -> dict[str, Any]:
    """A step from its numbered line: the number is its id, then the tool and arguments."""
    step_id = f"step_{int(head.group('n'))}"
    if not _CANONICAL_HEAD.match(line):
        notes.append(f"{step_id}: header style")
    rest = head.group("rest")
    tool = _TOOL.match(rest)
    assert tool is not None
    if tool.group(0) != tool.group("tool"):
        notes.append(f"{step_id}: tool name in markdown")
    step: dict[str, Any] = {"id": step_id, "tool": tool.group("tool")}
    _args(step, rest[tool.end() :].strip(), step_id, notes, revision)
    return step


def written_steps(text: str, plan_format: str = "json", *, revision: int) -> list[Any] | None:
    """The steps of a plan as the model wrote them (the one lenient JSON reader every parser
    uses, or the text plan reader at the plan reader's ``revision``), before any
    normalization; None when nothing parses. What a request about that plan (a judge's, a
    proposal's) and its calibration read, as the executor reads it."""
    if plan_format == "text":
        try:
            return load_prose(text, [], revision=revision)[0]["steps"]
        except PlanError:
            return None
    try:
        value = lenient_json(text, [])
    except OutputParseError:
        return None
    steps = value.get("steps") if isinstance(value, dict) else None
    return steps if isinstance(steps, list) else None
