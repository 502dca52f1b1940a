"""The judge side of calibration: ``judge_accuracy``, ``judge_correlation`` and
``evaluator_noise`` from the scores judges gave; ``check_coverage`` from the post-conditions
written in plan steps; ``rollout_optimism`` from imagined outcomes of plans the model doubts;
``reflection_gain`` from decisions made with a reflection in view.

Each fit is the maximum of a likelihood that is the simulator's own generative model for the
quantity (``docs/calibration.md`` states each in words), so traces the simulator wrote with
known values are fitted back to them (``tests/test_calibrate_judge.py``). Intervals are
percentile bootstraps over tasks (``FitOptions.level``, 95 % by default; the unit: a task's
decisions share their beliefs). A grid maximum keeps the bootstrap cheap: the per-task
log-likelihood is computed once per grid point and each resample only re-weights tasks.

The rows come from :mod:`.extract_judge`; importing this module registers both.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from planarena.experiments.calibrate import extract_judge
from planarena.experiments.calibrate.registry import (
    Estimate,
    FitOptions,
    judged,
    register_fit,
    task_resamples,
)
from planarena.planners.llm.profiles import SkillProfile
from planarena.planners.llm.sim_belief import ACTION_MISTAKES, LOOK, PLAN_MISTAKES, PREFERRED

__all__ = [
    "ACC_GRID",
    "RHO_GRID",
    "SIGMA_GRID",
    "fit_checks",
    "fit_judge",
    "fit_reflection",
    "fit_rollout",
]

# The least chance that a proposer's first sample departs from its belief (a sampling slip):
# how far a proposal is evidence of the belief the judge partly reads. Above it, the slip is
# the proposer's error rate at the sample's prompt times its share of slips.
SLIP = 0.03
ACC_GRID = np.round(np.arange(0.0, 1.0001, 0.05), 2)
RHO_GRID = np.round(np.arange(0.0, 1.0001, 0.05), 2)
#: log-likelihood differences below this share of its size are float rounding, not data
TIE_NATS = 1e-6
SIGMA_GRID = np.round(np.r_[np.arange(0.02, 0.3001, 0.02), 0.35, 0.4, 0.5, 0.6], 2)
P_GRID = np.round(np.arange(0.0, 1.0001, 0.005), 3)
BINS = np.arange(101) / 100.0  # a judged value, to the hundredth (a score's precision)
OTHER = sum(LOOK["other"]) / 2  # how an option the model cannot see looks (Belief.value)
CONTEXT_SCALE = SkillProfile().context_scale_tokens
ATTRACTIVE = ("trap", "persist", "fallback")  # the judge's own wrong favourite comes first


def ndtr(x: np.ndarray) -> np.ndarray:
    """The standard normal CDF (Abramowitz and Stegun 7.1.26 for erf, error < 1.5e-7): numpy
    has no erf, and the package does not depend on scipy."""
    z = np.abs(x) / np.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    erf = 1.0 - poly * np.exp(-z * z)
    return np.where(x >= 0, 0.5 * (1.0 + erf), 0.5 * (1.0 - erf))


# --- what the proposer believes at a point ---------------------------------------------------


EpisodeKey = tuple[str, Any, float]  # (task, trial, error_scale): one model's beliefs


def _episode(row: Mapping[str, Any]) -> EpisodeKey:
    return (row["task"], row.get("trial", 0), float(row.get("error_scale", 1.0)))


@dataclass
class Beliefs:
    """What the proposer chose at each decision point, and which steps the model writes a
    check for (settling whether a right step written without checks dropped them).

    A belief's confusion grows with the prompt: the same draw at a point confuses the model
    when the error rate of the request's prompt exceeds it. So a judge or rollout whose
    prompt is longer than the proposals that showed the right option may still hold a
    confused belief there; :meth:`top` adds that chance, from the proposer's skill
    (``p_correct``, ``systematic_share``, the mistake weights: the strong profile's unless
    the fit is given others, ``FitOptions.extra["profile"]``)."""

    seen: dict[tuple[EpisodeKey, str], Counter[str]]
    right_tokens: dict[tuple[EpisodeKey, str], int]  # the longest prompt that showed right
    tokens: dict[tuple[EpisodeKey, str], float]  # the mean prompt of the samples at a point
    written: set[tuple[EpisodeKey, str]]
    wrong_share: float  # share of first proposals that were wrong: the prior where none was
    skill: SkillProfile

    def kind(self, episode: EpisodeKey, point: str, kind: str, bare: bool) -> str:
        """The option a step is, once known whether the model writes a check for it."""
        if bare and kind == "unchecked" and (episode, point) not in self.written:
            return "right"
        return kind

    def options(
        self, episode: EpisodeKey, point: str, options: Sequence[str], pooled: bool
    ) -> tuple[str, ...]:
        """The options at a point: ``unchecked`` is one where the model writes a check."""
        if pooled and (episode, point) in self.written and point.startswith("step:"):
            return (*options, "unchecked")
        return tuple(options)

    def _slip(self, episode: EpisodeKey, point: str) -> float:
        """How often a first sample at the point departs from the belief: the proposer's
        error rate at the prompts that showed it, times the share of errors that are slips
        (at least :data:`SLIP`)."""
        tokens = self.tokens.get((episode, point))
        if tokens is None:
            return SLIP
        skill = self.skill.scaled(episode[2])
        return max(SLIP, skill.error_rate(int(tokens)) * (1.0 - skill.systematic_share))

    def _confusion(self, episode: EpisodeKey, point: str, tokens: float | None) -> float:
        """P(the belief is confused at this prompt length | proposals at shorter prompts
        showed it unconfused)."""
        shown = self.right_tokens.get((episode, point))
        if tokens is None or shown is None or tokens <= shown:
            return 0.0
        skill = self.skill.scaled(episode[2])
        share = skill.systematic_share
        now, then = skill.error_rate(int(tokens)), skill.error_rate(shown)
        return max(0.0, share * (now - then)) / max(1e-9, 1.0 - share * then)

    def top(
        self,
        episode: EpisodeKey,
        point: str,
        options: Sequence[str],
        tokens: float | None = None,
    ) -> dict[str, float]:
        """P(the belief a request of ``tokens`` prompt tokens reads prefers each option |
        the proposals at the point)."""
        m = len(options)
        if m == 1:
            return {options[0]: 1.0}
        seen = self.seen.get((episode, point), Counter())
        seen = Counter({k: n for k, n in seen.items() if k in options})
        if not seen:
            wrong = self.wrong_share / (m - 1)
            return {k: (1.0 - self.wrong_share) if k == "right" else wrong for k in options}
        slip = self._slip(episode, point)
        log = {
            k: sum(n * np.log(1 - slip if k == o else slip / (m - 1)) for o, n in seen.items())
            for k in options
        }
        top = max(log.values())
        weights = {k: float(np.exp(v - top)) for k, v in log.items()}
        total = sum(weights.values())
        probs = {k: w / total for k, w in weights.items()}
        drift = self._confusion(episode, point, tokens)
        if drift > 0:
            table = PLAN_MISTAKES if point.startswith("step:") else ACTION_MISTAKES
            pool = [(k, self.skill.resolved(w)) for k, w in table.items() if k in options]
            mass = sum(w for _, w in pool)
            if mass > 0:
                moved = probs.get("right", 0.0) * drift
                probs["right"] = probs.get("right", 0.0) - moved
                for k, w in pool:
                    probs[k] = probs.get(k, 0.0) + moved * w / mass
        return probs


def proposer_skill(options: FitOptions) -> SkillProfile:
    """The proposer's skill the judge side takes as given (``FitOptions.extra["profile"]``:
    fitted values of the proposer side; the strong profile's otherwise)."""
    given = dict(options.extra.get("profile") or {})
    known = {k: v for k, v in given.items() if k in SkillProfile.model_fields and v is not None}
    return SkillProfile(**known)


