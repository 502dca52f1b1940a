"""The plan reader's revisions: revision 2 reads the slips of real plans that have one reading,
each counted as a repair; revision 1 reads every text as the shipped recording was read.

A slip is read only when a careful reader could read it no other way: a dependency or a
placeholder that names a tool one candidate step uses, ``{{result...}}`` in a step with one
dependency, a step id written as a template, a placeholder whose step is not a dependency.
Two candidates, a loop, a cut-off text, prose in a dependency stay refused at both revisions,
and a JSON plan and a text plan with the same slip get the same repair.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from planarena.experiments.calibrate import plan_reading
from planarena.planners.formats import PLAN_REVISIONS, Generated
from planarena.planners.plan import (
    IMPLIED_DEP,
    READING_NOTE,
    RESULT_PLACEHOLDER,
    TEMPLATE_DEP,
    TOOL_DEP,
    TOOL_PLACEHOLDER,
    Plan,
    PlanError,
    parse_plan,
)
from planarena.planners.plan_prose import written_steps

TOOLS = ("search_web", "parse_pdf", "extract_data", "generate_summary")
RECORDING = Path(__file__).resolve().parent / "data" / "recordings" / "qwen2.5-coder-0.5b"
SEARCH = {"id": "step_1", "tool": "search_web", "args": {"query": "Acme annual report"}}


def step(n: int, tool: str, deps: Any = None, **args: Any) -> dict[str, Any]:
    """A Plan JSON step; ``deps`` is written as given (None: no depends_on)."""
    out: dict[str, Any] = {"id": f"step_{n}", "tool": tool, "args": args}
    if deps is not None:
        out["depends_on"] = deps
    return out


def plan(*steps: dict[str, Any]) -> str:
    return json.dumps({"goal": "report", "steps": list(steps)})


def readings(p: Plan) -> list[str]:
    """The kinds of revision-2 readings a plan's notes name, in order."""
    return [n.split(": ")[1] for n in p.normalizations if n.startswith(READING_NOTE)]


def reason(text: str, revision: int, **kw: Any) -> str:
    with pytest.raises(PlanError) as info:
        parse_plan(text, TOOLS, revision=revision, **kw)
    return info.value.reason


# Each slip: the plan, the reading it needs, and the last step as read (deps, args).
READ = {
    "dependency {{step_1.id}}": (
        plan(SEARCH, step(2, "parse_pdf", ["{{step_1.id}}"], url="{{step_1.result.url}}")),
        [TEMPLATE_DEP],
        (["step_1"], {"url": "{{step_1.result.url}}"}),
    ),
    "dependency step_1.id": (
        plan(SEARCH, step(2, "parse_pdf", "step_1.id", url="{{step_1.result.url}}")),
        [TEMPLATE_DEP],
        (["step_1"], {"url": "{{step_1.result.url}}"}),
    ),
    "dependency {{step_1}}": (
        plan(SEARCH, step(2, "parse_pdf", ["{{ step_1 }}"], url="{{step_1.result.url}}")),
        [TEMPLATE_DEP],
        (["step_1"], {"url": "{{step_1.result.url}}"}),
    ),
    "dependency named by its tool": (
        plan(SEARCH, step(2, "parse_pdf", ["search_web"], url="{{step_1.result.url}}")),
        [TOOL_DEP],
        (["step_1"], {"url": "{{step_1.result.url}}"}),
    ),
    "dependency as a placeholder naming a tool": (
        plan(
            SEARCH,
            step(2, "parse_pdf", ["{{search_web.result.url}}"], url="{{step_1.result.url}}"),
        ),
        [TOOL_DEP],
        (["step_1"], {"url": "{{step_1.result.url}}"}),
    ),
    "placeholder naming a tool among the dependencies": (
        plan(
            SEARCH,
            step(2, "parse_pdf", ["step_1"], url="{{step_1.result.url}}"),
            step(3, "extract_data", ["step_1", "step_2"], doc_id="{{parse_pdf.result.doc_id}}"),
        ),
        [TOOL_PLACEHOLDER],
        (["step_1", "step_2"], {"doc_id": "{{step_2.result.doc_id}}"}),
    ),
    "placeholder naming a tool, no dependencies": (
        plan(SEARCH, step(2, "parse_pdf", url="{{search_web.result.url}}")),
        [TOOL_PLACEHOLDER, IMPLIED_DEP],
        (["step_1"], {"url": "{{step_1.result.url}}"}),
    ),
    "placeholder {{tool.field}}": (
        plan(SEARCH, step(2, "parse_pdf", ["step_1"], url="{{search_web.url}}")),
        [TOOL_PLACEHOLDER],
        (["step_1"], {"url": "{{step_1.url}}"}),
    ),
    "placeholder {{result.field}}, one dependency": (
        plan(SEARCH, step(2, "parse_pdf", ["step_1"], url="{{result.url}}")),
        [RESULT_PLACEHOLDER],
        (["step_1"], {"url": "{{step_1.result.url}}"}),
    ),
    "placeholder to a step that is no dependency": (
        plan(SEARCH, step(2, "parse_pdf", url="{{step_1.result.url}}")),
        [IMPLIED_DEP],
        (["step_1"], {"url": "{{step_1.result.url}}"}),
    ),
}


