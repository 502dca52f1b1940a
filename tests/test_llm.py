"""The LLM layer: token counting, metering, and a simulator that only ever returns text."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from planarena.envs import clock
from planarena.envs.report.oracle import ReportOracle
from planarena.planners.formats import OutputParseError, parse_action_turn, parse_score
from planarena.planners.llm.base import EpisodeLLM
from planarena.planners.llm.profiles import SKILLS, ModelProfile, SkillProfile
from planarena.planners.llm.protocol import RequestContext, RequestKind
from planarena.planners.llm.sim import SimLLM
from planarena.planners.llm.tokens import count_messages, count_text, encoding
from planarena.planners.plan import PlanError, parse_plan
from planarena.planners.prompts import plan_system, react_system

from tests.conftest import tasks

TOOLS = [
    "search_web",
    "search_web_backup",
    "parse_pdf",
    "fetch_filing",
    "extract_data",
    "generate_summary",
]


def test_o200k_is_built_offline_and_counts_like_tiktoken() -> None:
    enc = encoding()
    assert enc.name == "o200k_base"
    assert enc.decode(enc.encode("planarena plans 計畫")) == "planarena plans 計畫"
    assert count_text("hello world") == 2
    msgs = [{"role": "user", "content": "hello world"}]
    assert count_messages(msgs) == 3 + 3 + 2


def test_the_ranks_ready_form_is_rebuilt_when_missing_or_torn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cached ready form gives the ranks the file does; a torn one is rebuilt, not
    read as a shorter vocabulary."""
    from planarena.planners.llm import tokens

    monkeypatch.setenv("PLANARENA_CACHE", str(tmp_path))
    fresh = tokens._ranks()  # from the file: writes the ready form
    (ready,) = tmp_path.glob("*.ranks.marshal")
    assert tokens._ranks() == fresh and len(fresh) == tokens.N_RANKS
    ready.write_bytes(ready.read_bytes()[: ready.stat().st_size // 2])
    assert tokens._ranks() == fresh  # torn: rebuilt from the file
    assert ready.stat().st_size > 1_000_000


def _sim(skill: SkillProfile, n: int = 0) -> tuple[SimLLM, EpisodeLLM]:
    task = tasks("complex", n=n + 1)[n]
    sim = SimLLM(skill, ReportOracle(task), seed_keys=(0, task.task_id))
    return sim, EpisodeLLM(sim, {"default": ModelProfile(name="m")})


def _complete(
    llm: EpisodeLLM, messages: list[dict[str, str]], role: str, kind: RequestKind
) -> tuple[str, float]:
    async def main() -> tuple[str, float]:
        with clock.use_clock(clock.SimClock()) as c:
            context = RequestContext(observations=())  # nothing observed yet
            text = await llm.complete(messages, role=role, kind=kind, context=context)
            return text, c.now

    return asyncio.run(main())


def test_sim_returns_text_that_the_real_parsers_accept() -> None:
    from planarena.envs.report.env import SPECS

    sim, llm = _sim(SKILLS["perfect"])
    plan_text, _ = _complete(
        llm,
        [{"role": "system", "content": plan_system(SPECS)}, {"role": "user", "content": "Task: x"}],
        "planner",
        RequestKind.PLAN,
    )
    plan = parse_plan(plan_text, TOOLS)
    assert plan.steps[-1].tool == "generate_summary"
    turn_text, elapsed = _complete(
        llm,
        [
            {"role": "system", "content": react_system(SPECS)},
            {"role": "user", "content": "Task: x"},
        ],
        "executor",
        RequestKind.ACT,
    )
    turn = parse_action_turn(turn_text)
    assert turn.action == "search_web" and "query" in turn.action_input
    assert elapsed > 0
    assert llm.usage.calls == 2 and llm.usage.by_role["planner"] > 0


def test_malformed_and_sloppy_outputs_go_through_the_same_parsers() -> None:
    from planarena.envs.report.env import SPECS

    broken = SKILLS["perfect"].model_copy(update={"p_malformed": 1.0})
    _, llm = _sim(broken)
    text, _ = _complete(
        llm,
        [{"role": "system", "content": plan_system(SPECS)}, {"role": "user", "content": "Task: x"}],
        "planner",
        RequestKind.PLAN,
    )
    with pytest.raises(PlanError):
        parse_plan(text, TOOLS)
    sloppy = SKILLS["perfect"].model_copy(update={"p_sloppy_json": 1.0})
    _, llm = _sim(sloppy)
    text, _ = _complete(
        llm,
        [{"role": "system", "content": plan_system(SPECS)}, {"role": "user", "content": "Task: x"}],
        "planner",
        RequestKind.PLAN,
    )
    assert text.startswith("```json")
    assert parse_plan(text, TOOLS).repaired


def test_react_parser_rejects_non_format() -> None:
    for bad in [
        "",
        "Action: search_web",
        "Action: x\nAction Input: [1]",
        'Action: x\nAction Input: {"a": ',
    ]:
        with pytest.raises(OutputParseError):
            parse_action_turn(bad)
    assert parse_score("Score: 0.7") == 0.7
    assert parse_score("Score: 3") == 0.3  # a bare number above 1: a 10-point scale
    assert parse_score("Score: 300") == 1.0  # off every scale: clipped


def test_unknown_role_is_refused() -> None:
    _, llm = _sim(SKILLS["perfect"])
    with pytest.raises(ValueError):
        _complete(llm, [{"role": "user", "content": "x"}], "oracle", RequestKind.ACT)


def test_an_episodes_latency_and_cost_add_up_from_its_trace() -> None:
    """Identities, not constants: a static plan without faults runs its calls one after
    another, so its latency is the sum of its LLM calls' and tool calls' durations, and its
    cost is the sum over LLM calls of tokens times the price of the model that served each."""
    from tests.conftest import MODELS, episode

    prices = {m.name: m for m in MODELS.values()}
    for task in tasks("medium", n=3):
        record, trace = episode("plan_execute", task, skill="strong")
        llm = [e for e in trace["events"] if e["event"] == "llm"]
        spans = [e["t1"] - e["t0"] for e in llm]
        spans += [c["t1"] - c["t0"] for c in trace["tool_calls"]]
        assert record.latency_s == pytest.approx(sum(spans), abs=1e-5)
        cost = sum(
            (
                e["prompt_tokens"] * prices[e["model"]].usd_per_mtok_input
                + e["completion_tokens"] * prices[e["model"]].usd_per_mtok_output
            )
            / 1e6
            for e in llm
        )
        assert record.cost_usd == pytest.approx(cost, abs=1e-7)


def test_counting_a_text_by_its_lines_equals_encoding_it_whole() -> None:
    """count_text sums cached line pieces; o200k must give the same count for the whole text
    (line breaks before "/" or white space, "\\r\\n", punctuation runs, other scripts)."""
    import json
    import random

    rng = random.Random(0)
    alphabet = [
        "a",
        "Bc",
        " ",
        "  ",
        "\n",
        "\n\n",
        "\t",
        "/",
        "//",
        "{",
        "}",
        ":",
        "1",
        "23",
        "é",
        "漢字",
        "\r\n",
        ".",
        "-",
        "_",
        '"',
        "'s",
        "ERROR",
        " /x",
        ")\n/",
        ", {",
        ": [",
        " {",
        "  [",
        "\n {",
        "\t[",
    ]
    texts = [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(80, 400))) for _ in range(3000)
    ]
    texts.append("Task: find revenue\n" * 40 + 'Action Input: {"q": "a/b"}\n/path\n  indented\n')
    steps = [{"id": f"step_{i}", "args": {"q": [i, "x y"]}, "depends_on": []} for i in range(9)]
    texts.append("Plan so far: " + json.dumps(steps) + "\nPropose 3 candidate next steps")
    enc = encoding()
    for text in texts:
        assert count_text(text) == len(enc.encode_ordinary(text)), repr(text[:120])


