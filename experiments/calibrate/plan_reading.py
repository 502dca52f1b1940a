"""How the plan reader's revisions read a recording's real plans: which replies revision 1
rejects and why, which of them revision 2 reads (and by which repair), and how many
conditions revision 3 reads (``&&`` and ``||`` as ``and`` and ``or``).

Run as ``python -m planarena.experiments.calibrate.plan_reading <recording dir>``; it reads the
recording's ``run/traces.jsonl.xz`` and prints a markdown table. It is the measurement behind
the repairs of revision 2 (docs/planners.md#plan-revisions): a slip is worth reading only if
real models make it, and only if it has one reading.
"""

from __future__ import annotations

import ast
import json
import lzma
import re
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from planarena.planners.conditions import is_expression
from planarena.planners.formats import Generated, parse_step_lines, request_format
from planarena.planners.plan import (
    C_OPERATORS,
    C_OPERATORS_REVISION,
    READING_NOTE,
    Plan,
    PlanError,
    parse_plan,
)
from planarena.planners.plan_prose import written_steps
from planarena.planners.plan_refs import template_name, template_step_id

TRACES = Path("run") / "traces.jsonl.xz"
_TOOL_LINE = re.compile(r"^- ([A-Za-z_][\w.-]*)\(", re.MULTILINE)
_CALL = re.compile(r"^\s*[A-Za-z_][\w.-]*\s*\(")
_FORMATS = {"plan": "json", "plan_text": "text"}


@dataclass(frozen=True)
class PlanReply:
    """One plan or replan completion with what its parse needs: the tools of its prompt and,
    for a replan, the steps its execution log says completed."""

    kind: str  # "plan" or "revise_plan"
    text: Generated
    tools: tuple[str, ...]
    completed: tuple[str, ...]
    plan_format: str


def tools_of(system: str) -> tuple[str, ...]:
    """The tool names of a plan prompt: its ``Tools:`` list, one signature line each."""
    return tuple(_TOOL_LINE.findall(system.partition("Tools:")[2]))


def completed_of(user: str) -> tuple[str, ...]:
    """The steps a replan prompt's execution log shows succeeded (the executor's ``done``)."""
    return tuple(step_id for step_id, _, _, ok, _ in parse_step_lines(user) if ok)


def replies(recording: Path) -> Iterator[PlanReply]:
    """Every plan and replan completion of a recording, in trace order. A request is a plan
    request by the format its prompt asks for; the replanner's role marks a replan."""
    with lzma.open(recording / TRACES, "rt") as lines:
        for line in lines:
            for event in json.loads(line)["events"]:
                reply = _reply(event)
                if reply is not None:
                    yield reply


def _reply(event: dict[str, object]) -> PlanReply | None:
    """The plan reply an ``llm`` event holds; None for any other event or request."""
    if event.get("event") != "llm":
        return None
    prompt = event["prompt"]
    assert isinstance(prompt, list)
    fmt = _FORMATS.get(request_format(prompt))
    if fmt is None:
        return None
    system = " ".join(m["content"] for m in prompt if m["role"] == "system")
    user = prompt[-1]["content"]
    kind = "revise_plan" if event.get("role") == "replanner" else "plan"
    text = Generated(str(event["completion"]), event.get("finish_reason"))  # type: ignore[arg-type]
    return PlanReply(kind, text, tools_of(system), completed_of(user), fmt)


def parse(reply: PlanReply, revision: int) -> Plan | PlanError:
    """The reply parsed as the executor parses it, at ``revision``: the plan or the error."""
    try:
        return parse_plan(
            reply.text,
            reply.tools,
            completed=reply.completed,
            plan_format=reply.plan_format,
            revision=revision,
        )
    except PlanError as err:
        return err


def readings(plan: Plan) -> str:
    """The revision-2 repairs a plan needed, by kind (the notes that start READING_NOTE)."""
    kinds = [n.split(": ")[1] for n in plan.normalizations if n.startswith(READING_NOTE)]
    return " + ".join(dict.fromkeys(kinds)) or "none"


def cause(err: PlanError, reply: PlanReply) -> str:
    """A rejection's reason and, where the message tells one, a finer cause."""
    message = str(err)
    if err.reason == "schema" and message.startswith("unrecognized step id "):
        return f"schema: {_bad_id(message.removeprefix('unrecognized step id '), reply)}"
    if err.reason == "schema" and "conditions in" in message and "list of strings" in message:
        return "schema: condition not a string (an object)"
    if err.reason == "schema" and message.startswith("args of"):
        return "schema: args not an object"
    if err.reason == "malformed_json" and "cut off" in message:
        return "malformed_json: " + ("cut at max_tokens" if reply.text.truncated else "unclosed")
    if err.reason == "unresolvable_placeholder":
        return f"unresolvable_placeholder: {_bad_placeholder(message, reply)}"
    if err.reason == "unknown_fallback":
        return "unknown_fallback: fallback not a tool"
    return err.reason


