"""Episode-level metrics for planarena result tables.

Every number that ends up in a paper table is computed here, from the raw per-episode
records, with methods stated in the docstrings so a reader can recompute them. The unit of
resampling is the **task** (trials of one task are correlated), identified by
:func:`task_keys` (``seed`` is always part of it: task ids repeat across seeds):

* completion: share of episodes with ``success == True``; Wilson score interval when every
  task ran once, else a task (cluster) bootstrap interval, never narrower than Wilson;
* latency percentiles: numpy's default ``'linear'`` method (Hyndman & Fan type 7) with a
  task-bootstrap percentile interval; token means with a task-bootstrap interval;
* every bootstrap draws *counts* (multinomial task weights) in bounded chunks from an
  explicit ``numpy.random.Generator`` seeded by :func:`derive_seed` (``zlib.crc32``, never
  Python's salted ``hash()``), so memory does not grow with ``n_boot x n``;
* paired comparisons resample tasks; p-values from the exact sign test on per-task
  differences (McNemar's exact test when trials = 1), Holm-adjusted across a family;
* pass@k (Chen et al. 2021) and pass^k (Yao et al. 2024, tau-bench) per task;
* cost of success (means over completed episodes), Kaplan-Meier time to success, recovery
  stratified by the faults drawn before the planner acts (``exposed_faults``), robustness
  (completion with faults / without, paired by task) and consistency over trials.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

PERCENTILE_METHOD = "linear"
"""numpy percentile method used everywhere (Hyndman & Fan 1996, definition 7)."""

COMPLEXITY_ORDER: tuple[str, ...] = ("simple", "medium", "complex")
"""Canonical complexity order; every output sorts complexity this way, not alphabetically."""

FAILURE_MODES: tuple[str, ...] = (
    "dead_end",
    "gave_up_after_tool_failure",
    "precondition_unverified",
    "plan_logic_error",
    "hallucinated_tool_call",
    "malformed_output",
    "budget_exhausted",
    "false_success",
    "harness_error",
    "correctly_reported_unreachable",
)
"""Canonical failure-mode order used for failure-distribution columns."""

ROLE_TOKEN_COLUMNS: tuple[str, ...] = (
    "tokens_planner",
    "tokens_executor",
    "tokens_evaluator",
    "tokens_replanner",
    "tokens_rollout",
)
"""Optional per-role token columns; missing values inside a present column count as 0."""

DEFAULT_BY: tuple[str, ...] = ("planner", "env", "complexity")
TASK_KEYS: tuple[str, ...] = ("planner", "seed", "env", "complexity", "task_id")
"""Base task identity; :func:`task_keys` adds every swept config column of a record set."""
PAIR_KEYS: tuple[str, ...] = ("seed", "env", "complexity", "task_id")
"""Base pairing keys (a task, whatever its trials); :func:`pair_keys` adds swept columns."""
CONFIG_KEYS: tuple[str, ...] = ("seed", "llm", "faults")
"""Record columns that name a run's configuration; a swept one becomes a group key."""
BOOT_CHUNK_ELEMENTS = 1 << 19
"""Bootstrap work arrays hold at most this many numbers (~4 MB of float64) at a time (the
resamples, and so every interval, do not depend on it; smaller chunks also ran faster)."""

SUMMARY_COLUMNS: tuple[str, ...] = (
    "n",
    "n_tasks",
    "trials_max",
    "successes",
    "completion_rate",
    "completion_ci_low",
    "completion_ci_high",
    "completion_ci_method",
    "progress_mean",
    "tokens_mean",
    "tokens_mean_ci_low",
    "tokens_mean_ci_high",
    "tokens_prompt_mean",
    "tokens_completion_mean",
    "llm_calls_mean",
    "tool_calls_mean",
    "retries_mean",
    "fallbacks_mean",
    "replans_mean",
    "latency_p50",
    "latency_p50_ci_low",
    "latency_p50_ci_high",
    "latency_p99",
    "latency_p99_ci_low",
    "latency_p99_ci_high",
    "cost_mean",
    "harness_errors",
    "successes_tokens_mean",
    "successes_cost_mean",
    "successes_latency_p50",
    "cost_per_success",
    "time_to_success_km_median",
)
"""Fixed summary columns that follow the group-key columns, in output order."""

# (output column, source column) pairs averaged per cell, in output order.
_MEAN_COLUMNS: tuple[tuple[str, str], ...] = (
    ("progress_mean", "progress"),
    ("tokens_mean", "tokens_total"),
    ("tokens_prompt_mean", "tokens_prompt"),
    ("tokens_completion_mean", "tokens_completion"),
    ("llm_calls_mean", "llm_calls"),
    ("tool_calls_mean", "tool_calls"),
    ("retries_mean", "retries"),
    ("fallbacks_mean", "fallbacks"),
    ("replans_mean", "replans"),
)

_RESERVED_COLUMNS = frozenset(
    {*SUMMARY_COLUMNS, "recovery_rate_conditional", "n_faulted", "k", "n_pairs", "fault"}
)

_REQUIRED_SUMMARY_INPUTS: tuple[str, ...] = (
    "success",
    "failure_mode",
    "latency_s",
    "cost_usd",
    "faults_injected",
    *(src for _, src in _MEAN_COLUMNS),
)

EPISODE_COLUMNS: tuple[str, ...] = tuple(
    dict.fromkeys(
        (
            *TASK_KEYS,
            "trial",
            *CONFIG_KEYS,
            *_REQUIRED_SUMMARY_INPUTS,
            *ROLE_TOKEN_COLUMNS,
            "exposed_faults",
            "stop_reason",  # job_cost_cap: an episode the job's cost cap cut, not measured
            "overrides",
            "run_dir",
        )
    )
)
"""Record columns the tables (and figures) read; with an ``overrides`` column, the columns
its keys name too (:func:`table_columns`). Every other record column is left unread."""

CATEGORY_COLUMNS: tuple[str, ...] = (
    "planner",
    "env",
    "complexity",
    "llm",
    "faults",
    "failure_mode",
    "exposed_faults",
    "stop_reason",
)
"""String columns with few distinct values, held as categoricals (categories sorted) in the
frame the tables read: one byte a row instead of a string, and grouped without hashing."""