@pytest.mark.parametrize("err", [0.0, 0.3, 0.9])
def test_a_belief_is_the_points_own_draws_whatever_was_asked_before(err: float) -> None:
    """A belief is the point's own keyed draws: asking the same points at other prompt
    lengths first (other memo entries) must not change it, and it equals a belief built from
    the flat keyed uniforms (a memo that leaks across lengths or points changes some value)."""
    from planarena.envs.rng import KeyedDraws
    from planarena.planners.llm.sim import LOOK, PREFERRED, SimLLM

    skill = SKILLS["weak"]
    available = ["right", "trap", "premise", "invented", "early"]
    mistakes = {"premise": "w_premise", "invented": "w_hallucinate"}
    warm, _ = _sim(skill)
    for other in (0.1, 0.6, 0.95):  # the same points asked at other prompt lengths first
        for point in ("p1", "p2"):
            _ = warm.belief(skill, point, available, other, mistakes).values
    task = tasks("complex", n=1)[0]
    fresh = SimLLM(skill, ReportOracle(task), seed_keys=(0, task.task_id))
    for point in ("p1", "p2"):
        u = KeyedDraws(0, task.task_id).under("belief", point).uniform01
        top = "right"
        if u("trap") < skill.p_trap:
            top = "trap"
        elif u("confused") < err * skill.systematic_share:
            top = SimLLM._weighted(skill, mistakes, available, u("mistake")) or "right"
        want = {k: LOOK[k][0] + (LOOK[k][1] - LOOK[k][0]) * u("look", k) for k in available}
        want[top] = PREFERRED[0] + (PREFERRED[1] - PREFERRED[0]) * u("look-top")
        for sim in (warm, fresh):
            belief = sim.belief(skill, point, available, err, mistakes)
            assert (belief.top, belief.values) == (top, want)


