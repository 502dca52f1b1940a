"""The request protocol: every LLM request declares its kind, and the simulator answers that.

The simulated LLM models an LLM and a world, never a planner: it answers the *kind* a request
declares (``planarena.planners.llm.protocol.RequestKind``), not the sender nor the wording.
These tests hold the three sides of that: every built-in planner declares a known kind that
matches what its prompt asks for; a request without a kind, or of a kind the simulator does not
model, ends its episode as a ``harness_error`` naming the planner and the kind (never a silent
non-answer); and a planner that words its prompts its own way is simulated like the original.
The kind is not part of a request's identity, so it moves no random draw.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from conftest import CONFIGS, make_planner
from fake_server import FakeOpenAI
from hydra.utils import instantiate
from omegaconf import OmegaConf
from planarena.envs import clock
from planarena.envs.base import Env, Task
from planarena.envs.faults import FaultConfig, FaultRule
from planarena.envs.tools import Toolbox, ToolSpec
from planarena.experiments.records.trace_schema import parse_event
from planarena.experiments.run.episode import EpisodeRecord, run_one, sim_models, simulate
from planarena.planners.base import Planner, PlannerResult, TaskView
from planarena.planners.formats import request_format
from planarena.planners.llm.base import Completion, EpisodeLLM, Message, Request
from planarena.planners.llm.openai_backend import OpenAIBackend
from planarena.planners.llm.profiles import SKILLS, ModelProfile, SkillProfile
from planarena.planners.llm.protocol import RESERVED, ProtocolError, RequestContext, RequestKind
from planarena.planners.llm.sim import ANSWERS, SimLLM
from planarena.planners.llm.tokens import count_text
from planarena.planners.prompts import react_system
from planarena.planners.react import ReActPlanner

ROOT = Path(__file__).resolve().parents[1]
PLANNERS = sorted(p.stem for p in (CONFIGS / "planner").glob("*.yaml"))
ENVS = sorted(p.stem for p in (CONFIGS / "env").glob("*.yaml"))  # `file` included
DEFAULT_FAULTS = FaultConfig(
    **OmegaConf.to_container(OmegaConf.load(CONFIGS / "faults" / "default.yaml"))
)
MODELLED = {str(k) for k in RequestKind} - {str(k) for k in RESERVED}

# What each built-in planner asks for (its replanning ladder, where it has one, adds
# ``revise_plan``); a kind outside its set is a wrong declaration.
PLANNER_KINDS = {
    # auto runs the planner it picks: whatever that one asks for
    "auto": {str(k) for k in RequestKind} - {str(k) for k in RESERVED},
    "react": {"act"},
    "reflexion": {"act", "reflect"},
    "plan_execute": {"plan"},
    "plan_execute_replan": {"plan", "revise_plan"},
    "plan_execute_rerun": {"plan"},
    "topo": {"plan", "revise_plan"},
    "tot": {"plan", "rate_plan", "revise_plan"},
    "bfs": {"propose_steps", "rate_candidates", "revise_plan"},
    "dfs": {"propose_actions", "rate_candidates"},
    "mcts": {"propose_steps", "rollout", "revise_plan"},
}
# The output format the shipped prompts ask a real model for (``formats.request_format``,
# which the OpenAI backend reads for its token allowance), and the kinds that ask for it.
FORMAT_KINDS = {
    "action": {"act"},
    "plan": {"plan", "revise_plan"},
    "candidates": {"propose_actions"},
    "steps": {"propose_steps"},
    "scores": {"rate_candidates"},
    "score": {"rate_plan"},
    "outcome": {"rollout"},
    "reflection": {"reflect"},
}


@cache
def env_from_config(name: str) -> Env:
    """The env ``env=<name>`` runs: its config group yaml, instantiated."""
    return instantiate(OmegaConf.load(CONFIGS / "env" / f"{name}.yaml"))


class KindRecorder:
    """A backend that notes what each request declared and delegates to the simulated LLM."""

    name = "sim"

    def __init__(self, inner: SimLLM) -> None:
        self.inner = inner
        self.seen: list[tuple[str, str | None, str]] = []  # (role, kind, format asked for)

    async def generate(
        self, messages: Sequence[Message], *, role: str, model: ModelProfile, request: Request
    ) -> Completion:
        self.seen.append((role, request.kind, request_format(messages)))
        return await self.inner.generate(messages, role=role, model=model, request=request)


def _recorded(
    planner: str, env_name: str, task: Task, skill: SkillProfile, rules: Sequence[FaultRule]
) -> tuple[EpisodeRecord, list[tuple[str, str | None, str]]]:
    env = env_from_config(env_name)
    recorder = KindRecorder(
        SimLLM(skill, env.oracle(task), seed_keys=(0, task.env, task.task_id, 0))
    )
    record, _ = asyncio.run(
        run_one(
            planner_name=planner,
            planner=make_planner(planner),
            env=env,
            task=task,
            backend=recorder,
            llm_label=f"sim:{skill.name}",
            models=sim_models(),
            rules=rules,
            faults_label="default",
        )
    )
    return record, recorder.seen


# --- the kinds ------------------------------------------------------------------------------


def test_the_kinds_are_one_documented_enum_and_the_simulator_answers_all_but_the_reserved() -> None:
    assert [str(k) for k in RequestKind] == [
        "act",
        "plan",
        "revise_plan",
        "propose_actions",
        "propose_steps",
        "rate_candidates",
        "rate_plan",
        "rollout",
        "reflect",
        "verify",
    ]
    assert all(k.__doc__ and len(k.__doc__) > 30 for k in RequestKind)
    assert {str(k) for k in RESERVED} == {"verify"}
    assert {str(k) for k in ANSWERS} == MODELLED
    assert RequestKind.ACT == "act" and RequestKind("rate_plan") is RequestKind.RATE_PLAN


def test_docs_table_every_kind() -> None:
    """docs/simulator.md's protocol table has a row per kind, reserved ones included."""
    text = (ROOT / "docs" / "simulator.md").read_text()
    section = text.split("## The request protocol", 1)[1].split("\n## ", 1)[0]
    rows = {m.group(1) for m in re.finditer(r"^\| `(\w+)` \|", section, re.MULTILINE)}
    assert rows == {str(k) for k in RequestKind}


