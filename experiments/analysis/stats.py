"""The statistics behind every interval and p-value of the tables, as plain functions.

Nothing here knows about records: numbers in, numbers out, so a reader can recompute a table
cell from its inputs. Every bootstrap takes an explicit ``numpy.random.Generator`` (seeded by
:func:`derive_seed`, never Python's salted ``hash()``) and draws its resamples in bounded
chunks (:data:`BOOT_CHUNK_ELEMENTS`), so memory does not grow with ``n_boot x n``.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

PERCENTILE_METHOD = "linear"
"""numpy percentile method used everywhere (Hyndman & Fan 1996, definition 7)."""


# 1 << 19 float64 numbers are 4 MB; smaller chunks also ran faster than larger ones
BOOT_CHUNK_ELEMENTS = 1 << 19
"""Bootstrap work arrays hold at most this many numbers at a time, so memory does not grow
with ``n_boot x n`` (the resamples, and so every interval, do not depend on it)."""


FloatArray = npt.NDArray[np.float64]


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion.

    Chosen over the normal (Wald) interval because it stays inside [0, 1] and keeps
    reasonable coverage for the small n and rates near 0/1 typical of benchmark cells.
    Returns ``(nan, nan)`` when ``n == 0``.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return (math.nan, math.nan)
    z = NormalDist().inv_cdf(1.0 - (1.0 - confidence) / 2.0)
    p = successes / n
    z2 = z * z
    denom = 1.0 + z2 / n
    center = (p + z2 / (2.0 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / denom
    # The closed form is exactly 0 / 1 at the extremes; pin them to avoid float fuzz.
    low = 0.0 if successes == 0 else max(0.0, center - half)
    high = 1.0 if successes == n else min(1.0, center + half)
    return (low, high)


def paired_difference_interval(
    both: int, only_a: int, only_b: int, neither: int, confidence: float = 0.95
) -> tuple[float, float]:
    """Interval of ``P(a succeeds) - P(b succeeds)`` from paired outcomes: Newcombe's (1998)
    square-and-add interval for paired data (his method 10).

    Each proportion gets its Wilson interval; the two distances from the estimate are added in
    quadrature, less the part the pairing explains (``psi``, the phi correlation of the pairs,
    shrunk by ``n / 2`` toward 0 when positive). Chosen over the exact conditional interval
    (:func:`~planarena.experiments.studies.sensitivity_stats.net_win_interval`), which only the
    discordant pairs move: with every discordant pair on one side its far end is the estimate
    itself, and with none it is ``(0, 0)``, a certainty 10 tied tasks do not give (Newcombe,
    Stat. Med. 17:2635, 1998). ``(nan, nan)`` when there are no pairs.
    """
    n = both + only_a + only_b + neither
    if min(both, only_a, only_b, neither) < 0:
        raise ValueError(f"counts must be >= 0, got {(both, only_a, only_b, neither)}")
    if n == 0:
        return (math.nan, math.nan)
    hits_a, hits_b = both + only_a, both + only_b
    p_a, p_b = hits_a / n, hits_b / n
    low_a, high_a = wilson_interval(hits_a, n, confidence)
    low_b, high_b = wilson_interval(hits_b, n, confidence)
    margins = hits_a * (n - hits_a) * hits_b * (n - hits_b)
    cross = both * neither - only_a * only_b
    if margins == 0 or 0 <= cross <= n / 2:
        psi = 0.0
    else:
        psi = (cross - n / 2 if cross > 0 else cross) / math.sqrt(margins)

    def reach(x: float, y: float) -> float:
        return math.sqrt(max(0.0, x * x + y * y - 2.0 * psi * x * y))

    diff = p_a - p_b
    low = diff - reach(p_a - low_a, high_b - p_b)
    high = diff + reach(p_b - low_b, high_a - p_a)
    return (max(-1.0, low), min(1.0, high))


def percentile(values: npt.ArrayLike, q: float) -> float:
    """q-th percentile (q in [0, 100]) with numpy's default ``'linear'`` method.

    'linear' is Hyndman & Fan type 7 (also pandas' ``quantile`` default), so readers
    recomputing with numpy or pandas defaults get identical numbers. Empty input -> nan;
    NaNs are not dropped (they propagate), so bad records are visible rather than hidden.
    """
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        return math.nan
    return float(np.percentile(arr, q, method=PERCENTILE_METHOD))


def percentile_stat(q: float) -> Callable[..., Any]:
    """Vectorized percentile statistic (``stat(x, axis=...)``) for :func:`bootstrap_ci`."""

    def stat(x: npt.ArrayLike, axis: int | None = None) -> Any:
        return np.percentile(x, q, axis=axis, method=PERCENTILE_METHOD)

    return stat


def bootstrap_ci(
    values: npt.ArrayLike,
    stat: Callable[..., Any],
    *,
    seed: int,
    n_boot: int = 1000,
    confidence: float = 0.95,
    vectorized: bool = True,
) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval for ``stat(values)``.

    Procedure (so it can be reproduced exactly): ``rng = numpy.random.default_rng(seed)``;
    ``idx = rng.integers(0, n, size=(n_boot, n))``; compute ``stat`` on each row of
    ``values[idx]``; return the ``(1-confidence)/2`` and ``(1+confidence)/2`` percentiles
    (method 'linear') of those ``n_boot`` statistics; the index rows are drawn in chunks of
    at most :data:`BOOT_CHUNK_ELEMENTS` numbers, so memory stays bounded. With
    ``vectorized=True`` the stat is called once per chunk as ``stat(resamples, axis=1)``
    (works for ``np.mean``, ``np.median`` and :func:`percentile_stat`); otherwise it is
    applied row by row. Empty input -> (nan, nan).
    """
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    arr = np.asarray(values, dtype=np.float64).ravel()
    n = arr.size
    if n == 0:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    rows = max(1, BOOT_CHUNK_ELEMENTS // n)
    parts = []
    for start in range(0, n_boot, rows):
        idx = rng.integers(0, n, size=(min(rows, n_boot - start), n))
        resamples = arr[idx]
        if vectorized:
            part = np.asarray(stat(resamples, axis=1), dtype=np.float64)
        else:
            part = np.array([float(stat(row)) for row in resamples], dtype=np.float64)
        parts.append(part.reshape(-1) if part.ndim else part.reshape(1))
    stats = np.concatenate(parts)
    if stats.shape != (n_boot,):
        raise ValueError(f"stat must return one value per resample, got shape {stats.shape}")
    alpha = 1.0 - confidence
    low, high = np.percentile(
        stats, [100.0 * alpha / 2.0, 100.0 * (1.0 - alpha / 2.0)], method=PERCENTILE_METHOD
    )
    return (float(low), float(high))


def derive_seed(seed: int, *parts: object) -> int:
    """Stable per-cell seed: ``zlib.crc32`` of ``"seed|part1|part2|..."`` (UTF-8).

    Python's ``hash()`` of strings is salted per process, so it would make CIs change
    between runs; crc32 is stable across processes, platforms and Python versions.
    """
    key = "|".join(str(p) for p in (seed, *parts))
    return zlib.crc32(key.encode("utf-8"))


def boot_rng(seed: int, *parts: object) -> np.random.Generator:
    """An explicit Generator per statistic, seeded by :func:`derive_seed` (no global state)."""
    return np.random.default_rng(derive_seed(seed, *parts))


def task_weights(
    rng: np.random.Generator, n_tasks: int, n_boot: int, per_row: int | None = None
) -> Iterable[npt.NDArray[np.int64]]:
    """Bootstrap task multiplicities, ``n_boot`` rows of ``Multinomial(n_tasks, 1/n_tasks)``,
    yielded in chunks whose size times ``per_row`` (default ``n_tasks``) stays under
    :data:`BOOT_CHUNK_ELEMENTS`; row ``b`` says how often each task is drawn in resample b."""
    width = max(per_row or n_tasks, 1)
    rows = max(1, BOOT_CHUNK_ELEMENTS // width)
    for start in range(0, n_boot, rows):
        size = min(rows, n_boot - start)
        # n_tasks draws with replacement per row, counted: Multinomial(n_tasks, 1/n_tasks)
        # exactly, about 5x faster than rng.multinomial's category-by-category binomials
        drawn = rng.integers(0, n_tasks, size=(size, n_tasks))
        drawn += np.arange(size)[:, None] * n_tasks
        yield np.bincount(drawn.ravel(), minlength=size * n_tasks).reshape(size, n_tasks)


def _exact_sums(x: FloatArray) -> bool:
    """Whether every weighted sum ``w @ x`` of :func:`task_weights` is an integer below 2**53
    (``x`` integer-valued, ``len(x) * max|x|`` small): then every order of adding gives the
    same float, and a sum over the drawn tasks equals the matrix product bit for bit."""
    if x.size == 0 or not np.isfinite(x).all():
        return False
    return bool(np.array_equal(x, np.trunc(x)) and np.abs(x).max() * x.size < 2.0**53)


def resampled_sums(
    rng: np.random.Generator, columns: Sequence[FloatArray], n_boot: int
) -> Iterator[list[FloatArray]]:
    """Per chunk of :func:`task_weights` (same draws from ``rng``), ``[w @ x for x in
    columns]``. When every column's sums are exact (:func:`_exact_sums`) they are summed over
    the drawn tasks in integers instead (a column of ones: the number of tasks), which skips
    counting the draws and the float matrix products and gives the same numbers."""
    n = columns[0].size
    if not all(_exact_sums(x) for x in columns):
        for w in task_weights(rng, n, n_boot):
            yield [w @ x for x in columns]
        return
    ones = [bool((x == 1).all()) for x in columns]
    ints = [x.astype(np.int64) for x in columns]
    rows = max(1, BOOT_CHUNK_ELEMENTS // max(n, 1))
    for start in range(0, n_boot, rows):
        size = min(rows, n_boot - start)
        drawn = rng.integers(0, n, size=(size, n))  # task_weights' draws, not counted
        yield [
            np.full(size, float(n)) if one else x[drawn].sum(axis=1).astype(np.float64)
            for x, one in zip(ints, ones, strict=True)
        ]


def percentile_interval(stats: FloatArray, confidence: float) -> tuple[float, float]:
    """The ``(1-confidence)/2`` and ``(1+confidence)/2`` percentiles (type 7) of the finite
    resampled ``stats``; (nan, nan) when none is finite."""
    stats = stats[np.isfinite(stats)]
    if stats.size == 0:
        return (math.nan, math.nan)
    alpha = 1.0 - confidence
    low, high = np.percentile(
        stats, [100.0 * alpha / 2.0, 100.0 * (1.0 - alpha / 2.0)], method=PERCENTILE_METHOD
    )
    return (float(low), float(high))


def task_bootstrap_ratio(
    sums: npt.ArrayLike,
    counts: npt.ArrayLike,
    *,
    rng: np.random.Generator,
    n_boot: int = 1000,
    confidence: float = 0.95,
) -> tuple[float, float]:
    """Task-bootstrap interval of ``sum(sums) / sum(counts)`` (a mean over episodes).

    ``sums[t]`` is task t's total (successes, tokens, ...) and ``counts[t]`` its episodes.
    Each resample draws tasks with replacement (multinomial counts ``w``) and computes
    ``w @ sums / w @ counts``; the percentile interval of those is returned.
    """
    s = np.asarray(sums, dtype=np.float64)
    c = np.asarray(counts, dtype=np.float64)
    if s.size == 0:
        return (math.nan, math.nan)
    parts = [num / den for num, den in resampled_sums(rng, [s, c], n_boot)]
    return percentile_interval(np.concatenate(parts), confidence)


def weighted_percentile_rows(
    sorted_values: FloatArray, weights: npt.NDArray[np.int64], q: float
) -> FloatArray:
    """Type-7 percentile of each row's multiset: value i repeated ``weights[b, i]`` times.

    Equal to ``np.percentile(np.repeat(sorted_values, weights[b]), q)`` row by row, without
    building the repeated arrays: position ``h = (N-1) q / 100`` in the expanded order is found
    from the cumulative counts.
    """
    cum = np.cumsum(weights, axis=1)
    total = cum[:, -1]
    h = (total - 1) * (q / 100.0)
    lo = np.floor(h)
    frac = h - lo
    hi = np.minimum(lo + 1, total - 1)
    i_lo = (cum <= lo[:, None]).sum(axis=1)
    i_hi = (cum <= hi[:, None]).sum(axis=1)
    v_lo = sorted_values[np.minimum(i_lo, sorted_values.size - 1)]
    v_hi = sorted_values[np.minimum(i_hi, sorted_values.size - 1)]
    return v_lo + frac * (v_hi - v_lo)


def task_bootstrap_percentile(
    values: npt.ArrayLike,
    tasks: npt.ArrayLike,
    q: float,
    *,
    rng: np.random.Generator,
    n_boot: int = 1000,
    confidence: float = 0.95,
) -> tuple[float, float]:
    """Task-bootstrap interval of the q-th percentile (type 7) of episode ``values``.

    ``tasks[i]`` names episode i's task; a resample draws tasks with replacement and keeps
    every episode of a drawn task as many times as it was drawn. Values are sorted first, so
    the input order does not matter.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return (math.nan, math.nan)
    labels = np.asarray(tasks)
    if labels.dtype.kind in "iu":  # task numbers: sorted uniques as factorize(sort=True) has
        codes = np.unique(labels, return_inverse=True)[1].reshape(-1)
    else:
        codes, _ = pd.factorize(pd.Series(list(tasks)), sort=True)
    order = np.lexsort((codes, v))
    v, codes = v[order], codes[order]
    n_tasks = int(codes.max()) + 1
    parts = [
        weighted_percentile_rows(v, w[:, codes], q)
        for w in task_weights(rng, n_tasks, n_boot, per_row=2 * v.size + n_tasks)
    ]
    return percentile_interval(np.concatenate(parts), confidence)


def kaplan_meier(times: npt.ArrayLike, events: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Kaplan-Meier estimate of P(no event by t): ``(event_times, survival)``.

    At each distinct event time t_j with d_j events and n_j episodes still at risk (time >=
    t_j; an episode censored at t_j counts as at risk at t_j), ``S(t_j) = prod (1 - d_i/n_i)``
    over i <= j. For time to success, ``events`` is ``success`` and failures are censored at
    their end time, so ``1 - S`` is the chance of success by t *had failed episodes gone on*
    (failure treated as non-informative censoring; the plain completion rate is the share of
    episodes that succeeded at all).
    """
    t = np.asarray(times, dtype=np.float64)
    e = np.asarray(events, dtype=bool)
    if t.size == 0 or not e.any():
        return np.empty(0), np.empty(0)
    event_times, counts = np.unique(t[e], return_counts=True)
    t_sorted = np.sort(t)
    at_risk = t.size - np.searchsorted(t_sorted, event_times, side="left")
    deaths = counts.astype(np.float64)
    survival = np.cumprod(1.0 - deaths / at_risk)
    return event_times, survival


def km_median(times: npt.ArrayLike, events: npt.ArrayLike) -> float:
    """Smallest event time with Kaplan-Meier ``S(t) <= 0.5``; NaN if never reached."""
    event_times, survival = kaplan_meier(times, events)
    reached = np.nonzero(survival <= 0.5)[0]
    return float(event_times[reached[0]]) if reached.size else math.nan


def sign_test_p(wins_a: int, wins_b: int) -> float:
    """Exact two-sided sign test: ``min(1, 2 P(X <= min(a, b)))``, X ~ Binomial(a + b, 1/2).

    On tasks that ran once this is McNemar's exact test (a, b = discordant pairs); ties
    (tasks with equal outcomes) carry no information and are dropped. 1.0 when a + b = 0.
    """
    n = wins_a + wins_b
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins_a, wins_b) + 1))
    return min(1.0, 2 * tail / 2**n)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm (1979) step-down adjusted p-values: the i-th smallest of m gets
    ``max_{j <= i} min(1, (m - j) p_(j))`` (0-based j); NaNs stay NaN and are not counted."""
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.size, math.nan)
    valid = np.nonzero(~np.isnan(p))[0]
    m = valid.size
    order = valid[np.argsort(p[valid], kind="stable")]
    running = 0.0
    for j, i in enumerate(order):
        running = max(running, min(1.0, (m - j) * p[i]))
        out[i] = running
    return out.tolist()
