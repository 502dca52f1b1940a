"""One tolerance policy for every output format, tested on one corpus of real-model styles.

Each style is a way real models deviate from the requested format (markdown labels, fenced
JSON, prose, single quotes, trailing commas...). The same style is applied to a ReAct turn,
a candidate list, candidate plan steps and a Plan JSON: every parser must accept it (and
report a repair) or reject it alike. A model that never follows the format ends as
``malformed_output`` whatever the planner.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from planarena.planners.formats import (
    FINISH,
    Generated,
    OutputParseError,
    parse_action_turn,
    parse_candidates,
    parse_outcome,
    parse_score,
    parse_scores,
    parse_step_candidates,
    request_format,
)
from planarena.planners.plan import PlanError, parse_plan

TOOLS = frozenset({"search_web", "parse_pdf", "generate_summary"})
ARGS = {"query": "Acme annual report 2025", "year": 2025}
PLAN = {
    "goal": "report",
    "steps": [
        {"id": "step_1", "tool": "search_web", "args": {"query": "Acme annual report 2025"}},
        {
            "id": "step_2",
            "tool": "generate_summary",
            "args": {"text": "{{step_1.result.title}}"},
            "depends_on": ["step_1"],
        },
    ],
}


def _single_quotes(js: str) -> str:
    return js.replace('"', "'")


def _trailing_comma(js: str) -> str:
    return js[:-1] + ",}" if js.endswith("}") else js[:-1] + ",]"


# JSON styles: (name, how the JSON text is written). Each applies to every format.
JSON_STYLES: list[tuple[str, Callable[[str], str]]] = [
    ("fenced", lambda js: f"```json\n{js}\n```"),
    ("fenced_no_lang", lambda js: f"```\n{js}\n```"),
    ("prose_around", lambda js: f"Sure, here it is:\n{js}\nLet me know if you need more."),
    ("single_quotes", _single_quotes),
    ("trailing_comma", _trailing_comma),
    (
        "pretty_printed_fenced",
        lambda js: "```json\n" + json.dumps(json.loads(js), indent=2) + "\n```",
    ),
]
# Label styles for the labelled formats (ReAct turns, candidates).
LABEL_STYLES: list[tuple[str, Callable[[str], str]]] = [
    ("lowercase", str.lower),
    ("uppercase", str.upper),
    ("bold", lambda label: f"**{label}:**"),
    ("bold_outside", lambda label: f"**{label}**"),
    ("heading", lambda label: f"### {label}"),
]


def react_turn(label: Callable[[str], str] = lambda x: x, js: str | None = None) -> str:
    js = json.dumps(ARGS) if js is None else js

    def lab(name: str) -> str:
        out = label(name)
        return out if out.endswith(":") or out.endswith(":**") else out + ":"

    thought, action, action_input = lab("Thought"), lab("Action"), lab("Action Input")
    return f"{thought} I need the report.\n{action} search_web\n{action_input} {js}"


@pytest.mark.parametrize("style", [s for s, _ in JSON_STYLES])
def test_every_json_style_is_accepted_and_counted_by_every_parser(style: str) -> None:
    fmt = dict(JSON_STYLES)[style]
    turn = parse_action_turn(react_turn(js=fmt(json.dumps(ARGS))))
    assert (turn.action, turn.action_input) == ("search_web", ARGS) and turn.repairs
    notes: list[str] = []
    (cand,) = parse_candidates("Candidate 1:\n" + react_turn(js=fmt(json.dumps(ARGS))), notes)
    assert cand.action_input == ARGS and notes
    notes = []
    steps = parse_step_candidates(fmt(json.dumps(PLAN["steps"])), notes)
    assert steps == PLAN["steps"] and notes
    plan = parse_plan(fmt(json.dumps(PLAN)), TOOLS)
    assert [s.tool for s in plan.steps] == ["search_web", "generate_summary"] and plan.repaired


@pytest.mark.parametrize("style", [s for s, _ in LABEL_STYLES])
def test_every_label_style_is_accepted_and_counted(style: str) -> None:
    text = react_turn(dict(LABEL_STYLES)[style])
    turn = parse_action_turn(text)
    assert (turn.action, turn.action_input) == ("search_web", ARGS) and turn.repairs, text
    notes: list[str] = []
    header = dict(LABEL_STYLES)[style]("Candidate 1")
    (cand,) = parse_candidates(f"{header}\n{text}", notes)
    assert cand.action == "search_web" and notes


def test_well_formed_output_needs_no_repair() -> None:
    turn = parse_action_turn(react_turn())
    assert turn == parse_action_turn(react_turn()) and turn.repairs == ()
    assert not parse_plan(json.dumps(PLAN), TOOLS).repaired
    notes: list[str] = []
    assert parse_step_candidates(json.dumps(PLAN["steps"]), notes) and notes == []


@pytest.mark.parametrize(
    "text",
    [
        'Thought: x\nAction: search_web(query="Acme annual report 2025", year=2025)',
        "Thought: x\nAction: `search_web(query='Acme annual report 2025', year=2025)`",
        'Action: search_web({"query": "Acme annual report 2025", "year": 2025})',
    ],
)
def test_function_call_style_reads_literals_only(text: str) -> None:
    turn = parse_action_turn(text)
    assert (turn.action, turn.action_input) == ("search_web", ARGS)
    assert "function-call style" in turn.repairs


def test_call_style_action_over_an_action_input_reads_the_input() -> None:
    """A small model writes the call and then the Action Input: the tool is the call's name,
    the arguments are the Action Input's, and it counts as a repair."""
    text = (
        'Thought: x\nAction: search_web("Acme annual report 2025")\n'
        'Action Input: {"query": "Acme annual report 2025", "year": 2025}'
    )
    turn = parse_action_turn(text)
    assert (turn.action, turn.action_input) == ("search_web", ARGS)
    assert turn.repairs == ("function-call style",)


