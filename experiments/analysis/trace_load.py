"""One episode's trace read for :mod:`planarena.experiments.analysis.trace_view`: the trace line
of ``traces.jsonl`` picked by planner, task and trial, and its episode record beside it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class EpisodeTrace:
    """One trace document plus its episode record (when episodes.jsonl has it)."""

    planner: str
    task_id: str
    trial: int
    grade: str
    events: list[dict[str, Any]]
    tool_calls: list[dict[str, Any]]
    record: dict[str, Any] | None = None
    source: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def trace_files(run_dir: Path) -> list[Path]:
    """``run_dir/traces.jsonl``, else every job's traces under a sweep dir (sorted)."""
    direct = run_dir / "traces.jsonl"
    if direct.is_file():
        return [direct]
    return sorted(run_dir.rglob("traces.jsonl"))


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                rows.append(json.loads(line))
    return rows


def _find_record(source: Path, doc: dict[str, Any]) -> dict[str, Any] | None:
    episodes = source.parent / "episodes.jsonl"
    if not episodes.is_file():
        return None
    for rec in _read_jsonl(episodes):
        if (rec.get("planner"), rec.get("task_id"), int(rec.get("trial", 0))) == (
            doc["planner"],
            doc["task_id"],
            int(doc.get("trial", 0)),
        ):
            return rec
    return None


def _job_label(trace_file: Path) -> str:
    """`` [job: seed=1 planner=react] (dir)``: a job's overrides, so sweep choices differ."""
    overrides = trace_file.parent / ".hydra" / "overrides.yaml"
    label = ""
    if overrides.is_file():
        import yaml

        items = [
            str(o)
            for o in (yaml.safe_load(overrides.read_text(encoding="utf-8")) or [])
            if not str(o).startswith("hydra.")
        ]
        if items:
            label = f" [job: {' '.join(items)}]"
    return f"{label} ({trace_file.parent})"


def load_trace(
    run_dir: str | Path,
    task_id: str,
    *,
    planner: str | None = None,
    trial: int | None = None,
) -> EpisodeTrace:
    """The one trace matching ``task_id`` (and ``planner``/``trial`` when given).

    Raises ``FileNotFoundError`` without traces, ``LookupError`` when nothing or more than
    one episode matches (the message lists the candidates, so the user can pick one rather
    than silently get the first).
    """
    run_dir = Path(run_dir)
    files = trace_files(run_dir)
    if not files:
        raise FileNotFoundError(f"no traces.jsonl in {run_dir} (was write_traces=false?)")
    matches: list[tuple[Path, dict[str, Any]]] = []
    task_ids: set[str] = set()
    ran: dict[str, set[int]] = {}  # the task's planners and their trials, to suggest
    for f in files:
        for doc in _read_jsonl(f):
            task_ids.add(str(doc.get("task_id")))
            if doc.get("task_id") != task_id:
                continue
            ran.setdefault(str(doc.get("planner")), set()).add(int(doc.get("trial", 0)))
            if planner is not None and doc.get("planner") != planner:
                continue
            if trial is not None and int(doc.get("trial", 0)) != trial:
                continue
            matches.append((f, doc))
    if not matches:
        if task_id not in task_ids:
            known = ", ".join(sorted(task_ids)[:10])
            raise LookupError(f"task {task_id!r} not in {run_dir}; tasks include: {known}")
        asked = " ".join(
            f"--{k} {v}" for k, v in (("planner", planner), ("trial", trial)) if v is not None
        )
        options = "; ".join(
            f"{p} (trial {', '.join(map(str, sorted(t)))})" for p, t in sorted(ran.items())
        )
        raise LookupError(f"no episode of {task_id!r} with {asked}; it ran with: {options}")
    if len(matches) > 1:
        # (one planner and one trial in one job is a single match: no --planner needed)
        jobs = {f for f, _ in matches}
        hint = " (or give that job's dir as RUN_DIR)" if len(jobs) > 1 else ""
        options = "; ".join(
            f"--planner {d['planner']} --trial {d.get('trial', 0)}{_job_label(f)}"
            for f, d in matches
        )
        raise LookupError(f"{len(matches)} episodes match {task_id!r}, pick one{hint}: {options}")
    source, doc = matches[0]
    return EpisodeTrace(
        planner=str(doc["planner"]),
        task_id=str(doc["task_id"]),
        trial=int(doc.get("trial", 0)),
        grade=str(doc.get("grade", "")),
        events=list(doc.get("events", [])),
        tool_calls=list(doc.get("tool_calls", [])),
        record=_find_record(source, doc),
        source=source,
        extra={k: v for k, v in doc.items() if k not in _TRACE_KEYS},
    )


_TRACE_KEYS = frozenset({"planner", "task_id", "trial", "grade", "events", "tool_calls"})
