"""How many tasks a paired comparison of two planners needs: a power estimate for the exact
sign test (McNemar's exact test when every task ran once) that the comparisons use.

Two planners run the same tasks; per task the outcome pair is concordant (both succeed or
both fail) or discordant: ``p10`` = P(a succeeds, b fails), ``p01`` = P(a fails, b succeeds).
Only discordant tasks inform the test, so the power depends on ``p10`` and ``p01`` alone.
Plugging in the *observed* shares of a run makes the answer an estimate that assumes those
shares are the true ones (a small observed difference is itself uncertain).
"""

from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist

import numpy as np

EXACT_UP_TO = 1500
"""Sizes up to this are searched with the exact power; beyond it the normal approximation
(already within a few tasks there) is returned, so an estimate stays cheap."""


def mcnemar_n_normal(p10: float, p01: float, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """Tasks needed by the normal approximation of McNemar's test (Connor 1987).

    With ``p_d = p10 + p01`` (discordance) and ``delta = p10 - p01`` (the completion
    difference), the two-sided test at level ``alpha`` has power ``power`` at

        n = (z_{1-alpha/2} * sqrt(p_d) + z_{power} * sqrt(p_d - delta**2))**2 / delta**2

    (z: standard normal quantiles). ``inf`` when ``delta == 0`` (no size separates equal
    rates). A real number; :func:`tasks_for_power` rounds and checks it exactly.
    """
    _check(p10, p01, alpha, power)
    pd_, delta = p10 + p01, p10 - p01
    if delta == 0:
        return math.inf
    z_a = NormalDist().inv_cdf(1 - alpha / 2)
    z_b = NormalDist().inv_cdf(power)
    return float((z_a * math.sqrt(pd_) + z_b * math.sqrt(pd_ - delta**2)) ** 2 / delta**2)


def sign_test_power(n: int, p10: float, p01: float, *, alpha: float = 0.05) -> float:
    """Exact power of the two-sided exact sign test (``stats.sign_test_p(a, b) < alpha``) on
    ``n`` tasks with discordance probabilities ``p10``, ``p01``.

    The number of discordant tasks is ``D ~ Binomial(n, p10 + p01)``; given ``D = d`` the
    wins of a are ``W ~ Binomial(d, q)``, ``q = p10 / (p10 + p01)``; the test rejects when
    ``W <= k_d`` or ``W >= d - k_d``, ``k_d`` the largest k with ``2 P(Bin(d, 1/2) <= k) <
    alpha``. Power = ``sum_d P(D = d) P(reject | d)``."""
    _check(p10, p01, alpha, 0.5)
    if n <= 0 or p10 + p01 == 0:
        return 0.0
    reject = _reject_given_d(round(p10 / (p10 + p01), 12), alpha, max(n, 1))[: n + 1]
    return float(np.dot(_binom_pmf(n, p10 + p01), reject))


def tasks_for_power(p10: float, p01: float, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """Tasks per cell at which the exact sign test at ``alpha`` separates the pair with
    probability ``power``: the smallest n (searched from below :func:`mcnemar_n_normal`) whose
    exact power (:func:`sign_test_power`) reaches ``power``; the normal approximation,
    rounded up, beyond :data:`EXACT_UP_TO`; ``inf`` when ``p10 == p01``.

    Exact power is not monotone in n (the test is discrete): a slightly larger n can fall just
    under ``power`` again, so read the answer as "about this many"."""
    approx = mcnemar_n_normal(p10, p01, alpha=alpha, power=power)
    if math.isinf(approx):
        return math.inf
    if approx > EXACT_UP_TO:
        return float(math.ceil(approx))
    q, pd_ = round(p10 / (p10 + p01), 12), p10 + p01
    n_max = min(EXACT_UP_TO, math.ceil(1.5 * approx) + 20)
    reject = _reject_given_d(q, alpha, n_max)

    def exact(n: int) -> float:
        return float(np.dot(_binom_pmf(n, pd_), reject[: n + 1]))

    n = max(1, math.ceil(0.8 * approx))
    if exact(n) >= power:  # walk down to the first size under it
        while n > 1 and exact(n - 1) >= power:
            n -= 1
        return float(n)
    while n < n_max:
        n += 1
        if exact(n) >= power:
            return float(n)
    return float(math.ceil(approx))


def _check(p10: float, p01: float, alpha: float, power: float) -> None:
    if not (0 <= p10 <= 1 and 0 <= p01 <= 1 and p10 + p01 <= 1):
        raise ValueError(f"need p10, p01 >= 0 with p10 + p01 <= 1, got {p10}, {p01}")
    if not (0 < alpha < 1 and 0 < power < 1):
        raise ValueError(f"need 0 < alpha, power < 1, got {alpha}, {power}")


@lru_cache(maxsize=4096)
def _log_factorials(n: int) -> np.ndarray:
    """``log(k!)`` for k = 0..n (cached: the same table serves every size below n)."""
    return np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1, dtype=np.float64)))])


def _binom_pmf(n: int, p: float) -> np.ndarray:
    """Binomial(n, p) probabilities of 0..n (log space, so large n does not overflow)."""
    k = np.arange(n + 1)
    if p <= 0 or p >= 1:
        return (k == (n if p >= 1 else 0)).astype(np.float64)
    lf = _log_factorials(max(n, 1))
    logp = lf[n] - lf[k] - lf[n - k] + k * math.log(p) + (n - k) * math.log1p(-p)
    return np.exp(logp)


@lru_cache(maxsize=64)
def _critical(alpha: float, d_max: int) -> tuple[int, ...]:
    """Per d = 0..d_max the sign test's critical count ``k_d`` (-1: no count rejects)."""
    out = [-1]
    for d in range(1, d_max + 1):
        null_cdf = np.cumsum(_binom_pmf(d, 0.5))
        out.append(int(np.searchsorted(2 * null_cdf, alpha, side="left")) - 1)  # 2cdf(k) < a
    return tuple(out)


@lru_cache(maxsize=256)
def _reject_given_d(q: float, alpha: float, d_max: int) -> np.ndarray:
    """P(the sign test rejects | d discordant tasks) for d = 0..d_max, a's share of wins q."""
    out = np.zeros(d_max + 1)
    for d, k in enumerate(_critical(alpha, d_max)):
        if k >= 0:
            alt = _binom_pmf(d, q)
            out[d] = alt[: k + 1].sum() + alt[d - k :].sum()
    return out


__all__ = ["EXACT_UP_TO", "mcnemar_n_normal", "sign_test_power", "tasks_for_power"]