FloatArray = npt.NDArray[np.float64]


# --------------------------------------------------------------------------- basic statistics


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


# --------------------------------------------------------------------------- ordering helpers


def _first_appearance(values: Iterable[Hashable]) -> list[Hashable]:
    """Unique values in order of first appearance."""
    return list(dict.fromkeys(values))


def _natural_sorted(values: Iterable[Hashable]) -> list[Hashable]:
    """Sort by value when comparable (numbers numerically), else by string form."""
    items = list(values)
    try:
        return sorted(items)  # type: ignore[type-var]
    except TypeError:
        return sorted(items, key=lambda v: (type(v).__name__, str(v)))


def sort_cells(
    frame: pd.DataFrame,
    keys: Sequence[str],
    *,
    planner_order: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Sort rows by ``keys`` in the project's canonical order and reset the index.

    planner: ``planner_order`` first, then unlisted planners by first appearance in
    ``frame``; complexity: simple < medium < complex (unknown values after, sorted);
    any other key: sorted by value (by string form if mixed types). Deterministic.
    """
    if frame.empty or not keys:
        return frame.reset_index(drop=True)
    rank_cols: list[str] = []
    ranked = frame.reset_index(drop=True).copy()
    for i, key in enumerate(keys):
        col = ranked[key]
        if key == "planner":
            order = list(planner_order or [])
            order += [p for p in _first_appearance(col) if p not in order]
        elif key == "complexity":
            extra = sorted((c for c in set(col) if c not in COMPLEXITY_ORDER), key=str)
            order = [*COMPLEXITY_ORDER, *extra]
        else:
            order = _natural_sorted(set(col))
        ranks = {v: r for r, v in enumerate(order)}
        rank_name = f"__rank_{i}"
        ranked[rank_name] = [ranks[v] for v in col]
        rank_cols.append(rank_name)
    ranked = ranked.sort_values(rank_cols, kind="stable")
    return ranked.drop(columns=rank_cols).reset_index(drop=True)


def _planner_order(df: pd.DataFrame, planner_order: Sequence[str] | None) -> list[str]:
    """Explicit order first, then remaining planners by first appearance in the episodes."""
    order = list(planner_order or [])
    if "planner" in df.columns:
        order += [p for p in _first_appearance(df["planner"]) if p not in order]
    return order


def _require(df: pd.DataFrame, columns: Iterable[str]) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise KeyError(f"episode table is missing required columns: {missing}")


def _success_bool(series: pd.Series) -> npt.NDArray[np.bool_]:
    """Strict bool conversion: NaN or non 0/1 values raise instead of becoming True."""
    if series.isna().any():
        raise ValueError("'success' contains missing values")
    values = series.to_numpy()
    if values.dtype != np.bool_:
        uniq = set(pd.unique(values).tolist())
        if not uniq <= {0, 1}:  # True == 1 and False == 0 in Python sets
            raise ValueError(f"'success' must be boolean, got values {sorted(map(str, uniq))}")
    return values.astype(bool)


def _groups(
    df: pd.DataFrame, by: Sequence[str]
) -> Iterable[tuple[tuple[Hashable, ...], pd.DataFrame]]:
    """Group in first-appearance order, yielding tuple keys even for a single column."""
    for key, sub in df.groupby(list(by), sort=False, dropna=False, observed=True):
        yield (key if isinstance(key, tuple) else (key,)), sub


def _group_positions(
    df: pd.DataFrame, by: Sequence[str]
) -> list[tuple[tuple[Hashable, ...], npt.NDArray[np.intp]]]:
    """:func:`_groups` as (key, row positions) pairs: the same groups in the same order, each
    with its rows' positions in ``df`` (ascending, the order of the rows of :func:`_groups`'
    sub-frame), without building a sub-frame per group."""
    indices = df.groupby(list(by), sort=False, dropna=False, observed=True).indices
    pairs = sorted(indices.items(), key=lambda item: int(item[1][0]))  # first appearance
    return [(key if isinstance(key, tuple) else (key,), at) for key, at in pairs]


def task_codes(df: pd.DataFrame, keys: Sequence[str]) -> npt.NDArray[np.intp]:
    """Task numbers in the sorted order of the ``keys`` values as strings: equal to
    ``pd.factorize(pd.MultiIndex.from_frame(df[keys].astype(str)), sort=True)[0]``, column
    by column (a MultiIndex of every row is slow to build and to sort)."""
    keys = list(keys)
    if bool(df[keys].isna().to_numpy().any()):  # a missing key: a value of its own there
        return pd.factorize(pd.MultiIndex.from_frame(df[keys].astype(str)), sort=True)[0]
    codes, _ = _string_ranks(df[keys[0]])
    for key in keys[1:]:
        more, n_more = _string_ranks(df[key])
        codes, _ = pd.factorize(codes.astype(np.int64) * n_more + more, sort=True)
    return codes


def _string_ranks(column: pd.Series) -> tuple[npt.NDArray[np.intp], int]:
    """``pd.factorize(column.astype(str), sort=True)`` (codes, number of codes), converting
    only the distinct values to strings (a seed column is 100k ints but one string)."""
    raw, uniques = pd.factorize(column, use_na_sentinel=False)
    ranks, names = pd.factorize(pd.Series(uniques).astype(str), sort=True)
    return ranks[raw], len(names)


# --------------------------------------------------------------------------- keys


_NOT_CONFIG_KEYS = frozenset(
    {
        "hydra",
        "progress",
        "concurrency",
        "workers",
        "resume",
        "write_traces",
        "figures",
        "fail_fast",
        "dry_run",
        "report_extra",
        "llm.max_concurrency",
        "llm.cache_dir",
    }
)
"""Overrides that change how a job runs or prints, never what its episodes are."""


def parse_overrides(text: object) -> dict[str, str]:
    """``"planner=react seed=1 llm.skill=weak"`` -> ``{"planner": "react", ...}``.

    The ``overrides`` column :func:`experiments.load` adds is the job's command-line overrides
    joined by spaces; ``+``/``++`` prefixes are dropped, deletions (``~key``), Hydra's own
    ``hydra.*`` keys and output-only keys (``progress``, ``concurrency``, ...) are ignored.
    """
    if not isinstance(text, str):
        return {}
    out: dict[str, str] = {}
    for token in text.split():
        if "=" not in token or token.startswith("~"):
            continue
        key, value = token.split("=", 1)
        key = key.lstrip("+")
        if key.startswith("hydra.") or key in _NOT_CONFIG_KEYS:
            continue
        out[key] = value
    return out


def override_column(key: str) -> str:
    """Column name of an override key: the key itself, or ``config.<key>`` when the key would
    clash with a summary column (``n_tasks=50`` is a config value, not a count of tasks)."""
    return f"config.{key}" if key in _RESERVED_COLUMNS else key


def with_swept_columns(df: pd.DataFrame) -> pd.DataFrame:
    """Add one column per command-line override that differs between the runs of ``df``.

    A multirun over ``llm.skill=weak,strong`` gives a column ``llm.skill``; keys that are
    already record columns (``planner``, ``seed``, ...) keep the record's value. Returns
    ``df`` itself when there is nothing to add.
    """
    if "overrides" not in df.columns:
        return df
    texts = df["overrides"].fillna("").astype(str)  # a run without .hydra/ has none
    parsed = {text: parse_overrides(text) for text in pd.unique(texts)}
    keys = sorted(
        k for k in {k for d in parsed.values() for k in d} if override_column(k) not in df.columns
    )
    keys = [k for k in keys if k not in df.columns]
    varying = [k for k in keys if len({d.get(k) for d in parsed.values()}) > 1]
    if not varying:
        return df
    out = df.copy()
    for key in varying:
        out[override_column(key)] = [parsed[text].get(key, "") for text in texts]
    return out


def _override_text(value: Any) -> str:
    """A config value written as a command-line override writes it (``true``, ``null``,
    ``[a,b]``), so a run's default compares equal to another run's explicit override."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_override_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_override_text(v)}" for k, v in value.items()) + "}"
    return str(value)


