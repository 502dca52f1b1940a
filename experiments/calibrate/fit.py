"""Maximum-likelihood fits of the proposer's skill: the simulator's own generative model of a
decision, written as a likelihood over the ``choice`` rows (:mod:`.extract`), and Bernoulli
rates for malformed and sloppy output per format.

The decision model (``SimMind.belief`` and ``Decider._sample``): at a decision point the
belief prefers the trap (``p_trap``, when one is on offer), else the failed call again
(``p_persist``), else, with the chance ``err * systematic_share``, a mistake drawn by the
weights ``w_*`` among those on offer, else the right option; ``err = (1 - p_correct) * (1 +
prompt_tokens / context_scale_tokens)`` (capped at 0.95), every error probability times the
role's ``error_scale``. The answer is the preferred option, except that with the chance
``err * (1 - systematic_share)`` it slips to another option drawn in proportion to how good
it looks (the ``LOOK`` ranges). A subtle warning sign is missed with ``p_miss_signal``: the
likelihood sums over every reading of the observations, and, for a plan, over whether it
started on the attractive wrong line and whether it repeated the failed call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
from planarena.experiments.calibrate.optim import nelder_mead
from planarena.experiments.calibrate.registry import (
    Estimate,
    FitOptions,
    at_the_edge,
    bernoulli,
    judged,
    register_fit,
    task_resamples,
)
from planarena.planners.llm.profiles import (
    MALFORMED_FORMATS,
    PERSISTENCE_FORMATS,
    SkillProfile,
)
from planarena.planners.llm.sim_belief import LOOK

KINDS = (
    "right", "trap", "persist", "fallback", "premise", "early", "invented", "stop",
    "dependency", "unchecked", "other",
)  # fmt: skip
IX = {k: i for i, k in enumerate(KINDS)}
CTYPES = {"action": 0, "step": 1, "line": 2, "persist": 3}
# the mistakes a confused belief draws among, per choice type, and the weight of each
ACTION_W = {"invented": "w_hallucinate", "premise": "w_premise", "stop": "w_stop",
            "early": "w_stop", "other": "w_other"}  # fmt: skip
STEP_W = {"invented": "w_hallucinate_plan", "premise": "w_premise_plan", "stop": "w_stop_plan",
          "dependency": "w_dependency", "unchecked": "w_unchecked",
          "other": "w_other_plan"}  # fmt: skip

# The decision model's parameters, in the optimiser's order, with their transform.
PARAMS = (
    "p_correct", "context_scale_tokens", "p_trap", "p_persist", "p_miss_signal",
    "systematic_share", "w_hallucinate", "w_premise", "w_other", "w_hallucinate_plan",
    "w_premise_plan", "w_dependency", "w_other_plan",
)  # fmt: skip
LOGIT = {"p_correct", "p_trap", "p_persist", "p_miss_signal", "systematic_share"}
START = {
    "p_correct": 0.9, "context_scale_tokens": 4000.0, "p_trap": 0.3, "p_persist": 0.3,
    "p_miss_signal": 0.3, "systematic_share": 0.5, "w_hallucinate": 1.0, "w_premise": 1.0,
    "w_other": 0.05, "w_hallucinate_plan": 1.0, "w_premise_plan": 1.0, "w_dependency": 1.0,
    "w_other_plan": 0.05,
}  # fmt: skip
# The two pools of mistakes: only the ratios within a pool are identified, so each pool's
# weights are scaled to mean 1 over the profile's weights in it (its "other" moves with it).
ACTION_POOL = ("w_hallucinate", "w_premise", "w_stop")
STEP_POOL = ("w_hallucinate_plan", "w_premise_plan", "w_stop_plan", "w_dependency")
POOL_OF = {
    **{w: ACTION_POOL for w in (*ACTION_POOL, "w_other")},
    **{w: STEP_POOL for w in (*STEP_POOL, "w_unchecked", "w_other_plan")},
}
UNITS = ("w_stop", "w_stop_plan")  # each pool's unit in the optimiser (held at 1)
WEIGHT_POOLS = ((*ACTION_POOL, "w_other"), (*STEP_POOL, "w_unchecked", "w_other_plan"))
"""Each pool's fields as a profile writes them: one composition (only ratios within it are
identified), so a profile takes a pool from one source, never some weights from the fit and
the rest from a default."""
EPS = 1e-12


LOWER = np.array([1e-6 if q in LOGIT else 0.0 for q in PARAMS])
# A weight's range is wide: its pool's stop weight is the unit, and a model that almost never
# stops (the shipped 0.5B model's tool calls) puts every other weight at a large multiple of it.
UPPER = np.array([1 - 1e-6 if q in LOGIT else (50.0 if q == "context_scale_tokens" else 1e4)
                  for q in PARAMS])  # fmt: skip
STEPS = np.array([0.1 if q in LOGIT else 0.5 for q in PARAMS])


def _to_x(values: dict[str, float]) -> np.ndarray:
    """The optimiser's coordinates: the probabilities and weights themselves, and the decay
    per 1,000 prompt tokens (``1000 / context_scale_tokens``; 0 is no decay), so a value at
    the edge of its range (no trap ever taken, no decay) is an ordinary point."""
    out = [1000.0 / values[q] if q == "context_scale_tokens" else values[q] for q in PARAMS]
    return np.array(out, dtype=float)


def _from_x(x: np.ndarray) -> dict[str, float]:
    x = np.clip(x, LOWER, UPPER)
    out = {q: float(v) for q, v in zip(PARAMS, x, strict=True)}
    out["context_scale_tokens"] = 1000.0 / max(out["context_scale_tokens"], 1e-9)
    for unit in UNITS:  # each pool's scale: its stop weight is the unit (renormalised on output)
        out[unit] = 1.0
    out["w_unchecked"] = float(np.mean([out[w] for w in STEP_POOL]))
    return out


@lru_cache(maxsize=4096)
def shares(avail: str) -> np.ndarray:
    """S[top, c]: the chance a slip from ``top`` lands on ``c``, among the options on offer
    (each other option drawn in proportion to its look, the looks uniform in their ``LOOK``
    range: a Monte Carlo mean, seeded)."""
    kinds = [k for k in avail.split(",") if k]
    out = np.zeros((len(KINDS), len(KINDS)))
    rng = np.random.default_rng(0)
    draws = {k: rng.uniform(*LOOK.get(k, LOOK["other"]), size=4000) for k in kinds}
    for top in [*kinds, "other"]:
        others = [k for k in kinds if k != top]
        if not others:
            continue
        total = sum(draws[k] for k in others)
        for k in others:
            out[IX[top], IX[k]] = float(np.mean(draws[k] / total))
    return out


def _mask(names: Sequence[str]) -> np.ndarray:
    m = np.zeros((len(names), len(KINDS)))
    for i, s in enumerate(names):
        for k in str(s).split(","):
            if k:
                m[i, IX[k]] = 1.0
    return m


@dataclass
class Choices:
    """The ``choice`` rows as arrays: one line per choice (aggregated where independent)."""

    ctype: np.ndarray
    avail: np.ndarray  # [n, K] 0/1
    match: np.ndarray  # [n, K] 0/1
    q: np.ndarray  # [n, K]: the chance a slip from top k lands on a matching option
    tokens: np.ndarray
    scale: np.ndarray
    task: np.ndarray  # task index (for bootstrap weights)
    count: np.ndarray  # how many identical independent choices a line stands for
    branch: np.ndarray  # branch index among mixture branches (-1: independent)
    prior_missed: np.ndarray  # per mixture branch: readings' missed / attentive counts
    prior_kept: np.ndarray
    prior_scale: np.ndarray  # per mixture branch: its role's error scale
    branch_unit: np.ndarray  # per mixture branch: its unit index
    unit_task: np.ndarray  # per unit: task index
    n_units: int
    tasks: list[str]

    @property
    def n(self) -> int:
        return int(self.count.sum())


def choices_of(table: pd.DataFrame) -> Choices | None:
    """The choice rows of ``table`` as arrays for the likelihood."""
    rows = table[table["quantity"] == "choice"].copy()
    if rows.empty:
        return None
    tasks = sorted(set(rows["task"]))
    task_ix = {t: i for i, t in enumerate(tasks)}
    rows["task_ix"] = rows["task"].map(task_ix)
    rows["n_subtle"] = rows["n_subtle"].fillna(0).astype(int)
    rows["n_missed"] = rows["n_missed"].fillna(0).astype(int)
    branches = rows.groupby("unit")["branch"].transform("nunique")
    single = (branches == 1) & (rows["n_subtle"] == 0)
    ind = rows[single].copy()
    ind["tok"] = (ind["prompt_tokens"] // 25) * 25 + 12
    keys = ["task_ix", "ctype", "avail", "matches", "error_scale", "tok"]
    ind = ind.groupby(keys, sort=False).size().reset_index(name="count")
    mix = rows[~single].copy()
    mix["bkey"] = mix["unit"].astype(str) + ":" + mix["branch"].astype(str)
    bkeys = list(dict.fromkeys(mix["bkey"]))
    bix = {b: i for i, b in enumerate(bkeys)}
    units = list(dict.fromkeys(mix["unit"]))
    uix = {u: i for i, u in enumerate(units)}
    first = mix.drop_duplicates("bkey").set_index("bkey").loc[bkeys]
    ctype = np.concatenate([ind["ctype"].map(CTYPES), mix["ctype"].map(CTYPES)]).astype(int)
    avail_s = [*ind["avail"], *mix["avail"]]
    match_s = [*ind["matches"], *mix["matches"]]
    match = _mask(match_s)
    q = np.zeros_like(match)
    for i, a in enumerate(avail_s):
        q[i] = shares(a) @ match[i] if a else 0.0
    return Choices(
        ctype=ctype,
        avail=_mask(avail_s),
        match=match,
        q=q,
        tokens=np.concatenate([ind["tok"], mix["prompt_tokens"]]).astype(float),
        scale=np.concatenate([ind["error_scale"], mix["error_scale"]]).astype(float),
        task=np.concatenate([ind["task_ix"], mix["task_ix"]]).astype(int),
        count=np.concatenate([ind["count"], np.ones(len(mix))]).astype(float),
        branch=np.concatenate([-np.ones(len(ind)), mix["bkey"].map(bix)]).astype(int),
        prior_missed=first["n_missed"].to_numpy(float),
        prior_kept=(first["n_subtle"] - first["n_missed"]).to_numpy(float),
        prior_scale=first["error_scale"].to_numpy(float),
        branch_unit=first["unit"].map(uix).to_numpy(int),
        unit_task=mix.drop_duplicates("unit").set_index("unit").loc[units]["task_ix"].to_numpy(int),
        n_units=len(units),
        tasks=tasks,
    )


@dataclass
class _Static:
    """What :func:`choice_prob` needs of the choices that no parameter changes."""

    action: np.ndarray
    persist: np.ndarray
    has_trap: np.ndarray  # a trap on offer (and a choice type where the belief can take it)
    has_persist: np.ndarray  # the failed call on offer to a tool-call decision
    w_action: np.ndarray  # [n, K]: 1 where a mistake of a tool call is on offer
    w_step: np.ndarray  # [n, K]: 1 where a mistake of a plan step is on offer
    m_cols: np.ndarray  # [n, 3]: the answer is right / trap / persist
    q_cols: np.ndarray  # [n, 3]: a slip from right / trap / persist lands on the answer


def _static(c: Choices) -> _Static:
    cached = getattr(c, "_static", None)
    if cached is not None:
        return cached
    a = c.avail
    action, step = c.ctype == CTYPES["action"], c.ctype == CTYPES["step"]
    line, persist = c.ctype == CTYPES["line"], c.ctype == CTYPES["persist"]
    # a wrong call that runs is on offer to a confused belief wherever the model made one (an
    # env whose only other tools are the step's fallback and trap has none for the simulator),
    # but only at a step still to take (where ``invented`` is on offer): where the model
    # believes the work done (its answer the one option) or the goal unreachable, the
    # simulator offers no other call (``Decider._action_options`` returns before it). Else
    # any w_other > 0 gave a reading that saw the work done all of err * systematic_share
    # for a tool call, and the fit took w_other ~1e-6 to explain tool calls by readings that
    # missed a sign (p_miss_signal 0.62 [0.59, 1.00] against a true 0.5)
    with_other = a.copy()
    with_other[:, IX["other"]] = a[:, IX["invented"]]

    def mistakes(kinds: dict[str, str], rows: np.ndarray) -> np.ndarray:
        cols = np.zeros(len(KINDS))
        for k in kinds:
            cols[IX[k]] = 1.0
        return with_other * cols * rows[:, None]

    cols = [IX["right"], IX["trap"], IX["persist"]]
    st = _Static(
        action=action,
        persist=persist,
        has_trap=(action | step | line) & (a[:, IX["trap"]] > 0),
        has_persist=action & (a[:, IX["persist"]] > 0),
        w_action=mistakes(ACTION_W, action),
        w_step=mistakes(STEP_W, step),
        m_cols=c.match[:, cols],
        q_cols=c.q[:, cols],
    )
    c._static = st  # type: ignore[attr-defined]
    return st


def choice_prob(c: Choices, p: dict[str, float]) -> np.ndarray:
    """The chance of each choice line's observed answer under the parameters ``p``."""
    st = _static(c)
    s = c.scale
    err = np.minimum(0.95, (1 - p["p_correct"]) * s * (1 + c.tokens / p["context_scale_tokens"]))
    pt = np.minimum(1.0, p["p_trap"] * s)
    pp = np.minimum(1.0, p["p_persist"] * s)
    share = p["systematic_share"]
    t_trap = np.where(st.has_trap, pt, 0.0)
    persisting = np.where(st.has_persist, pp, 0.0)
    t_persist = np.where(st.persist, pp, (1 - t_trap) * persisting)
    rest = np.where(st.persist, 1 - pp, (1 - t_trap) * (1 - persisting))
    w_act = np.zeros(len(KINDS))
    w_step = np.zeros(len(KINDS))
    for k, w in ACTION_W.items():
        w_act[IX[k]] = p[w]
    for k, w in STEP_W.items():
        w_step[IX[k]] = p[w]
    weights = st.w_action * w_act + st.w_step * w_step
    total = weights.sum(axis=1)
    has = total > 0
    confused = np.where(has, err * share, 0.0) * rest
    per_weight = np.where(has, confused / np.where(has, total, 1.0), 0.0)
    t_right = rest - confused
    slip = np.where(st.persist, 0.0, err * (1 - share))
    stay = (weights * c.match).sum(axis=1) * per_weight
    moved = (weights * c.q).sum(axis=1) * per_weight
    tops = np.stack([t_right, t_trap, t_persist], axis=1)
    stay = stay + (tops * st.m_cols).sum(axis=1)
    moved = moved + (tops * st.q_cols).sum(axis=1)
    return (1 - slip) * stay + slip * moved


