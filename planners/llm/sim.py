"""The offline simulated LLM: a seeded model of an LLM's per-decision skill over a world.

It reads the prompt it is given (the transcript, the execution log, the partial plan, the
requested output format), reconstructs what has been observed, asks the env's oracle which
steps remain done right, and then *decides like a fallible model*: each decision is right with
the skill's probability (lower as the prompt grows), may fall for a locally attractive trap,
may invent a tool, act on an unverified premise or stop early, and the text may come out
malformed. As a judge it sees how good a candidate looks, blurred by its noise; as a rollout it
imagines the outcome, optimistically. It returns text only; planners parse it with the same
parsers they use for a real model.

Nothing here names or detects a planner: the same request format gets the same treatment
whoever sends it, and every difference between planners comes from how many decisions they
ask for, with what information, and what they do with the answers.

Its parts: ``sim_reading`` reads a prompt, ``sim_belief`` is the shape of a belief,
``sim_mind`` is the episode's state (what was seen, what is believed) and ``sim_decider``
answers one request; this module dispatches a request by the format it asks for.
"""

from __future__ import annotations

from collections.abc import Sequence

from planarena.planners.llm.base import Completion, Message, Request
from planarena.planners.llm.profiles import ModelProfile
from planarena.planners.llm.sim_belief import LOOK, PREFERRED, Belief, digest, pick
from planarena.planners.llm.sim_decider import Decider
from planarena.planners.llm.sim_mind import SimMind
from planarena.planners.llm.sim_reading import render_step
from planarena.planners.llm.tokens import count_messages

# The simulator's parts, importable from here as before the split (tests and the README name
# ``LOOK`` and ``PREFERRED`` here; envs' tests render gold steps with ``render_step``).
__all__ = ["LOOK", "PREFERRED", "Belief", "SimLLM", "digest", "pick", "render_step"]


class SimLLM(SimMind):
    """A simulated LLM bound to one task's oracle (one instance per episode).

    Two kinds of randomness, kept apart on purpose. A *belief* belongs to a decision point
    (what has been observed, which step is next) and is drawn from the episode's seed and
    that point only, so every request about the same point, from a proposer, a judge or a
    rollout, of any planner, sees the same belief. A *sample* belongs to one request (a hash
    of its messages and its occurrence in the episode), so the same prompt gets the same
    answer and asking again gives a fresh sample.
    """

    name = "sim"

    async def generate(
        self, messages: Sequence[Message], *, role: str, model: ModelProfile, request: Request
    ) -> Completion:
        """The answer to one request, chosen by the output format the request asks for."""
        del role  # the model profile, not the caller's role, decides how skilled the model is
        rng = self.draws.rng("llm", request.digest, request.occurrence)
        skill = self.skill_at(model.error_scale)
        # The requested format is stated in the system message or the last message; a growing
        # transcript in between is only read when the request needs its observations.
        system = messages[0]["content"] if messages else ""
        last = messages[-1]["content"] if messages else ""
        tokens = request.o200k_prompt
        if tokens is None:
            tokens = count_messages(messages)
        d = Decider(self, skill, rng, tokens)
        if "candidate next actions" in last:
            text = d.propose_actions(messages, last)
        elif "candidate next steps for the plan" in last:
            text = d.propose_steps(last)
        elif "Rate each candidate" in last:
            text = d.rate_candidates(messages)
        elif "Rate this plan" in last:
            text = d.rate_plan(last)
        elif "Imagine carrying out" in last:
            text = d.rollout(last)
        elif "Action Input:" in system and "Respond in exactly this format" in system:
            text = d.act(messages)
        elif "Respond with a Plan JSON" in system:
            text = d.plan(last)
        else:
            text = "I am not sure what is being asked."
        return Completion(text=text)