# --- (a) every built-in planner declares known kinds, matching what it asks for --------------


def test_every_built_in_planner_declares_a_known_kind_for_every_request() -> None:
    """Every planner on every env (2 medium and 2 complex tasks, default faults, the strong
    model): every request declares a kind the simulator models, the kind the prompt's own
    format asks for, ``revise_plan`` exactly for the replanner's requests, and only the kinds
    that planner is built to send. Across them, every modelled kind is exercised."""
    used: set[str] = set()
    for env_name in ENVS:
        env = env_from_config(env_name)
        pool = [
            t
            for c in ("medium", "complex")
            for t in env.generate(2, seed=0, complexity=c, unreachable_rate=0.05)
        ]
        for planner in PLANNERS:
            kinds: set[str] = set()
            for task in pool:
                record, seen = _recorded(
                    planner, env_name, task, SKILLS["strong"], DEFAULT_FAULTS.rules
                )
                assert record.failure_mode != "harness_error", (planner, env_name, record.detail)
                assert seen, (planner, env_name, task.task_id)
                for role, kind, fmt in seen:
                    where = (planner, env_name, task.task_id, role, kind, fmt)
                    assert kind in MODELLED, where
                    assert kind in FORMAT_KINDS[fmt], where
                    assert (kind == "revise_plan") == (role == "replanner"), where
                    kinds.add(str(kind))
            assert kinds <= PLANNER_KINDS[planner], (planner, env_name, kinds)
            used |= kinds
    assert used == MODELLED


# --- (b) no kind, or a kind the simulator does not model: a harness error, named ------------


class _OneRequest(Planner):
    """Sends one request of its own wording with the kind it is given (None: none at all)."""

    def __init__(self, name: str, kind: str | None) -> None:
        self.name = name
        self.kind = kind

    async def run(self, task: TaskView, tools: Toolbox, llm: EpisodeLLM) -> PlannerResult:
        messages = [
            {"role": "system", "content": "Look back on what went wrong so far."},
            {"role": "user", "content": f"Task: {task.goal}"},
        ]
        if self.kind is None:
            text = await llm.complete(messages, role="planner")
        else:
            text = await llm.complete(messages, role="planner", kind=self.kind)
        return PlannerResult(text, "answered")


