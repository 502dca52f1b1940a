"""Tests for planners.plan: parsing, normalization, rejection reasons, placeholder resolution."""

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from planarena.planners import plan as plan_module
from planarena.planners.plan import (
    Plan,
    PlanError,
    PlanStep,
    canonical_step_id,
    find_placeholders,
    parse_plan,
    resolve_args,
)

# The seed article's example plan, verbatim.
SEED_PLAN = """
{
  "goal": "分析競爭對手 A 財報",
  "steps": [
    {
      "id": "step_1",
      "tool": "search_web",
      "args": {"query": "A 公司 2025 年報"},
      "depends_on": [],
      "pre_conditions": ["internet_accessible == true"],
      "post_conditions": ["result.url != null"],
      "retry_limit": 3,
      "fallback": "search_web_backup"
    },
    {
      "id": "step_2",
      "tool": "parse_pdf",
      "args": {"url": "{{step_1.result.url}}"},
      "depends_on": ["step_1"],
      "pre_conditions": ["step_1.status == success"],
      "post_conditions": ["result.revenue != null"]
    }
  ]
}
"""
SEED_TOOLS = ["search_web", "search_web_backup", "parse_pdf", "generate_summary"]

RAG_PLAN = """
{
  "goal": "規劃 Rust 學習路線",
  "steps": [
    {"step": 1, "action": "retrieve", "query": "Rust 基礎概念", "purpose": "背景知識"},
    {"step": 2, "action": "retrieve", "query": "Rust 推薦書籍", "purpose": "資源"},
    {"step": 3, "action": "retrieve_conditional", "query": "{dep_result} 入門路線",
     "depends_on": 1, "purpose": "依據基礎概念找路線"},
    {"step": 4, "action": "synthesize", "depends_on": [1, "2", "step_3"], "purpose": "整合"}
  ]
}
"""
RAG_TOOLS = ["retrieve", "retrieve_conditional", "synthesize"]


def seed_dict() -> dict[str, Any]:
    return json.loads(SEED_PLAN)


def parse_seed(data: dict[str, Any], **kwargs: Any) -> Plan:
    return parse_plan(json.dumps(data, ensure_ascii=False), SEED_TOOLS, **kwargs)


def reason_of(text: str, tools: list[str] = SEED_TOOLS, **kwargs: Any) -> str:
    with pytest.raises(PlanError) as info:
        parse_plan(text, tools, **kwargs)
    assert str(info.value)
    return info.value.reason


def seed_reason(data: dict[str, Any], **kwargs: Any) -> str:
    return reason_of(json.dumps(data, ensure_ascii=False), **kwargs)


# ------------------------------------------------------------------ happy paths


def test_seed_example_parses() -> None:
    plan = parse_plan(SEED_PLAN, SEED_TOOLS)
    assert plan.form == "seed"
    assert not plan.repaired
    assert plan.normalizations == []
    assert [s.id for s in plan.steps] == ["step_1", "step_2"]
    first, second = plan.steps
    assert first.tool == "search_web"
    assert first.fallback == "search_web_backup"
    assert first.retry_limit == 3
    assert first.pre_conditions == ["internet_accessible == true"]
    assert second.depends_on == ["step_1"]
    assert second.args == {"url": "{{step_1.result.url}}"}
    assert second.retry_limit == 3  # default
    assert second.fallback is None
    assert list(plan.graph().edges) == [("step_1", "step_2")]
    assert plan.step("2") is second


def test_rag_example_parses_and_normalizes_ids() -> None:
    plan = parse_plan(RAG_PLAN, RAG_TOOLS)
    assert plan.form == "rag"
    assert [s.id for s in plan.steps] == ["step_1", "step_2", "step_3", "step_4"]
    cond = plan.step("step_3")
    assert cond.tool == "retrieve_conditional"
    assert cond.depends_on == ["step_1"]
    assert cond.args == {"query": "{dep_result} 入門路線"}
    assert cond.purpose == "依據基礎概念找路線"
    assert plan.step("step_4").depends_on == ["step_1", "step_2", "step_3"]
    assert plan.step("step_4").args == {}
    assert "id 1 -> step_1" in plan.normalizations
    assert "depends_on 1 in step_3 -> step_1" in plan.normalizations
    assert set(plan.graph().predecessors("step_4")) == {"step_1", "step_2", "step_3"}


@pytest.mark.parametrize("raw", [1, "1", "step_1", "Step 1", "step-1", "STEP_1", "s1", " step_01 "])
def test_canonical_step_id(raw: object) -> None:
    assert canonical_step_id(raw) == "step_1"


@pytest.mark.parametrize("raw", [True, None, 1.0, -1, "", "first", "step_x", [1], "1.5"])
def test_canonical_step_id_rejects(raw: object) -> None:
    with pytest.raises(PlanError) as info:
        canonical_step_id(raw)
    assert info.value.reason == "schema"


