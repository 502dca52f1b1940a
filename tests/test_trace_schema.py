"""The trace schema: every trace line a run writes validates, and docs/records.md documents it.

A small real run of every planner on every env (faults and a weak model, so retries,
fallbacks, replans and rejected plans happen) is validated line by line; the event kinds a
run only emits when something goes wrong (a budget, a crash, a dead endpoint) come from real
episodes or, for the endpoint, from the dict the episode loop writes. Every event kind the
code emits must have a model, and every model field a row in docs/records.md.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import make_planner
from planarena.envs.report.env import ReportEnv
from planarena.experiments.records.trace_schema import (
    EVENT_MODELS,
    TRACE_SCHEMA_VERSION,
    SearchNode,
    ToolCall,
    TraceLine,
    parse_event,
    parse_trace,
)
from planarena.experiments.run.episode import EpisodeRecord, simulate
from planarena.planners.base import Planner, PlannerResult, TaskView
from planarena.planners.llm.base import Budget
from planarena.planners.llm.profiles import SKILLS
from pydantic import ValidationError

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "records.md"
PLANNERS = sorted(p.stem for p in (ROOT / "configs" / "planner").glob("*.yaml"))
ENVS = sorted(p.stem for p in (ROOT / "configs" / "env").glob("*.yaml"))  # `file` included
EMITTERS = ("planners", "experiments/run", "envs", "search")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("every_planner_env")
    cmd = [
        sys.executable,
        "-m",
        "planarena.experiments.run.runner",
        f"planner=[{','.join(PLANNERS)}]",
        f"env=[{','.join(ENVS)}]",
        "n_tasks=1",
        "trials=2",
        "faults=heavy",
        "llm.skill=weak",
        "progress=false",
        "figures=false",
        f"hydra.run.dir={out}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_every_trace_line_of_every_planner_and_env_validates(run_dir: Path) -> None:
    records = lines(run_dir / "episodes.jsonl")
    assert {(r["planner"], r["env"]) for r in records} == {(p, e) for p in PLANNERS for e in ENVS}
    traces = lines(run_dir / "traces.jsonl")
    assert len(traces) == len(records)
    kinds = set()
    for number, doc in enumerate(traces, start=1):
        try:
            parsed = parse_trace(doc)
        except ValidationError as exc:  # name the line, so a failure is found in the file
            pytest.fail(f"traces.jsonl:{number}: {exc}")
        kinds |= {e.event for e in parsed.events}
    # what a faulty run with a weak model always shows (the rest: rare, or on purpose below)
    assert {
        "llm",
        "plan",
        "replan",
        "plan_rejected",
        "step",
        "retry",
        "fallback",
        "skip",
        "search_tree",
    } <= kinds


def test_parsing_keeps_every_value(run_dir: Path) -> None:
    """The models drop nothing: dumped by alias, a parsed line is the line again."""
    for doc in lines(run_dir / "traces.jsonl")[:40]:
        again = parse_trace(doc).model_dump(by_alias=True, exclude_unset=True)
        assert again == doc


def _crashing_planner() -> Planner:
    class Crash(Planner):
        name = "crash"

        async def run(self, task: TaskView, tools: Any, llm: Any) -> PlannerResult:
            raise RuntimeError("boom")

    return Crash()


def _simulate(planner: Planner, **kwargs: Any) -> dict[str, Any]:
    env = ReportEnv()
    (task,) = env.generate(1, seed=0, complexity="medium")
    _, trace = simulate(planner.name, planner, env, task, skill=SKILLS["weak"], **kwargs)
    return trace


def test_the_events_of_an_episode_that_ends_badly_validate() -> None:
    budget = _simulate(make_planner("react"), budget=Budget(max_calls=1))
    crash = _simulate(_crashing_planner())
    seen = set()
    for trace in (budget, crash):
        seen |= {e.event for e in parse_trace(trace).events}
    assert {"budget_exhausted", "harness_error"} <= seen
    # the episode loop's dict for a dead endpoint (experiments/run/episode.py)
    parse_event({"event": "infrastructure_error", "error": "APIConnectionError: refused"})
    # the executor's dict when the replanner answers with no steps (planners/executor.py)
    parse_event({"event": "replan_unreachable", "t": 12.5})


def test_an_llm_event_of_an_http_backend_validates() -> None:
    """What ``openai_backend`` adds to an llm event (its ``log``) is part of the schema."""
    parse_event(
        {
            "event": "llm",
            "role": "executor",
            "model": "gpt-4o-mini",
            "t0": 0.0,
            "t1": 1.5,
            "prompt_tokens": 10,
            "completion_tokens": 3,
            "finish_reason": "stop",
            "replayed": True,
            "queue_s": 0.25,
            "served_model": "gpt-4o-mini-2024-07-18",
            "tool_calls": [{"name": "search_web"}],
            "retries": 1,
            "prompt": [{"role": "user", "content": "hi"}],
            "completion": "hello",
        }
    )


@pytest.mark.parametrize(
    ("change", "field"),
    [
        pytest.param(lambda d: d["events"][0].update(note="new"), "note", id="new field"),
        pytest.param(lambda d: d["events"][0].update(event="llm_"), "llm_", id="unknown kind"),
        pytest.param(lambda d: d["events"][0].pop("role"), "role", id="missing field"),
        pytest.param(
            lambda d: d["events"][0].update(prompt_tokens="306"), "prompt_tokens", id="a string"
        ),
        pytest.param(lambda d: d["tool_calls"][0].update(ms=1.0), "ms", id="tool call field"),
        pytest.param(lambda d: d.update(seed=0), "seed", id="line field"),
    ],
)
def test_a_line_that_differs_from_the_schema_is_refused(
    run_dir: Path, change: Any, field: str
) -> None:
    doc = next(
        d
        for d in lines(run_dir / "traces.jsonl")
        if d["events"] and d["events"][0]["event"] == "llm" and d["tool_calls"]
    )
    change(doc)
    with pytest.raises(ValidationError, match=field):
        parse_trace(doc)


def test_every_event_kind_the_code_emits_has_a_model() -> None:
    """A literal ``"event": "<kind>"`` anywhere in the emitting packages, plus the kinds
    written through a variable (the executor's plan and replan, the episode loop's
    infrastructure_error), is a kind of the schema, and the schema has no other."""
    found = {"plan", "replan", "infrastructure_error"}
    for folder in EMITTERS:
        for path in (ROOT / folder).rglob("*.py"):
            found |= set(re.findall(r"""["']event["']: ["']([a-z_]+)["']""", path.read_text()))
    assert found == set(EVENT_MODELS)


def _documented_tables() -> dict[str, list[str]]:
    """Heading -> the backticked names in the first column of the tables under it."""
    out: dict[str, list[str]] = {}
    heading = ""
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip().strip("`")
            out.setdefault(heading, [])
        elif m := re.match(r"\| `([^`]+)` \|", line):
            out[heading].append(m.group(1))
    return out


def _fields(model: type) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items()]


def test_docs_describe_every_event_field_and_record_key() -> None:
    tables = _documented_tables()
    for kind, model in EVENT_MODELS.items():
        want = _fields(model) + (_fields(SearchNode) if kind == "search_tree" else [])
        assert tables.get(kind) == want, f"docs/records.md, ### `{kind}`"
    assert tables["Tool calls"] == _fields(ToolCall)
    assert tables["Trace lines"] == _fields(TraceLine)
    assert tables["Episode records"] == list(EpisodeRecord.model_fields)
    assert f"TRACE_SCHEMA_VERSION = {TRACE_SCHEMA_VERSION}" in DOCS.read_text(encoding="utf-8")
