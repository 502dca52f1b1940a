"""The request protocol: every LLM request declares the kind of answer it asks for.

A planner says what it wants (``llm.complete(messages, role=..., kind=RequestKind.PLAN)``);
the prompt says it to a real model in the planner's own words. The simulated LLM answers the
declared kind and the world, never the wording nor the sender, so a planner that phrases its
prompts its own way is simulated exactly like one that uses the shipped prompts. A request
without a kind, or of a kind a backend does not model, raises :class:`ProtocolError` instead of
getting a made-up answer. The kind is not part of a request's identity: the same messages get
the same random draws whatever kind they are sent as (see :class:`~.base.Request`).

The kinds live here and nowhere else; ``docs/simulator.md`` ("The request protocol") says
what the simulated LLM makes of each.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = ["NEEDS", "RESERVED", "Observed", "ProtocolError", "RequestContext", "RequestKind"]


class RequestKind(StrEnum):
    """What one LLM request asks for. A member is a ``str`` (``RequestKind.ACT == "act"``),
    so a planner may pass either; each member's ``__doc__`` says what it asks for and the
    answer's format (the parsers of :mod:`planarena.planners.formats` read it)."""

    def __new__(cls, value: str, doc: str) -> RequestKind:
        member = str.__new__(cls, value)
        member._value_ = value
        member.__doc__ = doc
        return member

    ACT = (
        "act",
        "One turn of a Thought / Action transcript (ReAct): the next tool call or finish, "
        "given the observations so far. Answer: 'Thought: ...', 'Action: <tool>', "
        "'Action Input: <JSON object>'.",
    )
    PLAN = (
        "plan",
        "A whole plan before anything ran: a first plan, a corrected one after a rejected "
        "plan, or an improved version of a candidate plan shown in the prompt. Answer: a Plan "
        "JSON object, or numbered steps in prose when the context's plan_format is 'text'.",
    )
    REVISE_PLAN = (
        "revise_plan",
        "A replan after a step failed: the steps that still need to run, given the execution "
        "log and the failed step. Answer: a Plan JSON object (or a text plan, by the "
        "context's plan_format) with only those steps (no steps: the goal is out of reach).",
    )
    PROPOSE_ACTIONS = (
        "propose_actions",
        "k different candidate next actions at a point of a transcript, best first. Answer: "
        "'Candidate <n>:' blocks, each a Thought / Action / Action Input turn.",
    )
    PROPOSE_STEPS = (
        "propose_steps",
        "k different candidate next steps of a partial plan. Answer: a JSON list of Plan JSON "
        'steps, or [{"done": true}] when the plan is complete.',
    )
    RATE_CANDIDATES = (
        "rate_candidates",
        "A judge's score for each listed candidate (actions or plan steps): how likely it "
        "leads to the goal. Answer: one line 'Score <n>: <0..1>' per candidate.",
    )
    RATE_PLAN = (
        "rate_plan",
        "A judge's score for one whole plan. Answer: 'Score: <0..1>'.",
    )
    ROLLOUT = (
        "rollout",
        "An imagined outcome: would carrying out this partial plan reach the goal? Answer: "
        "'Outcome: success' or 'Outcome: failure'.",
    )
    REFLECT = (
        "reflect",
        "A critique of a failed attempt, carried into the next decisions (Reflexion): what "
        "went wrong and what to do instead. Answer: 'Reflection: <one paragraph>'.",
    )
    VERIFY = (
        "verify",
        "Reserved: a check of a result or an answer against the goal before it is used or "
        "returned. Named so planners and backends agree on it; the simulated LLM does not "
        "model it yet and refuses it with ProtocolError.",
    )


RESERVED: frozenset[RequestKind] = frozenset({RequestKind.VERIFY})
"""Kinds the protocol names for what comes next; the simulated LLM refuses them for now."""


@dataclass(frozen=True, eq=False)
class Observed:
    """One tool call the model has seen the outcome of: in a transcript (``id`` is the
    planner's own, e.g. its position) or in an execution log (``id`` is the step's id).

    ``text`` is the observation as the prompt shows it (the result's JSON, or ``ERROR
    <kind>: ...``); ``ok`` is False for a call that failed or a result a check rejected;
    ``rejected_by_check`` marks the latter (the call returned, a post-condition said no).
    Compared by identity: a planner that resends the same object lets a backend read it once.
    """

    id: str
    tool: str
    args: Mapping[str, Any]
    text: str
    ok: bool = True
    rejected_by_check: bool = False