def task_loglik(c: Choices, p: dict[str, float]) -> np.ndarray:
    """The log-likelihood of every task's choices (a mixture unit summed over its readings)."""
    logp = np.log(np.maximum(choice_prob(c, p), EPS))
    ind = c.branch < 0
    out = np.bincount(c.task[ind], weights=logp[ind] * c.count[ind], minlength=len(c.tasks))
    out = out.astype(float)  # with no row outside a mixture, numpy counts in integers
    if c.n_units:
        pm = np.clip(p["p_miss_signal"] * c.prior_scale, 1e-9, 1 - 1e-9)
        branch_ll = np.bincount(c.branch[~ind], weights=logp[~ind], minlength=len(c.branch_unit))
        branch_ll += c.prior_missed * np.log(pm) + c.prior_kept * np.log(1 - pm)
        top = np.full(c.n_units, -np.inf)
        np.maximum.at(top, c.branch_unit, branch_ll)
        summed = np.bincount(c.branch_unit, weights=np.exp(branch_ll - top[c.branch_unit]),
                             minlength=c.n_units)  # fmt: skip
        unit_ll = top + np.log(np.maximum(summed, EPS))
        out += np.bincount(c.unit_task, weights=unit_ll, minlength=len(c.tasks))
    return out


def loglik(c: Choices, p: dict[str, float], weights: np.ndarray | None = None) -> float:
    """The total log-likelihood, weighted per task (a bootstrap resample's multiplicities)."""
    per_task = task_loglik(c, p)
    return float(per_task.sum() if weights is None else per_task @ weights)