def beliefs(table: pd.DataFrame, skill: SkillProfile | None = None) -> Beliefs:
    """The proposer's choices per point, from the ``belief_evidence`` rows, and the steps the
    model writes any check for, from the ``check_covers`` rows."""
    checks = _rows(table, "check_covers")
    written = {
        (_episode(r), r["point"])
        for r in checks
        if r["outcome"] == 1 and isinstance(r.get("point"), str)
    }
    seen: dict[tuple[EpisodeKey, str], Counter[str]] = defaultdict(Counter)
    right_tokens: dict[tuple[EpisodeKey, str], int] = {}
    lengths: dict[tuple[EpisodeKey, str], list[int]] = defaultdict(list)
    first = []
    for r in _rows(table, "belief_evidence"):
        ep = _episode(r)
        bare = r.get("bare") is True
        kind = r["outcome"]
        if bare and kind == "unchecked" and (ep, r["point"]) not in written:
            kind = "right"
        seen[(ep, r["point"])][kind] += 1
        lengths[(ep, r["point"])].append(int(r["prompt_tokens"]))
        if kind == "right":
            key = (ep, r["point"])
            right_tokens[key] = max(right_tokens.get(key, 0), int(r["prompt_tokens"]))
        first.append(kind != "right")
    share = float(np.clip(np.mean(first), 0.02, 0.5)) if first else 0.1
    tokens = {k: float(np.mean(v)) for k, v in lengths.items()}
    return Beliefs(dict(seen), right_tokens, tokens, written, share, skill or SkillProfile())