_REPR = re.compile(r"""^('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")


def _bad_id(shown: str, reply: PlanReply) -> str:
    """What an unrecognized step id is: a step's own id, or a dependency of some shape."""
    m = _REPR.match(shown)
    value = ast.literal_eval(m.group(1)) if m else shown
    # revision 1's reading: this explains why revision 1 refused the reply
    steps = written_steps(reply.text, reply.plan_format, revision=1) or []
    if any(isinstance(s, dict) and value in (s.get("id"), s.get("step")) for s in steps):
        return "step id not a number"
    if value in reply.tools or (template_name(value) or "") in reply.tools:
        return "dependency names a tool" + _why_not(shown)
    if template_step_id(value) is not None:
        return "dependency written as a template"
    if _CALL.match(value):
        return "dependency written as a tool call"
    return "dependency in prose" + (" (with a placeholder)" if "{" in value else "")


def _why_not(message: str) -> str:
    """Why revision 2 did not read a name as a step, where its message says."""
    if "0 candidate steps" in message:
        return " no earlier step uses"
    if "candidate steps use" in message:
        return " several steps use"
    return " whose tool is not known" if "not known" in message else ""


def _bad_placeholder(message: str, reply: PlanReply) -> str:
    """What an unresolvable placeholder is: one naming a tool, ``result``, no step, or a step
    the placeholder's step does not depend on."""
    if "is not one of its dependencies" in message:
        return "its step not a dependency"
    if "does not name a step" in message:
        head = re.sub(r"\[.*", "", message.partition("{{")[2].partition(".")[0].strip())
        if head in reply.tools:
            return "names a tool" + _why_not(message)
        return "names result" if head == "result" else "names no step"
    if "names tool" in message:
        return "names a tool" + _why_not(message)
    if "names result" in message:
        return "names result, with other than one dependency"
    if "which no step fills" in message:
        return "a {name} no step fills"
    return "other"


@dataclass(frozen=True)
class Outcome:
    """One reply read at both revisions: revision 1's cause of rejection (None: accepted),
    and revision 2's repairs (accepted) or cause (rejected)."""

    kind: str
    text: str
    first: str | None
    second: str
    second_ok: bool


def outcome(reply: PlanReply) -> Outcome:
    """The reply read at revisions 1 and 2."""
    one, two = parse(reply, 1), parse(reply, 2)
    first = cause(one, reply) if isinstance(one, PlanError) else None
    if isinstance(two, PlanError):
        return Outcome(reply.kind, str(reply.text), first, cause(two, reply), False)
    return Outcome(reply.kind, str(reply.text), first, readings(two), True)


def table(outcomes: Sequence[Outcome]) -> str:
    """The markdown table: per revision-1 cause, how many revision 2 reads and how."""
    rejected = [o for o in outcomes if o.first is not None]
    lines = [
        "| rejected at revision 1 by | replies (distinct) | accepted at revision 2 "
        "(by repair) | still rejected at revision 2 (by cause) |",
        "| --- | ---: | --- | --- |",
    ]
    for first, n in Counter(o.first for o in rejected).most_common():
        group = [o for o in rejected if o.first == first]
        lines.append(
            f"| {first} | {n} ({len({o.text for o in group})}) | "
            f"{_tally([o.second for o in group if o.second_ok])} | "
            f"{_tally([o.second for o in group if not o.second_ok])} |"
        )
    return "\n".join(lines)


def _tally(values: Sequence[str]) -> str:
    """``n`` and each value's count (``5: a 3, b 2``); ``0`` when there are none."""
    if not values:
        return "0"
    counts = ", ".join(f"{v} {n}" for v, n in Counter(values).most_common())
    return f"{len(values)}: {counts}"


def summary(outcomes: Sequence[Outcome]) -> str:
    """Totals per request kind, and the check that revision 2 keeps every plan revision 1
    accepted as it was (a revision-2 repair there would be a reading revision 1 refused)."""
    lines = []
    for kind in ("plan", "revise_plan"):
        of_kind = [o for o in outcomes if o.kind == kind]
        ok1 = sum(o.first is None for o in of_kind)
        ok2 = sum(o.second_ok for o in of_kind)
        lines.append(
            f"- {kind}: {len(of_kind)} replies ({len({o.text for o in of_kind})} distinct), "
            f"accepted {ok1} at revision 1, {ok2} at revision 2"
        )
    changed = sum(o.first is None and o.second != "none" for o in outcomes)
    lines.append(f"- accepted at revision 1 but read otherwise at revision 2: {changed}")
    return "\n".join(lines)


def condition_readings(replies: Sequence[PlanReply]) -> str:
    """The line on revision 3: replies accepted at it whose conditions it read (``&&``,
    ``||``), how many conditions, and how many of those are expressions once read."""
    read, conditions, expressions = [], 0, 0
    for reply in replies:
        before, after = parse(reply, C_OPERATORS_REVISION - 1), parse(reply, C_OPERATORS_REVISION)
        if isinstance(before, PlanError) or isinstance(after, PlanError):
            continue  # conditions decide no plan's acceptance: both parse, or neither
        changed = [
            now
            for old, new in zip(before.steps, after.steps, strict=True)
            for was, now in zip(
                [*old.pre_conditions, *old.post_conditions],
                [*new.pre_conditions, *new.post_conditions],
                strict=True,
            )
            if was != now
        ]
        if changed:
            read.append(str(reply.text))
        conditions += len(changed)
        expressions += sum(is_expression(c) for c in changed)
    return (
        f"- conditions read at revision {C_OPERATORS_REVISION} ({C_OPERATORS}): {conditions} in "
        f"{len(read)} accepted replies ({len(set(read))} distinct); expressions once read: "
        f"{expressions}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Print the measurement of one recording dir; 2 if it holds no trace or no plan."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or not (Path(args[0]) / TRACES).is_file():
        print(f"usage: plan_reading <recording dir holding {TRACES}>", file=sys.stderr)
        return 2
    every = list(replies(Path(args[0])))
    outcomes = [outcome(r) for r in every]
    if not outcomes:
        print("plan_reading: no plan or replan reply in the recording", file=sys.stderr)
        return 2
    print(summary(outcomes) + "\n" + condition_readings(every), table(outcomes), sep="\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
