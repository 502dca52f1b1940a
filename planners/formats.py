"""Text formats shared by the prompts planners write and the parsers that read model output.

A real model and the simulated one read the same prompts and are parsed by the same code, so
the formats live in one place: the Thought/Action turn format, the observation line of a transcript,
and the marker with which a prompt asks for a Plan JSON or a score.

One tolerance policy for every format a model writes (a ReAct turn, candidate actions,
candidate plan steps, a Plan JSON in ``planners.plan``, a score), so that no planner is
penalised for formatting the others are forgiven:

- labels (``Thought:``, ``Action:``, ``Action Input:``, ``Candidate 1:``, ``Score:``,
  ``Outcome:``) in any case, with markdown emphasis, heading or bullet marks around them;
- JSON bare, in a code fence, or inside prose; almost-JSON (single quotes, trailing commas,
  unquoted keys, comments) repaired by ``json_repair``;
- an action in function-call style, ``search_web(query="...")``, and ``Final Answer: ...``
  (a finish); a plan step's tool written as its signature, ``search_web(query: string)``;
- scores as 0-1, ``x/10``, ``x out of 10``, percentages or exponents; a bare number above 1 is
  read on a 10-point (up to 10) or 100-point (up to 100) scale.

Every deviation from the requested format that is accepted is a *repair*, reported by the
parser (``ActionTurn.repairs`` or a ``notes`` list) so planners count it (``plan_repairs``).
Two things are never repaired: JSON that was never closed (the output was cut off; repairing
it would silently shorten a plan or an argument), and any output the backend flagged as cut at
``max_tokens`` that needs a repair (see :class:`Generated`). Nothing is ever ``eval``-ed:
function-call arguments are read with :func:`ast.literal_eval` on each literal.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import json_repair
from planarena.envs.jsontext import encoder

_DECODER = json.JSONDecoder()  # stateless: one for every raw_decode

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
PLAN_TEXT_FORMAT = (
    "Respond with a numbered plan in plain text, no JSON. First a line 'Goal: <the goal>', "
    "then 'Steps:' and one numbered line per step: '<n>. <tool> <name>=<value> ...' (each "
    'value a JSON literal, e.g. query="..." or fields=["a", "b"]), followed by indented '
    "lines, each optional: '- after: <step numbers it depends on>', '- requires: <a "
    "pre-condition>', '- check: <a post-condition>' (one condition per line), '- retries: "
    "<n>', '- fallback: <tool>'. Refer to an earlier step's output as "
    "\"{{step_N.result.<field>}}\". With nothing to do, write 'Steps: none'."
)
"""What a prompt that asks for a text plan says (the counterpart of ``PLAN_FORMAT``)."""
SCORE_FORMAT = "Respond with one line: Score: <a number from 0 to 1>"
PLAN_REVISIONS = (1, 2, 3)
"""Revisions of the plan prompt and of the plan reader (the top-level ``plan_revision`` key).

1. As the shipped 0.5B recording was made (2026-12-02/03): the format line alone.
2. The plan prompt adds one worked example and the condition facts a plan may check; the plan
   reader accepts the slips of real plans that have one reading (docs/planners.md), each
   counted as a repair.
