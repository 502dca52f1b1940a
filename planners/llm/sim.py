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
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from planarena.envs import caches
from planarena.envs.jsontext import encoder
from planarena.envs.oracle import (
    REPORT_UNREACHABLE,
    SUBMIT_ANSWER,
    GoldStep,
    Obs,
    Oracle,
    Ref,
    literal_args,
)
from planarena.envs.rng import KeyedDraws
from planarena.planners.formats import (
    FINISH,
    POSTCONDITION_NOTE,
    OutputParseError,
    dumps,
    error_kind,
    parse_action_turn,
    parse_candidates,
    parse_step_lines,
    render_candidates,
)
from planarena.planners.llm.base import Completion, Message, Request
from planarena.planners.llm.profiles import ModelProfile, SkillProfile
from planarena.planners.llm.tokens import count_messages

_DECODER = json.JSONDecoder()  # stateless: one for every raw_decode
_PLAN_JSON = encoder(ensure_ascii=False)  # json.dumps(..., ensure_ascii=False), built once
_STEP_ID = re.compile(r"\bstep_(\d+)\b")
_FAILED_STEP = re.compile(r"^Failed step: (\S+)", re.MULTILINE)

# The shape of a belief. At a decision point the model prefers one option (the one it thinks
# is right: usually the right one; a trap if it is fooled; a mistake if it is confused) and
# values it in PREFERRED; every other option it can see gets a value drawn in its LOOK range.
# These describe how options *look*, never who asks: proposing samples from the belief,
# judging reads the same belief (plus the judge's noise), a rollout imagines from it.
PREFERRED = (0.85, 0.98)
LOOK = {
    "right": (0.55, 0.75),  # when the model prefers another option, the right one still looks fair
    "trap": (0.55, 0.8),  # locally attractive: that is what makes it a trap
    "fallback": (0.5, 0.7),  # a reasonable second choice
    "persist": (0.3, 0.6),  # doing the failed thing again
    "early": (0.2, 0.45),  # answering with what is in hand
    "unchecked": (0.5, 0.7),  # a plan step without its checks
    "dependency": (0.2, 0.45),  # a plan step with a dependency forgotten
    "premise": (0.1, 0.35),  # a guessed argument
    "stop": (0.05, 0.3),  # giving up
    "invented": (0.02, 0.2),  # a tool that does not exist
    "other": (0.1, 0.3),
}
# Mistake kinds that make sense for one action (a Thought/Action turn or candidate) and for
# one step written into a plan, with the skill weight that picks among them.
ACTION_MISTAKES = {
    "invented": "w_hallucinate",
    "premise": "w_premise",
    "stop": "w_stop",  # gives up after a failure
    "early": "w_stop",  # ... or, with no failure to give up on, answers with what it has
}
PLAN_MISTAKES = {
    "invented": "w_hallucinate",
    "premise": "w_premise",
    "stop": "w_stop",
    "dependency": "w_dependency",
    "unchecked": "w_unchecked",
}


class Belief:
    """One model's view at one decision point: the option it prefers, and how good every
    option it can see looks to it. The values are drawn when first read (each is a named
    draw, so when does not matter): a sample that keeps the preferred option never reads
    them."""

    __slots__ = ("top", "_values", "_draw_values")

    def __init__(
        self,
        top: str,
        values: dict[str, float] | None = None,
        draw_values: Callable[[], dict[str, float]] | None = None,
    ) -> None:
        self.top = top
        self._values = values
        self._draw_values = draw_values

    @property
    def values(self) -> dict[str, float]:
        if self._values is None:
            assert self._draw_values is not None
            self._values, self._draw_values = self._draw_values(), None
        return self._values

    def value(self, kind: str) -> float:
        return self.values.get(kind, sum(LOOK["other"]) / 2)


def _digest(*parts: object) -> str:
    return hashlib.blake2b(repr(parts).encode(), digest_size=8).hexdigest()


_NO_OBSERVATION = _digest()  # the signature of nothing observed yet


