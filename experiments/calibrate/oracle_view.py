"""The oracle's view of an episode's decision points, computed with no skill involved.

Calibration must classify a model's answer against the options that were on offer, whatever
model answered. The options come from the simulator's own machinery (the same
:class:`~planarena.planners.llm.sim_mind.SimMind` and
:class:`~planarena.planners.llm.sim_decider.Decider` that answer a simulated request), built
on the episode's oracle with the ``perfect`` profile: an attentive reader (nothing overlooked
unless a caller says so) that writes every check of a step's pool. No skill number enters an
option: which observations are taken at face value is the caller's explicit ``overlooked``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from planarena.envs.oracle import REPORT_UNREACHABLE, SUBMIT_ANSWER, GoldStep, Obs, Oracle
from planarena.planners.formats import FINISH
from planarena.planners.llm.profiles import SKILLS
from planarena.planners.llm.protocol import Observed
from planarena.planners.llm.sim_decider import Decider
from planarena.planners.llm.sim_mind import Gold, SimMind
from planarena.planners.llm.sim_reading import step_core

MAX_SUBTLE = 3
"""At most this many subtle observations are considered together (2**n views)."""


@dataclass(frozen=True)
class ActionPoint:
    """The options at one point of a transcript, as one reading of the observations sees
    them: ``gold`` (the right steps left), ``options`` (kind -> (tool, literal args)), and
    the observations this reading took at face value."""

    gold: list[GoldStep]
    options: dict[str, tuple[str, dict[str, Any]]]
    overlooked: frozenset[str]


class OracleView:
    """One episode's oracle, read through the simulator's machinery without a skill."""

    def __init__(self, oracle: Oracle, seed_keys: tuple[object, ...]) -> None:
        self.oracle = oracle
        self.skill = SKILLS["perfect"]
        self.mind = SimMind(self.skill, oracle, seed_keys=seed_keys)
        # a decider that never errs: only its option machinery is used
        self.decider = Decider(self.mind, self.skill, random.Random(0), 0)

    # --- reading ----------------------------------------------------------------------------

    def tool_names(self) -> frozenset[str]:
        return self.oracle.tool_names()

    def transcript(self, observed: Sequence[Observed]) -> list[Obs]:
        """A transcript's observations as the oracle reads them (keyed by position)."""
        return self.mind.transcript(observed)

    def execution_log(self, observed: Sequence[Observed]) -> tuple[list[Obs], set[str]]:
        """An execution log's observations (keyed by step id) and the ids a check rejected."""
        return self.mind.execution_log(observed)

    def subtle_keys(self, obs: Sequence[Obs], flagged: frozenset[str] = frozenset()) -> list[str]:
        """Keys of observations with a warning sign a model may miss (not flagged by a check)."""
        return [o.key for o in obs if o.key not in flagged and self.oracle.subtle(o)]

    @staticmethod
    def readings(subtle: Sequence[str]) -> list[frozenset[str]]:
        """Every set of the (first :data:`MAX_SUBTLE`) subtle observations a model may have
        taken at face value, the attentive reading (nothing overlooked) first."""
        keys = list(subtle)[:MAX_SUBTLE]
        return [frozenset(c) for r in range(len(keys) + 1) for c in combinations(keys, r)]

    # --- actions ----------------------------------------------------------------------------

    def action_point(self, obs: list[Obs], overlooked: frozenset[str] = frozenset()) -> ActionPoint:
        """The options at a transcript's point under one reading (the simulator's own
        ``Decider._action_options``: right, trap, fallback, persist, stop, premise, early,
        invented)."""
        gold = self.oracle.remaining(obs, overlooked)
        options = self.decider._action_options(gold, obs, overlooked)  # noqa: SLF001
        return ActionPoint(gold, options, overlooked)

    def action_kind(self, tool: str, args: Any, point: ActionPoint) -> str:
        """Which option an answered action is: the option it equals (a finish by its
        status), else a tool the env lacks (``invented``), a finish (``stop`` on failure,
        ``early`` on success), the right tool with other arguments (``premise``), or
        ``other``."""
        args = args if isinstance(args, dict) else {}
        for kind, (t, a) in point.options.items():
            if t == tool and a == args:
                return kind
        for kind, (t, a) in point.options.items():
            if tool == FINISH == t and a.get("status") == args.get("status"):
                return kind
        if tool == FINISH:
            return "stop" if args.get("status") == "failure" else "early"
        if tool not in self.tool_names():
            return "invented"
        right = point.options.get("right")
        if right is not None and right[0] == tool:
            return "premise"
        trap = point.options.get("trap")
        if trap is not None and trap[0] == tool and tool != right[0]:  # type: ignore[index]
            return "trap"
        return "other"

    # --- plans ------------------------------------------------------------------------------

    def initial_gold(self) -> Gold:
        """The right plan before anything ran (steps, rendered with every check of their
        pool, their traps, the attractive wrong line)."""
        return self.mind.initial_gold()

    def plan_gold(self, obs: list[Obs], overlooked: frozenset[str] = frozenset()) -> list[GoldStep]:
        """The right remaining steps after an execution log, under one reading."""
        return self.oracle.remaining(obs, overlooked)

    def step_kind(self, step: Any, i: int) -> str:
        """How step ``i`` of a plan written before anything ran compares with the right plan
        (the simulator's ``Decider._kind_of`` with every check of the pool: a right step
        without any post-condition, where the pool has one, is ``unchecked``)."""
        return self.decider._kind_of(step, i)  # noqa: SLF001

    @staticmethod
    def step_kind_against(
        step: Any,
        g: GoldStep,
        rendered: dict[str, Any],
        trap: dict[str, Any] | None,
        tools: frozenset[str],
    ) -> str:
        """How a written step compares with the right step ``g`` (rendered as a model writes
        it) and its trap: right, trap, invented, premise (right tool, other arguments),
        dependency (right tool and arguments, dependencies dropped), unchecked (right, no
        post-condition where the pool has one) or other."""
        if not isinstance(step, dict):
            return "other"
        if step.get("done"):
            return "stop"
        if step.get("tool") not in tools:
            return "invented"
        core, right = step_core(step), step_core(rendered)
        if core == right:
            return "right" if step.get("post_conditions") or not g.checks else "unchecked"
        if trap is not None and core == step_core(trap):
            return "trap"
        if core[0] == right[0] and core[2] == right[2]:
            return "premise"
        if core[0] == right[0] and core[1] == right[1]:
            return "dependency"
        return "other"

    def render(self, g: GoldStep, ids: dict[str, str]) -> dict[str, Any]:
        """A gold step as a model writes it, with every check of its pool."""
        return self.mind.render(self.skill, g, ids)

    @staticmethod
    def is_unreachable(gold: Sequence[GoldStep]) -> bool:
        return bool(gold) and gold[0].tool == REPORT_UNREACHABLE

    @staticmethod
    def line_starts_wrong(gold: Sequence[GoldStep]) -> bool:
        """Whether the attractive wrong line is on offer here as a plan's first step."""
        line = gold[0].trap_plan if gold else None
        return bool(line) and line[0].tool != SUBMIT_ANSWER  # type: ignore[index]