@pytest.mark.parametrize(
    ("planner", "kind", "says"),
    [
        ("my_kindless_planner", None, "with no kind"),
        ("my_reflecting_planner", "reflect", "of kind 'reflect' without context.observations"),
        ("my_verifying_planner", RequestKind.VERIFY, "of kind 'verify', which the simulated LLM"),
        ("my_typo_planner", "reflekt", "of kind 'reflekt', which is not a kind of the request"),
    ],
)
def test_a_request_the_simulator_does_not_model_ends_as_a_named_harness_error(
    planner: str, kind: str | None, says: str
) -> None:
    env = env_from_config("report")
    (task,) = env.generate(1, seed=0, complexity="medium")
    record, trace = simulate(planner, _OneRequest(planner, kind), env, task, skill=SKILLS["strong"])
    assert record.failure_mode == "harness_error" and record.stop_reason == "harness_error"
    assert not record.success
    source = f"plug-in {_OneRequest.__module__.split('.')[0]}"  # not planarena's code
    cause = f"{source}; a rerun will not help until it is fixed"
    prefix = f"ProtocolError: planner {planner} ({cause}) sent a request {says}"
    assert record.detail.startswith(prefix), record.detail
    if "without context" in says:  # what it must carry
        assert "pass context=RequestContext(...)" in record.detail
    else:  # what it could have asked for
        assert "act, plan, revise_plan" in record.detail
    (event,) = [e for e in trace["events"] if e["event"] == "harness_error"]
    assert event["error"].startswith(record.detail)  # the record keeps its first 300 chars
    parse_event(event)  # a valid trace line


def test_the_simulator_raises_rather_than_answer_an_unmodelled_kind() -> None:
    env = env_from_config("report")
    (task,) = env.generate(1, seed=0, complexity="medium")
    sim = SimLLM(SKILLS["strong"], env.oracle(task), seed_keys=(0,))
    messages = [{"role": "user", "content": f"Task: {task.goal}"}]
    for kind in (None, "reflect", "verify", "Plan", "", 3):
        request = Request(Request.digest_of(messages), kind=kind)  # type: ignore[arg-type]
        with pytest.raises(ProtocolError) as caught:
            asyncio.run(
                sim.generate(
                    messages, role="planner", model=sim_models()["default"], request=request
                )
            )
        assert caught.value.kind == kind


