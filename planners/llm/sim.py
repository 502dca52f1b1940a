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

from planarena.envs.oracle import Oracle
from planarena.planners.llm.base import Completion, Message, Request
from planarena.planners.llm.profiles import ModelProfile, SkillProfile
from planarena.planners.llm.protocol import NEEDS, ProtocolError, RequestContext, RequestKind
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

Answer = Callable[[Decider, RequestContext], str]  # (decider, the request's context) -> text

# How the simulated model answers each kind it models, from the request's context (what the
# prompt is about, as data; the prompt's wording is never read). A revision of the remaining
# steps is written like a plan, from the execution log the context carries. The reserved kind
# (``verify``) is not modelled: it raises ProtocolError.
ANSWERS: Mapping[str, Answer] = MappingProxyType(
    {
        RequestKind.ACT: Decider.act,
        RequestKind.PLAN: Decider.plan,
        RequestKind.REVISE_PLAN: Decider.revise_plan,
        RequestKind.PROPOSE_ACTIONS: Decider.propose_actions,
        RequestKind.PROPOSE_STEPS: Decider.propose_steps,
        RequestKind.RATE_CANDIDATES: Decider.rate_candidates,
        RequestKind.RATE_PLAN: Decider.rate_plan,
        RequestKind.ROLLOUT: Decider.rollout,
        RequestKind.REFLECT: Decider.reflect,
    }
)


def missing_context(kind: str, context: RequestContext | None) -> list[str]:
    """The context fields a request of ``kind`` lacks (:data:`~.protocol.NEEDS`)."""
    needs = list(NEEDS.get(kind, ()))
    if (
        kind == RequestKind.RATE_CANDIDATES
        and (context is None or context.plan is None)
        and "observations" not in needs
    ):
        needs.append("observations")  # candidate actions are rated at a transcript's point
    if context is None:
        return needs
    return [n for n in needs if getattr(context, n) is None]


class SimLLM(SimMind):
    """A simulated LLM bound to one task's oracle (one instance per episode).

    Two kinds of randomness, kept apart on purpose. A *belief* belongs to a decision point
    (what has been observed, which step is next) and is drawn from the episode's seed and
    that point only, so every request about the same point, from a proposer, a judge or a
    rollout, of any planner, sees the same belief. A *sample* belongs to one request (a hash
    of its messages and its occurrence in the episode), so the same prompt gets the same
    answer and asking again gives a fresh sample, or, with ``p_same_answer``, the very
    answer the first asking got (a model decoding greedily, as a real model is usually
    served for a benchmark).
    """

    name = "sim"

    def __init__(
        self,
        skill: SkillProfile,
        oracle: Oracle,
        *,
        seed_keys: tuple[object, ...],
    ) -> None:
        super().__init__(skill, oracle, seed_keys=seed_keys)
        # the first answer to each prompt (digest, error scale), kept where p_same_answer > 0
        self._answered: dict[tuple[str, float], str] = {}

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
        context = request.context
        if missing := missing_context(kind, context):
            raise ProtocolError(kind, backend="the simulated LLM", answers=ANSWERS, missing=missing)
        skill = self.skill_at(model.error_scale)
        said = self._said_before(request, model.error_scale, skill.p_same_answer)
        if said is not None:
            return Completion(text=said)
        rng = self.draws.rng("llm", request.digest, request.occurrence)
        tokens = request.o200k_prompt
        if tokens is None:
            tokens = count_messages(messages)
        decider = Decider(
            self,
            skill,
            rng,
            tokens,
            repeat=request.occurrence > 0,
            reflections=context.reflections if context is not None else (),
        )
        text = answer(decider, context or RequestContext())
        if skill.p_same_answer > 0:
            self._answered.setdefault((request.digest, model.error_scale), text)
        return Completion(text=text)

    def _said_before(self, request: Request, scale: float, p_same: float) -> str | None:
        """The first answer to this very prompt in the episode, if the model gives it again
        (chance ``p_same``, one draw per asking; none at 0 or on a first asking)."""
        if p_same <= 0 or request.occurrence == 0:
            return None
        first = self._answered.get((request.digest, scale))
        if first is None:
            return None
        u = self.draws.uniform01("same-answer", request.digest, request.occurrence)
        return first if u < p_same else None