def _run_configs(run_dir: str | Path) -> tuple[dict[str, Any], ...]:
    """The configurations a run dir records, most trusted first: ``run.json``'s (the resolved
    configuration the records were made with), ``.hydra/config.yaml`` and the config-group
    choices of ``.hydra/hydra.yaml`` (``experiment``, ...). Unreadable files are skipped."""
    import yaml
    from planarena.experiments.records.identity import RUN_FILE

    root = Path(run_dir)
    out: list[dict[str, Any]] = []
    try:
        run = json.loads((root / RUN_FILE).read_text(encoding="utf-8"))
        if isinstance(run, dict) and isinstance(run.get("config"), dict):
            out.append(run["config"])
    except (OSError, ValueError):
        pass
    for name, pick in (("config.yaml", ()), ("hydra.yaml", ("hydra", "runtime", "choices"))):
        try:
            doc = yaml.safe_load((root / ".hydra" / name).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            continue
        for key in pick:
            doc = doc.get(key) if isinstance(doc, dict) else None
        if isinstance(doc, dict):
            out.append(doc)
    return tuple(out)


def run_config_value(
    run_dir: str | Path, key: str, configs: Sequence[dict[str, Any]] | None = None
) -> str | None:
    """The value of the dotted config ``key`` (``n_tasks``, ``llm.skill``, ``experiment``)
    that the run in ``run_dir`` used, written as an override would write it; None if no
    configuration file of the run has the key (``configs``: the run's, already read)."""
    for config in _run_configs(run_dir) if configs is None else configs:
        if key in config:  # a group choice is one key with a slash (hydra/launcher)
            return _override_text(config[key])
        node: Any = config
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                break
            node = node[part]
        else:
            return _override_text(node)
    return None


def with_run_defaults(df: pd.DataFrame, before: Iterable[str]) -> pd.DataFrame:
    """Fill the swept override columns :func:`with_swept_columns` added (those not in
    ``before``) where a run's overrides do not name the key: that run used its configured
    value (a default run beside ``n_tasks=4`` ran 20 tasks), read from its ``run.json`` or
    ``.hydra/``. A value no file of the run records stays blank."""
    before = set(before)
    if "overrides" not in df.columns or "run_dir" not in df.columns:
        return df
    keys = {k for t in pd.unique(df["overrides"].fillna("")) for k in parse_overrides(t)}
    configs: dict[str, tuple[dict[str, Any], ...]] = {}
    for key in sorted(keys):
        column = override_column(key)
        if column in before or column not in df.columns:
            continue
        blank = (df[column] == "").to_numpy()
        if not blank.any():
            continue
        runs = df["run_dir"].astype(str).to_numpy()
        for run in pd.unique(runs[blank]):
            if run not in configs:
                configs[run] = _run_configs(run)
            value = run_config_value(run, key, configs[run])
            if value is not None:
                df.loc[blank & (runs == run), column] = value
    return df


def table_columns(columns: Iterable[str], overrides: Iterable[object] = ()) -> list[str]:
    """The ones of ``columns`` (in their order) that the tables and figures read:
    :data:`EPISODE_COLUMNS` and, for the ``overrides`` values given, the columns their keys
    name (:func:`with_swept_columns` may have added them, or a record may hold one)."""
    wanted = set(EPISODE_COLUMNS)
    for text in overrides:
        for key in parse_overrides(text):
            wanted |= {key, override_column(key)}
    return [c for c in columns if c in wanted]


def swept_keys(df: pd.DataFrame) -> list[str]:
    """Config columns that take more than one value in ``df``: ``seed``, ``llm``, ``faults``
    and every override column :func:`with_swept_columns` added. Cells are grouped by these,
    never pooled over them."""
    out = [k for k in CONFIG_KEYS if k in df.columns and df[k].nunique(dropna=False) > 1]
    if "overrides" in df.columns:
        parsed = [parse_overrides(t) for t in pd.unique(df["overrides"].fillna(""))]
        keys = sorted({override_column(k) for d in parsed for k in d})
        out += [
            k
            for k in keys
            if k in df.columns
            and k not in out
            and k not in DEFAULT_BY
            and k not in CONFIG_KEYS
            and df[k].nunique(dropna=False) > 1
        ]
    return out


def cell_keys(df: pd.DataFrame, by: Sequence[str] = DEFAULT_BY) -> list[str]:
    """``by`` plus every swept key of ``df`` (in that order, without repeats)."""
    return [*by, *(k for k in swept_keys(df) if k not in by)]


def task_keys(df: pd.DataFrame, by: Sequence[str] = DEFAULT_BY) -> list[str]:
    """Columns that identify one task of one cell: the cell keys, ``seed`` and ``task_id``."""
    keys = cell_keys(df, by)
    return [*keys, *(k for k in ("seed", "task_id") if k in df.columns and k not in keys)]


def pair_keys(df: pd.DataFrame) -> list[str]:
    """Keys on which two planners' episodes are paired: the task keys without ``planner``."""
    return [k for k in task_keys(df) if k != "planner"]


# --------------------------------------------------------------------------- task bootstrap


def _rng(seed: int, *parts: object) -> np.random.Generator:
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


def _interval(stats: FloatArray, confidence: float) -> tuple[float, float]:
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
    return _interval(np.concatenate(parts), confidence)


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
    return _interval(np.concatenate(parts), confidence)


# --------------------------------------------------------------------------- pass@k / pass^k


def _per_task(df: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    work = df.assign(_success=_success_bool(df["success"]))
    return (
        work.groupby(list(keys), sort=False, dropna=False, observed=True)["_success"]
        .agg(n="size", c="sum")
        .reset_index()
    )


def _pass_k(df: pd.DataFrame, k: int, kind: str) -> pd.DataFrame:
    if not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    _require(df, ("planner", "env", "complexity", "task_id", "success"))
    out_col = {"at": "pass_at_k", "hat": "pass_hat_k", "same": "consistency"}[kind]
    keys = cell_keys(df)
    per_task = _per_task(df, task_keys(df))
    rows: list[dict[str, Any]] = []
    for key, sub in _groups(per_task, keys):
        kept = sub[sub["n"] >= k]
        scores = []
        for n_t, c_t in zip(kept["n"].tolist(), kept["c"].tolist(), strict=True):
            total = math.comb(n_t, k)
            if kind == "at":
                scores.append(1.0 - math.comb(n_t - c_t, k) / total)
            elif kind == "hat":
                scores.append(math.comb(c_t, k) / total)
            else:  # k trials drawn without replacement all agree (all succeed or all fail)
                scores.append((math.comb(c_t, k) + math.comb(n_t - c_t, k)) / total)
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "k": int(k),
                "n_tasks": len(kept),
                "n_tasks_excluded": int(len(sub) - len(kept)),
                out_col: float(np.mean(scores)) if scores else math.nan,
            }
        )
    columns = [*keys, "k", "n_tasks", "n_tasks_excluded", out_col]
    result = pd.DataFrame(rows, columns=columns)
    return sort_cells(result, keys, planner_order=_planner_order(df, None))