def test_a_real_model_reads_the_prompt_not_the_kind(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The OpenAI-compatible backend sends the prompt and ignores the kind: a request with no
    kind or a reserved one is answered, and the same messages under another kind are the same
    request (a replay from the response cache)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    backend = OpenAIBackend("fake", base_url=server.url, cache_dir=str(tmp_path / "cache"))
    messages = [{"role": "user", "content": "what went wrong?"}]

    async def ask(kind: str | None) -> str:
        other = EpisodeLLM(backend, {"default": ModelProfile(name="fake")})
        with clock.use_clock(clock.SimClock()):
            return await other.complete(messages, role="planner", kind=kind)

    first = asyncio.run(ask("reflect"))
    assert asyncio.run(ask(None)) == asyncio.run(ask("act")) == first
    assert server.requests == 1  # the others were replays of the same request


# --- (c) prompt wording is not modelled ----------------------------------------------------


class RewordedReAct(ReActPlanner):
    """ReAct with a system prompt of its own words: another persona and other instructions,
    the turn format described differently (none of the shipped prompt's sentences), the same
    tool lines and, by construction, the same o200k token count as the shipped prompt."""

    name = "react_reworded"

    def system_prompt(self, tools: Sequence[ToolSpec]) -> str:
        lines = "".join(f"- {t.signature()}\n" for t in tools)
        return (
            "As a careful analyst, get the assignment done with tool calls, a single one each "
            "reply.\nYour toolkit:\n" + lines + "Once it is finished, use finish with the "
            "answer. Should it be impossible, use finish with status failure and explain "
            "briefly why.\nWrite three lines, nothing else:\nThought: <why>\n"
            "Action: <a tool name, or finish>\nAction Input: <a JSON object of arguments; "
            'finish takes {"answer": "<the final answer>", "status": "success" or "failure"}>'
        )


def _pair(
    task: Task, env_name: str, skill: SkillProfile
) -> tuple[tuple[EpisodeRecord, dict[str, Any]], tuple[EpisodeRecord, dict[str, Any]]]:
    env = env_from_config(env_name)
    run = {"skill": skill, "rules": DEFAULT_FAULTS.rules, "faults_label": "default"}
    return (
        simulate("react", make_planner("react"), env, task, **run),
        simulate("react_reworded", RewordedReAct(), env, task, **run),
    )


def _pool(env_name: str, n: int) -> list[Task]:
    env = env_from_config(env_name)
    return [
        t
        for c in ("simple", "medium", "complex")
        for t in env.generate(n, seed=0, complexity=c, unreachable_rate=0.05)
    ]


def test_a_reworded_react_of_the_same_length_plays_exactly_the_same_episodes() -> None:
    """What is guaranteed exactly. The simulator answers an ``act`` request from the world
    (the oracle, the observations in the transcript), the episode's beliefs (keyed by the seed
    and the decision point) and the prompt's length (a longer prompt errs more and takes
    longer); the wording enters only through the request's digest, which picks the *sample*.
    With a model whose samples carry no randomness (every error a wrong belief:
    ``systematic_share`` 1; no malformed output) and a rewording of the same token count, the
    reworded ReAct must play every episode exactly as ReAct does: the same tool calls, faults,
    tokens, time and outcome, on every env under the default faults. Its prompt shares none of
    the sentences the simulator used to look for, so a simulator reading the wording would
    not even answer it."""
    skill = SKILLS["weak"].model_copy(
        update={"name": "weak-beliefs", "systematic_share": 1.0, "p_malformed": 0.0}
    )
    outcomes = set()
    for env_name in ENVS:
        for task in _pool(env_name, 3):
            tools = env_from_config(env_name).make_tools(task, rules=[], seed_keys=(0,)).toolbox
            shipped, own = (
                react_system(tools.catalogue()),
                RewordedReAct().system_prompt(tools.catalogue()),
            )
            assert "Respond in exactly this format" not in own
            assert count_text(own) == count_text(shipped)  # the premise: the same length
            (a, a_trace), (b, b_trace) = _pair(task, env_name, skill)
            assert b.model_dump(exclude={"planner", "wall_s"}) == a.model_dump(
                exclude={"planner", "wall_s"}
            ), (env_name, task.task_id)
            assert b_trace["events"] == a_trace["events"], (env_name, task.task_id)
            outcomes.add((a.success, a.failure_mode))
    # not a trivially uniform pool: completed episodes and several ways of failing
    assert {done for done, _ in outcomes} == {True, False} and len(outcomes) > 3


def test_a_reworded_react_completes_as_often_as_react_at_the_default_skill() -> None:
    """What holds with sampling. At the strong model about half of the errors are sampling
    slips, drawn from the request's own stream: a reworded prompt draws other samples, so some
    episodes end otherwise, but neither planner is favoured. Paired over 84 tasks (4 per
    complexity on every env), the tasks only one of them completes split evenly: McNemar's
    difference is within 3 standard deviations (|b - c| <= 3 sqrt(b + c)), and completion
    differs by at most a tenth of the tasks."""
    react_only = reworded_only = both = 0
    for env_name in ENVS:
        for task in _pool(env_name, 4):
            (a, _), (b, _) = _pair(task, env_name, SKILLS["strong"])
            react_only += a.success and not b.success
            reworded_only += b.success and not a.success
            both += a.success and b.success
    n = 12 * len(ENVS)
    assert both > n // 2
    assert abs(react_only - reworded_only) <= 3 * math.sqrt(react_only + reworded_only)
    assert abs(react_only - reworded_only) <= n // 10


# --- (d) the kind is not part of a request's identity ---------------------------------------


class _Echo:
    """A backend that keeps every request it is sent and answers a constant."""

    name = "echo"

    def __init__(self) -> None:
        self.requests: list[Request] = []

    async def generate(
        self, messages: Sequence[Message], *, role: str, model: ModelProfile, request: Request
    ) -> Completion:
        self.requests.append(request)
        return Completion("ok")


def test_the_kind_is_carried_to_the_backend_but_is_not_part_of_the_digest() -> None:
    backend = _Echo()
    llm = EpisodeLLM(backend, {"default": ModelProfile(name="m")})
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]

    async def go() -> None:
        with clock.use_clock(clock.SimClock()):
            for kind in ("plan", "revise_plan", None, RequestKind.RATE_PLAN):
                await llm.complete(messages, role="planner", kind=kind)

    asyncio.run(go())
    digests = {r.digest for r in backend.requests}
    assert digests == {Request.digest_of(messages)}
    assert [r.kind for r in backend.requests] == ["plan", "revise_plan", None, "rate_plan"]
    # the k-th identical request, whatever kind it declares: the occurrence counts on
    assert [r.occurrence for r in backend.requests] == [0, 1, 2, 3]
    assert Request("d", 0, kind="plan") == Request("d", 0, kind="rate_plan")