def mle_x(c: Choices, x0: np.ndarray | None = None, weights: np.ndarray | None = None,
          max_iter: int = 3000, step: float = 1.0, fixed: np.ndarray | None = None
          ) -> np.ndarray:  # fmt: skip
    """The coordinates (:func:`_to_x`) that maximise :func:`loglik` within their range
    (``fixed``: coordinates held at their value in ``x0``)."""
    x0 = _to_x(START) if x0 is None else x0.copy()
    free = np.ones(len(x0), dtype=bool) if fixed is None else ~fixed

    def full(z: np.ndarray) -> np.ndarray:
        x = x0.copy()
        x[free] = z
        return x

    def f(z: np.ndarray) -> float:
        x = full(z)
        inside = np.clip(x, LOWER, UPPER)
        return -loglik(c, _from_x(inside), weights) + 1e3 * float(np.sum((x - inside) ** 2))

    z = nelder_mead(f, x0[free], step=STEPS[free] * step, max_iter=max_iter)
    z = nelder_mead(f, z, step=STEPS[free] * step / 4, max_iter=max_iter)  # a restart near it
    return onto_edges(c, np.clip(full(z), LOWER, UPPER), free, weights)


EDGE_REACH = 1e-3
"""How far from an edge a coordinate the optimiser stopped at is tried on the edge itself."""


