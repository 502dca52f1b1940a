"""Sequential allocation: a study's cells take their tasks in stages and stop once settled.

``sequential.stages=[s1, s2, ...]`` (tasks per env x complexity, increasing, below
``n_tasks``) runs every cell on its first ``s1`` tasks, then asks the study which cells its
records already settle (:meth:`~planarena.experiments.studies.registry.Study.settled_cells`);
only the others go on to ``s2`` tasks, and so on up to ``n_tasks``. A cell's tasks are always a
prefix of the full run's, every planner of the cell runs the same ones, and an episode is the
episode the full run would have recorded (the key changes which episodes run, never what they
are), so resuming the dir with ``sequential.stages=[]`` completes it to the full run.

The rule a study applies to each of its comparisons (:class:`Rule`), at each of the ``K``
interim looks (``K`` = the number of stages):

- **separable**: the exact paired interval of the difference, at confidence ``1 - alpha / K``,
  excludes 0; or
- **a settled tie** (completion only): the one-sided ``1 - alpha / K`` Clopper-Pearson upper
  bound of the share of tasks on which the two differ is below ``margin``; the difference,
  which that share bounds, is then within ``margin`` of 0.

Error rate: each interim interval misses the true difference with probability at most
``alpha / K``; by the union bound over the ``K`` looks, the chance that a comparison is settled
at some look on an interval that misses it (a sign the truth contradicts, or a tie wider than
``margin``) is at most ``alpha``. A cell stops when every comparison the study draws from it is
settled; the study's own analysis then runs on the records as usual.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from planarena.experiments.studies.sensitivity_stats import clopper_pearson, net_win_interval


@dataclass(frozen=True)
class Rule:
    """When a paired comparison is settled at an interim look (the module's docstring)."""

    looks: int
    alpha: float = 0.05
    margin: float = 0.05

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> Rule | None:
        """The run's rule, or None when it runs every cell on every task."""
        spec = config.get("sequential") or {}
        stages = list(spec.get("stages") or [])
        if not stages:
            return None
        return cls(len(stages), float(spec.get("alpha", 0.05)), float(spec.get("margin", 0.05)))

    @property
    def level(self) -> float:
        """Each look's error: ``alpha`` spread evenly over the looks (Bonferroni)."""
        return self.alpha / self.looks

    def completion_settled(self, differences: Sequence[float], against: float = 0.0) -> bool:
        """Per-task completion differences ``a - b`` of two planners on the same tasks (-1, 0
        or 1 with one trial; a task counts as a win by its sign): separable from ``against``,
        or (``against`` 0) a tie within ``margin``."""
        d = np.asarray(differences, dtype=float)
        d = d[np.isfinite(d)]
        n = len(d)
        if n == 0:
            return False
        wins, losses = int((d > 0).sum()), int((d < 0).sum())
        low, high = net_win_interval(wins, losses, n, 1.0 - self.level)
        if low > against or high < against:
            return True
        if against != 0.0:
            return False
        _, upper = clopper_pearson(wins + losses, n, 1.0 - 2.0 * self.level)  # one-sided
        return upper < self.margin

    def ratio_settled(self, log_ratios: Sequence[float], against: float = 0.0) -> bool:
        """Per-task log ratios of a cost (tokens, latency) of two planners: separable from
        ``against`` when the normal interval of their mean, at ``1 - alpha / K``, excludes it
        (no settled tie: a cost claim is about a direction or a size)."""
        x = np.asarray(log_ratios, dtype=float)
        x = x[np.isfinite(x)]
        if len(x) < 2:
            return False
        half = _z(self.level) * float(x.std(ddof=1)) / math.sqrt(len(x))
        mean = float(x.mean())
        return mean - half > against or mean + half < against


def _z(level: float) -> float:
    """The two-sided normal quantile: ``P(|Z| > z) = level``."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(1.0 - level / 2.0)