def test_the_same_messages_get_the_same_draws_whatever_kind_they_are_sent_as() -> None:
    """A replan is answered as a plan: the same messages sent as ``plan`` and as
    ``revise_plan`` get the same text, since the draws are keyed by the digest alone."""
    env = env_from_config("report")
    (task,) = env.generate(1, seed=0, complexity="complex")
    catalogue = env.make_tools(task, rules=[], seed_keys=(0,)).toolbox.catalogue()
    from planarena.planners.prompts import plan_system

    messages = [
        {"role": "system", "content": plan_system(catalogue)},
        {"role": "user", "content": f"Task: {task.goal}"},
    ]

    def ask(kind: str, occurrence: int) -> str:
        sim = SimLLM(SKILLS["weak"], env.oracle(task), seed_keys=(0, task.env, task.task_id, 0))
        context = RequestContext(observations=(), failed_step="step_1")
        request = Request(Request.digest_of(messages), occurrence, kind=kind, context=context)
        out = asyncio.run(
            sim.generate(messages, role="planner", model=sim_models()["default"], request=request)
        )
        return out.text

    for occurrence in range(4):
        assert ask("plan", occurrence) == ask("revise_plan", occurrence)


def test_a_plugins_protocol_error_sums_up_whole_naming_the_plugin_and_no_blind_rerun() -> None:
    """The job's closing line quotes a long ProtocolError at a word boundary (no bracket cut
    open), and tells the user to fix the code the error names before a rerun, since the same
    planner sends the same request again; an endpoint's failure keeps the plain rerun advice."""
    import pandas as pd
    from planarena.experiments.run.runner import harness_error_summary

    env = env_from_config("report")
    (task,) = env.generate(1, seed=0, complexity="medium")
    planner = _OneRequest("my_typo_planner", "reflekt")
    record, _ = simulate("my_typo_planner", planner, env, task, skill=SKILLS["strong"])
    rows = pd.DataFrame([{"failure_mode": "harness_error", "detail": record.detail}] * 2)
    line = harness_error_summary(rows)
    assert line.startswith("2 harness_error episode(s) (errors of the harness or of a planner")
    assert "2x ProtocolError: planner my_typo_planner (plug-in test_protocol; a rerun" in line
    quoted = line.split("2x ", 1)[1]
    assert quoted.count("(") - quoted.count(")") <= 1, line  # at most the cut sentence's own
    assert not re.search(r"\($|\(;", line) and " ...;" in line
    assert line.endswith(
        "fix the code the error names, then rerun the same command to run them again"
    )
    endpoint = pd.DataFrame(
        [{"failure_mode": "infrastructure_error", "detail": "APITimeoutError: x"}]
    )
    assert harness_error_summary(endpoint).endswith("; rerun the same command to run them again")
