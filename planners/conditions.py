"""Safe evaluation of plan pre/post-condition strings.

Plans written by an LLM carry conditions such as ``step_1.status == success`` or
``remaining_budget_usd > 0.10``. They are untrusted text, so they are never passed to
Python's ``eval``: the expression is parsed with :mod:`ast`, checked against a small
whitelist of node types, and then evaluated by a restricted :class:`simpleeval.SimpleEval`
whose operators are all guarded. Names and dotted chains are resolved from the context
by this module (not by attribute access on arbitrary objects), so nothing outside the
context is reachable.
"""

import ast
import functools
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import simpleeval

__all__ = ["ConditionError", "MAX_CONDITION_CHARS", "evaluate_condition", "is_expression"]

MAX_CONDITION_CHARS = 500
"""Longer conditions are rejected before parsing (bounds parse time and recursion)."""


class ConditionError(ValueError):
    """A condition is malformed, unsafe, refers to an unknown name or is not boolean."""


# Bare words an LLM writes unquoted; reserved, so they are literals even if the context
# happens to contain a key of the same name (keeps a condition's meaning context-free).
_LITERALS: dict[str, Any] = {
    "true": True,
    "false": False,
    "null": None,
    "none": None,
    "success": "success",
    "failed": "failed",
    "failure": "failure",
    "skipped": "skipped",
    "pending": "pending",
    "running": "running",
}

_ALLOWED_NODES: tuple[type[ast.AST], ...] = (
    ast.Expression,
    ast.BoolOp,
    ast.And,
    ast.Or,
    ast.UnaryOp,
    ast.Not,
    ast.USub,
    ast.UAdd,
    ast.Compare,
    ast.Eq,
    ast.NotEq,
    ast.Lt,
    ast.LtE,
    ast.Gt,
    ast.GtE,
    ast.In,
    ast.NotIn,
    ast.Is,
    ast.IsNot,
    ast.BinOp,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.Mod,
    ast.Name,
    ast.Attribute,
    ast.Constant,
    ast.Tuple,
    ast.List,
    ast.Load,
)

_MISSING = object()


def _is_number(value: object) -> bool:
    return isinstance(value, int | float)


