"""Text formats shared by the prompts planners write and the parsers that read model output.

A real model and the simulated one read the same prompts and are parsed by the same code, so
the formats live in one place: the Thought/Action turn format, the observation line of a transcript,
and the marker with which a prompt asks for a Plan JSON or a score.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

ACTION_TURN_FORMAT = (
    "Respond in exactly this format:\n"
    "Thought: <your reasoning>\n"
    "Action: <one tool name, or finish>\n"
    "Action Input: <one JSON object of arguments; for finish: "
    '{"answer": "<the final answer>", "status": "success" or "failure"}>'
)
PLAN_FORMAT = (
    "Respond with a Plan JSON object only: "
    '{"goal": str, "steps": [{"id": "step_1", "tool": str, "args": {...}, "depends_on": [...], '
    '"pre_conditions": [...], "post_conditions": [...], "retry_limit": int, '
    '"fallback": str or null}]}. Refer to an earlier step\'s output as '
    '"{{step_N.result.<field>}}".'
)
SCORE_FORMAT = "Respond with one line: Score: <a number from 0 to 1>"
FINISH = "finish"


class OutputParseError(ValueError):
    """Model output that does not follow the requested format."""


@dataclass(frozen=True)
class ActionTurn:
    thought: str
    action: str
    action_input: dict[str, Any]


_ACTION = re.compile(r"^\s*Action\s*:\s*(.+?)\s*$", re.MULTILINE)
_INPUT = re.compile(r"^\s*Action Input\s*:\s*", re.MULTILINE)
_THOUGHT = re.compile(r"^\s*Thought\s*:\s*(.*)$", re.MULTILINE)


def parse_action_turn(text: str, *, max_chars: int = 50_000) -> ActionTurn:
    """Parse one Thought/Action turn; the Action Input must be a JSON object."""
    if len(text) > max_chars:
        raise OutputParseError(f"output of {len(text)} characters exceeds {max_chars}")
    action = _ACTION.search(text)
    if action is None:
        raise OutputParseError("no 'Action:' line")
    start = _INPUT.search(text, action.end())
    if start is None:
        raise OutputParseError("no 'Action Input:' line after the action")
    try:
        value, _ = json.JSONDecoder().raw_decode(text[start.end() :].strip())
    except json.JSONDecodeError as err:
        raise OutputParseError(f"Action Input is not valid JSON: {err.msg}") from None
    if not isinstance(value, dict):
        raise OutputParseError("Action Input must be a JSON object")
    thought = _THOUGHT.search(text)
    name = action.group(1).strip().strip("`'\"")
    return ActionTurn(thought.group(1).strip() if thought else "", name, value)


_SCORE = re.compile(r"Score\s*:\s*([-+]?\d*\.?\d+)")


def parse_score(text: str) -> float:
    """The judge's score, clipped to [0, 1]."""
    match = _SCORE.search(text)
    if match is None:
        raise OutputParseError("no 'Score:' line")
    return min(1.0, max(0.0, float(match.group(1))))


