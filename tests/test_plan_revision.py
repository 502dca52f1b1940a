"""The plan prompt's revisions: revision 2 names every condition fact the executor can read and
shows one worked example that the plan reader accepts as written; revision 1 is the prompt
the shipped 0.5B recording was made with, and a recording without the key replays under it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from planarena.configs import CONFIG_DIR
from planarena.envs import clock
from planarena.envs.tools import ToolSpec
from planarena.experiments.records.identity import fingerprint
from planarena.experiments.run import recording
from planarena.experiments.run.prepare import prepare
from planarena.planners.base import PlannerStats
from planarena.planners.conditions import evaluate_condition
from planarena.planners.executor import LadderPolicy, PlanExecutor
from planarena.planners.formats import PLAN_REVISION, PLAN_REVISIONS
from planarena.planners.plan import parse_plan
from planarena.planners.prompts import EXAMPLE_STEPS, REPLAN_USER, plan_system

ENVS = ("report", "file", "code_gen", "rag", "web_nav", "pipeline", "research")
RECORDING = Path(__file__).resolve().parent / "data" / "recordings" / "qwen2.5-coder-0.5b"
EXAMPLE_TOOLS = ("get_forecast", "send_email")


def _episode_toolboxes() -> dict[str, Any]:
    """Each built-in env's first complex task's toolbox, as a run builds it."""
    with initialize_config_dir(str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(
            "config",
            overrides=[f"env=[{','.join(ENVS)}]", "n_tasks=1", "complexity=[complex]"],
        )
    prepared = prepare(cfg)
    out: dict[str, Any] = {}
    for job in prepared.jobs:
        if job.env_name not in out:
            env = prepared.envs[job.env_name]
            seed_keys = (0, job.env_name, job.task.task_id)
            out[job.env_name] = env.make_tools(
                job.task, rules=prepared.faults.rules, seed_keys=seed_keys
            ).toolbox
    return out


def _example_text(system: str) -> str:
    return system.split("Task: Get tomorrow's forecast for Lyon and email it to the team.\n", 1)[1]


def test_the_latest_revision_is_the_default_and_revision_1_shows_neither_example_nor_facts() -> (
    None
):
    spec = ToolSpec("search", "Search.", {"type": "object", "properties": {}})
    old = plan_system([spec], revision=1)
    assert "Example" not in old and "Conditions are" not in old
    assert plan_system([spec]) == plan_system([spec], revision=PLAN_REVISION)
    assert max(PLAN_REVISIONS) == PLAN_REVISION
    with pytest.raises(ValueError, match="plan revision"):
        plan_system([spec], revision=99)


@pytest.mark.parametrize("plan_format", ["json", "text"])
def test_the_worked_example_is_a_plan_the_reader_accepts_unrepaired(plan_format: str) -> None:
    """A model that copies the example's form exactly writes a plan that parses with no
    repair, in either format, to the example's steps."""
    system = plan_system([], plan_format, revision=2)
    plan = parse_plan(_example_text(system), EXAMPLE_TOOLS, plan_format=plan_format)
    assert not plan.repaired
    assert [s.model_dump(include={"id", "tool", "args", "depends_on"}) for s in plan.steps] == [
        {k: s[k] for k in ("id", "tool", "args", "depends_on")} for s in EXAMPLE_STEPS
    ]
    assert [s.pre_conditions for s in plan.steps] == [s["pre_conditions"] for s in EXAMPLE_STEPS]


def test_the_example_uses_no_tool_of_any_env() -> None:
    """Copying the example can never run: its tools belong to no built-in env."""
    for name, toolbox in _episode_toolboxes().items():
        assert not set(EXAMPLE_TOOLS) & set(toolbox.names()), name


def _condition(name: str, toolbox: Any, facts: dict[str, Any]) -> str:
    """A condition on a documented name, its placeholder filled with a real key."""
    head = name.split(".", 1)[0]
    if name.endswith(".<tool>"):
        return f"{head}.{toolbox.names()[0]} == true"
    if name == "context.documents":
        return "context.documents == context.documents"
    if name.endswith(".<key>"):
        return f"{head}.{next(iter(facts[head]))} == {head}.{next(iter(facts[head]))}"
    return f"{name} == {name}"


def test_every_condition_fact_the_prompt_names_resolves_in_every_env() -> None:
    """The names revision 2 documents are the ones the executor's condition context holds:
    a condition on each evaluates (raises no ConditionError) in every built-in env."""
    for name, toolbox in _episode_toolboxes().items():
        with clock.use_clock(clock.SimClock()):
            facts = toolbox.facts()
            system = plan_system(toolbox.catalogue(), revision=2, facts=toolbox.fact_names())
            line = next(x for x in system.splitlines() if x.startswith("Conditions are"))
            names = re.sub(r"\([^)]*\)", "", line.split("names: ", 1)[1]).split(". ", 1)[0]
            listed = [n.strip() for n in names.split(",")]
            llm = SimpleNamespace(trace=[], usage=SimpleNamespace(cost_usd=0.0), plan_revision=2)
            executor = PlanExecutor(LadderPolicy(), toolbox, llm, "goal", PlannerStats())  # type: ignore[arg-type]
            context = executor._context(result={"url": "u"})
            for fact in listed:
                if fact.startswith(("step_N.", "result.")):
                    continue
                assert evaluate_condition(_condition(fact, toolbox, facts), context) in (
                    True,
                    False,
                ), (name, fact)
            for fact in facts:  # and every fact of the world is named
                assert fact in line, (name, fact)