def pass_at_k(df: pd.DataFrame, k: int) -> pd.DataFrame:
    """pass@k (Chen et al. 2021, "Evaluating Large Language Models Trained on Code"):
    P(at least one of k trials succeeds), per cell (planner, env, complexity, swept keys).

    Per task (:func:`task_keys`, seed included) with n trials and c successes, the unbiased
    estimator ``1 - C(n-c, k) / C(n, k)``, averaged over tasks; tasks with n < k are excluded
    (counted in ``n_tasks_excluded``) because the estimator needs k draws.
    """
    return _pass_k(df, k, "at")


def pass_hat_k(df: pd.DataFrame, k: int) -> pd.DataFrame:
    """pass^k (Yao et al. 2024, tau-bench): P(all of k trials succeed), per cell.

    Per task: ``C(c, k) / C(n, k)``, averaged over tasks; tasks with n < k are excluded.
    It measures reliability (consistency across retries), unlike pass@k. Note: planarena's
    trials are independent episodes (fresh LLM and fault draws), not tau-bench's rerun of the
    same environment state.
    """
    return _pass_k(df, k, "hat")


def consistency_k(df: pd.DataFrame, k: int) -> pd.DataFrame:
    """Share of tasks whose k trials all agree (all succeed or all fail), per cell.

    Per task: ``(C(c, k) + C(n-c, k)) / C(n, k)`` (k trials drawn without replacement from
    the task's n), averaged over tasks with n >= k; column ``consistency``.
    """
    return _pass_k(df, k, "same")


# --------------------------------------------------------------------------- summary


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