def test_placeholder_ids_canonicalized() -> None:
    data = seed_dict()
    data["steps"][1]["args"] = {"url": "{{ Step-1.result.url }}", "n": "{{1.result.items[0]}}"}
    plan = parse_seed(data)
    assert plan.step("step_2").args == {
        "url": "{{step_1.result.url}}",
        "n": "{{step_1.result.items.0}}",
    }
    assert any("placeholder" in note for note in plan.normalizations)


def test_code_fence_and_trailing_comma_repaired() -> None:
    text = "Here is the plan:\n```json\n" + SEED_PLAN.replace("]\n    }\n  ]", "],\n    },\n  ]")
    text += "\n```\nHope this helps!"
    plan = parse_plan(text, SEED_TOOLS)
    assert plan.repaired
    assert "stripped code fence" in plan.normalizations
    assert "repaired json" in plan.normalizations
    assert len(plan.steps) == 2


def test_prose_around_valid_json_sets_repaired() -> None:
    plan = parse_plan("Sure! " + SEED_PLAN + " Done.", SEED_TOOLS)
    assert plan.repaired
    assert "stripped surrounding prose" in plan.normalizations


def test_completed_steps_allow_replan_references() -> None:
    data = {
        "goal": "g",
        "steps": [
            {
                "id": "step_3",
                "tool": "generate_summary",
                "args": {"text": "{{step_1.result.url}}"},
                "depends_on": ["step_2"],
            }
        ],
    }
    plan = parse_seed(data, completed=["1", "Step 2"])
    assert plan.steps[0].depends_on == ["step_2"]
    assert list(plan.graph().nodes) == ["step_3"]
    assert seed_reason(data) == "unknown_dependency"


def test_transitive_ancestor_placeholder_ok() -> None:
    data = seed_dict()
    data["steps"].append(
        {
            "id": "step_3",
            "tool": "generate_summary",
            "args": {"u": "{{step_1.result.url}}"},
            "depends_on": ["step_2"],
        }
    )
    assert len(parse_seed(data).steps) == 3


# ------------------------------------------------------------------- rejections


def test_unknown_tool() -> None:
    data = seed_dict()
    data["steps"][1]["tool"] = "rm_rf"
    assert seed_reason(data) == "unknown_tool"


def test_a_tool_written_as_its_signature_is_that_tool_and_a_repair() -> None:
    """A real model copies the prompt's tool line (``search_web(query: string)``) into a
    plan: read as the tool, like ReAct's function-call style, and counted as a repair; an
    unknown name in the same shape is still an unknown tool."""
    data = seed_dict()
    tool = data["steps"][1]["tool"]
    data["steps"][1]["tool"] = f"{tool}(query: string)"
    plan = parse_seed(data)
    assert plan.steps[1].tool == tool and plan.repaired
    assert any("signature" in n for n in plan.normalizations)
    data["steps"][1]["tool"] = "rm_rf(path: string)"
    assert seed_reason(data) == "unknown_tool"


def test_unknown_fallback() -> None:
    data = seed_dict()
    data["steps"][0]["fallback"] = "nope"
    assert seed_reason(data) == "unknown_fallback"


def test_unknown_dependency() -> None:
    data = seed_dict()
    data["steps"][1]["depends_on"] = ["step_9"]
    assert seed_reason(data) == "unknown_dependency"


def test_self_dependency() -> None:
    data = seed_dict()
    data["steps"][0]["depends_on"] = ["1"]
    assert seed_reason(data) == "self_dependency"


def test_cyclic_dependency() -> None:
    data = seed_dict()
    data["steps"][0]["depends_on"] = ["step_2"]
    assert seed_reason(data) == "cyclic_dependency"


def test_duplicate_id_after_canonicalization() -> None:
    data = seed_dict()
    data["steps"][1]["id"] = "Step 1"
    data["steps"][1]["depends_on"] = []
    data["steps"][1]["args"] = {}
    assert seed_reason(data) == "duplicate_id"


def test_negative_retry_limit() -> None:
    data = seed_dict()
    data["steps"][0]["retry_limit"] = -1
    assert seed_reason(data) == "negative_retry_limit"


@pytest.mark.parametrize("value", ["3", 2.5, True, [3]])
def test_non_int_retry_limit_is_schema(value: object) -> None:
    data = seed_dict()
    data["steps"][0]["retry_limit"] = value
    assert seed_reason(data) == "schema"


def test_placeholder_to_non_ancestor() -> None:
    """Revision 1 refuses it; revision 2 reads the placeholder as the dependency it implies
    (tests/test_plan_reading.py)."""
    data = seed_dict()
    data["steps"][1]["depends_on"] = []
    assert seed_reason(data, revision=1) == "unresolvable_placeholder"


