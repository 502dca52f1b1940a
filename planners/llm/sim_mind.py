"""The simulated model's state over one episode: what it has seen and what it believes.

A belief belongs to a decision point and is drawn from the episode's seed and that point only,
so this state is shared by every request of the episode (a proposer, a judge, a rollout); the
answers themselves are written by :mod:`planarena.planners.llm.sim_decider`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from planarena.envs.oracle import SUBMIT_ANSWER, GoldStep, Obs, Oracle, Ref
from planarena.envs.rng import KeyedDraws
from planarena.planners.formats import dumps
from planarena.planners.llm.profiles import SkillProfile
from planarena.planners.llm.protocol import Observed
from planarena.planners.llm.sim_belief import BELIEVED_ONLY, LOOK, PREFERRED, Belief, pick
from planarena.planners.llm.sim_reading import observation, render_step, step_core


@dataclass
class Gold:
    """The right plan before anything ran, rendered as a model would write it."""

    gold: list[GoldStep]
    ids: dict[str, str]
    rendered: list[dict[str, Any]]
    traps: list[dict[str, Any] | None]
    cores: list[tuple[Any, str, tuple[str, ...]]]
    trap_cores: list[tuple[Any, str, tuple[str, ...]] | None]
    # the first step of the attractive wrong line a whole plan can take from the start
    line_core: tuple[Any, str, tuple[str, ...]] | None = None


class SimMind:
    """One episode's model: its skill, its keyed draws, and what it has read and believes
    (memoized per episode, since a transcript is re-read every turn)."""

    def __init__(
        self, skill: SkillProfile, oracle: Oracle, *, seed_keys: tuple[object, ...]
    ) -> None:
        self.skill = skill
        self.oracle = oracle
        self.seed_keys = seed_keys
        self.draws = KeyedDraws(*seed_keys)
        self._beliefs: dict[tuple[object, ...], Belief] = {}
        self._initial: Gold | None = None
        self._skills: dict[float, SkillProfile] = {}
        # JSON of values the episode's prompts share (an observation's args and result are
        # re-read every turn): keyed by identity, the value kept alive beside its text
        self._json: dict[int, tuple[object, str]] = {}
        # per observation (by identity, kept alive beside): its part of a signature's material
        # and whether the oracle calls it subtle (a transcript is re-read every turn)
        self._read_obs: dict[int, tuple[Obs, str, bool]] = {}
        self._invented: dict[str, str] = {}  # the tool the model would invent for a step
        self._other: dict[str, str | None] = {}  # the env tool it would call instead of a step
        self._checks: dict[tuple[int, str], list[str]] = {}  # the checks a model writes
        self._pre: dict[tuple[int, str], list[str]] = {}  # the pre-conditions it writes
        self._fallbacks: dict[tuple[int, str, str], str | None] = {}  # the fallback it names
        self._judge_views: dict[tuple[object, ...], Belief] = {}
        self.lessons: dict[str, str] = {}  # reflections this model wrote -> what they concern
        self._noticed: dict[tuple[str, str, str], float] = {}
        self.first_points: dict[str, str] = {}  # decision points of the first plan's steps
        # whether the last answer in each (format, model) came out broken (malformed_persistence)
        self.last_broken: dict[tuple[str, str], bool] = {}
        # each observation of a request's context as the oracle reads it, per (object, key):
        # a transcript resends the same objects every turn
        self._observed: dict[tuple[int, str], tuple[Observed, Obs]] = {}

    def skill_at(self, error_scale: float) -> SkillProfile:
        """The episode's skill scaled for a model profile (built once per scale)."""
        if error_scale not in self._skills:
            self._skills[error_scale] = self.skill.scaled(error_scale)
        return self._skills[error_scale]

    def _as_obs(self, o: Observed, key: str, ok: bool | None) -> Obs:
        known = self._observed.get((id(o), key))
        if known is None or known[0] is not o:
            known = self._observed[(id(o), key)] = (o, observation(key, o.tool, o.args, o.text, ok))
        return known[1]

    def transcript(self, observed: Sequence[Observed]) -> list[Obs]:
        """The observations of a transcript (its tool calls in order, failed attempts
        included), keyed by position: what a call failed with is read from its text."""
        return [self._as_obs(o, f"obs_{i}", None) for i, o in enumerate(observed)]

    def execution_log(self, observed: Sequence[Observed]) -> tuple[list[Obs], set[str]]:
        """(the observations of an execution log keyed by step id, the ids of results a
        check rejected). A rejected result is read as it was returned: the model sees the
        value, and that a check flagged it."""
        obs, checked = [], set()
        for o in observed:
            if o.rejected_by_check:
                checked.add(o.id)
                obs.append(self._as_obs(o, o.id, None))
            else:
                obs.append(self._as_obs(o, o.id, o.ok))
        return obs, checked

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
        ``(tool, args JSON, error)`` per observation (``digest`` of those tuples, its repr
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

    def other_tool(self, g: GoldStep) -> str | None:
        """The tool of the env this model would call in place of step ``g`` when it takes a
        wrong tool (one draw an episode; never the step's own tool, its fallback or its
        trap's, which are options of their own; None: the env has no other tool)."""
        if g.key in self._other:
            return self._other[g.key]
        own = {g.tool, g.fallback, g.trap.tool if g.trap is not None else None}
        tools = sorted(t for t in self.oracle.tool_names() if t not in own)
        tool = tools[int(self.draws.uniform01("other-tool", g.key) * len(tools))] if tools else None
        self._other[g.key] = tool
        return tool

    def written_checks(self, skill: SkillProfile, g: GoldStep) -> list[str]:
        """The post-conditions this model writes for step ``g``: each check of the step's
        pool (what a careful model could think of, never what a fault is set to break) with
        the chance ``check_coverage``, one draw per check an episode (what the model thinks
        can go wrong does not change between plans)."""
        return self._covered(self._checks, "check", skill, g, g.checks, skill.check_coverage)

    def written_pre(self, skill: SkillProfile, g: GoldStep) -> list[str]:
        """The world-fact pre-conditions this model writes for step ``g`` (e.g.
        ``api_key_valid.search_web == true``): each of the step's with the chance
        ``precondition_coverage``, one draw per condition an episode, whatever the faults
        (what the model believes the step needs does not change between plans)."""
        return self._covered(self._pre, "pre", skill, g, g.pre, skill.precondition_coverage)

    def _covered(
        self,
        memo: dict[tuple[int, str], list[str]],
        draw: str,
        skill: SkillProfile,
        g: GoldStep,
        pool: Sequence[str],
        cover: float,
    ) -> list[str]:
        """Each item of ``pool`` with the chance ``cover``: one draw per item of step ``g``
        an episode (keyed ``draw``, the step and the item), kept for every later plan."""
        written = memo.get((id(skill), g.key))
        if written is None:
            written = [c for c in pool if self.draws.uniform01(draw, g.key, c) < cover]
            memo[(id(skill), g.key)] = written
        return written

    def written_fallback(self, skill: SkillProfile, g: GoldStep) -> str | None:
        """The fallback tool this model names for step ``g``: the step's own with the chance
        ``precondition_coverage`` (one draw a step an episode), else none."""
        if g.fallback is None:
            return None
        memo = (id(skill), g.key, "fallback")
        if memo not in self._fallbacks:
            known = self.draws.uniform01("fallback", g.key) < skill.precondition_coverage
            self._fallbacks[memo] = g.fallback if known else None
        return self._fallbacks[memo]

    def invented_fallback(self, skill: SkillProfile, g: GoldStep) -> str | None:
        """The tool this model names as step ``g``'s fallback though the catalogue lacks it
        (the step's invented tool), with the chance ``p_invent_fallback``: one draw a step an
        episode, so every plan repeats it; None (no draw at 0) where it writes its own."""
        p = skill.p_invent_fallback
        if p <= 0 or self.draws.uniform01("invent-fallback", g.key) >= p:
            return None
        return self.invented_tool(g.key)

    def render(self, skill: SkillProfile, g: GoldStep, ids: dict[str, str]) -> dict[str, Any]:
        """A gold step as this model writes it: its own checks, pre-conditions and fallback,
        not the oracle's (a dependency's status condition follows from its depends_on)."""
        rendered = render_step(g, ids)
        rendered["post_conditions"] = list(self.written_checks(skill, g))
        deps = [str(d) for d in rendered.get("depends_on") or []]
        written = self.written_pre(skill, g)
        rendered["pre_conditions"] = [*written, *(f"{d}.status == success" for d in deps)]
        rendered["fallback"] = self.written_fallback(skill, g)
        return rendered

    def judge_view(self, skill: SkillProfile, point: str, available: Sequence[str]) -> Belief:
        """A judge's own view of the options at a decision point, apart from the proposer's
        belief: it prefers the right option with the chance ``judge_accuracy``, else one of
        the other options it can see (the attractive ones first); drawn from the point alone,
        so every judge request about the point shares it."""
        memo = (id(skill), point, tuple(available))
        if (known := self._judge_views.get(memo)) is not None:
            return known
        u = self.draws.under("judge", point).uniform01
        top = "right"
        wrong = [k for k in available if k != "right"]
        if wrong and u("top") >= skill.judge_accuracy:
            attractive = [k for k in ("trap", "persist", "fallback") if k in wrong]
            pool = attractive or wrong
            top = pool[min(int(u("which") * len(pool)), len(pool) - 1)]
        values = {k: LOOK[k][0] + (LOOK[k][1] - LOOK[k][0]) * u("look", k) for k in available}
        values[top] = PREFERRED[0] + (PREFERRED[1] - PREFERRED[0]) * u("look-top")
        view = self._judge_views[memo] = Belief(top, values)
        return view

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
        self,
        skill: SkillProfile,
        point: str,
        available: Sequence[str],
        err: float,
        mistakes: dict[str, str],
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
            values = {
                k: LOOK[k][0] + (LOOK[k][1] - LOOK[k][0]) * u("look", k)
                for k in options
                if k not in BELIEVED_ONLY
            }
            values[top] = PREFERRED[0] + (PREFERRED[1] - PREFERRED[0]) * u("look-top")
            return values

        options = tuple(available)
        self._beliefs[memo] = belief = Belief(top, draw_values=draw_values)
        return belief

    @staticmethod
    def _weighted(
        skill: SkillProfile, mistakes: dict[str, str], available: Sequence[str], x: float
    ) -> str | None:
        pool = [(k, skill.resolved(w)) for k, w in mistakes.items() if k in available]
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

    def _line_core(self, gold: list[GoldStep]) -> tuple[Any, str, tuple[str, ...]] | None:
        line = gold[0].trap_plan if gold else None
        if not line or line[0].tool == SUBMIT_ANSWER:
            return None
        ids = {g.key: f"step_{1 + i}" for i, g in enumerate(line)}
        return step_core(render_step(line[0], ids))

    def initial_gold(self) -> Gold:
        """The right plan before anything ran; it never changes within an episode, and
        partial-plan requests compare against it many times, so it is built once."""
        if self._initial is None:
            gold = self.oracle.remaining([])
            ids = {g.key: f"step_{1 + i}" for i, g in enumerate(gold)}
            rendered = [self.render(self.skill, g, ids) for g in gold]
            traps = [self.render(self.skill, g.trap, ids) if g.trap else None for g in gold]
            self._initial = Gold(
                gold,
                ids,
                rendered,
                traps,
                cores=[step_core(r) for r in rendered],
                trap_cores=[step_core(t) if t else None for t in traps],
                line_core=self._line_core(gold),
            )
        return self._initial
