"""Tests for planners.conditions: the seed article's condition syntax, evaluated safely."""

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from planarena.planners.conditions import ConditionError, evaluate_condition

TRUE_CTX: dict[str, Any] = {
    "step_1": {"status": "success"},
    "internet_accessible": True,
    "result": {"url": "http://x", "count": 3, "items": [1, 2]},
    "documents": ["a", "b"],
    "remaining_budget_usd": 0.5,
}
FALSE_CTX: dict[str, Any] = {
    "step_1": {"status": "failed"},
    "internet_accessible": False,
    "result": {"url": None, "count": 0, "items": []},
    "documents": [],
    "remaining_budget_usd": 0.05,
}
SEED_EXAMPLES = [
    "step_1.status == success",
    "internet_accessible == true",
    "result.url != null",
    "result.count > 0",
    "context.documents.count > 0",
    "remaining_budget_usd > 0.10",
]


@pytest.mark.parametrize("expr", SEED_EXAMPLES)
def test_seed_examples_true(expr: str) -> None:
    assert evaluate_condition(expr, TRUE_CTX) is True


@pytest.mark.parametrize("expr", SEED_EXAMPLES)
def test_seed_examples_false(expr: str) -> None:
    assert evaluate_condition(expr, FALSE_CTX) is False


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("result.url == null", False),
        ("result.missing == null", True),
        ("result.missing != null", False),
        ("result.missing.deeper == None", True),
        ("result.missing.count > 0", False),
        ("result.items.count == 2", True),
        ("step_1.status.count == 7", True),
        ("step_1.count == 1", True),
        ("internet_accessible == TRUE and not (step_1.status == failed)", True),
        ("step_1.status == failure or result.count >= 3", True),
        ("step_1.status in (success, skipped)", True),
        ("step_1.status not in [pending, running]", True),
        ("'succ' in step_1.status", True),
        ('step_1.status == "success"', True),
        ("1 < result.count <= 3", True),
        ("remaining_budget_usd - 0.4 > 0.05", True),
        ("-result.count < 0", True),
        ("result.url is not null", True),
        ("true", True),
        ("internet_accessible", True),
        ("step_1.status == skipped", False),
    ],
)
def test_grammar(expr: str, expected: bool) -> None:
    assert evaluate_condition(expr, TRUE_CTX) is expected


def test_context_key_named_count_wins() -> None:
    assert evaluate_condition("result.count == 3", TRUE_CTX)


def test_object_attributes() -> None:
    class Obj:
        status = "success"

        def method(self) -> None:  # pragma: no cover - never called
            pass

    ctx = {"step_1": Obj()}
    assert evaluate_condition("step_1.status == success", ctx)
    assert evaluate_condition("step_1.nothing == null", ctx)
    with pytest.raises(ConditionError):
        evaluate_condition("step_1.method == null", ctx)


ATTACKS = [
    "__import__('os')",
    "().__class__",
    "result.__class__",
    "result._private == 1",
    "9**9**9",
    "'a'*10**9",
    "'a' * 3 == 'aaa'",
    "[1] * 3 == [1, 1, 1]",
    "[x for x in y]",
    "{x for x in y}",
    "lambda: 1",
    "open('x')",
    "result.items.append(1)",
    "result['url'] == null",
    "'abc'.upper",
    "(1).real == 1",
    "x := 1",
    "1 if true else 0",
    "f'{result}' == ''",
    "b'x' == b'x'",
    "1j == 1j",
    "result.count << 2 > 0",
    "~result.count < 0",
    "...",
    "unknown_name == 1",
    "step_1.status ==",
    "",
    "   ",
    "a = 1",
    "import os",
    "1 + 1",
    "result.url",
    "result.count",
    "'a' < 1",
    "1 / 0 > 0",
    "x" * 501,
]


@pytest.mark.parametrize("expr", ATTACKS)
def test_attacks_and_errors_raise(expr: str) -> None:
    with pytest.raises(ConditionError):
        evaluate_condition(expr, TRUE_CTX)


def test_non_string_expression() -> None:
    with pytest.raises(ConditionError):
        evaluate_condition(123, TRUE_CTX)  # type: ignore[arg-type]


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    assert evaluate_condition("not " * 120 + "true", TRUE_CTX) is True
    with pytest.raises(ConditionError):
        evaluate_condition("(" * 240 + "true" + ")" * 240, TRUE_CTX)


@settings(max_examples=120, deadline=None)
@given(st.text(max_size=80))
def test_arbitrary_text_is_bool_or_condition_error(expr: str) -> None:
    try:
        result = evaluate_condition(expr, TRUE_CTX)
    except ConditionError:
        return
    assert isinstance(result, bool)


_TOKENS = st.sampled_from(
    [
        "step_1",
        ".status",
        ".count",
        "result",
        ".url",
        "==",
        "!=",
        ">",
        "<",
        "and",
        "or",
        "not",
        "(",
        ")",
        "0",
        "1.5",
        "success",
        "null",
        "true",
        "'s'",
        "in",
        "*",
        "+",
        "-",
        "[",
        "]",
        ",",
    ]
)


@settings(max_examples=120, deadline=None)
@given(st.lists(_TOKENS, max_size=12))
def test_token_soup_is_bool_or_condition_error(tokens: list[str]) -> None:
    try:
        result = evaluate_condition(" ".join(tokens).replace(" .", "."), TRUE_CTX)
    except ConditionError:
        return
    assert isinstance(result, bool)
