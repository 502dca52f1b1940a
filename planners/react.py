"""ReAct: Thought / Action / Observation, one tool call per LLM turn; the context grows."""

from __future__ import annotations

from collections.abc import Sequence

from planarena.envs.tools import Toolbox, ToolError, ToolSpec
from planarena.planners.base import Planner, PlannerResult, PlannerStats, TaskView
from planarena.planners.formats import FINISH, OutputParseError, observation_text, parse_action_turn
from planarena.planners.llm.base import EpisodeLLM
from planarena.planners.llm.protocol import Observed, RequestContext, RequestKind
from planarena.planners.params import Count, ToolCalling, checked
from planarena.planners.prompts import react_system


class ReActPlanner(Planner):
    """The baseline: every step is a fresh decision made with the whole history in the prompt.

    It has no retry policy of its own (the model decides, turn by turn, whether to call a tool
    again) and no way to verify a premise before acting. ``max_turns`` bounds the episode;
    ``max_parse_failures`` consecutive unparseable turns end it as malformed output.
    """

    name = "react"

    @checked
    def __init__(
        self,
        max_turns: Count = 40,
        max_parse_failures: Count = 3,
        tool_calling: ToolCalling = "text",
    ) -> None:
        self.max_turns = max_turns
        self.max_parse_failures = max_parse_failures
        self.tool_calling = tool_calling  # native: the API's tool interface, where supported

    def system_prompt(self, tools: Sequence[ToolSpec]) -> str:
        """The system message: the tools and the turn format. A subclass may word it its own
        way; every turn is still declared an ``act`` request, which is what the simulated LLM
        answers (the wording changes only which sample it draws)."""
        return react_system(tools)

    async def after_failure(
        self,
        llm: EpisodeLLM,
        messages: list[dict[str, str]],
        seen: Sequence[Observed],
        memory: list[str],
    ) -> None:
        """Called after a tool call failed, its observation already in ``messages``. ReAct
        does nothing: the model sees the error on its next turn. A subclass may add to the
        conversation (``messages``) and to what later requests say they carry (``memory``,
        sent as ``RequestContext.reflections``)."""

    async def run(self, task: TaskView, tools: Toolbox, llm: EpisodeLLM) -> PlannerResult:
        stats = PlannerStats()
        trace = llm.trace
        names = set(tools.names())
        messages = [
            {"role": "system", "content": self.system_prompt(tools.catalogue())},
            {"role": "user", "content": f"Task: {task.goal}"},
        ]
        parse_failures = 0
        previous: tuple[str, str] | None = None
        seen: list[Observed] = []  # the tool calls observed so far: the request's context
        memory: list[str] = []  # what the conversation carries beyond them (reflections)
        for _turn in range(self.max_turns):
            native = tools.catalogue() if self.tool_calling == "native" else None
            text = await llm.complete(
                messages,
                role="executor",
                kind=RequestKind.ACT,
                context=RequestContext(observations=tuple(seen), reflections=tuple(memory)),
                tools=native,
            )
            messages.append({"role": "assistant", "content": text})
            try:
                turn = parse_action_turn(text)
            except OutputParseError as err:
                parse_failures += 1
                trace.append({"event": "parse_error", "error": str(err)})
                if parse_failures >= self.max_parse_failures:
                    return PlannerResult(None, "malformed_output", str(err), stats, trace)
                messages.append(
                    {
                        "role": "user",
                        "content": f"Observation: ERROR format: {err}. "
                        "Follow the response format exactly.",
                    }
                )
                continue
            parse_failures = 0
            stats.plan_repairs += bool(turn.repairs)  # the one tolerance policy, counted
            if turn.action == FINISH:
                answer = str(turn.action_input.get("answer", "") or "")
                status = str(turn.action_input.get("status", "success")).lower()
                if status == "success" and answer:
                    return PlannerResult(answer, "answered", "", stats, trace)
                # finishing with status failure is the model saying the goal is out of reach
                stop = "reported_unreachable" if status == "failure" else "gave_up"
                return PlannerResult(None, stop, answer or "model gave up", stats, trace)
            call = (turn.action, observation_text(turn.action_input))
            if call == previous:
                stats.retries += 1
            previous = call
            if turn.action not in names:
                trace.append({"event": "hallucinated_tool", "tool": turn.action})
            ok = True
            try:  # an unknown tool is the toolbox's to reject, as it would be for a real agent
                result = await tools.call(turn.action, turn.action_input)
                observation = observation_text(result)
            except ToolError as err:
                observation, ok = err.observation(), False
            messages.append({"role": "user", "content": f"Observation: {observation}"})
            seen.append(Observed(str(len(seen)), turn.action, turn.action_input, observation, ok))
            if not ok:
                await self.after_failure(llm, messages, seen, memory)
        return PlannerResult(
            None, "budget", f"no answer after {self.max_turns} turns", stats, trace
        )
