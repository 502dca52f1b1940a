"""How the simulated model reads what a request is about: an observation as the oracle reads
it, a plan step's core, and a gold step written as a model would write it.

It reads the request's context (:class:`~planarena.planners.llm.protocol.RequestContext`),
never the prompt's wording; reading is separate from deciding so that every request kind reads
an observation or a step the same way.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from planarena.envs import caches
from planarena.envs.oracle import GoldStep, Obs, Ref
from planarena.planners.formats import dumps, error_kind


@lru_cache(maxsize=4096)
def _read_result(text: str) -> tuple[Any, str | None]:
    """(result, error kind) of one observation text (cached: the same text is read again and
    again; the parsed result is shared, and the simulator only reads it)."""
    kind = error_kind(text)
    if kind is not None:
        return None, kind
    try:
        return json.loads(text), None
    except json.JSONDecodeError:
        return text, None


caches.register(_read_result.cache_clear)


def observation(key: str, tool: str, args: Any, text: str, ok: bool | None = None) -> Obs:
    """One observation as the oracle reads it: a failed call keeps its error text."""
    result, kind = _read_result(text)
    args = args if isinstance(args, dict) else {}
    if ok is False or kind is not None:
        return Obs(key, tool, args, text, kind or "error")  # the error text, for the oracle
    return Obs(key, tool, args, result, None)


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