@pytest.mark.parametrize("name", READ)
def test_each_slip_with_one_reading_is_read_at_revision_2_and_refused_at_1(name: str) -> None:
    text, kinds, (deps, args) = READ[name]
    with pytest.raises(PlanError):
        parse_plan(text, TOOLS, revision=1)
    read = parse_plan(text, TOOLS, revision=2)
    assert read.repaired and readings(read) == kinds
    assert read.steps[-1].depends_on == deps and read.steps[-1].args == args


def test_the_default_revision_is_the_latest_and_a_revision_is_checked() -> None:
    text = READ["placeholder naming a tool, no dependencies"][0]
    assert parse_plan(text, TOOLS) == parse_plan(text, TOOLS, revision=PLAN_REVISIONS[-1])
    with pytest.raises(ValueError, match="revision"):
        parse_plan(text, TOOLS, revision=max(PLAN_REVISIONS) + 1)


def test_the_revision_is_part_of_what_a_kept_outcome_is_kept_by() -> None:
    """The same text at the two revisions in turn: each gets its own revision's outcome."""
    text = READ["dependency named by its tool"][0]
    for _ in range(2):
        with pytest.raises(PlanError):
            parse_plan(text, TOOLS, revision=1)
        assert parse_plan(text, TOOLS, revision=2).repaired


# Slips with several readings, or none: refused at both revisions (reason at revision 2).
REFUSED = {
    "tool placeholder, two earlier steps use the tool": (
        plan(
            SEARCH,
            step(2, "search_web", query="Acme 10-K"),
            step(3, "parse_pdf", url="{{search_web.result.url}}"),
        ),
        "unresolvable_placeholder",
    ),
    "tool placeholder, two dependencies use the tool": (
        plan(
            SEARCH,
            step(2, "search_web", query="Acme 10-K"),
            step(3, "parse_pdf", ["step_1", "step_2"], url="{{search_web.result.url}}"),
        ),
        "unresolvable_placeholder",
    ),
    "tool placeholder, only a later step uses the tool": (
        plan(step(1, "parse_pdf", url="{{search_web.result.url}}"), step(2, "search_web")),
        "unresolvable_placeholder",
    ),
    "tool placeholder, the one dependency uses another tool": (
        plan(SEARCH, step(2, "extract_data", ["step_1"], doc_id="{{parse_pdf.result.doc_id}}")),
        "unresolvable_placeholder",
    ),
    "dependency names a tool two earlier steps use": (
        plan(
            SEARCH,
            step(2, "search_web", query="Acme 10-K"),
            step(3, "parse_pdf", ["search_web"], url="{{step_1.result.url}}"),
        ),
        "schema",
    ),
    "dependency names a tool no earlier step uses": (
        plan(step(1, "search_web", ["parse_pdf"], query="q"), step(2, "parse_pdf", url="x")),
        "schema",
    ),
    "{{result...}} with two dependencies": (
        plan(
            SEARCH,
            step(2, "search_web", query="Acme 10-K"),
            step(3, "parse_pdf", ["step_1", "step_2"], url="{{result.url}}"),
        ),
        "unresolvable_placeholder",
    ),
    "{{result...}} with no dependency": (
        plan(SEARCH, step(2, "parse_pdf", url="{{result.url}}")),
        "unresolvable_placeholder",
    ),
    "dependency in prose": (
        plan(SEARCH, step(2, "parse_pdf", ["search_web returned a url"], url="x")),
        "schema",
    ),
    "steps that loop back": (
        plan(step(1, "search_web", ["step_2"], query="q"), step(2, "parse_pdf", ["step_1"])),
        "cyclic_dependency",
    ),
    "a placeholder whose dependency would loop back": (
        plan(
            step(1, "search_web", query="{{step_2.result.title}}"),
            step(2, "parse_pdf", ["step_1"], url="{{step_1.result.url}}"),
        ),
        "unresolvable_placeholder",
    ),
    "a condition written as an object": (
        plan({**SEARCH, "post_conditions": [{"url": "https://acme.example/10k.pdf"}]}),
        "schema",
    ),
}


@pytest.mark.parametrize("name", REFUSED)
def test_a_slip_without_one_reading_is_refused_at_both_revisions(name: str) -> None:
    text, why = REFUSED[name]
    with pytest.raises(PlanError):
        parse_plan(text, TOOLS, revision=1)
    assert reason(text, 2) == why


def test_a_cut_off_plan_is_refused_whatever_slip_it_has() -> None:
    """An unclosed plan, or one cut at max_tokens, is never read (its end is missing)."""
    whole = READ["placeholder naming a tool, no dependencies"][0]
    for text in (whole[:-3], Generated(whole[:-1] + ",}", "length")):
        for revision in PLAN_REVISIONS:
            assert reason(text, revision) == "malformed_json"