def test_a_prompt_read_on_from_the_last_one_has_the_digest_and_tokens_of_a_fresh_read() -> None:
    """PromptReader continues from the previous request only when it begins with the very
    same message texts; whatever the sequence of requests (a growing transcript, a shorter
    one, a changed message, another conversation), each read equals a fresh one."""
    import random

    from planarena.planners.llm.base import PromptReader, Request

    rng = random.Random(3)
    pool = ["Task: find ü", 'Observation: {"a": 1}', "x" * 700 + "\n{" + "y " * 90, ""]
    reader = PromptReader()
    messages: list[dict[str, str]] = []
    continued = 0
    for _ in range(400):
        move = rng.random()
        if move < 0.6 or not messages:  # the transcript grows
            messages = [
                *messages,
                {
                    "role": rng.choice(["user", "assistant"]),
                    "content": rng.choice(pool) + str(rng.random()),
                },
            ]
            continued += 1
        elif move < 0.75:  # a shorter request that shares a prefix
            messages = messages[: rng.randrange(len(messages))]
        elif move < 0.9:  # one message replaced: by an equal text in a new object, or another
            i = rng.randrange(len(messages))
            text = messages[i]["content"]
            text = "".join(list(text)) if rng.random() < 0.5 else text + " (edited)"
            messages = [
                *messages[:i],
                {"role": messages[i]["role"], "content": text},
                *messages[i + 1 :],
            ]
        else:  # another conversation
            messages = [{"role": "system", "content": rng.choice(pool)}]
        assert reader.read(messages) == (Request.digest_of(messages), count_messages(messages))
    assert continued > 100


def test_a_signature_is_the_digest_of_what_was_observed_whatever_was_read_before() -> None:
    """SimLLM.signature keeps each observation's part of the material: it must equal the
    digest of the (tool, args JSON, error) tuples for none, one and several observations,
    read again, in another order, and for equal observations that are other objects."""
    from planarena.envs.oracle import Obs
    from planarena.planners.formats import dumps
    from planarena.planners.llm.sim_belief import digest

    task = tasks("medium", 1)[0]
    sim = SimLLM(SKILLS["strong"], ReportOracle(task), seed_keys=(0, "report", task.task_id, 0))
    a = Obs("obs_0", "search_web", {"query": "ü 2024"}, {"count": 1})
    b = Obs("obs_1", "parse_pdf", {"url": "u"}, "ERROR http_503: down", "http_503")
    c = Obs("obs_0", "search_web", {"query": "ü 2024"}, {"count": 1})  # equal to a
    for obs in ([], [a], [a, b], [b, a], [a, b, c], [c], [a, b]):
        expected = digest(*((o.tool, dumps(o.args), o.error) for o in obs))
        assert sim.signature(obs) == expected