@lru_cache(maxsize=4096)
def _read_action(content: str) -> tuple[str, dict[str, Any]] | None:
    """(tool, args) of one assistant turn; cached because a transcript is re-read each turn.
    The cached args are shared: the simulator only reads them."""
    try:
        turn = parse_action_turn(content)
    except OutputParseError:
        return None
    return turn.action, turn.action_input


@lru_cache(maxsize=4096)
def _read_result(text: str) -> tuple[Any, str | None]:
    """(result, error kind) of one observation text (cached and shared like the above)."""
    kind = error_kind(text)
    if kind is not None:
        return None, kind
    try:
        return json.loads(text), None
    except json.JSONDecodeError:
        return text, None


caches.register(_read_action.cache_clear)
caches.register(_read_result.cache_clear)


def _transcript_observations(
    messages: Sequence[Message],
    out: list[Obs] | None = None,
    pending: tuple[str, dict[str, Any]] | None = None,
) -> tuple[list[Obs], tuple[str, dict[str, Any]] | None]:
    """Observations of a Thought/Action transcript: an assistant action, then 'Observation: ...'
    (and the action still waiting for its observation); ``out`` and ``pending`` continue the
    reading of an earlier part of the transcript."""
    out = [] if out is None else out
    for m in messages:
        if m["role"] == "assistant":
            pending = _read_action(m["content"])
        elif (
            m["role"] == "user" and pending is not None and m["content"].startswith("Observation:")
        ):
            text = m["content"][len("Observation:") :].strip()
            out.append(_obs(f"obs_{len(out)}", pending[0], pending[1], text))
            pending = None
    return out, pending


def _obs(key: str, tool: str, args: Any, text: str, ok: bool | None = None) -> Obs:
    result, kind = _read_result(text)
    args = args if isinstance(args, dict) else {}
    if ok is False or kind is not None:
        return Obs(key, tool, args, text, kind or "error")  # the error text, for the oracle
    return Obs(key, tool, args, result, None)


def _json_after(prompt: str, marker: str) -> Any:
    """The JSON value that follows ``marker`` in the prompt (None if absent or broken)."""
    at = prompt.find(marker)
    if at < 0:
        return None
    try:
        value, _ = _DECODER.raw_decode(prompt[at + len(marker) :].lstrip())
    except json.JSONDecodeError:
        return None
    return value


def _core(step: Any) -> tuple[Any, str, tuple[str, ...]]:
    if not isinstance(step, dict):
        return (None, "", ())
    deps = step.get("depends_on") or []
    deps = deps if isinstance(deps, list) else [deps]
    return (step.get("tool"), dumps(step.get("args") or {}), tuple(sorted(map(str, deps))))


@dataclass
class _Gold:
    """The right plan before anything ran, rendered as a model would write it."""

    gold: list[GoldStep]
    ids: dict[str, str]
    rendered: list[dict[str, Any]]
    traps: list[dict[str, Any] | None]
    cores: list[tuple[Any, str, tuple[str, ...]]]
    trap_cores: list[tuple[Any, str, tuple[str, ...]] | None]


