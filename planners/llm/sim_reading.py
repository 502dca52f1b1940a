"""How the simulated model reads a prompt: a transcript's observations, the JSON after a
marker, a plan step's core, and a gold step written as a model would write it.

Reading is separate from deciding so that every request kind reads a prompt the same way.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from planarena.envs import caches
from planarena.envs.oracle import GoldStep, Obs, Ref
from planarena.planners.formats import OutputParseError, dumps, error_kind, parse_action_turn
from planarena.planners.llm.base import Message

_DECODER = json.JSONDecoder()  # stateless: one for every raw_decode


@lru_cache(maxsize=4096)
def _read_action(content: str) -> tuple[str, dict[str, Any]] | None:
    """(tool, args) of one assistant turn; cached because a transcript is re-read each turn.
    The cached args are shared: the simulator only reads them."""
    try:
        turn = parse_action_turn(content)
    except OutputParseError:
        return None
    return turn.action, turn.action_input


@lru_cache(maxsize=4096)
def _read_result(text: str) -> tuple[Any, str | None]:
    """(result, error kind) of one observation text (cached and shared like the above)."""
    kind = error_kind(text)
    if kind is not None:
        return None, kind
    try:
        return json.loads(text), None
    except json.JSONDecodeError:
        return text, None


caches.register(_read_action.cache_clear)
caches.register(_read_result.cache_clear)


def transcript_observations(
    messages: Sequence[Message],
    out: list[Obs] | None = None,
    pending: tuple[str, dict[str, Any]] | None = None,
) -> tuple[list[Obs], tuple[str, dict[str, Any]] | None]:
    """Observations of a Thought/Action transcript: an assistant action, then 'Observation: ...'
    (and the action still waiting for its observation); ``out`` and ``pending`` continue the
    reading of an earlier part of the transcript."""
    out = [] if out is None else out
    for m in messages:
        if m["role"] == "assistant":
            pending = _read_action(m["content"])
        elif (
            m["role"] == "user" and pending is not None and m["content"].startswith("Observation:")
        ):
            text = m["content"][len("Observation:") :].strip()
            out.append(observation(f"obs_{len(out)}", pending[0], pending[1], text))
            pending = None
    return out, pending


def observation(key: str, tool: str, args: Any, text: str, ok: bool | None = None) -> Obs:
    """One observation as the oracle reads it: a failed call keeps its error text."""
    result, kind = _read_result(text)
    args = args if isinstance(args, dict) else {}
    if ok is False or kind is not None:
        return Obs(key, tool, args, text, kind or "error")  # the error text, for the oracle
    return Obs(key, tool, args, result, None)


def json_after(prompt: str, marker: str) -> Any:
    """The JSON value that follows ``marker`` in the prompt (None if absent or broken)."""
    at = prompt.find(marker)
    if at < 0:
        return None
    try:
        value, _ = _DECODER.raw_decode(prompt[at + len(marker) :].lstrip())
    except json.JSONDecodeError:
        return None
    return value


def step_core(step: Any) -> tuple[Any, str, tuple[str, ...]]:
    """(tool, args JSON, sorted dependencies): what makes a written step the same step,
    whatever its id, conditions or spelling of ``depends_on``."""
    if not isinstance(step, dict):
        return (None, "", ())
    deps = step.get("depends_on") or []
    deps = deps if isinstance(deps, list) else [deps]
    return (step.get("tool"), dumps(step.get("args") or {}), tuple(sorted(map(str, deps))))


def render_step(g: GoldStep, ids: dict[str, str]) -> dict[str, Any]:
    """A gold step as a model writes it into a Plan JSON."""

    def ref_text(value: Any) -> Any:
        if isinstance(value, Ref):
            sid = ids.get(value.key, value.key)
            path = ".".join(("result", *value.path))
            return "{{" + f"{sid}.{path}" + "}}"
        if isinstance(value, dict):
            return {k: ref_text(v) for k, v in value.items()}
        if isinstance(value, list):
            return [ref_text(v) for v in value]
        return value

    deps = [ids.get(d, d) for d in g.deps]
    return {
        "id": ids[g.key],
        "tool": g.tool,
        "args": ref_text(g.args),
        "depends_on": deps,
        "pre_conditions": [*g.pre, *(f"{d}.status == success" for d in deps)],
        "post_conditions": list(g.post),
        "retry_limit": 3,
        "fallback": g.fallback,
    }
