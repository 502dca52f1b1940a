"""A prompt asked again (``p_same_answer``): a model decoding greedily gives the very answer it
gave the first time, where a sampler draws afresh. The shipped 0.5B model, served at
temperature 0, repeated itself on about two of three prompts asked again (the rest differed:
the server is not bit-for-bit deterministic). A planner that asks again unchanged after a
broken or refused answer is rescued by a sampler and not by a greedy model.

The rate belongs to the model, whatever planner asks; at 0 nothing is drawn or kept, so every
shipped profile's runs are as before.
"""

from __future__ import annotations

import asyncio

import pytest
from planarena.envs.report import ReportEnv
from planarena.planners.llm.base import Message, Request
from planarena.planners.llm.profiles import SKILLS, SkillProfile
from planarena.planners.llm.protocol import RequestContext, RequestKind
from planarena.planners.llm.sim import SimLLM

from tests.conftest import MODELS, assert_unchanged_by, episode, tasks

ASK_AGAIN = ["tot", "mcts"]  # send the very same prompt again (candidates, rollouts)


def _answers(skill: SkillProfile, times: int, seed: int) -> list[str]:
    """One episode's simulator asked the same plan prompt ``times`` times."""
    env = ReportEnv()
    task = tasks("medium", n=1, seed=seed)[0]
    sim = SimLLM(skill, env.oracle(task), seed_keys=(seed, task.task_id))
    messages: list[Message] = [{"role": "user", "content": f"Plan the task {task.task_id}."}]
    out = []
    for occurrence in range(times):
        request = Request(
            kind=RequestKind.PLAN,
            context=RequestContext(observations=()),
            digest=Request.digest_of(messages),
            occurrence=occurrence,
        )
        completion = asyncio.run(
            sim.generate(messages, role="planner", model=MODELS["default"], request=request)
        )
        out.append(completion.text)
    return out


def test_a_greedy_model_repeats_its_first_answer() -> None:
    """At 1 every asking gets the first answer; at 0 an error-prone model's samples differ."""
    sampler = SKILLS["weak"].scaled(5.0)
    greedy = sampler.model_copy(update={"p_same_answer": 1.0})
    for seed in range(3):
        assert len(set(_answers(greedy, 6, seed))) == 1
    assert any(len(set(_answers(sampler, 6, seed))) > 1 for seed in range(3))


@pytest.mark.parametrize("planner", ASK_AGAIN)
def test_a_greedy_model_changes_what_asking_again_buys(planner: str) -> None:
    """Planners that ask the same prompt again run differently when the answer repeats."""
    sampler = SKILLS["weak"].scaled(3.0)
    greedy = sampler.model_copy(update={"p_same_answer": 1.0})
    changed = 0
    for task in tasks("medium", n=4):
        a, a_trace = episode(planner, task, skill=sampler)
        b, b_trace = episode(planner, task, skill=greedy)
        changed += a_trace != b_trace
    assert changed >= 1, planner


@pytest.mark.parametrize("planner", ["react", "plan_execute"])
def test_a_planner_that_never_asks_again_is_untouched(planner: str) -> None:
    """ReAct's transcript grows every turn and a one-plan writer asks once: no prompt is
    asked again, so the rate changes nothing."""
    assert_unchanged_by(planner, SKILLS["weak"].scaled(3.0), {"p_same_answer": 1.0}, n=4)
