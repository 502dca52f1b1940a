"""JSON text for prompts, draw keys and records: the standard library's output, built faster.

``json.JSONEncoder(...).encode`` builds a new C encoder object on every call, which costs
more than encoding the small values the simulator's loop encodes many times per LLM call
(tool arguments, observations, draw keys). :func:`encoder` builds that C encoder once, with
the same options, so its text is exactly ``json.JSONEncoder(...).encode``'s
(``tests/test_envs.py`` checks it on generated values). Without CPython's C accelerator it
falls back to the standard encoder.
"""

from __future__ import annotations

import json
import json.encoder as _std
from collections.abc import Callable
from typing import Any


def encoder(
    *,
    sort_keys: bool = False,
    ensure_ascii: bool = True,
    separators: tuple[str, str] = (", ", ": "),
    default: Callable[[Any], Any] | None = None,
) -> Callable[[Any], str]:
    """``json.JSONEncoder(sort_keys=..., ensure_ascii=..., separators=..., default=...)
    .encode``, built once. Values must hold no reference cycles (they are not checked: a cycle
    raises ``RecursionError`` instead of ``ValueError``)."""
    standard = json.JSONEncoder(
        sort_keys=sort_keys,
        ensure_ascii=ensure_ascii,
        separators=separators,
        default=default,
        check_circular=False,
    )
    make = getattr(_std, "c_make_encoder", None)
    quote = _std.c_encode_basestring_ascii if ensure_ascii else _std.c_encode_basestring
    if make is None or quote is None:  # no C accelerator (not CPython)
        return standard.encode
    item_separator, key_separator = separators
    # markers None: no cycle check (the standard encoder's default keeps a dict of ids)
    chunks = make(
        None, standard.default, quote, None, key_separator, item_separator, sort_keys, False, True
    )
    join = "".join

    def encode(value: Any) -> str:
        return join(chunks(value, 0))

    return encode
