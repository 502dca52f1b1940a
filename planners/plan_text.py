"""From an LLM's text to a JSON value: fences and prose stripped, depth bounded, slightly
broken JSON repaired (a truncated text never is).

The text is untrusted, so its nesting is bounded before any parser sees it; every failure is a
:class:`~planarena.planners.plan_model.PlanError`.
"""

import json
import re
from typing import Any

import json_repair
from planarena.planners.formats import is_truncated, json_unclosed
from planarena.planners.plan_model import PlanError

_FENCE_RE = re.compile(r"```[ \t]*[A-Za-z0-9_+-]*[ \t]*\r?\n?(.*?)(?:```|\Z)", re.DOTALL)


_STRING_OR_ESCAPE_RE = re.compile(r'\\.|"(?:\\.|[^"\\])*"', re.DOTALL)
_NOT_BRACKET_RE = re.compile(r"[^\[\]{}]+")


def check_depth(text: str, max_depth: int) -> None:
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


def value_depth(value: Any) -> int:
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


def load_json(text: str, notes: list[str]) -> tuple[Any, bool]:
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