def dumps(value: Any) -> str:
    """Compact, deterministic JSON for prompts and observations."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(", ", ": "))


def observation_text(result: Any = None, error: str | None = None) -> str:
    """What an agent sees after a call: the result as JSON, or ``ERROR kind: message``."""
    return error if error is not None else dumps(result)


def step_line(step_id: str, tool: str, args: Any, observation: str, ok: bool) -> str:
    """One line of an execution log shown to a replanner."""
    return f"- {step_id} {tool} {dumps(args)} => {'OK' if ok else 'ERROR'} {observation}"


_STEP_LINE = re.compile(r"^- (\S+) (\S+) (\{.*)$")


def parse_step_lines(text: str) -> list[tuple[str, str, Any, bool, str]]:
    """Read back execution-log lines: (step_id, tool, args, ok, observation text)."""
    out = []
    decoder = json.JSONDecoder()
    for line in text.splitlines():
        m = _STEP_LINE.match(line)
        if not m:
            continue
        try:
            args, end = decoder.raw_decode(m.group(3))
        except json.JSONDecodeError:
            continue
        rest = m.group(3)[end:].strip()
        if rest.startswith("=> OK "):
            out.append((m.group(1), m.group(2), args, True, rest[6:]))
        elif rest.startswith("=> ERROR "):
            out.append((m.group(1), m.group(2), args, False, rest[9:]))
    return out


def error_kind(observation: str) -> str | None:
    """``http_503`` from ``ERROR http_503: ...``; None for a successful observation."""
    m = re.match(r"ERROR (\w+)", observation)
    return m.group(1) if m else None


# --- search planners: proposals, judgements, rollouts ------------------------------------

PROPOSE_STEPS = (
    "Propose {k} different candidate next steps for the plan. Respond with a JSON list of "
    "step objects only (the fields of a Plan JSON step). If the plan is already complete, "
    'propose {{"done": true}}.'
)
PROPOSE_ACTIONS = (
    "Propose {k} different candidate next actions, best first, each in this format:\n"
    "Candidate <n>:\nThought: <reasoning>\nAction: <tool name, or finish>\n"
    "Action Input: <one JSON object>"
)
RATE_CANDIDATES = (
    "Rate each candidate: how likely is it to lead to the goal? Respond with one line per "
    "candidate: Score <n>: <a number from 0 to 1>"
)
RATE_PLAN = "Rate this plan: how likely is it to reach the goal? " + SCORE_FORMAT
ROLLOUT = (
    "Imagine carrying out this partial plan and completing it sensibly. Would the goal be "
    "reached? Respond with one line: Outcome: success or Outcome: failure"
)

_CANDIDATE = re.compile(r"^\s*Candidate\s+(\d+)\s*:", re.MULTILINE)
_SCORE_N = re.compile(r"Score\s*(\d+)\s*:\s*([-+]?\d*\.?\d+)")
_OUTCOME = re.compile(r"Outcome\s*:\s*(success|failure)", re.IGNORECASE)


def parse_candidates(text: str) -> list[ActionTurn]:
    """Thought/Action candidates; unparseable ones are dropped (and counted by the caller)."""
    starts = [m.start() for m in _CANDIDATE.finditer(text)]
    out = []
    for a, b in zip(starts, [*starts[1:], len(text)], strict=True):
        try:
            out.append(parse_action_turn(text[a:b]))
        except OutputParseError:
            continue
    return out


def parse_step_candidates(text: str) -> list[dict[str, Any]]:
    """A JSON list of candidate plan steps (objects); anything else is an OutputParseError."""
    start, end = text.find("["), text.rfind("]")
    if start < 0 or end < start:
        raise OutputParseError("no JSON list of steps")
    try:
        value = json.loads(text[start : end + 1])
    except json.JSONDecodeError as err:
        raise OutputParseError(f"candidate list is not valid JSON: {err.msg}") from None
    if not isinstance(value, list):
        raise OutputParseError("candidates must be a JSON list")
    return [v for v in value if isinstance(v, dict)]


def parse_scores(text: str, n: int) -> list[float]:
    """Scores for candidates 1..n; a missing score counts as 0."""
    scores = [0.0] * n
    for m in _SCORE_N.finditer(text):
        i = int(m.group(1)) - 1
        if 0 <= i < n:
            scores[i] = min(1.0, max(0.0, float(m.group(2))))
    return scores


def parse_outcome(text: str) -> bool:
    m = _OUTCOME.search(text)
    if m is None:
        raise OutputParseError("no 'Outcome:' line")
    return m.group(1).lower() == "success"


def render_candidates(turns: list[tuple[str, str, dict[str, Any]]]) -> str:
    return "\n".join(
        f"Candidate {i}:\nThought: {t}\nAction: {a}\nAction Input: {dumps(x)}"
        for i, (t, a, x) in enumerate(turns, 1)
    )