def _flag(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_)) and bool(value)


def _rows(table: pd.DataFrame, quantity: str) -> list[dict[str, Any]]:
    if table.empty or "quantity" not in table:
        return []
    part = table[table["quantity"] == quantity]
    return part.to_dict("records")


# --- the judge -------------------------------------------------------------------------------


def _uniform(lo_hi: tuple[float, float], m: int = 48) -> np.ndarray:
    lo, hi = lo_hi
    return lo + (hi - lo) * (np.arange(m) + 0.5) / m


_MIX: dict[tuple[tuple[float, float], tuple[float, float]], np.ndarray] = {}


def _mix(own: tuple[float, float], judge: tuple[float, float]) -> np.ndarray:
    """pmf over :data:`BINS` of ``rho * U(own) + (1 - rho) * U(judge)``, per rho of
    :data:`RHO_GRID` (the judged value of one option: the proposer's look of it blended with
    the judge's own)."""
    key = (own, judge)
    if key not in _MIX:
        a, b = _uniform(own), _uniform(judge)
        out = np.empty((len(RHO_GRID), len(BINS)))
        for i, rho in enumerate(RHO_GRID):
            v = rho * a[:, None] + (1 - rho) * b[None, :]
            idx = np.clip(np.rint(v.ravel() * 100).astype(int), 0, 100)
            out[i] = np.bincount(idx, minlength=len(BINS)) / idx.size
        _MIX[key] = out
    return _MIX[key]


def _delta(value: float) -> np.ndarray:
    pmf = np.zeros((len(ACC_GRID), len(RHO_GRID), len(BINS)))
    pmf[:, :, int(round(value * 100))] = 1.0
    return pmf


def term_pmf(kind: str, options: Sequence[str], p_top: float, scale: float) -> np.ndarray:
    """pmf of how one option at one point looks to the judge, per (accuracy, rho): the
    proposer's value of it (preferred with the chance ``p_top`` that its belief prefers this
    option, else its look) blended with the judge's own value of it (preferred when the
    judge's own view picks it: the right option with the judge's accuracy, else a wrong one,
    the attractive ones first, each alike)."""
    if kind not in options:
        return _delta(OTHER)
    wrong = [k for k in options if k != "right"]
    acc = np.maximum(0.0, 1.0 - (1.0 - ACC_GRID) * scale)  # the role's error_scale
    if not wrong:
        pj = np.ones_like(acc)
    elif kind == "right":
        pj = acc
    else:
        pool = [k for k in ATTRACTIVE if k in wrong] or wrong
        pj = (1.0 - acc) / len(pool) if kind in pool else np.zeros_like(acc)
    look = LOOK.get(kind, LOOK["other"])
    pj = pj[:, None, None]
    return p_top * (pj * _mix(PREFERRED, PREFERRED) + (1 - pj) * _mix(PREFERRED, look)) + (
        1 - p_top
    ) * (pj * _mix(look, PREFERRED) + (1 - pj) * _mix(look, look))


def min_pmf(cdfs: Sequence[np.ndarray]) -> np.ndarray:
    """pmf of the least of independent values, from their CDFs (a plan looks as good as its
    weakest step)."""
    survive = 1.0 - cdfs[0]
    for c in cdfs[1:]:
        survive = survive * (1.0 - c)
    survive = np.clip(survive, 0.0, 1.0)
    before = np.concatenate([np.ones_like(survive[..., :1]), survive[..., :-1]], axis=-1)
    return np.clip(before - survive, 0.0, None)


