"""The shape of the simulated model's belief at a decision point.

Kept apart from the simulator's reading of prompts and from its decisions: proposing, judging
and a rollout all read the same :class:`Belief`, so what a belief is has one definition.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

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
    "other": (0.1, 0.3),  # another tool of the env than the right one
}
# Options a confused belief can prefer but a sample never slips to: a call to another tool of
# the env is a wrong call the model has to believe in. It gets a look only as the preferred
# option, so proposals, slips and a judge's view are those of the options it sees at the point.
BELIEVED_ONLY = frozenset({"other"})
# The options that are a different way to go on (not a mistake of form): what a further
# sample of the same decision can choose instead of the preferred one.
ROUTES = frozenset({"right", "trap", "fallback", "persist"})
# Mistake kinds that make sense for one action (a Thought/Action turn or candidate) and for
# one step written into a plan, with the skill weight that picks among them (a plan step's
# own weights fall back to the shared ones: ``SkillProfile.resolved``).
ACTION_MISTAKES = {
    "invented": "w_hallucinate",
    "premise": "w_premise",
    "stop": "w_stop",  # gives up after a failure
    "early": "w_stop",  # ... or, with no failure to give up on, answers with what it has
    "other": "w_other",  # another tool of the env: a wrong call that runs
}
PLAN_MISTAKES = {
    "invented": "w_hallucinate_plan",
    "premise": "w_premise_plan",
    "stop": "w_stop_plan",
    "dependency": "w_dependency",
    "unchecked": "w_unchecked",
    "other": "w_other_plan",
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
        """How good each visible option looks (drawn on first read)."""
        if self._values is None:
            assert self._draw_values is not None
            self._values, self._draw_values = self._draw_values(), None
        return self._values

    def value(self, kind: str) -> float:
        """How good an option of ``kind`` looks; one the model cannot see looks middling."""
        return self.values.get(kind, sum(LOOK["other"]) / 2)

    def corrected(self) -> Belief:
        """The same view with the right option preferred: what the model believes once a
        reflection has shown it its mistake (the values of the two options swap)."""
        if self.top == "right" or "right" not in self.values:
            return self
        values = dict(self.values)
        values["right"], values[self.top] = values[self.top], values["right"]
        return Belief("right", values)

    def runner_up(self) -> tuple[str, float] | None:
        """The best-looking other *route* (the right one, the attractive wrong one, a
        fallback, the failed call again), if it looks at least fair (as good as a right
        option the model does not prefer can look): where a fresh sample of the same decision
        can go instead. Mistakes of form (a dropped check, a guessed argument, an invented
        tool) are slips, not routes."""
        others = [(v, k) for k, v in self.values.items() if k != self.top and k in ROUTES]
        if not others:
            return None
        v, k = max(others)
        return (k, v) if v >= LOOK["right"][0] else None


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


def digest(*parts: object) -> str:
    """A short stable name for a decision point (a blake2b digest of the parts' repr)."""
    return hashlib.blake2b(repr(parts).encode(), digest_size=8).hexdigest()


NO_OBSERVATION = digest()  # the signature of nothing observed yet