def _numeric(op: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """Arithmetic on numbers only: rules out string/list repetition and concatenation."""

    def guarded(left: Any, right: Any) -> Any:
        if not (_is_number(left) and _is_number(right)):
            raise ConditionError(
                f"arithmetic needs numbers, got {type(left).__name__} and {type(right).__name__}"
            )
        return op(left, right)

    return guarded


def _ordered(op: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    """Ordering against a missing value (None) is False, so `result.count > 0` is safe."""

    def guarded(left: Any, right: Any) -> bool:
        if left is None or right is None:
            return False
        return bool(op(left, right))

    return guarded


def _contains(item: Any, container: Any) -> bool:
    """`x in None` is False (missing container) rather than a TypeError."""
    if container is None:
        return False
    return item in container


def _unary_numeric(op: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def guarded(value: Any) -> Any:
        if not _is_number(value):
            raise ConditionError(f"unary sign needs a number, got {type(value).__name__}")
        return op(value)

    return guarded


_OPERATORS: dict[type[ast.AST], Callable[..., Any]] = {
    ast.Add: _numeric(operator.add),
    ast.Sub: _numeric(operator.sub),
    ast.Mult: _numeric(operator.mul),
    ast.Div: _numeric(operator.truediv),
    ast.Mod: _numeric(operator.mod),
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: _ordered(operator.lt),
    ast.LtE: _ordered(operator.le),
    ast.Gt: _ordered(operator.gt),
    ast.GtE: _ordered(operator.ge),
    ast.In: _contains,
    ast.NotIn: lambda item, container: not _contains(item, container),
    ast.Is: lambda left, right: left is right,
    ast.IsNot: lambda left, right: left is not right,
    ast.Not: operator.not_,
    ast.USub: _unary_numeric(operator.neg),
    ast.UAdd: _unary_numeric(operator.pos),
}


def _check_tree(tree: ast.AST) -> None:
    """Whitelist the AST before anything is evaluated."""
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise ConditionError(f"{type(node).__name__} is not allowed in a condition")
        if isinstance(node, ast.Attribute):
            if node.attr.startswith("_"):
                raise ConditionError(f"private attribute {node.attr!r} is not allowed")
            if not isinstance(node.value, ast.Name | ast.Attribute):
                raise ConditionError("attribute access is only allowed on names")
        elif isinstance(node, ast.Name) and node.id.startswith("_"):
            raise ConditionError(f"private name {node.id!r} is not allowed")
        elif isinstance(node, ast.Constant) and not (
            node.value is None or isinstance(node.value, str | int | float)
        ):
            raise ConditionError(f"constant {node.value!r} is not allowed")


def _dotted(node: ast.Attribute) -> tuple[str, list[str]]:
    """Split `a.b.c` into ("a", ["b", "c"]); _check_tree guarantees the shape."""
    parts: list[str] = []
    current: ast.expr = node
    while isinstance(current, ast.Attribute):
        parts.append(current.attr)
        current = current.value
    if not isinstance(current, ast.Name):  # pragma: no cover - excluded by _check_tree
        raise ConditionError("attribute access is only allowed on names")
    parts.reverse()
    return current.id, parts


def _step(value: Any, part: str) -> Any:
    """One dotted hop: dict key, `.count` as a length, public data attribute, else None."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        if part in value:
            return value[part]
        if part == "count":
            return len(value)
        return None
    if part == "count" and isinstance(value, Sequence):
        return len(value)
    if isinstance(value, str | bytes | int | float | Sequence):
        return None
    attr = getattr(value, part, None)
    if callable(attr):
        raise ConditionError(f"method {part!r} cannot be used in a condition")
    return attr


class _ConditionEval(simpleeval.SimpleEval):
    """simpleeval evaluator with only whitelisted nodes and context-resolved names."""

    def __init__(self, context: Mapping[str, Any]) -> None:
        super().__init__(operators=dict(_OPERATORS), functions={}, names={})
        self._context = context
        self.nodes = {
            ast.Name: self._eval_context_name,
            ast.Attribute: self._eval_context_attribute,
            ast.UnaryOp: self._eval_unaryop,
            ast.BinOp: self._eval_binop,
            ast.BoolOp: self._eval_boolop,
            ast.Compare: self._eval_compare,
            ast.Constant: self._eval_constant,
            ast.Tuple: self._eval_sequence,
            ast.List: self._eval_sequence,
        }

    def _lookup(self, name: str, *, dotted: bool) -> Any:
        if name.lower() in _LITERALS:
            return _LITERALS[name.lower()]
        if name in self._context:
            return self._context[name]
        if name == "context" and dotted:
            # `context.documents.count` reads the evaluation context itself.
            return self._context
        raise ConditionError(f"unknown name {name!r}")

    def _eval_context_name(self, node: ast.Name) -> Any:
        return self._lookup(node.id, dotted=False)

    def _eval_context_attribute(self, node: ast.Attribute) -> Any:
        root, parts = _dotted(node)
        value = self._lookup(root, dotted=True)
        for part in parts:
            value = _step(value, part)
        return value

    def _eval_sequence(self, node: ast.Tuple | ast.List) -> tuple[Any, ...]:
        return tuple(self._eval(element) for element in node.elts)


@functools.lru_cache(maxsize=4096)
def _checked_tree(text: str) -> ast.expr:
    """The whitelisted AST of a condition (cached: plans repeat the same conditions, and
    evaluation never mutates the tree). Errors are raised, and not cached, every time."""
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ConditionError(f"cannot parse condition {text!r}: {exc}") from None
    _check_tree(tree)
    return tree.body


# One evaluator, its context swapped per call: building a SimpleEval dominates the cost of a
# condition otherwise. Evaluation is synchronous, so no other condition can interleave.
_EVALUATOR: _ConditionEval | None = None


def _parsed(expr: object) -> tuple[str, ast.expr]:
    """(the stripped text, its whitelisted tree); whatever the executor refuses to read
    raises, whatever the context."""
    if not isinstance(expr, str):
        raise ConditionError(f"condition must be a string, got {type(expr).__name__}")
    if len(expr) > MAX_CONDITION_CHARS:
        raise ConditionError(f"condition longer than {MAX_CONDITION_CHARS} characters")
    text = expr.strip()
    if not text:
        raise ConditionError("empty condition")
    return text, _checked_tree(text)


def is_expression(text: object) -> bool:
    """Whether ``text`` is a condition the executor can evaluate at all, whatever the
    context: a condition written in words is not."""
    try:
        _parsed(text)
    except ConditionError:
        return False
    return True


def evaluate_condition(expr: str, context: Mapping[str, Any]) -> bool:
    """Evaluate one condition against `context`; anything unsafe or non-bool raises."""
    global _EVALUATOR
    text, tree = _parsed(expr)
    if _EVALUATOR is None:
        _EVALUATOR = _ConditionEval({})
    evaluator = _EVALUATOR
    previous = evaluator._context
    evaluator._context = context
    try:
        result = evaluator.eval(text, previously_parsed=tree)
    except ConditionError:
        raise
    except (
        simpleeval.InvalidExpression,
        ArithmeticError,
        TypeError,
        ValueError,
        RecursionError,
    ) as exc:
        raise ConditionError(f"cannot evaluate condition {expr!r}: {exc}") from None
    finally:
        evaluator._context = previous
    if not isinstance(result, bool):
        raise ConditionError(f"condition {expr!r} evaluated to {type(result).__name__}, not bool")
    return result
