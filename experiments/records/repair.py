"""Repair of a run dir before a job appends to it (after a kill, or to rerun some episodes).

The trace line is written before its episode line, so a complete episode line *commits* an
episode. Nothing here rewrites a records file in place: repair truncates to the last complete
record (``os.truncate``), and the rare rewrite (dropping records that run again, or a foreign
trace line in the middle) writes a new file and renames it over the old one atomically. A kill
at any instant loses at most the episodes in flight.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planarena.experiments.records.schema import (
    EPISODES,
    RECORD_KEYS,
    TRACES,
    RecordsError,
    runs_again,
)


def _episode_key(r: Mapping[str, Any]) -> tuple[str, str, int, str]:
    """What a trace line and its record share (a study's cell label; none in a plain run)."""
    return (
        str(r.get("planner")),
        str(r.get("task_id")),
        int(r.get("trial", 0)),
        str(r.get("cell", "")),
    )


def record_key(r: Mapping[str, Any]) -> tuple[str, str, str, str, int, int, str, str]:
    """An episode's identity in a run dir: what ran, with which seed and configuration, and
    in which cell of a study's grid."""
    return (
        str(r["planner"]),
        str(r["env"]),
        str(r["complexity"]),
        str(r["task_id"]),
        int(r["seed"]),
        int(r["trial"]),
        str(r.get("config_id", "")),
        str(r.get("cell", "")),
    )


def _complete_lines(path: Path) -> Iterator[tuple[int, int, bytes]]:
    """(line number, end offset, line) of each newline-terminated line."""
    offset = 0
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            offset += len(raw)
            if raw.endswith(b"\n"):
                yield number, offset, raw


def _rewrite_without(path: Path, drop: set[int]) -> None:
    """A copy of ``path`` without the lines numbered in ``drop`` nor a torn last line, renamed
    over it atomically (a kill leaves either the old file or the new one)."""
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as out:
        for number, _, raw in _complete_lines(path):
            if number not in drop:
                out.write(raw)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


@dataclass
class Repair:
    """What :func:`repair_run_dir` kept: the keys of the recorded episodes (no records are
    held in memory), and what it set right, for the user (printed as ``resume: ...``)."""

    done: set[tuple[str, str, str, str, int, int, str, str]] = field(default_factory=set)
    messages: list[str] = field(default_factory=list)
    spent_usd: float = 0.0  # the kept records' cost_usd, summed in file order


def repair_run_dir(out_dir: Path, *, rerun_harness_errors: bool = True) -> Repair:
    """Make ``episodes.jsonl`` and ``traces.jsonl`` consistent before appending to them.

    Episodes: everything after the last complete record (a torn line) is truncated away; with
    ``rerun_harness_errors`` the records of episodes that were not measured (``harness_error``,
    ``infrastructure_error``) or were cut by the job's cost cap are dropped (new file, atomic
    rename) so they run again; ``spent_usd`` is the cost of the records kept. Traces: one per
    kept episode, in the file's order; torn lines, duplicates and traces of episodes not in
    ``episodes.jsonl`` are dropped (by truncation when they are all at the end, else by an
    atomic rewrite). Idempotent, and safe to kill at any
    instant: every step leaves both files readable and the next call finishes the job.
    """
    result = Repair()
    episodes, traces = out_dir / EPISODES, out_dir / TRACES
    wanted: set[tuple[str, str, int]] = set()
    if episodes.exists():
        wanted = _repair_episodes(episodes, result, rerun_harness_errors)
    if traces.exists():
        _repair_traces(traces, wanted, result)
    return result


def _repair_episodes(
    episodes: Path, result: Repair, rerun_harness_errors: bool
) -> set[tuple[str, str, int]]:
    """:func:`repair_run_dir` on ``episodes.jsonl``: fills ``result`` with the kept records,
    returns the keys their trace lines must have."""
    wanted: set[tuple[str, str, int]] = set()
    good_end = 0
    errors: set[int] = set()
    for number, end, raw in _complete_lines(episodes):
        if not raw.strip():
            errors.add(number)
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError:
            row = None
        if not isinstance(row, dict) or any(k not in row for k in RECORD_KEYS):
            raise RecordsError(
                f"{episodes}:{number}: not an episode record; move the file aside or run "
                "with resume=false"
            )
        good_end = end
        if rerun_harness_errors and runs_again(row):
            errors.add(number)
            continue
        result.done.add(record_key(row))
        result.spent_usd += float(row.get("cost_usd") or 0.0)
        wanted.add(_episode_key(row))
    size = episodes.stat().st_size
    if errors:
        _rewrite_without(episodes, errors)
    elif size > good_end:
        os.truncate(episodes, good_end)
    if size > good_end:
        result.messages.append(f"{episodes}: dropped a torn last line ({size - good_end} bytes)")
    if errors:
        result.messages.append(
            f"{episodes}: {len(errors)} episode(s) not measured (harness_error, "
            "infrastructure_error) or cut by the job's cost cap will run again"
        )
    return wanted


def _repair_traces(traces: Path, wanted: set[tuple[str, str, int]], result: Repair) -> None:
    """:func:`repair_run_dir` on ``traces.jsonl``: one line per wanted episode, in file order."""
    seen: set[tuple[str, str, int]] = set()
    dropped: set[int] = set()
    prefix_end = 0  # end of the longest run of kept lines from the start
    kept_after_drop = False
    last_end = 0
    for number, end, raw in _complete_lines(traces):
        last_end = end
        try:
            doc = json.loads(raw)
            key = _episode_key(doc) if isinstance(doc, dict) else None
        except (json.JSONDecodeError, ValueError, TypeError):
            key = None
        if key is not None and key in wanted and key not in seen:
            seen.add(key)
            if dropped:
                kept_after_drop = True
            else:
                prefix_end = end
        else:
            dropped.add(number)
    size = traces.stat().st_size
    if kept_after_drop:
        _rewrite_without(traces, dropped)
    elif size > prefix_end:  # only the tail goes (the usual case after a kill)
        os.truncate(traces, prefix_end)
    if dropped or size > prefix_end:
        result.messages.append(
            f"{traces}: set aside {len(dropped)} trace line(s) whose episode has no kept "
            "record (it runs again and writes its trace anew)"
            + (" and a torn last line" if size > last_end else "")
        )