def summarize(
    df: pd.DataFrame,
    by: Sequence[str] | None = None,
    *,
    seed: int = 0,
    n_boot: int = 1000,
    confidence: float = 0.95,
    planner_order: Sequence[str] | None = None,
) -> pd.DataFrame:
    """One row per cell with completion, cost, latency and robustness metrics.

    ``by`` defaults to :func:`cell_keys` (planner, env, complexity and every swept key, e.g.
    ``seed`` in a multi-seed sweep). Columns: the ``by`` keys, then :data:`SUMMARY_COLUMNS`,
    then ``tokens_<role>_mean`` for each role column present (missing values count as 0), then
    ``recovery_rate_conditional`` and ``n_faulted``. Definitions (task = :func:`task_keys`):

    * ``n`` episodes, ``n_tasks`` distinct tasks, ``trials_max`` most episodes of one task.
    * ``completion_rate = successes / n``; only ``success == True`` counts (a
      ``correctly_reported_unreachable`` episode is not a completion). Interval
      (``completion_ci_method``): ``wilson`` when every task ran once; else ``task_bootstrap``:
      the percentile interval of ``n_boot`` task resamples of ``sum(successes)/sum(episodes)``,
      widened to contain the episode-level Wilson interval (so it is never narrower than an
      interval that treats correlated trials as independent).
    * ``*_mean``: arithmetic means over all episodes of the cell; ``tokens_mean`` (of
      ``tokens_total``) has a task-bootstrap interval. ``wall_s`` is ignored.
    * ``latency_p50/p99``: :func:`percentile` of ``latency_s`` (method 'linear'); intervals by
      :func:`task_bootstrap_percentile`.
    * cost of success: ``successes_tokens_mean``, ``successes_cost_mean`` and
      ``successes_latency_p50`` over completed episodes only; ``cost_per_success`` is all the
      cell's cost divided by its successes (what one completion costs, failures included);
      ``time_to_success_km_median``: :func:`km_median` of latency with failures censored.
    * ``harness_errors``: episodes with ``failure_mode == "harness_error"`` (kept in n).
    * ``recovery_rate_conditional``: success share among episodes with ``faults_injected > 0``
      (conditional on something the planner causes: more calls meet more faults; for a fair
      comparison use :func:`recovery_by_fault`).

    Every bootstrap has its own Generator seeded by ``derive_seed(seed, *cell_key, name)``.
    """
    df = with_swept_columns(df)
    by = cell_keys(df) if by is None else list(by)
    if not by:
        raise ValueError("'by' must name at least one column")
    _require(df, (*by, *_REQUIRED_SUMMARY_INPUTS))
    roles = [c for c in ROLE_TOKEN_COLUMNS if c in df.columns]

    # every column the cells read, as one array each (a cell takes its rows by position and
    # makes them float64): numpy's own numbers without a copy, others converted once
    def numbers(series: pd.Series) -> npt.NDArray[Any]:
        raw = series.to_numpy()
        return raw if raw.dtype.kind in "biuf" else series.to_numpy(dtype=np.float64)

    success_all = _success_bool(df["success"])
    values = {src: numbers(df[src]) for _, src in _MEAN_COLUMNS}
    for src in ("latency_s", "cost_usd", "faults_injected"):
        values[src] = numbers(df[src])
    for role in roles:
        values[role] = numbers(df[role].fillna(0))
    harness_all = (df["failure_mode"] == "harness_error").to_numpy(dtype=bool)
    tkeys = [k for k in ("seed", "task_id") if k in df.columns and k not in by]
    task_all = task_codes(df, tkeys) if tkeys else np.arange(len(df))

    rows: list[dict[str, Any]] = []
    for key, at in _group_positions(df, by):
        success = success_all[at]
        n = int(success.size)
        n_success = int(success.sum())
        tasks = task_all[at]
        task_ids, task_index = np.unique(tasks, return_inverse=True)
        counts = np.bincount(task_index).astype(np.float64)
        ci_low, ci_high = wilson_interval(n_success, n, confidence)
        method = "wilson"
        if counts.max() > 1:
            method = "task_bootstrap"
            s_task = np.bincount(task_index, weights=success.astype(np.float64))
            b_low, b_high = task_bootstrap_ratio(
                s_task,
                counts,
                rng=_rng(seed, *key, "completion"),
                n_boot=n_boot,
                confidence=confidence,
            )
            ci_low, ci_high = min(ci_low, b_low), max(ci_high, b_high)
        row: dict[str, Any] = dict(zip(by, key, strict=True))
        row.update(
            n=n,
            n_tasks=int(task_ids.size),
            trials_max=int(counts.max()),
            successes=n_success,
            completion_rate=n_success / n,
            completion_ci_low=ci_low,
            completion_ci_high=ci_high,
            completion_ci_method=method,
        )
        for out_col, src in _MEAN_COLUMNS:
            row[out_col] = float(np.mean(values[src][at].astype(np.float64)))
        tokens = values["tokens_total"][at].astype(np.float64)
        row["tokens_mean_ci_low"], row["tokens_mean_ci_high"] = task_bootstrap_ratio(
            np.bincount(task_index, weights=tokens),
            counts,
            rng=_rng(seed, *key, "tokens_mean"),
            n_boot=n_boot,
            confidence=confidence,
        )
        latency = values["latency_s"][at].astype(np.float64)
        for q in (50, 99):
            name = f"latency_p{q}"
            row[name] = percentile(latency, q)
            low, high = task_bootstrap_percentile(
                latency,
                task_index,
                q,
                rng=_rng(seed, *key, name),
                n_boot=n_boot,
                confidence=confidence,
            )
            row[f"{name}_ci_low"] = low
            row[f"{name}_ci_high"] = high
        cost = values["cost_usd"][at].astype(np.float64)
        row["cost_mean"] = float(np.mean(cost))
        row["harness_errors"] = int(harness_all[at].sum())
        row["successes_tokens_mean"] = float(tokens[success].mean()) if n_success else math.nan
        row["successes_cost_mean"] = float(cost[success].mean()) if n_success else math.nan
        row["successes_latency_p50"] = percentile(latency[success], 50)
        row["cost_per_success"] = float(cost.sum() / n_success) if n_success else math.nan
        row["time_to_success_km_median"] = km_median(latency, success)
        for role in roles:
            row[f"{role}_mean"] = float(np.mean(values[role][at].astype(np.float64)))
        faulted = values["faults_injected"][at].astype(np.float64) > 0
        n_faulted = int(faulted.sum())
        row["recovery_rate_conditional"] = float(success[faulted].mean()) if n_faulted else math.nan
        row["n_faulted"] = n_faulted
        rows.append(row)

    columns = [
        *by,
        *SUMMARY_COLUMNS,
        *(f"{r}_mean" for r in roles),
        "recovery_rate_conditional",
        "n_faulted",
    ]
    result = pd.DataFrame(rows, columns=columns)
    for col in ("n", "n_tasks", "trials_max", "successes", "harness_errors", "n_faulted"):
        result[col] = result[col].astype("int64")
    return sort_cells(result, by, planner_order=_planner_order(df, planner_order))


def seed_spread(summary: pd.DataFrame) -> pd.DataFrame:
    """Between-seed spread of completion: one row per cell without ``seed``.

    Columns: the other keys, ``n_seeds``, ``completion_mean`` (mean of the per-seed rates),
    ``completion_sd`` (sample standard deviation, ddof = 1; NaN with one seed), ``completion_min``,
    ``completion_max``. Empty when ``summary`` has no ``seed`` column.
    """
    if "seed" not in summary.columns:
        return pd.DataFrame()
    start = list(summary.columns).index("n")
    keys = [k for k in summary.columns[:start] if k != "seed"]
    rows = []
    for key, sub in _groups(summary, keys):
        rates = sub["completion_rate"].to_numpy(dtype=np.float64)
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "n_seeds": int(rates.size),
                "completion_mean": float(rates.mean()),
                "completion_sd": float(rates.std(ddof=1)) if rates.size > 1 else math.nan,
                "completion_min": float(rates.min()),
                "completion_max": float(rates.max()),
            }
        )
    return pd.DataFrame(rows)


