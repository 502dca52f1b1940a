"""Prompt templates (jinja2). Prompts are plain text a real model would read."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from jinja2 import Environment, StrictUndefined
from planarena.envs.tools import ToolSpec
from planarena.planners.formats import ACTION_TURN_FORMAT, PLAN_FORMAT
from planarena.planners.plan_prose import PLAN_TEXT_FORMAT

_ENV = Environment(undefined=StrictUndefined, keep_trailing_newline=False, autoescape=False)

REACT_SYSTEM = _ENV.from_string(
    "You are an agent that completes the user's task by calling tools, one per turn.\n"
    "Tools:\n{% for t in tools %}- {{ t.signature() }}\n{% endfor %}"
    "When the task is done, call finish with the final answer. If it cannot be done, call "
    "finish with status failure and say why.\n{{ fmt }}"
)

PLAN_SYSTEM = _ENV.from_string(
    "You are a task planner. Write the whole plan before anything runs: every step with its "
    "tool, arguments, dependencies, pre-conditions (checked before the step runs) and "
    "post-conditions (checked on its result), a retry limit and an optional fallback tool.\n"
    "Tools:\n{% for t in tools %}- {{ t.signature() }}\n{% endfor %}{{ fmt }}"
)

PLAN_USER = _ENV.from_string("Task: {{ goal }}")

REPLAN_USER = _ENV.from_string(
    "Task: {{ goal }}\n"
    "Execution log:\n{% for line in log %}{{ line }}\n{% endfor %}"
    "Failed step: {{ failed }}\n"
    "Steps of the current plan that have not run (now invalid):\n"
    "{% for line in pending %}{{ line }}\n{% endfor %}"
    "Revise the plan: write only the steps that still need to run. Do not repeat completed "
    "steps; you may depend on them by id. Prefer fallback tools. If the goal cannot be "
    "reached, return a plan with no steps."
)


class _Signed:
    """What the system templates read of a tool: its signature line."""

    def __init__(self, line: str) -> None:
        self.line = line

    def signature(self) -> str:
        return self.line


@lru_cache(maxsize=256)
def _system(template: str, signatures: tuple[str, ...]) -> str:
    """A system prompt, rendered once per tool catalogue (every episode of an env sends
    the same one)."""
    tools = [_Signed(line) for line in signatures]
    if template == "react":
        return REACT_SYSTEM.render(tools=tools, fmt=ACTION_TURN_FORMAT)
    if template == "plan_text":
        return PLAN_SYSTEM.render(tools=tools, fmt=PLAN_TEXT_FORMAT)
    return PLAN_SYSTEM.render(tools=tools, fmt=PLAN_FORMAT)


_SIGNATURES: dict[int, tuple[ToolSpec, str]] = {}  # per tool spec (by identity, kept alive)


def _signatures(tools: Sequence[ToolSpec]) -> tuple[str, ...]:
    """Each tool's signature line, formatted once per spec (an episode asks for every turn's
    system prompt; the specs are the env's constants)."""
    out = []
    for t in tools:
        known = _SIGNATURES.get(id(t))
        if known is None or known[0] is not t:
            if len(_SIGNATURES) > 4096:  # specs built per task (a family file): bounded
                _SIGNATURES.clear()
            known = _SIGNATURES[id(t)] = (t, t.signature())
        out.append(known[1])
    return tuple(out)


def react_system(tools: Sequence[ToolSpec]) -> str:
    return _system("react", _signatures(tools))


def plan_system(tools: Sequence[ToolSpec], plan_format: str = "json") -> str:
    """The planner's system prompt; it asks for the plan in ``plan_format`` (``json``: a Plan
    JSON object; ``text``: numbered steps in prose)."""
    return _system("plan_text" if plan_format == "text" else "plan", _signatures(tools))
