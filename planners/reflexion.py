"""Reflexion: ReAct that writes a self-reflection after each failed call and carries it on.

After a tool call fails, the model is asked (a ``reflect`` request) what went wrong and what
to do instead; the critique joins the conversation, and every later request says it carries
it (``RequestContext.reflections``). Everything else is ReAct's: the same turns, the same
parser, the same budgets (a reflection is an LLM call like any other and is charged to the
episode). After ``max_reflections`` critiques it goes on as plain ReAct.

Shinn et al., "Reflexion: Language Agents with Verbal Reinforcement Learning" (2023), reflect
between whole trials; reflecting after each failed call is the within-episode variant, so the
comparison with ReAct is on the same tasks, tools and budgets.
"""

from __future__ import annotations

from collections.abc import Sequence

from planarena.planners.formats import REFLECT
from planarena.planners.llm.base import EpisodeLLM
from planarena.planners.llm.protocol import Observed, RequestContext, RequestKind
from planarena.planners.params import Count, Times, ToolCalling, checked
from planarena.planners.react import ReActPlanner


class ReflexionPlanner(ReActPlanner):
    """ReAct plus a verbal self-reflection after each failed tool call."""

    name = "reflexion"

    @checked
    def __init__(
        self,
        max_turns: Count = 40,
        max_parse_failures: Count = 3,
        tool_calling: ToolCalling = "text",
        max_reflections: Times = 5,
    ) -> None:
        super().__init__(
            max_turns=max_turns, max_parse_failures=max_parse_failures, tool_calling=tool_calling
        )
        self.max_reflections = max_reflections

    async def after_failure(
        self,
        llm: EpisodeLLM,
        messages: list[dict[str, str]],
        seen: Sequence[Observed],
        memory: list[str],
    ) -> None:
        """Ask for a critique of the failure and keep it in the conversation."""
        if len(memory) >= self.max_reflections:
            return
        reflection = await llm.complete(
            [*messages, {"role": "user", "content": REFLECT}],
            role="planner",
            kind=RequestKind.REFLECT,
            context=RequestContext(observations=tuple(seen), reflections=tuple(memory)),
        )
        memory.append(str(reflection))
        messages.append({"role": "user", "content": str(reflection)})
