"""Reliability under faults: recovery by fault kind, robustness, time to recover.

Recovery is stratified by the faults drawn before the planner acts (``exposed_faults``: the
same for every planner on a task, so the denominators agree); robustness pairs a task's runs
with and without faults; time to recover is read from the traces' tool calls.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from planarena.experiments.analysis.cells import (
    cell_keys,
    iter_groups,
    planner_order_of,
    sort_cells,
    success_bool,
    task_codes,
)
from planarena.experiments.analysis.stats import (
    boot_rng,
    percentile,
    percentile_interval,
    resampled_sums,
    task_bootstrap_ratio,
    wilson_interval,
)
from planarena.experiments.records.runs import with_swept_columns


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
    work["_success"] = success_bool(df["success"])
    work["_task"] = task_codes(df, tkeys)
    kinds = [_fault_kinds(v) or ["(none)"] for v in df["exposed_faults"]]
    work["fault"] = kinds
    work = work.explode("fault")
    all_kinds = sorted(k for k in set(work["fault"]) if k != "(none)")
    rows = []
    for key, sub in iter_groups(work, [*by, "fault"]):
        success = sub["_success"].to_numpy(dtype=bool)
        _, task_index = np.unique(sub["_task"].to_numpy(), return_inverse=True)
        counts = np.bincount(task_index).astype(np.float64)
        n, c = int(success.size), int(success.sum())
        low, high = wilson_interval(c, n, confidence)
        if counts.max() > 1:
            b_low, b_high = task_bootstrap_ratio(
                np.bincount(task_index, weights=success.astype(np.float64)),
                counts,
                rng=boot_rng(seed, *key, "recovery"),
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
        out.sort_values("_f", kind="stable"), by, planner_order=planner_order_of(df, planner_order)
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
    work["_success"] = success_bool(df["success"]).astype(np.float64)
    rows = []
    for key, sub in iter_groups(work, groups):
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
                boot_rng(seed, *key, faults, "robustness"), [s1, s0], n_boot
            ):
                with np.errstate(divide="ignore", invalid="ignore"):
                    stats.append(np.where(den > 0, num / den, np.nan))
            low, high = percentile_interval(np.concatenate(stats), confidence)
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
    return sort_cells(out, groups, planner_order=planner_order_of(df, planner_order))


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
    for key, sub in iter_groups(merged, keys):
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
    return sort_cells(pd.DataFrame(rows), keys, planner_order=planner_order_of(df, planner_order))