def test_placeholder_to_later_step() -> None:
    data = seed_dict()
    data["steps"][0]["args"] = {"query": "{{step_2.result.revenue}}"}
    assert seed_reason(data) == "unresolvable_placeholder"


def test_placeholder_not_naming_a_step() -> None:
    data = seed_dict()
    data["steps"][1]["args"] = {"url": "{{user_name}}"}
    assert seed_reason(data) == "unresolvable_placeholder"


def test_dep_result_without_depends_on() -> None:
    data = json.loads(RAG_PLAN)
    del data["steps"][2]["depends_on"]
    assert reason_of(json.dumps(data), RAG_TOOLS) == "unresolvable_placeholder"


def test_missing_synthesize() -> None:
    data = json.loads(RAG_PLAN)
    data["steps"].pop()
    assert reason_of(json.dumps(data), RAG_TOOLS) == "missing_synthesize"


def test_empty_plan() -> None:
    assert reason_of('{"goal": "g", "steps": []}') == "empty_plan"


@pytest.mark.parametrize(
    "text",
    [
        "[1, 2]",
        '"just a string"',
        '{"goal": "g"}',
        '{"goal": "g", "steps": {"id": 1}}',
        '{"goal": 5, "steps": [{"id": 1, "tool": "search_web"}]}',
        '{"goal": "g", "steps": [{"id": 1}]}',
        '{"goal": "g", "steps": [{"id": 1, "tool": 7}]}',
        '{"goal": "g", "steps": ["search_web"]}',
        '{"goal": "g", "steps": [{"id": 1, "tool": "search_web", "args": [1]}]}',
        '{"goal": "g", "steps": [{"id": 1, "tool": "search_web", "pre_conditions": [1]}]}',
        '{"goal": "g", "steps": [{"id": {"x": 1}, "tool": "search_web"}]}',
        '{"goal": "g", "steps": [{"step": 1, "action": "synthesize", "query": 5}]}',
    ],
)
def test_schema_errors(text: str) -> None:
    assert reason_of(text, [*SEED_TOOLS, "synthesize"]) == "schema"


@pytest.mark.parametrize("text", ["", "not json at all", "{", "{{{{}}}}", "```\n```"])
def test_malformed_json(text: str) -> None:
    assert reason_of(text) == "malformed_json"


def _never(*_: Any, **__: Any) -> Any:
    raise AssertionError("reached a parser")


def test_too_large_before_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refused on its length alone: neither the depth scan nor a parser sees the text (a
    spy, not a stopwatch: the check holds on a loaded machine)."""
    for name in ("check_depth", "load_json", "load_prose"):
        monkeypatch.setattr(plan_module, name, _never)
    assert reason_of("[" * 10_000_000) == "too_large"


def test_too_deep_fails_before_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bracket scan refuses a too-deep text before any JSON parser (whose recursion it
    would exhaust) sees it."""
    for name in ("load_json", "load_prose"):
        monkeypatch.setattr(plan_module, name, _never)
    assert reason_of("[" * 10_000_000, max_chars=20_000_000) == "too_deep"
    assert reason_of('{"goal": "g", "steps": ' + "[" * 30 + "]" * 30 + "}") == "too_deep"


def test_brackets_inside_strings_do_not_count_as_depth() -> None:
    data = seed_dict()
    data["steps"][0]["args"] = {"query": "[" * 50}
    assert parse_seed(data).steps[0].args["query"] == "[" * 50


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300))
def test_arbitrary_text_never_crashes(text: str) -> None:
    try:
        result = parse_plan(text, SEED_TOOLS)
    except PlanError as err:
        assert err.reason
    else:
        assert isinstance(result, Plan)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["id", "step", "tool", "action", "depends_on", "args", "query"]),
            children,
            max_size=4,
        )
    ),
    max_leaves=15,
)


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(st.sampled_from(["goal", "steps"]), _json_values))
def test_arbitrary_json_never_crashes(data: dict[str, Any]) -> None:
    try:
        parse_plan(json.dumps(data), SEED_TOOLS)
    except PlanError as err:
        assert err.reason


# --------------------------------------------------------------- placeholders


def test_find_placeholders() -> None:
    value = {"a": "{{step_1.result.url}}", "b": ["x {{ 2.title }} y", {"c": "{dep_result}"}]}
    assert find_placeholders(value) == [("step_1", ["result", "url"]), ("step_2", ["title"])]


def make_step(args: dict[str, Any], depends_on: list[str] | None = None) -> PlanStep:
    return PlanStep(
        id="step_9",
        tool="t",
        args=args,
        depends_on=depends_on or [],
        pre_conditions=[],
        post_conditions=[],
        retry_limit=3,
        fallback=None,
        purpose=None,
    )