def failure_distribution(
    df: pd.DataFrame,
    by: Sequence[str] = ("planner",),
    *,
    planner_order: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Share of each failure mode among failed episodes (``success == False``) per group.

    Columns: ``by`` keys, ``n_failed``, then one column per mode in :data:`FAILURE_MODES`
    order (modes outside that list are appended alphabetically so rows still sum to 1).
    Groups without failures are kept with ``n_failed == 0`` and NaN shares.
    """
    by = list(by)
    _require(df, (*by, "success", "failure_mode"))
    success = _success_bool(df["success"])
    failed_modes = df.loc[~success, "failure_mode"].astype(str)
    extra = sorted(set(failed_modes) - set(FAILURE_MODES))
    modes = [*FAILURE_MODES, *extra]
    work = df[by].copy()
    work["_failed"] = ~success
    work["_mode"] = df["failure_mode"].astype(str)

    rows: list[dict[str, Any]] = []
    for key, sub in _groups(work, by):
        failed = sub.loc[sub["_failed"], "_mode"]
        n_failed = int(failed.size)
        counts = failed.value_counts()
        row: dict[str, Any] = dict(zip(by, key, strict=True))
        row["n_failed"] = n_failed
        for mode in modes:
            row[mode] = int(counts.get(mode, 0)) / n_failed if n_failed else math.nan
        rows.append(row)
    result = pd.DataFrame(rows, columns=[*by, "n_failed", *modes])
    result["n_failed"] = result["n_failed"].astype("int64")
    return sort_cells(result, by, planner_order=_planner_order(df, planner_order))


# --------------------------------------------------------------------------- comparisons


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


def paired_difference(
    df: pd.DataFrame,
    planner_a: str,
    planner_b: str,
    *,
    seed: int,
    n_boot: int = 2000,
    confidence: float = 0.95,
    on: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Paired completion difference on shared tasks, the task as the unit.

    Per task (``on``, default :func:`pair_keys`: seed, env, complexity, task_id and swept
    keys) each planner's success rate over its trials; ``d_t = rate_a_t - rate_b_t``;
    ``mean_diff`` is the mean of ``d_t`` over tasks both planners ran. The interval is a
    percentile bootstrap resampling tasks (multinomial counts, ``default_rng(seed)``);
    ``degenerate`` says the interval has zero width (every resample gives the same value,
    e.g. all tasks agree), which is no evidence of precision. ``wins_a``/``wins_b`` count tasks
    with ``d_t > 0`` / ``< 0`` and ``p_value`` is :func:`sign_test_p` of those (McNemar's exact
    test when trials = 1).
    """
    df = with_swept_columns(df)
    on = pair_keys(df) if on is None else list(on)
    _require(df, ("planner", "success", *on))
    part = df[df["planner"].isin([planner_a, planner_b])]
    rates = _rate_columns(_task_rates(part, on))
    return _paired_stats(
        rates, planner_a, planner_b, seed=seed, n_boot=n_boot, confidence=confidence
    )


def _task_rates(df: pd.DataFrame, on: Sequence[str]) -> pd.DataFrame:
    """Per-task success rate of each planner: rows = tasks (``on``, sorted), columns = planners.

    Raises if a planner has two episodes of one task and trial (the pairing would be
    ambiguous, e.g. a run merged twice)."""
    on = list(on)
    episode_keys = [*on, *(["trial"] if "trial" in df.columns and "trial" not in on else [])]
    dup = df.duplicated([*episode_keys, "planner"])
    if dup.any():
        planners = sorted(map(str, set(df.loc[dup, "planner"])))
        raise ValueError(
            f"planner(s) {planners} have {int(dup.sum())} duplicate episodes for {episode_keys}"
        )
    work = df[[*on, "planner"]].copy()
    work["_s"] = _success_bool(df["success"]).astype(np.float64)
    grouped = work.groupby([*on, "planner"], sort=True, dropna=False, observed=True)["_s"]
    return grouped.mean().unstack("planner")


def _rate_columns(rates: pd.DataFrame) -> dict[Hashable, FloatArray]:
    """:func:`_task_rates`' columns as arrays (a frame's column is slow to look up, and a
    planner's is looked up once per other planner)."""
    return {p: rates[p].to_numpy(dtype=np.float64) for p in rates.columns}


def _paired_stats(
    rates: Mapping[Hashable, FloatArray],
    planner_a: str,
    planner_b: str,
    *,
    seed: int,
    n_boot: int,
    confidence: float,
) -> dict[str, Any]:
    """:func:`paired_difference`'s numbers from per-task rates (:func:`_rate_columns`; tasks
    both planners ran)."""
    if planner_a in rates and planner_b in rates:
        a, b = rates[planner_a], rates[planner_b]
        ran = ~(np.isnan(a) | np.isnan(b))  # tasks both planners ran
        a, b = a[ran], b[ran]
    else:
        a = b = np.empty(0)
    diff = a - b
    n_pairs = int(diff.size)
    if n_pairs:
        rng = np.random.default_rng(seed)
        parts = [total / n_pairs for (total,) in resampled_sums(rng, [diff], n_boot)]
        low, high = _interval(np.concatenate(parts), confidence)
    else:
        low = high = math.nan
    wins_a, wins_b = int((diff > 0).sum()), int((diff < 0).sum())
    return {
        "planner_a": planner_a,
        "planner_b": planner_b,
        "n_pairs": n_pairs,
        "n_tasks": n_pairs,
        "rate_a": float(a.mean()) if n_pairs else math.nan,
        "rate_b": float(b.mean()) if n_pairs else math.nan,
        "mean_diff": float(diff.mean()) if n_pairs else math.nan,
        "ci_low": low,
        "ci_high": high,
        "degenerate": bool(n_pairs and low == high),
        "wins_a": wins_a,
        "wins_b": wins_b,
        "p_value": sign_test_p(wins_a, wins_b),
        "confidence": confidence,
        "n_boot": n_boot,
        "seed": seed,
    }


def pairwise_comparisons(
    df: pd.DataFrame,
    *,
    seed: int,
    n_boot: int = 1000,
    alpha: float = 0.05,
    planner_order: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Every pair of planners per (env, complexity, swept keys other than seed), paired on
    tasks (seeds pooled: tasks of different seeds are different tasks). Columns: the group
    keys, ``planner_a``, ``planner_b`` and :func:`paired_difference`'s fields, ``p_holm``
    (Holm-adjusted over every row of the table, one family) and ``verdict``: ``better`` /
    ``worse`` (a vs b) when ``p_holm < alpha``, else ``no difference``."""
    df = with_swept_columns(df)
    planners = _planner_order(df, planner_order)
    planners = [p for p in planners if p in set(df["planner"])]
    groups = ["env", "complexity", *(k for k in swept_keys(df) if k != "seed")]
    on = pair_keys(df)
    _require(df, ("planner", "success", *on))
    rows: list[dict[str, Any]] = []
    for key, sub in _groups(df, groups):
        rates = _rate_columns(_task_rates(sub, on))
        present = [p for p in planners if p in rates]
        for i, a in enumerate(present):
            for b in present[i + 1 :]:
                d = _paired_stats(
                    rates,
                    a,
                    b,
                    seed=derive_seed(seed, *key, a, b),
                    n_boot=n_boot,
                    confidence=0.95,
                )
                if d["n_pairs"] == 0:
                    continue
                rows.append({**dict(zip(groups, key, strict=True)), **d})
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    out["p_holm"] = holm(out["p_value"].tolist())
    out["verdict"] = [
        ("better" if d > 0 else "worse") if p < alpha else "no difference"
        for d, p in zip(out["mean_diff"], out["p_holm"], strict=True)
    ]
    out = out.drop(columns=["confidence", "n_boot", "seed"])
    return sort_cells(out, groups).reset_index(drop=True)


# --------------------------------------------------------------------------- reliability


def _fault_kinds(value: object) -> list[str]:
    if not isinstance(value, str) or not value:
        return []
    return [k for k in value.split("+") if k]


def recovery_by_fault(
    df: pd.DataFrame,
    *,
    seed: int = 0,
    n_boot: int = 1000,
    confidence: float = 0.95,
    by: Sequence[str] | None = None,
    planner_order: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Recoverability: per fault kind drawn *before the planner acts* (``exposed_faults``),
    the share of exposed episodes that still succeeded.

    Exposure is the same for every planner on the same task, so every planner has the same
    denominator (the column ``n``). ``fault`` = ``(none)`` is the baseline of episodes with no
    exposed fault. Groups: ``by`` (default planner, env and swept keys; complexities pooled)
    x fault kind. Interval as :func:`summarize`'s completion interval (Wilson, or task
    bootstrap widened to Wilson when tasks ran several trials). Empty without the column.
    """
    if "exposed_faults" not in df.columns:
        return pd.DataFrame()
    df = with_swept_columns(df[df["exposed_faults"].notna()])  # older records: unknown
    if df.empty:
        return pd.DataFrame()
    by = cell_keys(df, ("planner", "env")) if by is None else list(by)
    by = [k for k in by if k != "complexity"]
    tkeys = [k for k in ("seed", "complexity", "task_id") if k in df.columns]
    work = df[list(dict.fromkeys([*by, *tkeys]))].copy()
    work["_success"] = _success_bool(df["success"])
    work["_task"] = task_codes(df, tkeys)
    kinds = [_fault_kinds(v) or ["(none)"] for v in df["exposed_faults"]]
    work["fault"] = kinds
    work = work.explode("fault")
    all_kinds = sorted(k for k in set(work["fault"]) if k != "(none)")
    rows = []
    for key, sub in _groups(work, [*by, "fault"]):
        success = sub["_success"].to_numpy(dtype=bool)
        _, task_index = np.unique(sub["_task"].to_numpy(), return_inverse=True)
        counts = np.bincount(task_index).astype(np.float64)
        n, c = int(success.size), int(success.sum())
        low, high = wilson_interval(c, n, confidence)
        if counts.max() > 1:
            b_low, b_high = task_bootstrap_ratio(
                np.bincount(task_index, weights=success.astype(np.float64)),
                counts,
                rng=_rng(seed, *key, "recovery"),
                n_boot=n_boot,
                confidence=confidence,
            )
            low, high = min(low, b_low), max(high, b_high)
        rows.append(
            {
                **dict(zip([*by, "fault"], key, strict=True)),
                "n": n,
                "successes": c,
                "rate": c / n,
                "ci_low": low,
                "ci_high": high,
            }
        )
    out = pd.DataFrame(rows)
    order = {k: i for i, k in enumerate(["(none)", *all_kinds])}
    out["_f"] = out["fault"].map(order)
    out = sort_cells(
        out.sort_values("_f", kind="stable"), by, planner_order=_planner_order(df, planner_order)
    )
    return out.drop(columns="_f")


def robustness(
    df: pd.DataFrame,
    *,
    seed: int = 0,
    n_boot: int = 1000,
    confidence: float = 0.95,
    baseline: str = "none",
    planner_order: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Robustness to faults: completion under faults / completion without, paired by task.

    Needs records of the same tasks run with ``faults=<baseline>`` and with another faults
    config (e.g. ``planarena -m experiment=robustness``). Per planner, env, complexity,
    other swept keys and faulted config: tasks present in both runs (keys: seed, task_id, and
    the trial when both have it); ``ratio = mean(success | faults) / mean(success | none)``
    over those tasks, with a task-bootstrap percentile interval (resamples whose baseline
    rate is 0 are dropped). Empty when there is no ``faults`` column with both kinds.
    """
    if "faults" not in df.columns:
        return pd.DataFrame()
    values = set(df["faults"])
    if baseline not in values or len(values) < 2:
        return pd.DataFrame()
    df = with_swept_columns(df)
    groups = [k for k in cell_keys(df) if k not in ("faults", "seed")]
    match = [k for k in ("seed", "task_id", "trial") if k in df.columns]
    work = df[[*groups, *match, "faults"]].copy()
    work["_success"] = _success_bool(df["success"]).astype(np.float64)
    rows = []
    for key, sub in _groups(work, groups):
        base = sub[sub["faults"] == baseline]
        for faults in sorted(values - {baseline}):
            hit = sub[sub["faults"] == faults]
            merged = base.merge(hit, on=match, suffixes=("_0", "_1"))
            if merged.empty:
                continue
            task_cols = [k for k in match if k != "trial"]
            codes = task_codes(merged, task_cols)
            s0 = np.bincount(codes, weights=merged["_success_0"].to_numpy())
            s1 = np.bincount(codes, weights=merged["_success_1"].to_numpy())
            r0, r1 = s0.sum() / len(merged), s1.sum() / len(merged)
            stats = []
            for num, den in resampled_sums(
                _rng(seed, *key, faults, "robustness"), [s1, s0], n_boot
            ):
                with np.errstate(divide="ignore", invalid="ignore"):
                    stats.append(np.where(den > 0, num / den, np.nan))
            low, high = _interval(np.concatenate(stats), confidence)
            rows.append(
                {
                    **dict(zip(groups, key, strict=True)),
                    "faults": faults,
                    "n_tasks": int(s0.size),
                    "completion_faults": r1,
                    "completion_none": r0,
                    "robustness": r1 / r0 if r0 > 0 else math.nan,
                    "ci_low": low,
                    "ci_high": high,
                }
            )
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    return sort_cells(out, groups, planner_order=_planner_order(df, planner_order))


def first_recovery_time(tool_calls: Iterable[Mapping[str, Any]]) -> float:
    """Simulated seconds from the end of an episode's first injected fault to the end of the
    next successful tool call (any tool); NaN when no fault was injected or nothing succeeded
    after it. ``tool_calls`` are the trace's ``{t0, t1, ok, injected, ...}`` rows.

    A fault is any injected call, including one that returned ok with a wrong payload
    (``wrong_result``: ``ok`` and ``injected``); a success is an ok call that was not itself
    injected, so a "200 but wrong" call neither recovers from a fault nor from itself. Every
    episode whose record has ``faults_injected > 0`` has an injected call here, so the cells'
    ``n_faulted`` match :func:`summarize`'s."""
    calls = [c for c in tool_calls if isinstance(c.get("t1"), int | float)]
    faults = [float(c["t1"]) for c in calls if c.get("injected")]
    if not faults:
        return math.nan
    first = min(faults)
    after = [
        float(c["t1"])
        for c in calls
        if c.get("ok") and not c.get("injected") and float(c["t1"]) > first
    ]
    return min(after) - first if after else math.nan


_TRACE_FIELDS = ("planner", "task_id", "tool_calls", "trial")


def _trace_fields(line: bytes) -> dict[str, Any]:
    """A trace line's object, or enough of it: trace lines are written with sorted keys, so
    ``planner``, ``task_id``, ``tool_calls`` and ``trial`` are its last keys and ``events``
    (most of the line) comes before them; the object is parsed from its ``"planner"`` key on.
    That parse succeeds only where the key is the line's own (one nested deeper leaves
    closing brackets over), and it is kept only if it holds all four keys; otherwise the
    whole line is parsed (raising ``ValueError`` for a torn line)."""
    at = line.find(b'"planner": ')
    if at > 0:
        try:
            doc = json.loads(b"{" + line[at:])
        except ValueError:
            doc = None
        if isinstance(doc, dict) and all(k in doc for k in _TRACE_FIELDS):
            return doc
    parsed: dict[str, Any] = json.loads(line)
    return parsed


def read_recovery_times(run_dirs: Iterable[str | Path]) -> pd.DataFrame:
    """:func:`first_recovery_time` of every episode with an injected fault, from the
    ``traces.jsonl`` of each run dir (streamed line by line; lines without an injected fault
    are skipped unparsed, and read as bytes, not decoded). Columns: run_dir, planner, task_id,
    trial, recovery_time_s."""
    rows = []
    for run_dir in run_dirs:
        path = Path(run_dir) / "traces.jsonl"
        if not path.is_file():
            continue
        with path.open("rb") as fh:
            for line in fh:
                if b'"injected": true' not in line and b'"injected":true' not in line:
                    continue
                try:
                    doc = _trace_fields(line)
                except ValueError:  # a torn last line of a run still being written (or not UTF-8)
                    continue
                rows.append(
                    {
                        "run_dir": str(run_dir),
                        "planner": doc.get("planner"),
                        "task_id": doc.get("task_id"),
                        "trial": int(doc.get("trial", 0)),
                        "recovery_time_s": first_recovery_time(doc.get("tool_calls") or []),
                    }
                )
    return pd.DataFrame(rows, columns=["run_dir", "planner", "task_id", "trial", "recovery_time_s"])


def time_to_recover(
    df: pd.DataFrame, times: pd.DataFrame, *, planner_order: Sequence[str] | None = None
) -> pd.DataFrame:
    """Per cell: episodes with an injected fault in their trace (``n_faulted``), how many had
    a successful tool call after the first fault (``n_resumed``), and the median and P90
    (type 7) of the simulated seconds from that fault to the next successful call. Conditional
    on a fault being injected (which depends on the planner's own calls). Empty without data."""
    need = ["run_dir", "planner", "task_id", "trial"]
    if times.empty or any(c not in df.columns for c in need):
        return pd.DataFrame()
    df = with_swept_columns(df)
    keys = cell_keys(df)
    left = df[[*dict.fromkeys([*keys, *need])]].copy()
    left["trial"] = left["trial"].astype(int)
    merged = left.merge(times, on=need, how="inner")
    if merged.empty:
        return pd.DataFrame()
    rows = []
    for key, sub in _groups(merged, keys):
        values = sub["recovery_time_s"].to_numpy(dtype=np.float64)
        resumed = values[np.isfinite(values)]
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "n_faulted": int(values.size),
                "n_resumed": int(resumed.size),
                "recover_s_p50": percentile(resumed, 50),
                "recover_s_p90": percentile(resumed, 90),
            }
        )
    return sort_cells(pd.DataFrame(rows), keys, planner_order=_planner_order(df, planner_order))