def onto_edges(c: Choices, x: np.ndarray, free: np.ndarray,
               weights: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """``x`` with every free coordinate within ``EDGE_REACH`` of an edge of its range moved
    onto it where the log-likelihood is no lower there. A simplex stops short of a maximum on
    an edge by as much as its last step, which can be more than ``EDGE_TOLERANCE``: a
    coordinate left there is stepped by the bootstrap though the likelihood rises to the edge
    (``systematic_share`` 2e-5 short of 1, refitted with the decay held, once stepped every
    resample along a direction the finite differences saw as convex: ``w_other`` 1.9 [0, 11],
    ``p_correct`` [0, 1])."""
    x = x.copy()
    best = loglik(c, _from_x(x), weights)
    for i in np.flatnonzero(free):
        for edge in (LOWER[i], UPPER[i]):
            if x[i] == edge or abs(x[i] - edge) > EDGE_REACH:
                continue
            y = x.copy()
            y[i] = edge
            ll = loglik(c, _from_x(y), weights)
            if ll >= best:
                x, best = y, ll
    return x


def mle(c: Choices, weights: np.ndarray | None = None) -> dict[str, float]:
    """The parameters that maximise :func:`loglik`."""
    return _from_x(mle_x(c, weights=weights))


def task_derivatives(c: Choices, x: np.ndarray, h: float = 1e-4) -> tuple[np.ndarray, np.ndarray]:
    """(G[t, i], H[t, i, j]): every task's gradient and Hessian of its log-likelihood in the
    transformed parameters, by central differences."""
    d = len(x)

    def moved(at: np.ndarray, i: int, by: float) -> np.ndarray:
        out = at.copy()
        out[i] = np.clip(at[i] + by, LOWER[i], UPPER[i])
        return out

    def grad(at: np.ndarray) -> np.ndarray:
        g = np.zeros((len(c.tasks), d))
        for i in range(d):
            up, down = moved(at, i, h), moved(at, i, -h)
            span = up[i] - down[i]
            g[:, i] = (task_loglik(c, _from_x(up)) - task_loglik(c, _from_x(down))) / span
        return g

    g0 = grad(x)
    hess = np.zeros((len(c.tasks), d, d))
    for j in range(d):  # forward differences of the gradient (backward at an upper edge)
        up = moved(x, j, 4 * h)
        if up[j] == x[j]:
            up = moved(x, j, -4 * h)
        hess[:, :, j] = (grad(up) - g0) / (up[j] - x[j])
    hess = (hess + hess.transpose(0, 2, 1)) / 2
    return g0, hess


EDGE_TOLERANCE = 1e-5
"""How close to an edge, as a share of the coordinate's range, the optimiser's stopping point
counts as on it: it stops near a bound, never exactly on it (docs/calibration.md, Limits)."""


def at_edge(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    """The coordinates held at an edge of their range by the data (the likelihood still
    rises beyond it): a maximum there is not a stationary point, so they are not stepped.
    One left free just inside its edge would be stepped, and so would every coordinate
    correlated with it."""
    tol = EDGE_TOLERANCE * (UPPER - LOWER)
    low = (x <= LOWER + tol) & (g < 0)
    high = (x >= UPPER - tol) & (g > 0)
    return low | high


def _projected_step(x: np.ndarray, g: np.ndarray, hess: np.ndarray, fixed: np.ndarray
                    ) -> np.ndarray:  # fmt: skip
    """One Newton step of a maximisation for the coordinates not ``fixed``, clipped to the
    box (a direction the data do not curve takes a long step: its replicates spread). The
    step is taken in coordinates relative to each one's size (a weight at 100 times its
    pool's unit is a 1 there), so the curvature floor is a unit of *relative* spread for a
    large coordinate: in absolute units it would hold a large weight still."""
    free = ~fixed
    delta = np.zeros(len(x))
    if free.any():
        size = np.maximum(np.abs(x[free]), 1.0)
        sub = hess[np.ix_(free, free)] * np.outer(size, size)
        vals, vecs = np.linalg.eigh(sub)
        floor = 1.0  # a direction the data curve less than this: a unit of spread
        vals = np.minimum(vals, -floor)  # a maximum: negative curvature in every direction
        delta[free] = -(vecs @ ((vecs.T @ (g[free] * size)) / vals)) * size
    return np.clip(x + delta, LOWER, UPPER)


def bisect(
    beyond: Callable[[float], bool], inside: float, outside: float, steps: int
) -> tuple[float, float]:
    """``(inside, outside)`` after ``steps`` halvings: the last points along a 1-D path found
    within and ``beyond`` a fall of the log-likelihood (the three likelihood bounds of this
    module walk their own paths with it)."""
    for _ in range(steps):
        mid = (inside + outside) / 2
        if beyond(mid):
            outside = mid
        else:
            inside = mid
    return inside, outside


def edge_interval(c: Choices, x: np.ndarray, i: int, drop: float = 1.92,
                  inward: float | None = None, base: float | None = None
                  ) -> tuple[float, float]:  # fmt: skip
    """For a coordinate at an edge: from the edge to where the log-likelihood, the others
    held, has fallen by ``drop`` (1.92: a one-sided 95 % likelihood bound) below ``base`` (by
    default its value at ``x``), going ``inward`` (+1 up, -1 down; by default away from the
    nearer edge)."""
    base = loglik(c, _from_x(x)) if base is None else base
    if inward is None:
        inward = 1.0 if x[i] - LOWER[i] <= UPPER[i] - x[i] else -1.0

    def beyond(t: float) -> bool:
        y = x.copy()
        y[i] = np.clip(x[i] + inward * t, LOWER[i], UPPER[i])
        return bool(base - loglik(c, _from_x(y)) > drop)

    _, hi = bisect(beyond, 0.0, UPPER[i] - LOWER[i], 40)
    other = float(np.clip(x[i] + inward * hi, LOWER[i], UPPER[i]))
    return (float(x[i]), other) if inward > 0 else (other, float(x[i]))


def one_step_boot(c: Choices, x: np.ndarray, boot: int, seed: int,
                  held: np.ndarray | None = None,
                  derivatives: tuple[np.ndarray, np.ndarray] | None = None,
                  ) -> list[np.ndarray]:  # fmt: skip
    """Task-bootstrap replicates of the MLE by one Newton step from the full-data optimum:
    each resample's gradient (its tasks' scores, with their multiplicities) against the full
    data's curvature. The linearised bootstrap: exact to first order, thousands of times
    cheaper than refitting, and stable where a resample's own curvature would not be. A
    direction the data barely curve is floored, not regularised away: its replicates
    spread, and its interval says so. Coordinates held at an edge of their range stay."""
    g, hess = derivatives if derivatives is not None else task_derivatives(c, x)
    fixed = at_edge(x, g.sum(axis=0)) | (np.zeros(len(x), dtype=bool) if held is None else held)
    total = hess.sum(axis=0)  # the full data's curvature, for every resample (stable)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(boot):
        w = np.bincount(rng.integers(0, len(c.tasks), len(c.tasks)), minlength=len(c.tasks))
        w = w.astype(float)
        out.append(_projected_step(x, w @ g, total, fixed))
    return out


def pool_unit(p: dict[str, float], weight: str) -> float:
    """The scale of ``weight``'s pool: the mean of the profile's weights in it."""
    return float(np.mean([p[w] for w in POOL_OF[weight]]))


def unit_interval(c: Choices, x: np.ndarray, unit: str, drop: float = 1.92
                  ) -> tuple[float, float]:  # fmt: skip
    """The unit weight's range (normalised) along the direction that scales every other
    weight of its pool by one factor, the rest held: from ``x`` each way to where the
    log-likelihood has fallen by ``drop``. A unit far smaller than its pool's other weights
    (a model that almost never stops) sits on a long, nearly flat stretch there, which a
    linearised bootstrap does not see."""
    others = np.array([POOL_OF.get(q) == POOL_OF[unit] and q != unit for q in PARAMS])
    base = loglik(c, _from_x(x))

    def at(k: float) -> np.ndarray:
        y = x.copy()
        y[others] = np.clip(x[others] * k, LOWER[others], UPPER[others])
        return y

    def beyond(log_k: float) -> bool:
        return bool(base - loglik(c, _from_x(at(float(np.exp(log_k))))) > drop)

    ends = []
    for sign in (1.0, -1.0):  # log k up (the unit shrinks) and down (it grows)
        outside = sign * np.log(1e4)
        if base - loglik(c, _from_x(at(float(np.exp(outside))))) <= drop:
            inside = outside  # still within the drop at the range's end
        else:
            inside, _ = bisect(beyond, 0.0, outside, 30)
        ends.append(1.0 / pool_unit(_from_x(at(float(np.exp(inside)))), unit))
    return min(ends), max(ends)


def normalised(p: dict[str, float]) -> dict[str, float]:
    """The mistake weights scaled to mean 1 per pool (only ratios within a pool are
    identified)."""
    out = dict(p)
    for w in POOL_OF:
        out[w] = p[w] / pool_unit(p, w)
    return out


@dataclass
class Support:
    """How much the choices say about each parameter: decisions where it could act."""

    n: dict[str, int]
    tasks: dict[str, int]
    absent: dict[str, str]


def support(c: Choices) -> Support:
    """Per parameter, the choices on which it could have acted (and their tasks)."""
    a, cnt, ctype = c.avail, c.count, c.ctype
    independent = c.branch < 0
    n_units = int(cnt[independent].sum()) + c.n_units

    def over(mask: np.ndarray) -> tuple[int, int]:
        return int(cnt[mask].sum()), len(set(c.task[mask]))

    def decisions(mask: np.ndarray) -> tuple[int, int]:
        """Independent choices plus mixture units (each unit one decision, however many
        readings it sums over)."""
        units = set(c.branch_unit[c.branch[mask & ~independent]]) if c.n_units else set()
        n = int(cnt[mask & independent].sum()) + len(units)
        return n, len(set(c.task[mask]))

    trap = over(a[:, IX["trap"]] > 0)
    persist = over((a[:, IX["persist"]] > 0) | (ctype == CTYPES["persist"]))
    dep = over(a[:, IX["dependency"]] > 0)
    miss = (c.n_units if c.prior_missed.size and (c.prior_missed > 0).any() else 0,
            len(set(c.unit_task)))  # fmt: skip
    alln = (n_units, len(c.tasks))
    on = {ACTION_POOL: decisions(ctype == CTYPES["action"]),
          STEP_POOL: decisions(ctype == CTYPES["step"])}  # fmt: skip
    n = {
        "p_correct": alln, "context_scale_tokens": alln, "systematic_share": alln,
        **{w: on[pool] for w, pool in POOL_OF.items()},
        "p_trap": trap, "p_persist": persist, "w_dependency": dep, "p_miss_signal": miss,
        "w_unchecked": (0, 0),
    }  # fmt: skip
    never = {ACTION_POOL: "no tool call was ever chosen",
             STEP_POOL: "no plan step was ever written"}  # fmt: skip
    absent = {
        **{w: never[pool] for w, pool in POOL_OF.items()},
        "p_trap": "no trap was ever on offer",
        "p_persist": "no failed call was ever there to repeat",
        "p_miss_signal": "no subtle warning sign was ever in view",
        "w_dependency": "no plan step with a dependency was ever written",
        "w_unchecked": "an omitted post-condition cannot be told from a check the model "
        "never writes (check_coverage)",
    }
    return Support({k: v[0] for k, v in n.items()}, {k: v[1] for k, v in n.items()}, absent)


REPORTED = (
    "p_correct", "context_scale_tokens", "p_trap", "p_persist", "p_miss_signal",
    "systematic_share", "w_hallucinate", "w_premise", "w_stop", "w_other",
    "w_hallucinate_plan", "w_premise_plan", "w_stop_plan", "w_dependency", "w_unchecked",
    "w_other_plan",
)  # fmt: skip
NOTES = {
    "p_correct": "right-move rate at an empty prompt (err = (1-p)(1+tokens/scale))",
    "context_scale_tokens": "prompt tokens per 1x growth of the error rate",
    "p_trap": "belief prefers the trap when one is on offer",
    "p_persist": "belief prefers repeating the failed call",
    "p_miss_signal": "a subtle warning sign overlooked (summed over readings)",
    "systematic_share": "share of errors that are beliefs (mistakes) rather than slips",
    "w_other": "an action's wrong call to another env tool (it runs; the world answers)",
    "w_other_plan": "a plan step's wrong call to another env tool (it runs; the world answers)",
}
POOL_NOTES = {
    ACTION_POOL: "relative weight among an action's mistakes (mean 1)",
    STEP_POOL: "relative weight among a plan step's mistakes (mean 1)",
}


def fit_decisions(table: pd.DataFrame, options: FitOptions, group: str = "pooled"
                  ) -> list[Estimate]:  # fmt: skip
    """The decision model's MLE with task-bootstrap intervals, per parameter. When the
    prompts' lengths do not identify the decay, it is held at the default profile's
    ``context_scale_tokens`` and the rest refitted, so the written profile is coherent."""
    c = choices_of(table)
    if c is None:
        return [
            judged(p, None, (None, None), 0, 0, options, group=group, absent="no decision observed")
            for p in REPORTED
        ]
    out, x = _estimates(c, options, group, None)
    scale = next(e for e in out if e.parameter == "context_scale_tokens")
    if scale.identified and not all_capped(c, x):
        return out
    if scale.identified:  # on the cap's ridge: resamples that moved do not make it a value
        scale.identified, scale.value, scale.lo, scale.hi = False, DEFAULT_SCALE, None, None
        scale.reason = (
            "every decision's error rate is at the 0.95 cap: the decay cannot be told from "
            f"the base rate (held at {DEFAULT_SCALE:g})"
        )
    held = np.array([q == "context_scale_tokens" for q in PARAMS])
    start = x.copy()
    start[held] = _to_x({**START, "context_scale_tokens": DEFAULT_SCALE})[held]
    again, x_held = _estimates(c, options, group, held, start)
    bound = _capped_bound(c, x_held, options.drop)
    if bound is not None:  # a flat stretch: refit the rest with the base rate at its end
        pinned = held | (np.arange(len(PARAMS)) == P_CORRECT)
        x_held[P_CORRECT] = bound.value
        again, _ = _estimates(c, options, group, pinned, x_held)
    free = {e.parameter: e for e in out}
    for e in again:
        if e.parameter == "context_scale_tokens":
            e.value, e.lo, e.hi = scale.value, scale.lo, scale.hi
            e.identified, e.reason, e.bounded = False, scale.reason, scale.bounded
            continue
        if e.parameter == "p_correct" and bound is not None:
            e.value, e.lo, e.hi = bound.value, bound.lo, bound.hi
            e.identified, e.reason = True, bound.reason
        elif e.parameter == "p_correct":
            # the base rate trades off against the decay: its interval spans both fits', so
            # it carries the decay's uncertainty as well as its own. Whether it is identified
            # is judged at the held decay, the one the profile writes beside it: a base rate
            # the held fit pins is the profile's, never strong's (0.97 at 4,000 tokens, which
            # the 1.5B recording's decisions put at 0.29 [0.22, 0.37])
            f = free[e.parameter]
            if None not in (e.lo, e.hi, f.lo, f.hi):
                given = (e.lo, e.hi)
                e.lo, e.hi = min(e.lo, f.lo), max(e.hi, f.hi)  # type: ignore[type-var]
                if e.identified:
                    e.reason = (
                        f"{e.reason}, given context_scale_tokens at {DEFAULT_SCALE:g}: "
                        f"[{given[0]:.3f}, {given[1]:.3f}] there; the interval spans the fit "
                        "with the decay free too"
                    )
                else:
                    ok = judged(e.parameter, e.value, (e.lo, e.hi), e.n, e.tasks, options)
                    e.identified, e.reason, e.bounded = ok.identified, ok.reason, ok.bounded
        elif e.identified or e.value is not None:
            e.note = (e.note + "; " if e.note else "") + (
                f"fitted with context_scale_tokens held at {DEFAULT_SCALE:g}"
            )
    return again


DEFAULT_SCALE = float(SkillProfile.model_fields["context_scale_tokens"].default)
P_CORRECT = PARAMS.index("p_correct")


def plateau_end(c: Choices, x: np.ndarray, i: int) -> float:
    """The largest value of coordinate ``i`` with the log-likelihood it has at ``x`` (the
    others held): the far end of a flat stretch, or ``x[i]`` where there is none."""
    base = loglik(c, _from_x(x))
    tol = 1e-9 * max(1.0, abs(base))

    def beyond(value: float) -> bool:
        y = x.copy()
        y[i] = value
        return not loglik(c, _from_x(y)) >= base - tol

    lo, _ = bisect(beyond, float(x[i]), float(UPPER[i]), 50)
    return lo


def off_the_flat(c: Choices, x: np.ndarray, fixed: np.ndarray | None) -> np.ndarray:
    """``x``, or a better optimum where the optimiser stopped on a flat stretch of the base
    rate (every decision at the error cap moves nothing there, so a simplex started on it
    stays) while a higher likelihood lies elsewhere along it: a scan of the base rate, then
    the optimiser again from the best point of the scan."""
    if fixed is not None and fixed[P_CORRECT]:
        return x
    base = loglik(c, _from_x(x))
    grid = np.linspace(LOWER[P_CORRECT], UPPER[P_CORRECT], 101)
    scan = []
    for value in grid:
        y = x.copy()
        y[P_CORRECT] = value
        scan.append(loglik(c, _from_x(y)))
    best = int(np.argmax(scan))
    if scan[best] <= base + 1e-6 * max(1.0, abs(base)):
        return x
    y = x.copy()
    y[P_CORRECT] = grid[best]
    return mle_x(c, y, fixed=fixed, step=0.3)


def all_capped(c: Choices, x: np.ndarray) -> bool:
    """Whether every decision's error rate sits at the 0.95 cap at ``x``: then the base rate
    and the decay trade off along a ridge, and neither has a value of its own."""
    p = _from_x(x)
    raw = (1 - p["p_correct"]) * c.scale * (1 + c.tokens / p["context_scale_tokens"])
    return bool(np.all(raw >= 0.95))


def _capped_bound(c: Choices, x: np.ndarray, drop: float = 1.92) -> Estimate | None:
    """The base rate when every decision's error rate sits at the 0.95 cap (the decay held):
    the lowest rate fits as well as the best, or within ``drop`` of it (a one-sided 95 %), and
    so does every rate up to some bound, so the data give that bound, not a value. The
    profile takes the bound (the largest right-move rate that keeps every decision seen at
    the cap); the interval runs from 0 to where the likelihood has fallen by ``drop`` below
    its best. None where the base rate has a best value the cap's plateau falls short of.

    Within ``drop``, not exactly: past the bound the decisions with the shortest prompts leave
    the cap first, and a chance excess of right answers among them puts a best value just above
    the bound in about half the runs of a model truly at the cap (their tool calls, 13 right of
    219 where 8.1 were expected, 1.1 above the plateau, once the plan prompts grew past them);
    the linearised bootstrap there, at a kink, gave [0.168, 0.216] around a truth of 0.02."""
    best = loglik(c, _from_x(x))
    low = x.copy()
    low[P_CORRECT] = LOWER[P_CORRECT]
    flat = loglik(c, _from_x(low))
    if flat < best - drop:
        return None
    end = plateau_end(c, low, P_CORRECT)
    if end - LOWER[P_CORRECT] <= 1e-3:
        return None
    best = max(best, flat)
    at_end = x.copy()
    at_end[P_CORRECT] = max(end, float(x[P_CORRECT]))
    _, hi = edge_interval(c, at_end, P_CORRECT, drop, inward=1.0, base=best)
    reason = (
        "an upper bound: every decision's error rate is at the 0.95 cap, and any lower rate "
        "fits as well (the profile takes the largest that keeps them there)"
    )
    if flat < best - 1e-9 * max(1.0, abs(best)):
        reason += (
            f"; the best rate, {x[P_CORRECT]:.3g}, fits {best - flat:.2f} better in "
            f"log-likelihood, within the {drop:.2f} of its interval"
        )
    return Estimate("p_correct", end, 0.0, hi, identified=True, reason=reason)


def _estimates(c: Choices, options: FitOptions, group: str, held: np.ndarray | None,
               start: np.ndarray | None = None) -> tuple[list[Estimate], np.ndarray]:  # fmt: skip
    x0 = _to_x({**START, "context_scale_tokens": DEFAULT_SCALE}) if start is None else start
    x = off_the_flat(c, mle_x(c, x0, fixed=held, step=1.0 if start is None else 0.3), held)
    derivatives = None if options.extra.get("exact_boot") else task_derivatives(c, x)
    if options.extra.get("exact_boot"):  # refit every resample (slow, exact)
        rng = np.random.default_rng(options.seed)
        xs = []
        for _ in range(options.boot):
            w = np.bincount(rng.integers(0, len(c.tasks), len(c.tasks)), minlength=len(c.tasks))
            xs.append(mle_x(c, x, w.astype(float), max_iter=800, step=0.3, fixed=held))
    else:
        xs = one_step_boot(c, x, options.boot, options.seed, held, derivatives)
    fitted = _from_x(x)
    best = normalised(fitted)
    g_full = None if derivatives is None else derivatives[0].sum(axis=0)
    edges = at_edge(x, g_full) if g_full is not None else np.zeros(len(x), dtype=bool)
    sup = support(c)
    intervals: dict[str, tuple[float, float]] = {}
    for i, q in enumerate(PARAMS):
        if held is not None and held[i]:
            lo_x = hi_x = float(x[i])
        elif edges[i]:
            lo_x, hi_x = edge_interval(c, x, i, options.drop)
        else:
            vals = np.array([b[i] for b in xs])
            lo_x, hi_x = options.interval(vals)
        if q == "context_scale_tokens":  # a decay per 1,000 tokens, as a scale
            intervals[q] = (1000.0 / max(hi_x, 1e-9), 1000.0 / max(lo_x, 1e-9))
        elif q.startswith("w_"):
            unit = pool_unit(fitted, q)  # the weights' scale
            intervals[q] = (lo_x / unit, hi_x / unit)
        else:
            intervals[q] = (lo_x, hi_x)
    for unit_weight in UNITS:  # the unit's spread: the pool's scale in every resample, and
        # the stretch along which the pool's other weights scale together at little cost
        lo, hi = options.interval([1.0 / pool_unit(_from_x(b), unit_weight) for b in xs])
        scan_lo, scan_hi = unit_interval(c, x, unit_weight, options.drop)
        intervals[unit_weight] = (min(lo, scan_lo), max(hi, scan_hi))
    intervals["w_unchecked"] = (1.0, 1.0)
    out = []
    for q in REPORTED:
        lo, hi = intervals[q]
        n, tasks = sup.n[q], sup.tasks[q]
        absent = sup.absent.get(q, "no decision observed")
        est = judged(q, best[q], (lo, hi), n, tasks, options, group=group, absent=absent,
                     note=NOTES.get(q) or POOL_NOTES[POOL_OF[q]])  # fmt: skip
        if n and tasks >= options.min_tasks and (q == "context_scale_tokens" or q.startswith("w_")):
            # a scale or a weight: judged by the ratio of its bounds, not their difference
            ok = hi <= 3 * max(lo, 0.05 if q.startswith("w_") else 1.0) and n >= options.min_n
            est.identified = ok
            est.bounded = not ok and n >= options.min_n
            est.reason = f"n={n} over {tasks} tasks" if ok else f"n={n} < {options.min_n}" if (
                n < options.min_n) else (
                f"interval {lo:.3g}..{hi:.3g} spans more than 3x"
                + (": the prompts' lengths vary too little to tell the decay from the base "
                   "rate" if q == "context_scale_tokens" else "")
            )  # fmt: skip
        if q == "w_unchecked":
            est.identified, est.bounded, est.reason = False, False, sup.absent[q]
        elif (
            degenerate(lo, hi)
            and not (q in PARAMS and edges[PARAMS.index(q)])
            and (est.identified or est.bounded)
        ):
            est.identified, est.bounded, est.reason = (
                False,
                False,
                (
                    "the likelihood does not move with it here (every resample at the same value: "
                    "e.g. error rates at their 0.95 cap)"
                ),
            )
            # a point every resample sat on bounds nothing (the fit's own estimate may lie
            # elsewhere on the flat ridge): no interval, so none excludes a default either
            est.lo = est.hi = None
        out.append(est)
    return out, x


def degenerate(lo: float | None, hi: float | None) -> bool:
    """An interval no wider than rounding: every resample at the same value (a ridge the
    data do not curve, e.g. error rates at their cap, moves no resample's gradient)."""
    if lo is None or hi is None:
        return False
    return hi - lo <= 1e-6 * max(abs(lo), abs(hi), 1e-9)


def _decisions_fit(table: pd.DataFrame, options: FitOptions) -> list[Estimate]:
    return fit_decisions(table, options)


def _format_fit(table: pd.DataFrame, options: FitOptions) -> list[Estimate]:
    """Malformed and sloppy output per format (a plan asked as text apart), pooled over the
    formats into the profile's fields and per format for the report."""
    out = []
    specs = (
        ("malformed", "p_malformed", "no JSON-bearing answer was ever asked for"),
        ("sloppy_json", "p_sloppy_json", "no Plan JSON was ever asked for"),
        ("malformed_text", "p_malformed_text", "no plan was ever asked as text"),
        ("sloppy_text", "p_sloppy_text", "no plan was ever asked as text"),
        ("prose_condition", "p_prose_condition", "no written plan step carried a condition"),
        ("restart_ids", "p_restart_ids", "no plan was written after a step had run"),
        ("invented_fallback", "p_invent_fallback", "no plan step was ever written"),
        (
            "answer_garbled",
            "p_answer_garbled",
            "no answer was written after the answer tool had returned the facts",
        ),
    )
    same = table[table["quantity"] == "same_answer"]  # not an error rate: never scaled
    out.append(bernoulli(same, "p_same_answer", options, absent="no prompt was asked twice"))
    for quantity, parameter, absent in specs:
        rows = table[table["quantity"] == quantity]
        pooled = rows[rows["format"] != "candidates"] if "format" in rows else rows
        out.append(scaled_bernoulli(pooled, parameter, options, absent=absent))
        by_format = rows["format"] if "format" in rows else pd.Series("", index=rows.index)
        if quantity == "malformed":  # a field per format: into the profile when identified
            for fmt, own in MALFORMED_FORMATS.items():
                sub = rows[by_format == fmt]
                why = f"no answer in the {fmt} format was ever asked for"
                est = scaled_bernoulli(sub, own, options, absent=why)
                if fmt == "candidates" and est.identified and (est.value or 0.0) > 0:
                    # the simulator cuts a broken list, which can keep its first candidates:
                    # lists that yield none bound its rate from below, exactly only at 0
                    est.identified = False
                    est.reason = "a list cut short still yields its first candidates: a lower bound"
                out.append(est)
        for fmt, sub in rows.groupby(by_format):
            if fmt and not (quantity == "malformed" and fmt in MALFORMED_FORMATS):
                out.append(scaled_bernoulli(sub, parameter, options, absent=absent,
                                            group=f"format={fmt}"))  # fmt: skip
    pooled = {e.parameter: e for e in out if e.group == "pooled"}
    rates = {fmt: _own_rate(pooled, own) for fmt, own in MALFORMED_FORMATS.items()}
    malformed = table[table["quantity"] == "malformed"]
    out.append(persistence_fit(malformed, rates, options))
    for fmt, own in PERSISTENCE_FORMATS.items():  # a field per format: in when identified
        rows = malformed[malformed["format"] == fmt] if "format" in malformed else malformed
        out.append(persistence_fit(rows, {fmt: rates.get(fmt)}, options, parameter=own))
    return out


def _own_rate(pooled: dict[str, Estimate], own: str) -> float | None:
    """A format's own fitted malformed rate, when identified: a persistence is read against
    the rate its format's answers show (a format whose rows only bound its rate, such as a
    candidate list that can keep its first candidates, is left out)."""
    e = pooled.get(own)
    return float(e.value) if e is not None and e.identified and e.value is not None else None


PERSISTENCE_ABSENT = "no answer followed another in its format and episode (re-asks aside)"


def persistence_fit(rows: pd.DataFrame, rates: dict[str, float | None], options: FitOptions,
                    parameter: str = "malformed_persistence") -> Estimate:  # fmt: skip
    """``malformed_persistence`` (or a format's own) by maximum likelihood over every answer
    that follows one in the same format in the same episode: broken as the last one was with
    chance rho, else a fresh draw at the format's rate (held at its fit). A grid, with its
    task bootstrap. Where no answer of the formats ever broke, rho changes nothing. A request
    repeating the very same messages is left out: it is answered as the same sample (a
    cached reply for a real model), which says nothing about persistence."""
    keys = ["planner", "task", "trial", "format"]
    known = {f: r for f, r in rates.items() if r is not None}
    if not known:
        return judged(parameter, None, (None, None), 0, 0, options,
                      absent="no format's own malformed rate is identified")  # fmt: skip
    if rows.empty or not {*keys, "request"} <= set(rows.columns):
        return judged(parameter, None, (None, None), 0, 0, options, absent=PERSISTENCE_ABSENT)
    r = rows[rows["format"].isin(list(known))]
    if "occurrence" in r:  # the very same messages again are the same sample, not a new one
        r = r[r["occurrence"] == 0]
    r = r.sort_values([*keys, "request"])
    r = r.assign(prev=r.groupby(keys)["outcome"].shift(1)).dropna(subset=["prev"])
    if r.empty:
        return judged(parameter, None, (None, None), 0, 0, options, absent=PERSISTENCE_ABSENT)
    if not (r["outcome"].astype(float).any() or r["prev"].astype(float).any()):
        return judged(parameter, None, (None, None), 0, 0, options,
                      absent="the format never broke, so nothing could persist")  # fmt: skip
    y = r["outcome"].to_numpy(float)
    rate = r["format"].map(known).to_numpy(float)
    fresh = np.where(y == 1, rate, 1 - rate)
    same = (y == r["prev"].to_numpy(float)).astype(float)
    grid = np.linspace(0, 1, 1001)
    per_row = np.log(np.clip(np.outer(grid, same) + np.outer(1 - grid, fresh), 1e-300, None))
    tasks, t_ix = np.unique(r["task"].to_numpy(str), return_inverse=True)
    per_task = np.zeros((len(grid), len(tasks)))
    np.add.at(per_task.T, t_ix, per_row.T)
    value = float(grid[np.argmax(per_task.sum(axis=1))])
    reps = [float(grid[np.argmax(per_task @ w)])
            for w in task_resamples(list(tasks), options.boot, options.seed)]  # fmt: skip
    return judged(parameter, value, options.interval(reps), len(r), len(tasks),
                  options, absent=PERSISTENCE_ABSENT,
                  note="broken as the last answer in its format and episode was")  # fmt: skip


def scaled_bernoulli(rows: pd.DataFrame, parameter: str, options: FitOptions, *, absent: str,
                     group: str = "pooled") -> Estimate:  # fmt: skip
    """A rate whose chance on each row is ``min(1, p * error_scale)`` (the role's model
    profile scales every error probability in a simulated run): the MLE on a grid, from
    per-(task, scale) sums, with its task bootstrap. With every scale 1, the plain mean."""
    if rows.empty or np.allclose(rows["error_scale"].astype(float), 1.0):
        return bernoulli(rows, parameter, options, absent=absent, group=group)
    y = rows.assign(y=rows["outcome"].astype(float))
    agg = y.groupby(["task", "error_scale"])["y"].agg(["sum", "count"]).reset_index()
    tasks = sorted(set(agg["task"]))
    t_ix = agg["task"].map({t: i for i, t in enumerate(tasks)}).to_numpy()
    grid = np.linspace(0, 1, 1001)
    q = np.clip(np.outer(grid, agg["error_scale"].to_numpy(float)), 1e-9, 1 - 1e-9)
    ll = np.log(q) * agg["sum"].to_numpy() + np.log(1 - q) * (agg["count"] - agg["sum"]).to_numpy()

    def best(w_task: np.ndarray) -> float:
        return float(grid[int(np.argmax(ll @ w_task[t_ix]))])

    value = best(np.ones(len(tasks)))
    boots = [best(w.astype(float)) for w in task_resamples(tasks, options.boot, options.seed)]
    events, scale = int(agg["sum"].sum()), float(agg["error_scale"].min())
    interval = at_the_edge(options.interval(boots), events, len(rows), options.level, scale)
    return judged(parameter, value, interval, len(rows), len(tasks), options, group=group,
                  absent=absent)  # fmt: skip


GROUP_REPORTED = (
    "p_correct", "p_trap", "p_persist", "p_miss_signal",
    "w_hallucinate", "w_premise", "w_stop", "w_other", "w_hallucinate_plan", "w_premise_plan",
    "w_stop_plan", "w_dependency", "w_other_plan",
)  # fmt: skip
"""The decision model's parameters the report breaks down per role and kind: a group whose
interval is clear of the pooled one says where one number per model is a simplification (the
shipped 0.5B model stops early in plans far more than in ReAct turns)."""


def per_group(table: pd.DataFrame, options: FitOptions) -> list[Estimate]:
    """The decision model per role and per kind (the report's breakdown; fewer resamples)."""
    out = []
    small = FitOptions(boot=max(10, options.boot // 5), seed=options.seed, min_n=options.min_n,
                       max_width=options.max_width, level=options.level)  # fmt: skip
    choice = table[table["quantity"] == "choice"]
    for col in ("role", "kind"):
        for name, _ in choice.groupby(col):
            sub = table[table[col] == name]
            for est in fit_decisions(sub, small, group=f"{col}={name}"):
                if est.parameter in GROUP_REPORTED and est.n > 0:  # one the group can say
                    out.append(est)
    return out


register_fit("decisions", _decisions_fit)
register_fit("formats", _format_fit)


def _groups_fit(table: pd.DataFrame, options: FitOptions) -> list[Estimate]:
    return per_group(table, options) if options.extra.get("groups", True) else []


register_fit("groups", _groups_fit)