RESULTS: dict[str, Any] = {
    "step_1": {"url": "http://a/x.pdf", "items": [{"n": 1}, {"n": 2}], "meta": {"k": "v"}},
    "step_2": "plain text",
    "step_3": {"empty": None},
}


def test_resolve_typed_and_embedded() -> None:
    step = make_step(
        {
            "url": "{{step_1.result.url}}",
            "items": "{{step_1.result.items}}",
            "n": "{{step_1.items.1.n}}",
            "meta": "{{ step_1.result.meta }}",
            "whole": "{{step_1.result}}",
            "text": "see {{step_1.result.url}} (n={{step_1.result.items[0].n}})",
            "nested": [{"deep": "{{step_2.result}}"}],
            "literal": 5,
        }
    )
    args = resolve_args(step, RESULTS)
    assert args["url"] == "http://a/x.pdf"
    assert args["items"] == [{"n": 1}, {"n": 2}]
    assert args["n"] == 2
    assert args["meta"] == {"k": "v"}
    assert args["whole"] == RESULTS["step_1"]
    assert args["text"] == "see http://a/x.pdf (n=1)"
    assert args["nested"] == [{"deep": "plain text"}]
    assert args["literal"] == 5
    args["items"].append("mutated")
    assert len(RESULTS["step_1"]["items"]) == 2  # no aliasing into results


def test_resolve_dep_result() -> None:
    one = make_step({"query": "{dep_result} 入門路線"}, ["step_2"])
    assert resolve_args(one, RESULTS) == {"query": "plain text 入門路線"}
    as_json = make_step({"query": "{dep_result}"}, ["step_3"])
    assert resolve_args(as_json, RESULTS) == {"query": '{"empty":null}'}
    several = make_step({"query": "{dep_result}"}, ["step_2", "step_3"])
    assert resolve_args(several, RESULTS) == {"query": 'plain text\n{"empty":null}'}


@pytest.mark.parametrize(
    ("args", "deps"),
    [
        ({"u": "{{step_1.result.missing}}"}, []),
        ({"u": "{{step_3.result.empty}}"}, []),
        ({"u": "x {{step_4.result}} y"}, []),
        ({"u": "{{step_1.result.items.7}}"}, []),
        ({"u": ["{{step_1.result.url.deeper}}"]}, []),
        ({"q": "{dep_result}"}, []),
        ({"q": "{dep_result}"}, ["step_5"]),
    ],
)
def test_resolve_fails_loudly(args: dict[str, Any], deps: list[str]) -> None:
    with pytest.raises(PlanError) as info:
        resolve_args(make_step(args, deps), RESULTS)
    assert info.value.reason == "unresolvable_placeholder"
    assert "step_9" in str(info.value)


def test_episodes_of_every_planner_leave_the_plans_parse_plan_keeps_as_parsed() -> None:
    """parse_plan keeps its outcomes and hands the same Plan to every caller of the same
    text (the planners of a job, a judge and then the executor), so nothing may change a
    kept plan: after episodes of every planner on every env, with faults and replans, each
    kept outcome equals a fresh parse of its text."""
    from pathlib import Path

    from hydra.utils import instantiate
    from omegaconf import OmegaConf
    from planarena.envs.faults import FaultConfig
    from planarena.experiments.run.episode import simulate
    from planarena.planners import plan as plan_module
    from planarena.planners.llm.profiles import SKILLS

    root = Path(__file__).resolve().parents[1]
    rules = FaultConfig(
        **OmegaConf.to_container(OmegaConf.load(root / "configs/faults/heavy.yaml"))
    ).rules
    planners = ["plan_execute", "plan_execute_replan", "tot", "bfs", "dfs", "mcts", "topo"]
    plan_module.PARSED.clear()
    for env_name in ("report", "rag", "code_gen"):
        env = instantiate(OmegaConf.load(root / "configs" / "env" / f"{env_name}.yaml"))
        for task in env.generate(2, seed=2, complexity="complex"):
            for name in planners:
                planner = instantiate(OmegaConf.load(root / "configs/planner" / f"{name}.yaml"))
                simulate(name, planner, env, task, skill=SKILLS["weak"], rules=rules, seed=2)
    kept = list(plan_module.PARSED.items())
    assert sum(isinstance(o, Plan) for _, o in kept) > 20
    for (text, _truncated, tools, completed, max_chars, max_depth, fmt, revision), outcome in kept:
        try:
            fresh: Plan | tuple[str, str] = plan_module._parse_plan(
                text, tools, completed, max_chars, max_depth, fmt, revision
            )
        except PlanError as err:
            fresh = (err.reason, str(err))
        if isinstance(outcome, Plan):
            assert isinstance(fresh, Plan) and outcome.model_dump() == fresh.model_dump()
        else:
            assert outcome == fresh