def test_function_call_with_code_is_not_evaluated() -> None:
    for text in [
        "Action: search_web(query=__import__('os').getcwd())",
        "Action: search_web(query=open('/etc/passwd').read())",
    ]:
        with pytest.raises(OutputParseError):
            parse_action_turn(text)


def test_final_answer_is_a_finish() -> None:
    turn = parse_action_turn(
        "Thought: I have both figures.\nFinal Answer: Acme revenue 5, profit 1"
    )
    assert turn.action == FINISH
    assert turn.action_input == {"answer": "Acme revenue 5, profit 1", "status": "success"}
    turn = parse_action_turn('Action: Finish\nAction Input: {"answer": "x", "status": "success"}')
    assert turn.action == FINISH and turn.repairs
    turn = parse_action_turn("Thought: done\nAction: finish\nAction Input: Acme revenue 5")
    assert turn.action_input == {"answer": "Acme revenue 5", "status": "success"}
    assert "finish text" in turn.repairs


def test_cut_off_json_is_never_repaired_in_any_format() -> None:
    cut_args = json.dumps(ARGS)[:-12]
    with pytest.raises(OutputParseError):
        parse_action_turn(react_turn(js=cut_args))
    assert parse_candidates("Candidate 1:\n" + react_turn(js=cut_args)) == []
    with pytest.raises(OutputParseError):
        parse_step_candidates(json.dumps(PLAN["steps"])[:-30])
    with pytest.raises(PlanError) as err:  # never a silently shorter plan
        parse_plan(json.dumps(PLAN)[:-40], TOOLS)
    assert err.value.reason == "malformed_json"


def test_output_cut_at_max_tokens_is_accepted_only_if_complete() -> None:
    sloppy = _trailing_comma(json.dumps(PLAN))
    assert parse_plan(sloppy, TOOLS).repaired  # a sloppy but complete plan is repaired...
    with pytest.raises(PlanError):  # ...but not when the server says it was cut
        parse_plan(Generated(sloppy, "length"), TOOLS)
    complete = Generated(json.dumps(PLAN) + "\nThis plan first searches", "length")
    assert len(parse_plan(complete, TOOLS).steps) == 2
    with pytest.raises(OutputParseError):
        parse_action_turn(Generated(react_turn(js=_single_quotes(json.dumps(ARGS))), "length"))
    assert parse_action_turn(Generated(react_turn() + "\nObserv", "length")).action_input == ARGS