@dataclass(frozen=True)
class RequestContext:
    """What a request is about, stated as data beside the prompt (the prompt says the same
    in the planner's own words). The simulated LLM answers from it and never parses the
    prompt; a real backend ignores it. Which fields a kind needs is :data:`NEEDS`.

    - ``observations``: the tool calls seen so far, in the order the prompt shows them (a
      transcript's calls, failed attempts included; an execution log's steps);
    - ``plan``: the plan the request is about, as Plan JSON step objects: the partial plan
      so far (``propose_steps``, ``rate_candidates`` of steps, ``rollout``), the plan to rate
      (``rate_plan``), a candidate plan to improve (``plan``; None: write a fresh plan);
    - ``candidates``: what to rate (``rate_candidates``): Plan JSON steps when ``plan`` is
      given, else ``(tool, args)`` actions;
    - ``k``: how many candidates a ``propose_*`` request asks for;
    - ``failed_step``: the id of the step whose failure a ``revise_plan`` answers;
    - ``pending``: ids of the current plan's steps that have not run (``revise_plan``);
    - ``reflections``: critiques of earlier failures the prompt carries (a ``reflect``
      request's answers, verbatim);
    - ``plan_format``: the format a ``plan`` or ``revise_plan`` request asks the plan in,
      ``json`` (a Plan JSON object) or ``text`` (numbered steps in prose,
      :mod:`planarena.planners.plan_prose`); the simulated LLM writes the plan in it, and its
      malformed-output skill applies per format (``p_malformed`` / ``p_sloppy_json`` for JSON,
      ``p_malformed_text`` / ``p_sloppy_text`` for text).
    """

    observations: Sequence[Observed] | None = None
    plan: Sequence[Any] | None = None
    candidates: Sequence[Any] | None = None
    k: int | None = None
    failed_step: str | None = None
    pending: Sequence[str] = ()
    reflections: Sequence[str] = ()
    plan_format: str = "json"


NEEDS: Mapping[str, tuple[str, ...]] = {
    RequestKind.ACT: ("observations",),
    RequestKind.PLAN: (),
    RequestKind.REVISE_PLAN: ("observations", "failed_step"),
    RequestKind.PROPOSE_ACTIONS: ("observations", "k"),
    RequestKind.PROPOSE_STEPS: ("plan", "k"),
    RequestKind.RATE_CANDIDATES: ("candidates",),
    RequestKind.RATE_PLAN: ("plan",),
    RequestKind.ROLLOUT: ("plan",),
    RequestKind.REFLECT: ("observations",),
}
"""The context fields a request of each kind must carry for the simulated LLM to answer it
(``rate_candidates`` also needs ``observations`` when its candidates are actions)."""


class ProtocolError(Exception):
    """A backend cannot answer a request by its declared kind: none was declared, the kind is
    not a :class:`RequestKind`, or the backend does not model it.

    Raised instead of a made-up answer, so a planner the backend cannot serve fails loudly:
    the episode is a ``harness_error`` whose detail names the planner and the kind, not a
    parse failure charged to the agent. The message names the kind and what the backend
    answers; the episode loop adds the planner (a backend never knows who sends a request)."""

    def __init__(
        self,
        kind: object,
        *,
        backend: str,
        answers: Iterable[str],
        missing: Sequence[str] = (),
    ) -> None:
        self.kind = kind
        self.backend = backend
        self.answers = tuple(str(a) for a in answers)
        self.missing = tuple(missing)
        super().__init__(self._describe())

    def _describe(self) -> str:
        if self.missing:
            fields = ", ".join(f"context.{m}" for m in self.missing)
            return (
                f"a request of kind {str(self.kind)!r} without {fields}, which {self.backend} "
                "answers from (pass context=RequestContext(...) to llm.complete)"
            )
        kinds = ", ".join(self.answers)
        if self.kind is None:
            return (
                f"a request with no kind, which {self.backend} cannot answer "
                f"(declare one of the kinds: {kinds})"
            )
        if not isinstance(self.kind, str) or self.kind not in {k.value for k in RequestKind}:
            return (
                f"a request of kind {str(self.kind)!r}, which is not a kind of the request "
                f"protocol (kinds {self.backend} answers: {kinds})"
            )
        return (
            f"a request of kind {str(self.kind)!r}, which {self.backend} does not model "
            f"(kinds: {kinds})"
        )
