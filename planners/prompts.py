"""Prompt templates (jinja2). Prompts are plain text a real model would read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from jinja2 import Environment, StrictUndefined
from planarena.envs.jsontext import encoder
from planarena.envs.tools import Toolbox, ToolSpec
from planarena.planners.formats import (
    ACTION_TURN_FORMAT,
    PLAN_FORMAT,
    PLAN_REVISION,
    PLAN_REVISIONS,
)
from planarena.planners.plan_prose import PLAN_TEXT_FORMAT, render_plan_text

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

CONDITIONS = _ENV.from_string(
    "Conditions are expressions, never sentences: ==, !=, <, <=, >, >=, in, and, or, not, "
    "over these names: step_N.status (success, failed or skipped), step_N.result.<field>, "
    "result.<field> (in a post-condition: this step's own result), remaining_budget_usd, "
    "context.documents (the documents retrieved so far)"
    "{% for f in facts %}, {{ f }}{% endfor %}. A condition on anything else is refused."
)

EXAMPLE_GOAL = "Get tomorrow's forecast for Lyon and email it to the team."
EXAMPLE_STEPS: tuple[Mapping[str, Any], ...] = (
    {
        "id": "step_1",
        "tool": "get_forecast",
        "args": {"city": "Lyon", "day": "tomorrow"},
        "depends_on": [],
        "pre_conditions": ["api_key_valid.get_forecast == true"],
        "post_conditions": ["result.forecast != null"],
        "retry_limit": 2,
        "fallback": None,
    },
    {
        "id": "step_2",
        "tool": "send_email",
        "args": {"to": "team", "body": "Lyon tomorrow: {{step_1.result.forecast}}"},
        "depends_on": ["step_1"],
        "pre_conditions": ["step_1.status == success"],
        "post_conditions": ["result.sent == true"],
        "retry_limit": 1,
        "fallback": None,
    },
)
"""The one worked example every plan prompt shows (revision 2), with tools that belong to no
env, so that copying it never runs. It names no fallback tool: with one
(``get_forecast_backup``) Qwen2.5-Coder-1.5B copied it, or its pattern (``find_item_backup``),
into every replan of its first recorded cells, which the reader refuses (unknown_fallback)."""

_EXAMPLE_JSON = encoder(ensure_ascii=False)


def _example(plan_format: str) -> str:
    intro = (
        "Example, for another task with other tools (get_forecast, send_email; not yours):"
        f"\nTask: {EXAMPLE_GOAL}\n"
    )
    if plan_format == "text":
        return intro + render_plan_text(EXAMPLE_GOAL, EXAMPLE_STEPS)
    return intro + _EXAMPLE_JSON({"goal": EXAMPLE_GOAL, "steps": list(EXAMPLE_STEPS)})


def condition_names(facts: Mapping[str, str]) -> tuple[str, ...]:
    """The world facts a condition may read, as the prompt names them (``facts``: the
    toolbox's :meth:`~planarena.envs.tools.Toolbox.fact_names`): a flag by its name, a table
    of tools as ``<name>.<tool>``, any other table as ``<name>.<key>``."""
    suffix = {"flag": "", "tool": ".<tool>"}
    return tuple(f"{name}{suffix.get(kind, '.<key>')}" for name, kind in facts.items())


REPLAN_USER = _ENV.from_string(
    "Task: {{ goal }}\n"
    "Execution log:\n{% for line in log %}{{ line }}\n{% endfor %}"
    "Failed step: {{ failed }}\n"
    "Steps of the current plan that have not run (now invalid):\n"
    "{% for line in pending %}{{ line }}\n{% endfor %}"
    "Revise the plan: write only the steps that still need to run. Do not repeat completed "
    "steps; you may depend on them by id. Prefer fallback tools. If the goal cannot be "
    "reached, return a plan with no steps."
    "{% if next_id %} Number the new steps from {{ next_id }} on.{% endif %}"
)


class _Signed:
    """What the system templates read of a tool: its signature line."""

    def __init__(self, line: str) -> None:
        self.line = line

    def signature(self) -> str:
        return self.line


@lru_cache(maxsize=256)
def _system(
    template: str,
    signatures: tuple[str, ...],
    revision: int = PLAN_REVISION,
    facts: tuple[str, ...] = (),
) -> str:
    """A system prompt, rendered once per tool catalogue (every episode of an env sends
    the same one)."""
    tools = [_Signed(line) for line in signatures]
    if template == "react":
        return REACT_SYSTEM.render(tools=tools, fmt=ACTION_TURN_FORMAT)
    plan_format = "text" if template == "plan_text" else "json"
    fmt = PLAN_TEXT_FORMAT if plan_format == "text" else PLAN_FORMAT
    if revision >= 2:
        fmt = f"{fmt}\n{CONDITIONS.render(facts=facts)}\n{_example(plan_format)}"
    return PLAN_SYSTEM.render(tools=tools, fmt=fmt)


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


def plan_system(
    tools: Sequence[ToolSpec],
    plan_format: str = "json",
    *,
    revision: int = PLAN_REVISION,
    facts: Mapping[str, str] | None = None,
) -> str:
    """The planner's system prompt; it asks for the plan in ``plan_format`` (``json``: a Plan
    JSON object; ``text``: numbered steps in prose). From revision 2 it names the condition
    facts of the world (``facts``: the toolbox's
    :meth:`~planarena.envs.tools.Toolbox.fact_names`) and shows one worked example
    (:data:`EXAMPLE_STEPS`) in the asked format."""
    if revision not in PLAN_REVISIONS:
        raise ValueError(f"plan revision must be one of {PLAN_REVISIONS}, got {revision!r}")
    names = condition_names(facts or {}) if revision >= 2 else ()
    template = "plan_text" if plan_format == "text" else "plan"
    return _system(template, _signatures(tools), revision, names)


def toolbox_plan_system(tools: Toolbox, plan_format: str = "json", *, revision: int) -> str:
    """:func:`plan_system` for an episode's toolbox: its catalogue and its condition facts."""
    return plan_system(tools.catalogue(), plan_format, revision=revision, facts=tools.fact_names())