def test_a_revision_2_replan_prompt_numbers_new_steps_after_every_used_id() -> None:
    common = {"goal": "g", "log": ["step_1 ok"], "failed": "step_3 x", "pending": []}
    assert "Number the new steps from step_4 on." in REPLAN_USER.render(**common, next_id="step_4")
    assert "Number the new steps" not in REPLAN_USER.render(**common, next_id=None)


def test_revision_1_keeps_a_config_id_and_a_recording_without_the_key_replays_under_it() -> None:
    """Runs made before the key keep their config_id, and a replay of one asks for the
    revision it was made with (the shipped recording's replies answer revision-1 prompts)."""
    assert fingerprint({"seed": 0, "plan_revision": 1}) == fingerprint({"seed": 0})
    assert fingerprint({"seed": 0, "plan_revision": 2}) != fingerprint({"seed": 0})
    run = json.loads((RECORDING / "run" / "run.json").read_text())
    assert "plan_revision" not in run["config"]
    assert "plan_revision=1" in recording.recorded_overrides(RECORDING)


def test_a_recording_with_the_key_replays_under_its_own_value_not_the_default(
    tmp_path: Path,
) -> None:
    """A recording made with ``plan_revision`` and ``grading`` set replays under those values
    even when the default has moved on: each is pinned on the replay's command line (here a
    recording made at revision 2, graded by facts, under the default revision 3)."""
    import shutil

    import yaml

    made = tmp_path / "rec" / "run" / ".hydra"
    shutil.copytree(RECORDING.parent / "qwen2.5-coder-1.5b" / "run" / ".hydra", made)
    config = yaml.safe_load((made / "config.yaml").read_text())
    config.update(plan_revision=2, grading="facts", recovery="equal")
    (made / "config.yaml").write_text(yaml.safe_dump(config))
    typed = yaml.safe_load((made / "overrides.yaml").read_text())  # the defaults, not typed
    kept = [o for o in typed if not o.startswith(("plan_revision=", "grading=", "recovery="))]
    (made / "overrides.yaml").write_text(yaml.safe_dump(kept))
    assert PLAN_REVISION != 2
    overrides = recording.recorded_overrides(tmp_path / "rec")
    for pinned in ("plan_revision=2", "grading=facts", "recovery=equal"):
        assert pinned in overrides


def test_revision_3_reads_a_conditions_and_and_or_signs_and_nothing_else() -> None:
    """``&&`` and ``||`` outside quotes have one reading; revision 3 reads them as ``and`` and
    ``or`` (a repair each), keeps quoted text and ``!=`` as written, and asks with revision 2's
    prompt. At revision 2 the same condition is kept, and the executor cannot evaluate it."""
    from planarena.planners.conditions import ConditionError
    from planarena.planners.plan import C_OPERATORS

    written = "internet_accessible == true && result.ok != false"
    quoted = "result.name == 'A && B' || result.ok"
    step = {"id": "step_1", "tool": "search", "args": {}, "depends_on": [],
            "pre_conditions": [written], "post_conditions": [quoted]}  # fmt: skip
    text = json.dumps({"goal": "g", "steps": [step]})
    at2, at3 = parse_plan(text, ["search"], revision=2), parse_plan(text, ["search"], revision=3)
    assert (at2.steps[0].pre_conditions, at2.repaired) == ([written], False)
    read = "internet_accessible == true and result.ok != false"
    assert at3.steps[0].pre_conditions == [read]
    assert at3.steps[0].post_conditions == ["result.name == 'A && B' or result.ok"]
    assert at3.repaired and sum(C_OPERATORS in n for n in at3.normalizations) == 2
    context = {"internet_accessible": True, "result": {"ok": True, "name": "x"}}
    with pytest.raises(ConditionError):
        evaluate_condition(written, context)
    assert evaluate_condition(read, context) is True
    spec = ToolSpec("search", "Search.", {"type": "object", "properties": {}})
    assert plan_system([spec], revision=3) == plan_system([spec], revision=2)


def test_every_and_sign_condition_of_the_1_5b_recording_is_an_expression_once_read() -> None:
    """The measurement behind revision 3: the 1.5B model's accepted plans join conditions with
    ``&&``, and each one so read is an expression the executor evaluates."""
    from planarena.experiments.calibrate import plan_reading

    rec = RECORDING.parent / "qwen2.5-coder-1.5b"
    line = plan_reading.condition_readings(list(plan_reading.replies(rec)))
    conditions, expressions = int(line.split("): ")[1].split()[0]), int(line.rsplit(": ", 1)[1])
    assert conditions > 100 and expressions == conditions, line