@pytest.mark.parametrize(
    ("text", "score"),
    [
        ("Score: 0.8", 0.8),
        ("**Score:** 0.8", 0.8),
        ("score: 8/10", 0.8),
        ("Score: 8 / 10", 0.8),
        ("Score: 8 out of 10", 0.8),
        ("Score: 80%", 0.8),
        ("Score: 1e-1", 0.1),
        ("Score: 8", 0.8),
        ("Score: 80", 0.8),
        ("Score: .5", 0.5),
        ("The plan is solid.\n\n**Score**: 0.9", 0.9),
        ("0.7", 0.7),
        ("Score: 1", 1.0),
        ("Score: -0.2", 0.0),
    ],
)
def test_scores_in_any_common_form_are_normalised(text: str, score: float) -> None:
    assert parse_score(text) == pytest.approx(score)


def test_candidate_scores_and_outcomes_use_the_same_policy() -> None:
    text = "**Score 1:** 8/10\nscore 2: 30%\nCandidate 3 score: 0.5\nScore for candidate 4: 1e-1"
    assert parse_scores(text, 4) == pytest.approx([0.8, 0.3, 0.5, 0.1])
    assert parse_outcome("**Outcome:** Success") and not parse_outcome("outcome: failure")
    with pytest.raises(OutputParseError):
        parse_score("I think it is good.")


def test_request_format_names_what_each_prompt_asks_for() -> None:
    from planarena.envs.report.env import SPECS
    from planarena.planners.formats import PROPOSE_ACTIONS, PROPOSE_STEPS, RATE_PLAN, ROLLOUT
    from planarena.planners.prompts import plan_system, react_system

    react = [{"role": "system", "content": react_system(SPECS)}, {"role": "user", "content": "T"}]
    plan = [{"role": "system", "content": plan_system(SPECS)}, {"role": "user", "content": "T"}]
    assert request_format(react) == "action" and request_format(plan) == "plan"
    assert request_format([*react, {"role": "user", "content": PROPOSE_ACTIONS.format(k=3)}]) == (
        "candidates"
    )
    assert request_format([*plan[:1], {"role": "user", "content": PROPOSE_STEPS.format(k=2)}]) == (
        "steps"
    )
    assert request_format([{"role": "user", "content": f"Plan: x\n{RATE_PLAN}"}]) == "score"
    assert request_format([*plan[:1], {"role": "user", "content": ROLLOUT}]) == "outcome"
    from planarena.planners.formats import MAX_TOKENS, PLAN_TEXT_FORMAT

    text_plan = [{"role": "system", "content": f"Plan it. {PLAN_TEXT_FORMAT}"}, plan[1]]
    assert request_format(text_plan) == "plan_text"  # its own format: no JSON mode
    assert MAX_TOKENS["plan_text"] == MAX_TOKENS["plan"]  # a plan's allowance either way
    from planarena.planners.llm.openai_backend import OpenAIBackend

    json_mode = OpenAIBackend("m", base_url="http://127.0.0.1:9/v1", json_mode=True)
    assert json_mode.sampling(plan)["response_format"] == {"type": "json_object"}
    assert "response_format" not in json_mode.sampling(text_plan)  # prose is not JSON


# --- one classification of format failures across planners --------------------------------


class _Garbage:
    """A model that never follows any format."""

    name = "garbage"

    def __init__(self, text: str) -> None:
        self.text = text

    async def generate(self, messages: Any, *, role: str, model: Any, request: Any) -> Any:
        from planarena.planners.llm.base import Completion

        return Completion(self.text)


@pytest.mark.parametrize("text", ["I am not sure what to do here.", "Score: 0.9\nOutcome: success"])
def test_a_model_that_never_keeps_the_format_is_malformed_output_for_every_planner(
    text: str,
) -> None:
    from conftest import ALL_PLANNERS, MODELS, make_planner, tasks
    from planarena.envs.report.env import ReportEnv
    from planarena.experiments.run.episode import run_one

    task = tasks("simple", 1)[0]
    for name in ALL_PLANNERS:
        record, _ = asyncio.run(
            run_one(
                planner_name=name,
                planner=make_planner(name),
                env=ReportEnv(),
                task=task,
                backend=_Garbage(text),
                llm_label="garbage",
                models=MODELS,
                rules=[],
                seed=0,
                trial=0,
            )
        )
        assert (record.failure_mode, record.stop_reason) == (
            "malformed_output",
            "malformed_output",
        ), (name, record.detail)
