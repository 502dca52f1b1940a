"""The fast JSON encoders write exactly what the standard library's encoder writes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from planarena.envs.jsontext import encoder

_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
OPTIONS = [
    {},
    {"ensure_ascii": False, "sort_keys": True},
    {"sort_keys": True, "ensure_ascii": False, "default": str},
    {"ensure_ascii": False, "separators": (",", ":")},
    {"default": str, "sort_keys": True},
]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(sorted(o)) or "plain")
@settings(max_examples=300, deadline=None)
@given(value=_values)
def test_encoder_writes_what_the_standard_encoder_writes(
    options: dict[str, Any], value: Any
) -> None:
    assert encoder(**options)(value) == json.JSONEncoder(**options).encode(value)


class _Opaque:
    def __str__(self) -> str:
        return "opaque ü"


def test_default_and_errors_behave_as_the_standard_encoder() -> None:
    value = {"b": _Opaque(), "a": [1.5, "ü"]}
    options = {"sort_keys": True, "ensure_ascii": False, "default": str}
    assert encoder(**options)(value) == json.JSONEncoder(**options).encode(value)
    with pytest.raises(TypeError):
        encoder()({"x": _Opaque()})  # no default: not serializable, as json.dumps says
