"""The offline simulated LLM: a seeded model of an LLM's per-decision skill over a world.

It reads the prompt it is given (the transcript, the execution log, the partial plan, the
requested output format), reconstructs what has been observed, asks the env's oracle which
steps remain done right, and then *decides like a fallible model*: each decision is right with
the skill's probability (lower as the prompt grows), may fall for a locally attractive trap,
may invent a tool, act on an unverified premise or stop early, and the text may come out
malformed. As a judge it sees how good a candidate looks, blurred by its noise; as a rollout it
imagines the outcome, optimistically. It returns text only; planners parse it with the same
parsers they use for a real model.

Nothing here names or detects a planner: a request is answered by the kind it declares (the
request protocol, :mod:`planarena.planners.llm.protocol`), never by who sends it or how its
prompt is worded, so the same kind gets the same treatment whoever sends it, and every
difference between planners comes from how many decisions they ask for, with what
information, and what they do with the answers. A request with no kind, or of a kind not
modelled here, raises :class:`~planarena.planners.llm.protocol.ProtocolError`.

Its parts: ``sim_reading`` reads a prompt, ``sim_belief`` is the shape of a belief,
``sim_mind`` is the episode's state (what was seen, what is believed) and ``sim_decider``
answers one request; this module dispatches a request by its declared kind.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

from planarena.planners.llm.base import Completion, Message, Request
from planarena.planners.llm.profiles import ModelProfile
from planarena.planners.llm.protocol import ProtocolError, RequestKind
from planarena.planners.llm.sim_belief import LOOK, PREFERRED, Belief, digest, pick
from planarena.planners.llm.sim_decider import Decider
from planarena.planners.llm.sim_mind import SimMind
from planarena.planners.llm.sim_reading import render_step
from planarena.planners.llm.tokens import count_messages

# The simulator's parts, importable from here as before the split (tests and the README name
# ``LOOK`` and ``PREFERRED`` here; envs' tests render gold steps with ``render_step``), and
# ``ANSWERS``, the request kinds it models.
__all__ = [
    "ANSWERS",
    "LOOK",
    "PREFERRED",
    "Belief",
    "SimLLM",
    "digest",
    "pick",
    "render_step",
]

Answer = Callable[[Decider, Sequence[Message], str], str]  # (decider, messages, last) -> text

# How the simulated model answers each kind it models (the last message is where a request
# states its specifics: the partial plan, the candidates, the plan to rate). A revision of the
# remaining steps is written like a plan: the decider reads the execution log it is given.
# The reserved kinds (``reflect``, ``verify``) are not modelled: they raise ProtocolError.
ANSWERS: Mapping[str, Answer] = MappingProxyType(
    {
        RequestKind.ACT: lambda d, messages, last: d.act(messages),
        RequestKind.PLAN: lambda d, messages, last: d.plan(last),
        RequestKind.REVISE_PLAN: lambda d, messages, last: d.plan(last),
        RequestKind.PROPOSE_ACTIONS: lambda d, messages, last: d.propose_actions(messages, last),
        RequestKind.PROPOSE_STEPS: lambda d, messages, last: d.propose_steps(last),
        RequestKind.RATE_CANDIDATES: lambda d, messages, last: d.rate_candidates(messages),
        RequestKind.RATE_PLAN: lambda d, messages, last: d.rate_plan(last),
        RequestKind.ROLLOUT: lambda d, messages, last: d.rollout(last),
    }
)


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
        """The answer to one request, chosen by the kind it declares (``request.kind``) and
        nothing else of the prompt; no kind, or one not in :data:`ANSWERS`, is a
        :class:`~planarena.planners.llm.protocol.ProtocolError`."""
        del role  # the model profile, not the caller's role, decides how skilled the model is
        kind = request.kind
        answer = ANSWERS.get(kind) if isinstance(kind, str) else None
        if answer is None:
            raise ProtocolError(kind, backend="the simulated LLM", answers=ANSWERS)
        rng = self.draws.rng("llm", request.digest, request.occurrence)
        skill = self.skill_at(model.error_scale)
        tokens = request.o200k_prompt
        if tokens is None:
            tokens = count_messages(messages)
        last = messages[-1]["content"] if messages else ""
        return Completion(text=answer(Decider(self, skill, rng, tokens), messages, last))