class SimLLM:
    """A simulated LLM bound to one task's oracle (one instance per episode).

    Two kinds of randomness, kept apart on purpose. A *belief* belongs to a decision point
    (what has been observed, which step is next) and is drawn from the episode's seed and
    that point only, so every request about the same point, from a proposer, a judge or a
    rollout, of any planner, sees the same belief. A *sample* belongs to one request (a hash
    of its messages and its occurrence in the episode), so the same prompt gets the same
    answer and asking again gives a fresh sample.
    """

    name = "sim"

    def __init__(self, skill: SkillProfile, oracle: Oracle, *, seed_keys: tuple[object, ...]):
        self.skill = skill
        self.oracle = oracle
        self.seed_keys = seed_keys
        self.draws = KeyedDraws(*seed_keys)
        self._beliefs: dict[tuple[object, ...], Belief] = {}
        self._initial: _Gold | None = None
        self._skills: dict[float, SkillProfile] = {}
        # JSON of values the episode's prompts share (an observation's args and result are
        # re-read every turn): keyed by identity, the value kept alive beside its text
        self._json: dict[int, tuple[object, str]] = {}
        # per observation (by identity, kept alive beside): its part of a signature's material
        # and whether the oracle calls it subtle (a transcript is re-read every turn)
        self._read_obs: dict[int, tuple[Obs, str, bool]] = {}
        self._invented: dict[str, str] = {}  # the tool the model would invent for a step
        self._noticed: dict[tuple[str, str, str], float] = {}
        self._first_points: dict[str, str] = {}  # decision points of the first plan's steps
        # the transcript read last: its (role, content) objects, its observations, pending
        self._transcript: tuple[
            list[tuple[str, str]], tuple[list[Obs], tuple[str, dict[str, Any]] | None]
        ] = ([], ([], None))

    async def generate(
        self, messages: Sequence[Message], *, role: str, model: ModelProfile, request: Request
    ) -> Completion:
        del role  # the model profile, not the caller's role, decides how skilled the model is
        rng = self.draws.rng("llm", request.digest, request.occurrence)
        scale = model.error_scale
        if scale not in self._skills:
            self._skills[scale] = self.skill.scaled(scale)
        skill = self._skills[scale]
        # The requested format is stated in the system message or the last message; a growing
        # transcript in between is only read when the request needs its observations.
        system = messages[0]["content"] if messages else ""
        last = messages[-1]["content"] if messages else ""
        tokens = request.o200k_prompt
        if tokens is None:
            tokens = count_messages(messages)
        d = _Decider(self, skill, rng, tokens)
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

    # --- what the model sees -----------------------------------------------------------------

    def observations(self, messages: Sequence[Message]) -> list[Obs]:
        """The observations of a Thought/Action transcript. A transcript grows turn by turn:
        when its first messages are the very ones read last time (the same role and content
        objects), only the new ones are read."""
        seen, (obs, pending) = self._transcript
        n = len(seen)
        if n <= len(messages) and all(
            messages[i]["role"] is r and messages[i]["content"] is c
            for i, (r, c) in enumerate(seen)
        ):
            obs, pending = _transcript_observations(messages[n:], list(obs), pending)
        else:
            obs, pending = _transcript_observations(messages)
        self._transcript = ([(m["role"], m["content"]) for m in messages], (obs, pending))
        return list(obs)

    def json_of(self, value: Any) -> str:
        """``dumps(value)``, once per object: the simulator only reads the values it parsed."""
        if value is None or isinstance(value, (str, int, float)):
            return dumps(value)
        known = self._json.get(id(value))
        if known is not None and known[0] is value:
            return known[1]
        text = dumps(value)
        self._json[id(value)] = (value, text)
        return text

    def signature(self, observations: Sequence[Obs]) -> str:
        """What was observed, independent of how a prompt numbered it: the digest of
        ``(tool, args JSON, error)`` per observation (``_digest`` of those tuples, its repr
        put together from each observation's part, computed once per observation)."""
        parts = [self._read(o)[1] for o in observations]
        material = f"({parts[0]},)" if len(parts) == 1 else "(" + ", ".join(parts) + ")"
        return hashlib.blake2b(material.encode(), digest_size=8).hexdigest()

    def invented_tool(self, key: str) -> str:
        """The tool name this model would invent at the step ``key`` (one draw an episode)."""
        tool = self._invented.get(key)
        if tool is None:
            tools = self.oracle.hallucinated_tools()
            tool = tools[int(self.draws.uniform01("invent", key) * len(tools))]
            self._invented[key] = tool
        return tool

    def _misses(self, skill: SkillProfile, o: Obs) -> bool:
        key = (o.tool, self.json_of(o.args), self.json_of(o.result))
        if (draw := self._noticed.get(key)) is None:
            draw = self._noticed[key] = self.draws.uniform01("notice", *key)
        return draw < skill.p_miss_signal

    def overlooked(
        self, skill: SkillProfile, obs: Sequence[Obs], flagged: frozenset[str] = frozenset()
    ) -> frozenset[str]:
        """Keys of observations whose subtle warning sign this model misses (one draw per
        observation: reading the same observation again does not make it more noticeable).
        An observation a check has flagged explicitly is never missed."""
        return frozenset(
            o.key
            for o in obs
            if o.key not in flagged and self._read(o)[2] and self._misses(skill, o)
        )

    def _read(self, o: Obs) -> tuple[Obs, str, bool]:
        """(o, its signature part, ``oracle.subtle(o)``), computed once per observation."""
        known = self._read_obs.get(id(o))
        if known is None or known[0] is not o:
            part = repr((o.tool, self.json_of(o.args), o.error))
            known = self._read_obs[id(o)] = (o, part, self.oracle.subtle(o))
        return known

    def belief(
        self, skill: SkillProfile, point: str, available: Sequence[str], err: float, mistakes: dict
    ) -> Belief:
        """The model's belief at a decision point: drawn from the point alone (so proposer,
        judge and rollout share it); ``err`` (from the request's prompt length) sets how
        likely a confused belief is, through the same draw, so a longer prompt can only make
        the same model more confused."""

        memo = (id(skill), point, tuple(available), err, tuple(mistakes.items()))
        if (known := self._beliefs.get(memo)) is not None:
            return known  # the same point asked again (a judge after a proposer, a rollout)

        u = self.draws.under("belief", point).uniform01

        top = "right"
        if "trap" in available and u("trap") < skill.p_trap:
            top = "trap"
        elif "persist" in available and u("persist") < skill.p_persist:
            top = "persist"
        elif u("confused") < err * skill.systematic_share:
            top = self._weighted(skill, mistakes, available, u("mistake")) or "right"

        def draw_values() -> dict[str, float]:
            values = {k: LOOK[k][0] + (LOOK[k][1] - LOOK[k][0]) * u("look", k) for k in options}
            values[top] = PREFERRED[0] + (PREFERRED[1] - PREFERRED[0]) * u("look-top")
            return values

        options = tuple(available)
        self._beliefs[memo] = belief = Belief(top, draw_values=draw_values)
        return belief

    @staticmethod
    def _weighted(
        skill: SkillProfile, mistakes: dict[str, str], available: Sequence[str], x: float
    ) -> str | None:
        pool = [(k, getattr(skill, w)) for k, w in mistakes.items() if k in available]
        return pick(pool, x)

    def guess(self, value: Any) -> Any:
        """A made-up value standing where a not-yet-known result should be."""
        if isinstance(value, Ref):
            tail = "_".join(value.path) or "data"
            return f"{value.key.split(':')[-1]}-{tail}"
        if isinstance(value, dict):
            return {k: self.guess(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.guess(v) for v in value]
        return value

    def initial_gold(self) -> _Gold:
        """The right plan before anything ran; it never changes within an episode, and
        partial-plan requests compare against it many times, so it is built once."""
        if self._initial is None:
            gold = self.oracle.remaining([])
            ids = {g.key: f"step_{1 + i}" for i, g in enumerate(gold)}
            rendered = [render_step(g, ids) for g in gold]
            traps = [render_step(g.trap, ids) if g.trap else None for g in gold]
            self._initial = _Gold(
                gold,
                ids,
                rendered,
                traps,
                cores=[_core(r) for r in rendered],
                trap_cores=[_core(t) if t else None for t in traps],
            )
        return self._initial


def pick(weighted: Sequence[tuple[str, float]], x: float) -> str | None:
    """The option a uniform draw ``x`` in [0, 1) lands on, in proportion to the weights
    (None when no weight is positive)."""
    pool = [(k, w) for k, w in weighted if w > 0]
    total = sum(w for _, w in pool)
    if not pool:
        return None
    x *= total
    for kind, w in pool:
        x -= w
        if x < 0:
            return kind
    return pool[-1][0]


def render_step(g: GoldStep, ids: dict[str, str]) -> dict[str, Any]:
    """A gold step as a model writes it into a Plan JSON."""

    def ref_text(value: Any) -> Any:
        if isinstance(value, Ref):
            sid = ids.get(value.key, value.key)
            path = ".".join(("result", *value.path))
            return "{{" + f"{sid}.{path}" + "}}"
        if isinstance(value, dict):
            return {k: ref_text(v) for k, v in value.items()}
        if isinstance(value, list):
            return [ref_text(v) for v in value]
        return value

    deps = [ids.get(d, d) for d in g.deps]
    return {
        "id": ids[g.key],
        "tool": g.tool,
        "args": ref_text(g.args),
        "depends_on": deps,
        "pre_conditions": [*g.pre, *(f"{d}.status == success" for d in deps)],
        "post_conditions": list(g.post),
        "retry_limit": 3,
        "fallback": g.fallback,
    }


class _Decider:
    """Answers one request: the model, its skill for this request's model profile, the
    request's own random stream and its prompt length."""

    def __init__(self, sim: SimLLM, skill: SkillProfile, rng: random.Random, tokens: int):
        self.sim = sim
        self.oracle = sim.oracle
        self.skill = skill
        self.rng = rng
        self.tokens = tokens
        self.err = skill.error_rate(tokens)

    # --- shared ------------------------------------------------------------------------------

    def _slip(self) -> bool:
        """A sampling slip: this sample departs from what the model believes."""
        return self.rng.random() < self.err * (1.0 - self.skill.systematic_share)

    def _sample(self, belief: Belief) -> str:
        """One proposal from a belief: its preferred option, or after a slip another option
        drawn in proportion to how good it looks."""
        if not self._slip():
            return belief.top
        others = [(k, v) for k, v in belief.values.items() if k != belief.top]
        return self._draw(others) or belief.top

    def _draw(self, weighted: Sequence[tuple[str, float]]) -> str | None:
        return pick(weighted, self.rng.random())

    def _score(self, value: float) -> float:
        noise = self.skill.judge_noise(self.tokens)
        return min(1.0, max(0.0, value + self.rng.gauss(0.0, noise)))

    def _break(self, text: str) -> str:
        if self.rng.random() >= self.skill.p_malformed:
            return text
        cut = self.rng.randint(len(text) // 3, max(len(text) // 3, len(text) - 3))
        return text[:cut]

    # --- actions (a Thought/Action turn, candidate actions, judging them) -------------------

    def _action_point(
        self, messages: Sequence[Message]
    ) -> tuple[list[Obs], list[GoldStep], Belief, dict[str, tuple[str, dict[str, Any]]]]:
        obs = self.sim.observations(messages)
        overlooked = self.sim.overlooked(self.skill, obs)
        gold = self.oracle.remaining(obs, overlooked)
        options = self._action_options(gold, obs, overlooked)
        point = _digest("act", self.sim.signature(obs), gold[0].key if gold else "done")
        belief = self.sim.belief(self.skill, point, list(options), self.err, ACTION_MISTAKES)
        return obs, gold, belief, options

    def _action_options(
        self, gold: list[GoldStep], obs: list[Obs], overlooked: frozenset[str]
    ) -> dict[str, tuple[str, dict[str, Any]]]:
        """Every option the model can see at this point, as (tool, literal args)."""
        if not gold:  # it believes the work is done: answer with what it holds
            answer = self.oracle.answer(obs) or self.oracle.partial_answer(obs)
            return {"right": (FINISH, {"answer": answer, "status": "success"})}
        g = gold[0]
        early = (FINISH, {"answer": self.oracle.partial_answer(obs), "status": "success"})
        if g.tool == REPORT_UNREACHABLE:
            return {"right": (FINISH, {"answer": "", "status": "failure"}), "early": early}
        args = literal_args(g.args, obs)  # shared by the options below: only read
        options: dict[str, tuple[str, dict[str, Any]]] = {"right": (g.tool, args)}
        attractive = g.trap or (g.trap_plan[0] if g.trap_plan else None)
        if attractive is not None:
            if attractive.tool == SUBMIT_ANSWER:
                options["trap"] = early
            else:
                options["trap"] = (attractive.tool, literal_args(attractive.args, obs))
        if g.fallback:
            options["fallback"] = (g.fallback, args)
        failed = obs[-1] if obs and obs[-1].error is not None else None
        if failed is not None:
            again = (failed.tool, dict(failed.args))
            if again != options["right"]:
                options["persist"] = again
            options["stop"] = (FINISH, {"answer": "", "status": "failure"})
        ahead = gold[1] if len(gold) > 1 else g
        options["premise"] = (ahead.tool, self.sim.guess(ahead.args))
        if obs and options.get("trap") != early:
            options["early"] = early
        options["invented"] = (self.sim.invented_tool(g.key), args)
        # options that coincide with the right move are the right move
        return {k: v for k, v in options.items() if k == "right" or v != options["right"]}

    @staticmethod
    def _thought(kind: str, tool: str, gold: list[GoldStep]) -> str:
        if not gold:
            return "The task is complete."
        if tool == FINISH:
            reason = gold[0].args.get("reason", "")
            return {
                "right": f"The goal cannot be reached: {reason}.",
                "stop": "The tool keeps failing; I cannot complete this.",
            }.get(kind, "I have enough to answer.")
        if kind == "persist":
            return f"{tool} failed; I will try it again."
        return f"Next I need {tool} to make progress on the task."

    def act(self, messages: Sequence[Message]) -> str:
        _, gold, belief, options = self._action_point(messages)
        kind = self._sample(belief)
        tool, args = options[kind]
        text = (
            f"Thought: {self._thought(kind, tool, gold)}\nAction: {tool}\n"
            f"Action Input: {dumps(args)}"
        )
        return self._break(text)

    def propose_actions(self, messages: Sequence[Message], last: str) -> str:
        k = int(m.group(1)) if (m := re.search(r"Propose (\d+)", last)) else 3
        _, gold, belief, options = self._action_point(messages)
        first = self._sample(belief)
        kinds = [first]
        rest = [(kk, v) for kk, v in belief.values.items() if kk != first]
        while len(kinds) < k and rest:
            pick = self._draw(rest)
            if pick is None:
                break
            kinds.append(pick)
            rest = [(kk, v) for kk, v in rest if kk != pick]
        chosen = []
        for n, kind in enumerate(kinds):
            tool, args = options[kind]
            thought = self._thought(kind, tool, gold)
            chosen.append((thought if n == 0 else f"Alternatively: {thought}", tool, args))
        return self._break(render_candidates(chosen))

    def _action_kind(
        self, tool: str, args: dict[str, Any], options: dict[str, tuple[str, dict[str, Any]]]
    ) -> str:
        for kind, (t, a) in options.items():
            if t != tool:
                continue
            if a == args or (tool == FINISH and a.get("status") == args.get("status")):
                return kind
        if tool != FINISH and tool not in self.oracle.tool_names():
            return "invented"
        return "other"

    # --- plans -------------------------------------------------------------------------------

    def _step_point(self, state: str, g: GoldStep) -> str:
        if state == _NO_OBSERVATION:  # a step of the plan before anything ran: asked often
            known = self.sim._first_points.get(g.key)
            if known is None:
                known = self.sim._first_points[g.key] = _digest("step", state, g.key)
            return known
        return _digest("step", state, g.key)

    def _step_options(self, g: GoldStep) -> list[str]:
        options = ["right", *PLAN_MISTAKES]
        if g.trap is not None:
            options.append("trap")
        if not g.deps:
            options.remove("dependency")
        if not g.post:
            options.remove("unchecked")
        return options

    def _step_belief(self, state: str, g: GoldStep) -> Belief:
        return self.sim.belief(
            self.skill, self._step_point(state, g), self._step_options(g), self.err, PLAN_MISTAKES
        )

    def _write_step(
        self, kind: str, g: GoldStep, ids: dict[str, str]
    ) -> tuple[dict[str, Any], bool]:
        """The step of one kind as written: (step, whether the plan stops here)."""
        step = g.trap if kind == "trap" and g.trap is not None else g
        rendered = render_step(step, ids)
        if kind == "invented":
            rendered["tool"] = self.sim.invented_tool(g.key)
        elif kind == "premise":
            rendered["args"] = self.sim.guess(step.args)
        elif kind == "stop":
            return rendered, True
        elif kind == "dependency":
            rendered["depends_on"] = []
            rendered["pre_conditions"] = list(step.pre)
        elif kind == "unchecked":
            rendered["post_conditions"] = []
        return rendered, False

    def plan(self, prompt: str) -> str:
        log_part = prompt.split("Execution log:", 1)[1] if "Execution log:" in prompt else ""
        obs, checked = [], set()
        for sid, tool, args, ok, text in parse_step_lines(log_part):
            result_text, _, _ = text.partition(POSTCONDITION_NOTE)
            if not ok and error_kind(text) is None:  # returned, but a check rejected it
                checked.add(sid)
                obs.append(_obs(sid, tool, args, result_text))
            else:
                obs.append(_obs(sid, tool, args, text, ok))
        failed_id = m.group(1) if (m := _FAILED_STEP.search(prompt)) else None
        flagged = frozenset(checked | ({failed_id} if failed_id else set()))
        overlooked = self.sim.overlooked(self.skill, obs, flagged)
        gold = self.oracle.remaining(obs, overlooked)
        state = self.sim.signature(obs)
        revising = (
            _json_after(prompt, "A candidate plan:") if "Improve this plan" in prompt else None
        )
        trap_plan = gold[0].trap_plan if gold else None
        if (
            trap_plan
            and trap_plan[0].tool != SUBMIT_ANSWER
            # a result a check rejected cannot be built on: the executor says it failed
            and not any(d in flagged for g in trap_plan for d in g.deps)
        ):
            line = self.sim.belief(
                self.skill, _digest("line", state), ["right", "trap"], self.err, {}
            )
            if line.top == "trap":
                gold = trap_plan
        if gold and gold[0].tool == REPORT_UNREACHABLE:
            gold = []  # the honest plan for an unreachable goal: no steps
        used = [int(n) for n in _STEP_ID.findall(prompt)] if obs else []
        first = max(used, default=0) + 1
        ids = {g.key: f"step_{first + i}" for i, g in enumerate(gold)}
        old = revising.get("steps") if isinstance(revising, dict) else None
        steps: list[dict[str, Any]] = []
        persist = (
            self._persisted_step(obs, failed_id, state, f"step_{first + len(gold)}", gold)
            if obs
            else None
        )
        if persist is not None:
            steps.append(persist)
        for i, g in enumerate(gold):
            belief = self._step_belief(state, g)
            if isinstance(old, list) and i < len(old) and self._kind_of(old[i], i) == belief.top:
                steps.append(old[i])  # a revision keeps what the model still believes right
                continue
            rendered, stop = self._write_step(self._sample(belief), g, ids)
            if stop:
                break
            steps.append(rendered)
        plan = {"goal": getattr(getattr(self.oracle, "task", None), "goal", ""), "steps": steps}
        text = _PLAN_JSON(plan)
        if self.rng.random() < self.skill.p_sloppy_json:
            head, _, tail = text.rpartition("]}")
            text = "```json\n" + head + ",]}" + tail + "\n```"
        return self._break(text)

    def _persisted_step(
        self,
        obs: list[Obs],
        failed_id: str | None,
        state: str,
        step_id: str,
        gold: list[GoldStep],
    ) -> dict[str, Any] | None:
        """A replanner committed to its line writes the failed step again, unchanged."""
        failed = next((o for o in reversed(obs) if o.key == failed_id), None)
        if failed is None or failed.error is None or failed.error == "precondition":
            return None
        belief = self.sim.belief(
            self.skill, _digest("persist", state), ["right", "persist"], self.err, {}
        )
        if belief.top != "persist":
            return None
        checks = next((g.post for g in gold if g.tool == failed.tool), [])
        return {
            "id": step_id,
            "tool": failed.tool,
            "args": dict(failed.args),
            "depends_on": [],
            "pre_conditions": [],
            "post_conditions": list(checks),
            "retry_limit": 3,
            "fallback": None,
        }

    # --- partial plans (search planners) -----------------------------------------------------

    def _kind_of(self, step: Any, i: int) -> str:
        """How step ``i`` of a written plan compares with the right plan."""
        init = self.sim.initial_gold()
        if isinstance(step, dict) and step.get("done"):
            return "right" if i >= len(init.rendered) else "stop"
        if not isinstance(step, dict) or i >= len(init.rendered):
            return "other"
        if step.get("tool") not in self.oracle.tool_names():
            return "invented"
        core = _core(step)
        if core == init.cores[i]:
            return "right" if step.get("post_conditions") or not init.gold[i].post else "unchecked"
        if core == init.trap_cores[i]:
            return "trap"
        right = init.cores[i]
        if core[0] == right[0] and core[2] == right[2]:
            return "premise"  # the right tool with other arguments
        if core[0] == right[0] and core[1] == right[1]:
            return "dependency"
        return "other"

    def _point_belief(self, i: int) -> Belief:
        """The belief about step ``i`` of a plan written before anything ran (shared by a
        whole-plan writer, a step proposer, a judge and a rollout)."""
        init = self.sim.initial_gold()
        if i >= len(init.gold):
            return Belief("right", {"right": PREFERRED[0]})
        return self._step_belief(_NO_OBSERVATION, init.gold[i])

    def _plan_values(
        self, steps: list[Any], start: int = 0, so_far: tuple[float, bool] = (1.0, True)
    ) -> tuple[float, bool]:
        """(how good the plan looks to the model: as good as its weakest step; whether the
        model believes every step is what it would write). ``steps`` may continue a plan
        whose first ``start`` steps gave ``so_far``."""
        looks, believed = so_far
        for i, step in enumerate(steps, start):
            kind = self._kind_of(step, i)
            belief = self._point_belief(i)
            looks = min(looks, belief.value(kind))
            believed = believed and kind == belief.top
        return looks, believed

    def propose_steps(self, last: str) -> str:
        k = int(m.group(1)) if (m := re.search(r"Propose (\d+)", last)) else 3
        partial = _json_after(last, "Plan so far:")
        partial = partial if isinstance(partial, list) else []
        init = self.sim.initial_gold()
        i = len(partial)
        if i >= len(init.gold):
            return self._break(json.dumps([{"done": True}]))
        g = init.gold[i]
        belief = self._point_belief(i)
        kinds = [self._sample(belief)]
        rest = [(kk, v) for kk, v in belief.values.items() if kk != kinds[0]]
        while len(kinds) < k and rest:
            pick = self._draw(rest)
            if pick is None:
                break
            kinds.append(pick)
            rest = [(kk, v) for kk, v in rest if kk != pick]
        chosen: list[dict[str, Any]] = []
        for kind in kinds:
            rendered, stop = self._write_step(kind, g, init.ids)
            candidate = {"done": True} if stop else rendered
            if candidate not in chosen:
                chosen.append(candidate)
        return self._break(_PLAN_JSON(chosen))

    def rate_candidates(self, messages: Sequence[Message]) -> str:
        last = messages[-1]["content"]
        partial = _json_after(last, "Plan so far:")
        lines = []
        if isinstance(partial, list):  # candidate plan steps
            prefix = self._plan_values(partial)  # shared by every candidate
            blocks = re.split(r"\n(?=Candidate \d+:)", last)[1:]
            for n, block in enumerate(blocks, 1):
                looks, _ = self._plan_values([_json_after(block, ":")], len(partial), prefix)
                lines.append(f"Score {n}: {self._score(looks):.2f}")
        else:  # candidate actions
            _, _, belief, options = self._action_point(messages)
            for n, turn in enumerate(parse_candidates(last), 1):
                kind = self._action_kind(turn.action, turn.action_input, options)
                lines.append(f"Score {n}: {self._score(belief.value(kind)):.2f}")
        return self._break("\n".join(lines))

    def rate_plan(self, last: str) -> str:
        plan = _json_after(last, "Plan:")
        steps = plan.get("steps") if isinstance(plan, dict) else None
        if not isinstance(steps, list):
            return f"Score: {self._score(LOOK['invented'][0]):.2f}"
        looks, _ = self._plan_values(steps)
        looks *= min(1.0, len(steps) / max(len(self.sim.initial_gold().gold), 1))
        return self._break(f"Score: {self._score(looks):.2f}")

    def rollout(self, last: str) -> str:
        partial = _json_after(last, "Plan so far:")
        steps = partial if isinstance(partial, list) else []
        _, believed = self._plan_values(steps)
        success = believed or self.rng.random() < self.skill.rollout_optimism
        return f"Outcome: {'success' if success else 'failure'}"