def test_a_replan_does_not_read_a_tool_a_completed_step_may_have_used() -> None:
    """The parser is not told a completed step's tool: ``{{search_web...}}`` in a replan could
    mean the completed step_1 as well as the new one, so it is refused."""
    text = plan(step(2, "search_web", query="q"), step(3, "parse_pdf", url="{{search_web.url}}"))
    assert parse_plan(text, TOOLS, revision=2).repaired
    assert reason(text, 2, completed=["step_1"]) == "unresolvable_placeholder"


def test_a_prose_condition_is_left_to_the_condition_evaluator() -> None:
    """The parser takes a condition in words as written at both revisions and repairs nothing
    (the executor's evaluator judges it)."""
    text = plan({**SEARCH, "post_conditions": ["the search found the annual report"]})
    read = [parse_plan(text, TOOLS, revision=r) for r in PLAN_REVISIONS]
    assert read[0] == read[1] and not read[1].repaired
    assert read[1].steps[0].post_conditions == ["the search found the annual report"]


# The same slips in the text format: the ``after`` line and arguments as a model writes them.
TEXT = {
    "dependency {{step_1.id}}": "   - after: {{step_1.id}}",
    "dependency step_1.id": "   - after: step_1.id",
    "dependency named by its tool": "   - after: search_web",
    "dependency as a placeholder naming a tool": "   - after: {{search_web.result.url}}",
}


def text_plan(after: str, url: str = "{{step_1.result.url}}") -> str:
    lines = ["Goal: report", "Steps:", '1. search_web query="Acme annual report"']
    return "\n".join([*lines, f'2. parse_pdf url="{url}"', *([after] if after else [])])


PARITY = {
    **{name: text_plan(after) for name, after in TEXT.items()},
    "placeholder naming a tool, no dependencies": text_plan("", "{{search_web.result.url}}"),
    "placeholder {{result.field}}, one dependency": text_plan("   - after: 1", "{{result.url}}"),
    "placeholder to a step that is no dependency": text_plan(""),
}


@pytest.mark.parametrize("name", PARITY)
def test_a_json_and_a_text_plan_with_the_same_slip_get_the_same_repair(name: str) -> None:
    as_json = parse_plan(READ[name][0], TOOLS, revision=2)
    as_text = parse_plan(PARITY[name], TOOLS, revision=2, plan_format="text")
    assert as_text.steps == as_json.steps
    assert readings(as_text) == readings(as_json) and as_text.repaired


@pytest.mark.parametrize("name", [n for n in PARITY if n not in TEXT])
def test_a_text_plan_slip_is_refused_at_revision_1_as_its_json_twin_is(name: str) -> None:
    with pytest.raises(PlanError):
        parse_plan(PARITY[name], TOOLS, revision=1, plan_format="text")


def test_an_after_line_revision_1_reads_is_read_alike_at_revision_2() -> None:
    """Revision 1 reads the number in ``after: {{step_1.id}}`` silently; revision 2 reads the
    same step and notes the slip, as it does in a JSON plan."""
    text = text_plan(TEXT["dependency {{step_1.id}}"])
    one = parse_plan(text, TOOLS, revision=1, plan_format="text")
    two = parse_plan(text, TOOLS, revision=2, plan_format="text")
    assert one.steps == two.steps and not readings(one) and readings(two) == [TEMPLATE_DEP]


def test_revision_1_reads_every_recorded_plan_as_before_and_2_keeps_what_1_accepted() -> None:
    """Every plan and replan reply of the shipped recording: revision 1 refuses it or accepts
    it with no revision-2 reading; a plan revision 1 accepts, revision 2 reads the same."""
    replies = list(plan_reading.replies(RECORDING))
    assert {r.kind for r in replies} == {"plan", "revise_plan"}
    for reply in replies:
        one = plan_reading.parse(reply, 1)
        if isinstance(one, Plan):
            assert not readings(one), reply.text
            assert plan_reading.parse(reply, 2) == one


def test_the_measurement_counts_every_reply_once(capsys: pytest.CaptureFixture[str]) -> None:
    """The table's rows add up to the replies revision 1 rejects, each split into those
    revision 2 reads and those it still rejects."""
    assert plan_reading.main([str(RECORDING)]) == 0
    out = capsys.readouterr().out
    outcomes = [plan_reading.outcome(r) for r in plan_reading.replies(RECORDING)]
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    counts = [int(row.split("|")[2].split()[0]) for row in rows[1:]]
    assert sum(counts) == sum(o.first is not None for o in outcomes)
    assert all(o.second_ok for o in outcomes if o.first is None)
    assert plan_reading.main([str(RECORDING / "nowhere")]) == 2


def test_what_a_judge_and_the_calibration_read_of_a_text_plan_follows_the_revision() -> None:
    """``written_steps`` (a judge's and a revision's context, the calibration's steps) reads
    a text plan at the plan reader's revision: an ``after`` line naming a tool is a step's
    dependency at revision 2, as the executor reads it, and no plan at revision 1."""
    text = text_plan(TEXT["dependency named by its tool"])
    assert written_steps(text, "text", revision=1) is None
    steps = written_steps(text, "text", revision=2)
    assert steps is not None and steps[1]["depends_on"] == ["search_web"]
    assert parse_plan(text, TOOLS, revision=2, plan_format="text").steps[1].depends_on