def noise_kernel(scores: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """P(score as written | judged value), per score and bin: the judged value plus Gaussian
    noise, clipped to [0, 1] and written to two decimals. Shape (len(sd), scores, bins)."""
    s = np.round(np.clip(scores, 0.0, 1.0), 2)[None, :, None]
    x = BINS[None, None, :]
    sd = np.maximum(sd, 1e-6)[:, :, None] if sd.ndim == 2 else sd
    hi = np.where(s >= 1.0, np.inf, (s + 0.005 - x) / sd)
    lo = np.where(s <= 0.0, -np.inf, (s - 0.005 - x) / sd)
    return ndtr(hi) - ndtr(lo)


def _score_terms(
    row: Mapping[str, Any], facts: Beliefs
) -> tuple[tuple[tuple[str, tuple[str, ...], float], ...], float]:
    """(the terms a score stands on: per decision point its option, the options there and
    the chance the proposer prefers that option; the least constant among them)."""
    ep = _episode(row)
    terms, const = [], 1.0
    for point, kind, bare, options, pooled in zip(
        row["points"], row["kinds"], row["bare"], row["options"], row["pooled_checks"], strict=True
    ):
        if point == extract_judge.PAST_END:
            const = min(const, PREFERRED[0] if kind == "right" else OTHER)
            continue
        kind = facts.kind(ep, point, kind, bool(bare))
        options = facts.options(ep, point, options, bool(pooled))
        if kind not in options:
            const = min(const, OTHER)
            continue
        p_top = facts.top(ep, point, options, row["prompt_tokens"]).get(kind, 0.0)
        terms.append((kind, tuple(options), round(p_top, 3)))
    return tuple(terms), const


def judge_loglik(
    table: pd.DataFrame, skill: SkillProfile | None = None
) -> tuple[np.ndarray, list[str], int]:
    """Per-task log-likelihood of every judge score on the (sigma, accuracy, rho) grid, the
    tasks in order, and the number of scores. Each score's likelihood is its own marginal
    (scores sharing a decision point share its draws: the bootstrap over tasks carries that)."""
    # a score of steps an earlier score selected (a beam's prefix, an improved plan) reads
    # draws that selection already favoured: its marginal is not the model's, so it is left out
    rows = [r for r in _rows(table, "judge_score") if not _flag(r.get("selected"))]
    if not rows:
        return np.zeros((0, len(SIGMA_GRID), len(ACC_GRID), len(RHO_GRID))), [], 0
    facts = beliefs(table, skill)
    tasks = sorted({r["task"] for r in rows})
    task_index = {t: i for i, t in enumerate(tasks)}
    groups: dict[Hashable, list[tuple[int, float, float]]] = defaultdict(list)
    for r in rows:
        terms, const = _score_terms(r, facts)
        if not terms and const >= 1.0:
            continue  # a score of nothing the oracle can place
        scale = float(r.get("error_scale", 1.0))
        sd_scale = scale * (1.0 + float(r["prompt_tokens"]) / CONTEXT_SCALE)
        groups[(terms, const, scale)].append((task_index[r["task"]], float(r["outcome"]), sd_scale))
    ll = np.zeros((len(tasks), len(SIGMA_GRID) * len(ACC_GRID) * len(RHO_GRID)))
    cdf_cache: dict[tuple[Any, ...], np.ndarray] = {}

    def cdf(key: tuple[Any, ...]) -> np.ndarray:
        if key not in cdf_cache:
            pmf = _delta(key[1]) if key[0] == "const" else term_pmf(*key)
            cdf_cache[key] = np.cumsum(pmf, axis=-1)
        return cdf_cache[key]

    for (terms, const, scale), members in groups.items():
        keys: list[tuple[Any, ...]] = [(*t, scale) for t in terms]
        if const < 1.0:
            keys.append(("const", const))
        pmf = min_pmf([cdf(k) for k in keys]).reshape(-1, len(BINS)).astype(np.float32)
        members.sort()
        idx = np.array([m[0] for m in members])
        scores = np.array([m[1] for m in members])
        sd = SIGMA_GRID[:, None] * np.array([m[2] for m in members])[None, :]
        kernel = noise_kernel(scores, sd).astype(np.float32)  # (sigma, n, bins)
        like = kernel @ pmf.T  # (sigma, n, acc*rho)
        like = 0.999 * like + 0.001 * 0.01  # a stray score (cut off, misread) is not fatal
        logs = np.moveaxis(np.log(like), 1, 0).reshape(len(members), -1)
        starts = np.flatnonzero(np.r_[True, idx[1:] != idx[:-1]])
        ll[idx[starts]] += np.add.reduceat(logs, starts, axis=0)
    ll = ll.reshape(len(tasks), len(SIGMA_GRID), len(ACC_GRID), len(RHO_GRID))
    return ll, tasks, len(rows)


def _tied(
    total: np.ndarray, shape: tuple[int, ...]
) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """The first grid maximum of a summed log-likelihood and, per axis, the indices tied with
    it (within :data:`TIE_NATS` per nat of its size): the lowest and highest when they differ.

    A flat direction (``judge_accuracy`` when ``judge_correlation`` is 1 has no effect) makes
    exact ties, and float32 sums break them by the machine's rounding, not by the data: read
    as ties, they widen the interval and the parameter is reported unidentified everywhere."""
    top = float(total.max())
    tied = np.flatnonzero(total >= top - TIE_NATS * max(1.0, abs(top)))
    coords = np.unravel_index(tied, shape)
    best = tuple(int(c[0]) for c in coords)
    spans = [
        (int(c.min()),) if c.min() == c.max() else (int(c.min()), int(c.max())) for c in coords
    ]
    return best, spans


def _grid_fit(
    ll: np.ndarray, options: FitOptions
) -> tuple[tuple[int, ...], list[tuple[tuple[int, ...], ...]]]:
    """(the grid maximum of the summed log-likelihood, and for each task resample the indices
    of its maximum per axis: one, or the two ends of a tie)."""
    flat = ll.reshape(ll.shape[0], -1)
    best, _ = _tied(flat.sum(0), ll.shape[1:])
    boots = []
    for w in task_resamples([str(i) for i in range(ll.shape[0])], options.boot, options.seed):
        # tasks are exchangeable: the weights apply to this array's order as well as any
        boots.append(tuple(_tied(w @ flat, ll.shape[1:])[1]))
    return best, boots


def _interval(
    values: Iterable[float], grid: np.ndarray, options: FitOptions
) -> tuple[float, float]:
    """The percentile interval (``options.level``) of bootstrap grid maxima, widened by half a
    grid step each way (the grid's resolution: a maximum stands for its cell)."""
    lo, hi = options.interval(np.fromiter(values, float))
    half = float(grid[1] - grid[0]) / 2
    return round(max(float(grid[0]), lo - half), 4), round(min(float(grid[-1]), hi + half), 4)


def fit_judge(table: pd.DataFrame, options: FitOptions) -> list[Estimate]:
    """``judge_accuracy``, ``judge_correlation`` and ``evaluator_noise``, jointly, by maximum
    likelihood over the judge scores (``rate_candidates``, ``rate_plan``)."""
    ll, tasks, n = judge_loglik(table, proposer_skill(options))
    absent = "no rate_candidates or rate_plan request was scored"
    note = "joint grid MLE over judge scores; proposer's belief from its proposals at the point"
    if n == 0:
        return [
            judged(p, None, (None, None), 0, 0, options, absent=absent, note=note)
            for p in ("judge_accuracy", "judge_correlation", "evaluator_noise")
        ]
    best, boots = _grid_fit(ll, options)
    flats = _tied(ll.reshape(ll.shape[0], -1).sum(0), ll.shape[1:])[1]
    grids = (SIGMA_GRID, ACC_GRID, RHO_GRID)
    names = ("evaluator_noise", "judge_accuracy", "judge_correlation")
    out = []
    for axis, (name, grid) in enumerate(zip(names, grids, strict=True)):
        value = float(grid[best[axis]])
        lo, hi = _interval((grid[i] for b in boots for i in b[axis]), grid, options)
        width = options.max_width if name != "evaluator_noise" else options.max_width / 2
        est = judged(name, value, (lo, hi), n, len(tasks), options, absent=absent, note=note)
        flat_span = flats[axis]
        if len(flat_span) == 2:
            est.identified = False
            est.reason = (
                f"the likelihood is flat over {grid[flat_span[0]]:g}..{grid[flat_span[1]]:g}"
                " at the maximum (no effect there)"
            )
        elif est.identified and hi - lo > width:
            est.identified, est.reason = False, f"interval width {hi - lo:.2f} > {width}"
        out.append(est)
    out += _judge_report(table, options)
    return [out[1], out[2], out[0], *out[3:]]


def _judge_report(table: pd.DataFrame, options: FitOptions) -> list[Estimate]:
    """Raw rates for the report: how often a judge scored the right option above every wrong
    one it was shown (not a profile field: it mixes accuracy, correlation and noise)."""
    rows = table[table["quantity"] == "judge_prefers_right"] if not table.empty else table
    if rows.empty:
        return []
    rate = float(rows["outcome"].astype(float).mean())
    return [
        Estimate(
            "judge_accuracy",
            rate,
            n=len(rows),
            tasks=rows["task"].nunique(),
            identified=False,
            reason="raw rate, not the field",
            group="raw=judge_prefers_right",
            note="share of rate_candidates requests whose best score went to the right option",
        )
    ]


# --- checks ----------------------------------------------------------------------------------


def fit_checks(table: pd.DataFrame, options: FitOptions) -> list[Estimate]:
    """``check_coverage``: each check of a step's pool is written with the chance
    ``1 - (1 - coverage) * error_scale`` (one draw per check and episode: a step written
    again carries the same checks, so each (episode, step, check) counts once)."""
    rows = _rows(table, "check_covers")
    absent = "no plan step was written with a check pool"
    if not rows:
        return [judged("check_coverage", None, (None, None), 0, 0, options, absent=absent)]
    frame = pd.DataFrame(rows)
    frame["trial"] = frame.get("trial", 0)
    keys = ["task", "trial", "error_scale", "gkey", "check"]
    units = frame.groupby(keys, sort=False)["outcome"].max().reset_index()
    scale = units["error_scale"].astype(float).to_numpy()
    covered = units["outcome"].astype(float).to_numpy()
    p = np.clip(1.0 - (1.0 - P_GRID[None, :]) * scale[:, None], 1e-9, 1 - 1e-9)
    ll_rows = covered[:, None] * np.log(p) + (1 - covered[:, None]) * np.log(1 - p)
    tasks = sorted(set(units["task"]))
    index = {t: i for i, t in enumerate(tasks)}
    ll = np.zeros((len(tasks), len(P_GRID)))
    np.add.at(ll, units["task"].map(index).to_numpy(), ll_rows)
    best, boots = _grid_fit(ll, options)
    value = float(P_GRID[best[0]])
    note = "binomial MLE; one unit per (episode, step, check); p = 1 - (1 - c) * error_scale"
    out = [
        judged(
            "check_coverage",
            value,
            _interval((P_GRID[i] for b in boots for i in b[0]), P_GRID, options),
            len(units),
            len(tasks),
            options,
            absent=absent,
            note=note,
        )
    ]
    for role, part in frame.groupby("role"):
        share = part.groupby(keys)["outcome"].max()
        out.append(
            Estimate(
                "check_coverage",
                float(share.mean()),
                n=len(share),
                tasks=part["task"].nunique(),
                reason="raw share per role",
                group=f"role={role}",
                note="share of pool checks written (not scaled back by error_scale)",
            )
        )
    return out


# --- rollouts --------------------------------------------------------------------------------


def _believed(row: Mapping[str, Any], facts: Beliefs) -> tuple[float, bool]:
    """(P(the model believes every step of the partial plan is the one it would write),
    whether the oracle knows the plan cannot succeed: some step is not the right one)."""
    ep = _episode(row)
    p, wrong = 1.0, False
    for point, kind, bare, options, pooled in zip(
        row["points"], row["kinds"], row["bare"], row["options"], row["pooled_checks"], strict=True
    ):
        if point == extract_judge.PAST_END:
            wrong = wrong or kind != "right"
            p *= 1.0 if kind == "right" else 0.0
            continue
        kind = facts.kind(ep, point, kind, bool(bare))
        options = facts.options(ep, point, options, bool(pooled))
        wrong = wrong or kind != "right"
        p *= facts.top(ep, point, options, row["prompt_tokens"]).get(kind, 0.0)
    return p, wrong


def fit_rollout(table: pd.DataFrame, options: FitOptions) -> list[Estimate]:
    """``rollout_optimism``: a rollout of a partial plan the model believes reports success;
    one it doubts does with the chance ``optimism``. Fitted on plans the oracle knows cannot
    succeed, the chance the model believes them taken from its proposals at those points."""
    rows = _rows(table, "rollout_says_success")
    facts = beliefs(table, proposer_skill(options)) if rows else None
    used = []
    for r in rows:
        p, wrong = _believed(r, facts)  # type: ignore[arg-type]
        if wrong:
            used.append((r["task"], p, int(r["outcome"])))
    absent = (
        "no rollout request" if not rows else "no rollout of a plan the oracle knows cannot succeed"
    )
    doubted = sum(p < 0.5 for _, p, _ in used)
    if not doubted:
        return [judged("rollout_optimism", None, (None, None), 0, 0, options, absent=absent)]
    return _bernoulli_grid(
        "rollout_optimism",
        used,
        lambda p: p + (1 - p) * P_GRID,
        doubted,
        options,
        absent=absent,
        note="Bernoulli MLE on rollouts of plans that cannot succeed, mixed with belief",
    )


def _bernoulli_grid(
    name: str,
    used: list[tuple[str, float, int]],
    success: Callable[[float], np.ndarray],
    n: int,
    options: FitOptions,
    *,
    absent: str,
    note: str,
) -> list[Estimate]:
    """A grid MLE over P_GRID of (task, belief, outcome) units, ``success(belief)`` the chance
    of outcome 1 at each grid value, with the task bootstrap's interval."""
    tasks = sorted({t for t, _, _ in used})
    index = {t: i for i, t in enumerate(tasks)}
    ll = np.zeros((len(tasks), len(P_GRID)))
    for t, p, y in used:
        s = success(p)
        ll[index[t]] += np.log(np.clip(s if y else 1 - s, 1e-12, None))
    best, boots = _grid_fit(ll, options)
    return [
        judged(
            name,
            float(P_GRID[best[0]]),
            _interval((P_GRID[i] for b in boots for i in b[0]), P_GRID, options),
            n,
            len(tasks),
            options,
            absent=absent,
            note=note,
        )
    ]


# --- reflections -----------------------------------------------------------------------------


def fit_reflection(table: pd.DataFrame, options: FitOptions) -> list[Estimate]:
    """``reflection_gain``: with a reflection in view, a wrong belief at a point is corrected
    with this chance (one draw per point and set of reflections). Identified by decisions
    made with reflections in view at points where the model's decision without them (its
    own, at the same point of the same task) was wrong."""
    rows = _rows(table, "reflected_choice")
    absent = "no decision was made with a reflection in view"
    if not rows:
        return [judged("reflection_gain", None, (None, None), 0, 0, options, absent=absent)]
    facts = beliefs(table, proposer_skill(options))
    used, seen = [], set()
    for r in sorted(rows, key=lambda r: r.get("request", 0)):
        ep = _episode(r)
        # the first decision with a reflection in view, per episode: later ones are reached
        # only along paths earlier corrections shaped, and which of them the decision without
        # reflections also reached depends on those corrections
        unit = (ep, r.get("planner"))
        if unit in seen:
            continue
        seen.add(unit)
        if (ep, r["point"]) not in facts.seen:
            continue
        at = sorted(set(facts.seen[(ep, r["point"])]) | {"right", r["outcome"]})
        p_right = facts.top(ep, r["point"], at).get("right", 0.0)
        used.append((r["task"], p_right, int(r["outcome"] == "right")))
    doubted = sum(p < 0.5 for _, p, _ in used)
    if not doubted:
        absent = (
            "no decision with a reflection in view at a point where the model, without one, "
            "chose wrong"
        )
        return [judged("reflection_gain", None, (None, None), 0, 0, options, absent=absent)]

    def right(p: float) -> np.ndarray:
        held = p + (1 - p) * P_GRID  # the belief prefers the right option (corrected or not)
        return held * (1 - SLIP) + (1 - held) * SLIP / 4  # the decision is a sample of it

    return _bernoulli_grid(
        "reflection_gain",
        used,
        right,
        doubted,
        options,
        absent=absent,
        note="Bernoulli MLE on reflected decisions at points its unreflected choice erred",
    )


register_fit("judge", fit_judge)
register_fit("check_coverage", fit_checks)
register_fit("rollout_optimism", fit_rollout)
register_fit("reflection_gain", fit_reflection)