3. As 2, and a condition's ``&&`` and ``||`` (outside quotes) read as ``and`` and ``or``,
   each a repair: the 1.5B model joins a plan's conditions so, and each one failed its step
   at revision 2 (docs/planners.md#plan-revisions).

A recording replays under the revision it was made with; a new run takes the latest."""
PLAN_REVISION = PLAN_REVISIONS[-1]
FINISH = "finish"


class OutputParseError(ValueError):
    """Model output that does not follow the requested format."""


class Generated(str):
    """Model output as text, plus how the generation ended (``finish_reason``).

    :class:`~planarena.planners.llm.base.EpisodeLLM` returns this; a planner passes it to a
    parser as is. ``truncated`` (finish reason ``length``) makes the parsers refuse any repair:
    a cut output is a format failure, never a silently shorter plan or argument."""

    finish_reason: str | None = None

    def __new__(cls, text: str, finish_reason: str | None = None) -> Generated:
        obj = super().__new__(cls, text)
        obj.finish_reason = finish_reason
        return obj

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"


def is_truncated(text: str) -> bool:
    return bool(getattr(text, "truncated", False))


@dataclass(frozen=True)
class ActionTurn:
    thought: str
    action: str
    action_input: dict[str, Any]
    repairs: tuple[str, ...] = field(default=(), compare=False)


_ACTION = re.compile(r"^\s*Action\s*:\s*(.+?)\s*$", re.MULTILINE)
_INPUT = re.compile(r"^\s*Action Input\s*:\s*", re.MULTILINE)
_THOUGHT = re.compile(r"^\s*Thought\s*:\s*(.*)$", re.MULTILINE)

# --- the lenient layer ------------------------------------------------------------------

_MARK = r"[ \t>#*_`~-]*"  # markdown around a label: headings, bullets, emphasis, quotes
_LABELS = {
    "thought": r"thoughts?",
    "input": r"action[ \t_-]*input|input",
    "action": r"action",
    "final": r"final[ \t_-]*answer",
}
_LABEL = re.compile(
    rf"^{_MARK}(?P<label>{'|'.join(f'(?P<{k}>{v})' for k, v in _LABELS.items())})"
    rf"[ \t*_`]*:[ \t*_`]*(?P<value>.*)$",
    re.MULTILINE | re.IGNORECASE,
)
_FENCE = re.compile(r"```[ \t]*[A-Za-z0-9_+-]*[ \t]*\r?\n?(.*?)(?:```|\Z)", re.DOTALL)
_CALL = re.compile(r"^([A-Za-z_][\w.-]*)\s*\(", re.DOTALL)
_NAME_STRIP = " \t`'\"*_"


def json_unclosed(text: str) -> bool:
    """True if ``text`` ends inside a JSON string or with a bracket left open: output that
    was cut off. Scans from the first ``{`` or ``[``."""
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        return False
    depth, in_string, escaped = 0, False, False
    for ch in text[min(starts) :]:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
            if depth == 0:
                return False
    return True


def lenient_json(text: str, notes: list[str], *, start: str = "{[") -> Any:
    """A JSON value from model text: strict first, then from a code fence or the prose around
    it, then repaired almost-JSON. Each step beyond strict JSON is noted in ``notes``. Output
    that was cut off (unclosed JSON, or flagged truncated and needing a repair) raises."""
    candidate = text.strip()
    try:
        return json.loads(candidate)
    except (ValueError, RecursionError):
        pass
    fence = _FENCE.search(candidate)
    if fence is not None and any(c in fence.group(1) for c in start):
        candidate = fence.group(1).strip()
        notes.append("code fence")
    positions = [i for i in (candidate.find(c) for c in start) if i >= 0]
    if not positions:
        raise OutputParseError("no JSON value")
    first = min(positions)
    if first:
        notes.append("prose around JSON")
    candidate = candidate[first:]
    try:
        value, _ = _DECODER.raw_decode(candidate)
        return value
    except (ValueError, RecursionError):
        pass
    if json_unclosed(candidate):
        raise OutputParseError("JSON was cut off (unclosed): truncated output is not repaired")
    if is_truncated(text):
        raise OutputParseError("output cut at max_tokens needs a repair: not accepted")
    try:
        value = json_repair.loads(candidate)
    except Exception as exc:  # noqa: BLE001 - third-party repair on garbage may raise anything
        raise OutputParseError(f"could not repair JSON: {exc}") from None
    if value in ("", None):
        raise OutputParseError("no JSON value, even repaired")
    notes.append("repaired json")
    return value


def _call_args(text: str, notes: list[str]) -> tuple[str, dict[str, Any]] | None:
    """``tool(a="x", b=2)`` or ``tool({"a": "x"})`` -> (tool, args); literals only."""
    text = text[:20_000]  # a call is short; this bounds the parsing work
    m = _CALL.match(text)
    if m is None:
        return None
    for end in [i for i, ch in enumerate(text) if ch == ")"][:50]:
        try:
            node = ast.parse(text[: end + 1], mode="eval").body
        except (SyntaxError, ValueError, RecursionError):
            continue
        if not isinstance(node, ast.Call):
            return None
        try:
            if node.keywords and not node.args:
                args = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
            elif len(node.args) == 1 and not node.keywords:
                args = ast.literal_eval(node.args[0])
            elif not node.args and not node.keywords:
                args = {}
            else:
                return None
        except (ValueError, TypeError, SyntaxError, RecursionError):
            return None
        if not isinstance(args, dict):
            return None
        notes.append("function-call style")
        return m.group(1), args
    return None


def _labels(text: str) -> list[tuple[str, re.Match[str]]]:
    out = []
    for m in _LABEL.finditer(text):
        kind = next(k for k in _LABELS if m.group(k) is not None)
        out.append((kind, m))
    return out


def _lenient_action_turn(text: str) -> ActionTurn:
    notes: list[str] = []
    labels = _labels(text)
    thought = next((m.group("value").strip() for k, m in labels if k == "thought"), "")
    action = next((m for k, m in labels if k == "action"), None)
    final = next((m for k, m in labels if k == "final"), None)
    if final is not None and (action is None or final.start() < action.start()):
        answer = text[final.start("value") :].strip().strip(_NAME_STRIP)
        if not answer:
            raise OutputParseError("empty 'Final Answer:'")
        notes.append("final answer label")
        return ActionTurn(thought, FINISH, {"answer": answer, "status": "success"}, tuple(notes))
    if action is None:
        raise OutputParseError("no 'Action:' line")
    if not re.match(r"\s*Action\s*:", action.group(0)):
        notes.append("label style")
    rest = text[action.start("value") :].strip().strip("`*_")
    called = _call_args(rest, notes)
    if called is not None:
        name, args = called
    else:
        name = action.group("value").strip().strip(_NAME_STRIP)
        start = next((m for k, m in labels if k == "input" and m.start() > action.start()), None)
        if start is None:
            raise OutputParseError("no 'Action Input:' line after the action")
        if not re.match(r"\s*Action Input\s*:", start.group(0)):
            notes.append("label style")
        following = [m.start() for k, m in labels if m.start() > start.start() and k != "input"]
        colon = text.index(":", start.end("label")) + 1
        segment = text[colon : min(following, default=len(text))]
        if is_truncated(text):
            segment = Generated(segment, text.finish_reason)  # type: ignore[attr-defined]
        if name.lower() == FINISH and "{" not in segment and segment.strip(_NAME_STRIP):
            # ``Action: finish`` with the answer as plain text, like ``Final Answer:``
            args = {"answer": segment.strip().strip(_NAME_STRIP), "status": "success"}
            notes.append("finish text")
        else:
            args = lenient_json(segment, notes, start="{")
        if not isinstance(args, dict):
            raise OutputParseError("Action Input must be a JSON object")
    if not name or not re.fullmatch(r"[\w.-]+", name):
        raise OutputParseError(f"action {name[:40]!r} is not a tool name")
    if name.lower() == FINISH and name != FINISH:
        name = FINISH
        notes.append("label style")
    return ActionTurn(thought, name, args, tuple(dict.fromkeys(notes)))


def parse_action_turn(text: str, *, max_chars: int = 50_000) -> ActionTurn:
    """Parse one Thought/Action turn; the Action Input must be a JSON object.

    Strict format first; otherwise the module's tolerance policy, with every repair listed
    in the turn's ``repairs``."""
    if len(text) > max_chars:
        raise OutputParseError(f"output of {len(text)} characters exceeds {max_chars}")
    action = _ACTION.search(text)
    strict_error: OutputParseError | None = None
    if action is None:
        strict_error = OutputParseError("no 'Action:' line")
    else:
        start = _INPUT.search(text, action.end())
        if start is None:
            strict_error = OutputParseError("no 'Action Input:' line after the action")
        else:
            try:
                value, _ = _DECODER.raw_decode(text[start.end() :].strip())
            except json.JSONDecodeError as err:
                strict_error = OutputParseError(f"Action Input is not valid JSON: {err.msg}")
            else:
                if not isinstance(value, dict):
                    raise OutputParseError("Action Input must be a JSON object")
                thought = _THOUGHT.search(text)
                name = action.group(1).strip().strip("`'\"")
                repairs: tuple[str, ...] = ()
                if (called := _CALL.match(name)) and name.endswith(")"):
                    # ``Action: search_web("q")`` over an Action Input: the tool is the call's
                    # name, its arguments the Action Input's (the call's are not read)
                    name, repairs = called.group(1), ("function-call style",)
                if name != FINISH and name.lower() == FINISH:
                    name, repairs = FINISH, ("label style",)
                return ActionTurn(thought.group(1).strip() if thought else "", name, value, repairs)
    try:
        return _lenient_action_turn(text)
    except OutputParseError as lenient_error:
        assert strict_error is not None
        raise (lenient_error if "cut" in str(lenient_error) else strict_error) from None


_SCORE = re.compile(r"Score\s*:\s*([-+]?\d*\.?\d+)")
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_VALUE = re.compile(
    rf"(?P<x>{_NUMBER})\s*(?:(?P<pct>%)|(?:/|\s+out\s+of\s+)\s*(?P<den>{_NUMBER}))?",
    re.IGNORECASE,
)
_SCORE_LENIENT = re.compile(
    rf"score[ \t*_`]*(?:\(0\s*-\s*1\))?[ \t*_`]*[:=][ \t*_`]*(?P<v>{_VALUE.pattern})",
    re.IGNORECASE,
)


def normalise_score(x: float, *, pct: bool = False, den: float | None = None) -> float:
    """A score in any common form on [0, 1]: percentages, ``x/den``, and a bare number
    above 1 read on a 10-point (up to 10) or 100-point scale; then clipped."""
    if pct:
        x /= 100
    elif den is not None and den > 0:
        x /= den
    elif 1 < x <= 10:
        x /= 10
    elif 10 < x <= 100:
        x /= 100
    return min(1.0, max(0.0, x))


def _score_of(m: re.Match[str]) -> float:
    den = m.group("den")
    return normalise_score(
        float(m.group("x")), pct=bool(m.group("pct")), den=float(den) if den else None
    )


def parse_score(text: str) -> float:
    """The judge's score on [0, 1], in any common form (``Score: 0.8``, ``**Score:** 8/10``,
    ``Score: 80%``, ``Score: 1e-1``); a reply that is just a number is read as the score."""
    match = _SCORE_LENIENT.search(text)
    if match is None:
        bare = re.fullmatch(rf"[\s*_`]*(?P<v>{_VALUE.pattern})[\s*_`.]*", text)
        if bare is None:
            raise OutputParseError("no 'Score:' line")
        match = bare
    return _score_of(match)


dumps: Callable[[Any], str] = encoder(ensure_ascii=False, sort_keys=True)
"""Compact, deterministic JSON for prompts and observations (one encoder, built once:
``json.dumps`` with options builds a new one per call, a cost in the simulator's loop)."""


def observation_text(result: Any = None, error: str | None = None) -> str:
    """What an agent sees after a call: the result as JSON, or ``ERROR kind: message``."""
    return error if error is not None else dumps(result)


# Appended to a logged result that a post-condition rejected: "<result> (post-condition
# failed: <condition>)"; the line is marked ERROR so the replanner reads it as a failed step.
POSTCONDITION_NOTE = " (post-condition failed: "


def step_line(step_id: str, tool: str, args: Any, observation: str, ok: bool) -> str:
    """One line of an execution log shown to a replanner."""
    return f"- {step_id} {tool} {dumps(args)} => {'OK' if ok else 'ERROR'} {observation}"


_STEP_LINE = re.compile(r"^- (\S+) (\S+) (\{.*)$")


def parse_step_lines(text: str) -> list[tuple[str, str, Any, bool, str]]:
    """Read back execution-log lines: (step_id, tool, args, ok, observation text)."""
    out = []
    decoder = _DECODER
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

_CANDIDATE = re.compile(
    rf"^{_MARK}candidate[ \t]*#?(\d+)[ \t*_`]*[:.)-]?[ \t*_`]*$|^{_MARK}candidate[ \t]*#?(\d+)"
    r"[ \t*_`]*:",
    re.MULTILINE | re.IGNORECASE,
)
_SCORE_N = re.compile(
    rf"(?:score[ \t*_`]*(?:for[ \t]+candidate[ \t]*)?#?(?P<n>\d+)"
    rf"|candidate[ \t]*#?(?P<c>\d+)[ \t*_`]*score)"
    rf"[ \t*_`]*[:=-][ \t*_`]*(?P<v>{_VALUE.pattern})",
    re.IGNORECASE,
)
_OUTCOME = re.compile(r"Outcome[ \t*_`]*:[ \t*_`]*(success|failure)", re.IGNORECASE)


def parse_candidates(text: str, notes: list[str] | None = None) -> list[ActionTurn]:
    """Thought/Action candidates; unparseable ones are dropped (and counted by the caller).
    A reply with no ``Candidate n:`` header is read as one candidate. Repairs (of any
    candidate) are appended to ``notes``."""
    starts = [m.start() for m in _CANDIDATE.finditer(text)]
    if not starts:
        starts = [0]  # one candidate without a header
    out = []
    for a, b in zip(starts, [*starts[1:], len(text)], strict=True):
        block = text[a:b]
        if is_truncated(text) and b == len(text):
            block = Generated(block, text.finish_reason)  # type: ignore[attr-defined]
        try:
            turn = parse_action_turn(block)
        except OutputParseError:
            continue
        out.append(turn)
        if notes is not None:
            notes.extend(turn.repairs)
    return out


def parse_step_candidates(text: str, notes: list[str] | None = None) -> list[dict[str, Any]]:
    """A JSON list of candidate plan steps (objects); anything else is an OutputParseError.
    The list may be fenced, in prose or almost-JSON (repairs appended to ``notes``); one
    object alone is read as a list of one."""
    found: list[str] = []
    try:
        value = lenient_json(text, found)
    except OutputParseError as err:
        raise OutputParseError(f"no JSON list of steps: {err}") from None
    if isinstance(value, dict):
        value = [value]
        found.append("object for a list")
    if not isinstance(value, list):
        raise OutputParseError("candidates must be a JSON list")
    if notes is not None:
        notes.extend(found)
    return [v for v in value if isinstance(v, dict)]


def parse_scores(text: str, n: int) -> list[float]:
    """Scores for candidates 1..n (any form :func:`parse_score` reads); a missing score
    counts as 0."""
    scores = [0.0] * n
    for m in _SCORE_N.finditer(text):
        i = int(m.group("n") or m.group("c")) - 1
        if 0 <= i < n:
            scores[i] = _score_of(m)
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


# --- request hygiene: what a request asks for, its stop sequences and token allowance ----

# The format a request asks for, recognised by the marker its prompt carries (the last user
# message first: a search prompt asks for candidates or a score over a ReAct or plan system).
REFLECT = (
    "The last action failed. Reflect on it in a few sentences: what went wrong, and what "
    "you will do differently from now on. Respond with one line: Reflection: <text>"
)

_REQUEST_MARKERS = (
    ("reflection", REFLECT),
    ("candidates", PROPOSE_ACTIONS.split("{k}")[1][:40]),
    ("steps", PROPOSE_STEPS.split("{k}")[1][:40]),
    ("scores", RATE_CANDIDATES),
    ("score", SCORE_FORMAT),
    ("outcome", ROLLOUT),
)
STOP_SEQUENCES: dict[str, list[str]] = {
    # a ReAct turn ends before the observation it would otherwise invent
    "action": ["\nObservation:", "\nObservation :", "\nThought:"],  # nor a second turn
    "candidates": ["\nObservation:"],
}
MAX_TOKENS: dict[str, int] = {
    "action": 400,
    "candidates": 900,
    "plan": 1500,
    "plan_text": 1500,
    "steps": 800,
    "scores": 300,
    "score": 300,
    "outcome": 200,
    "reflection": 300,
    "other": 1000,
}


def request_format(messages: Sequence[Mapping[str, str]]) -> str:
    """Which output format a chat request asks for: action, candidates, plan (a Plan JSON),
    plan_text (a plan in prose), steps, scores, score, outcome, reflection or other."""
    users = [m["content"] for m in messages if m["role"] == "user"]
    last = users[-1] if users else ""
    for name, marker in _REQUEST_MARKERS:
        if marker in last:
            return name
    system = " ".join(m["content"] for m in messages if m["role"] == "system")
    if ACTION_TURN_FORMAT in system:
        return "action"
    if PLAN_FORMAT in system:
        return "plan"
    if PLAN_TEXT_FORMAT in system:
        return "plan_text"
    return "other"


# --- native tool calling: the same turn, chosen through the API's tool interface -----------

FINISH_TOOL = {
    "name": FINISH,
    "description": "End the task with the final answer (status success), or say why it "
    "cannot be done (status failure).",
    "parameters": {
        "type": "object",
        "properties": {
            "answer": {"type": "string"},
            "status": {"type": "string", "enum": ["success", "failure"]},
        },
        "required": ["answer", "status"],
    },
}


def tool_schemas(specs: Sequence[Any]) -> list[dict[str, Any]]:
    """OpenAI ``tools`` for a catalogue of tool specs (name, description, parameters), plus
    ``finish``."""
    functions = [
        {"name": t.name, "description": t.description, "parameters": dict(t.parameters)}
        for t in specs
    ]
    return [{"type": "function", "function": f} for f in [*functions, FINISH_TOOL]]


def render_tool_calls(thought: str, calls: Sequence[tuple[str, str]]) -> str:
    """One native tool call as a Thought/Action turn; several (parallel tool calls, e.g. DFS's
    k candidates) as ``Candidate n:`` blocks, the format a text reply would have used."""
    if len(calls) == 1:
        return render_tool_call(thought, *calls[0])
    return "\n".join(
        f"Candidate {i}:\n{render_tool_call(thought, name, args)}"
        for i, (name, args) in enumerate(calls, 1)
    )


def render_tool_call(thought: str, name: str, arguments: str) -> str:
    """A native tool call written as the Thought/Action turn it stands for, so the transcript,
    the cache and the parsers are the same in both modes (``arguments`` is the API's JSON
    text, parsed like any Action Input)."""
    return f"Thought: {thought.strip()}\nAction: {name}\nAction Input: {arguments.strip() or '{}'}"
