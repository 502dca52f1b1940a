"""Cells, tasks and their order: which rows a table cell pools, and how rows are sorted.

A cell is a planner, env and complexity and every swept configuration key (never pooled
over); a task within it is its seed and task id. Every table and figure groups and sorts
through these helpers, so they agree on the cells and on their order.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd
from planarena.experiments.records.columns import CONFIG_KEYS, EPISODE_COLUMNS
from planarena.experiments.records.runs import override_column, parse_overrides

COMPLEXITY_ORDER: tuple[str, ...] = ("simple", "medium", "complex")
"""Canonical complexity order; every output sorts complexity this way, not alphabetically."""


DEFAULT_BY: tuple[str, ...] = ("planner", "env", "complexity")


PAIR_KEYS: tuple[str, ...] = ("seed", "env", "complexity", "task_id")
"""Base pairing keys (a task, whatever its trials); :func:`pair_keys` adds swept columns."""


def first_appearance(values: Iterable[Hashable]) -> list[Hashable]:
    """Unique values in order of first appearance."""
    return list(dict.fromkeys(values))


def natural_sorted(values: Iterable[Hashable]) -> list[Hashable]:
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
            order += [p for p in first_appearance(col) if p not in order]
        elif key == "complexity":
            extra = sorted((c for c in set(col) if c not in COMPLEXITY_ORDER), key=str)
            order = [*COMPLEXITY_ORDER, *extra]
        else:
            order = natural_sorted(set(col))
        ranks = {v: r for r, v in enumerate(order)}
        rank_name = f"__rank_{i}"
        ranked[rank_name] = [ranks[v] for v in col]
        rank_cols.append(rank_name)
    ranked = ranked.sort_values(rank_cols, kind="stable")
    return ranked.drop(columns=rank_cols).reset_index(drop=True)


def planner_order_of(df: pd.DataFrame, planner_order: Sequence[str] | None) -> list[str]:
    """Explicit order first, then remaining planners by first appearance in the episodes."""
    order = list(planner_order or [])
    if "planner" in df.columns:
        order += [p for p in first_appearance(df["planner"]) if p not in order]
    return order


def require_columns(df: pd.DataFrame, columns: Iterable[str]) -> None:
    """Refuse an episode table without ``columns``, naming the missing ones."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise KeyError(f"episode table is missing required columns: {missing}")


def success_bool(series: pd.Series) -> npt.NDArray[np.bool_]:
    """Strict bool conversion: NaN or non 0/1 values raise instead of becoming True."""
    if series.isna().any():
        raise ValueError("'success' contains missing values")
    values = series.to_numpy()
    if values.dtype != np.bool_:
        uniq = set(pd.unique(values).tolist())
        if not uniq <= {0, 1}:  # True == 1 and False == 0 in Python sets
            raise ValueError(f"'success' must be boolean, got values {sorted(map(str, uniq))}")
    return values.astype(bool)


def iter_groups(
    df: pd.DataFrame, by: Sequence[str]
) -> Iterable[tuple[tuple[Hashable, ...], pd.DataFrame]]:
    """Group in first-appearance order, yielding tuple keys even for a single column."""
    for key, sub in df.groupby(list(by), sort=False, dropna=False, observed=True):
        yield (key if isinstance(key, tuple) else (key,)), sub


def group_positions(
    df: pd.DataFrame, by: Sequence[str]
) -> list[tuple[tuple[Hashable, ...], npt.NDArray[np.intp]]]:
    """:func:`iter_groups` as (key, row positions) pairs: the same groups in the same order, each
    with its rows' positions in ``df`` (ascending, the order of the rows of :func:`iter_groups`'
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
