"""Candidates for hand labelling: a ``planarena`` run with every episode's classifier inputs kept.

Why: ``traces.jsonl`` and ``episodes.jsonl`` do not hold what
:func:`planarena.experiments.run.episode.classify` reads (the grader's flags, the task's
``unreachable``, the planner's full detail). This script runs ``planarena`` in this process
(``workers=1``) with ``episode._play`` wrapped, and appends one line per episode to
``<run dir>/candidates.jsonl``: the classifier's inputs, the answer, each call's meaning to the
grader (a trap opened, the missing data observed) and the planner's non-LLM trace events.

    python tests/data/labelled_traces/make_candidates.py preset=full n_tasks=4 \
        hydra.run.dir=/tmp/pa_labels_run/a progress=false figures=false

With ``PLANARENA_SRC=<dir>`` (a ``git archive <commit>`` of the repository, unpacked there), the
editable install's ``planarena`` packages are read from that tree instead: the candidates of the
commit the fixtures record, whatever the work tree holds now.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def _pin_source() -> None:
    """Point the editable install's package map at ``$PLANARENA_SRC`` (before any import)."""
    src = os.environ.get("PLANARENA_SRC")
    if not src:
        return
    finders = [m for n, m in sys.modules.items() if n.startswith("__editable___planarena")]
    if not finders or "planarena" in sys.modules:
        sys.exit("make_candidates: PLANARENA_SRC needs an editable install, not yet imported")
    mapping = finders[0].MAPPING
    for name, path in mapping.items():
        mapping[name] = str(Path(src) / Path(path).name)


_pin_source()
from planarena.experiments.run import episode  # noqa: E402

ANSWER_CHARS = 600
"""Characters of the answer kept (enough to read which figures it states)."""


def _call(env: Any, task: Any, c: Any) -> dict[str, Any]:
    """One call as the classifier and a reader see it; ``trap``/``missing`` are what the grader
    makes of this call alone."""
    alone = env.grade(task, None, [c])
    return {
        "tool": c.tool,
        "args": c.args,
        "ok": c.ok,
        "error_kind": c.error_kind,
        "injected": c.injected,
        "trap": alone.trap_touched,
        "missing": alone.saw_missing_data,
    }


def _events(trace: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The planner's events without the LLM calls' timing lines (counted instead)."""
    out: list[dict[str, Any]] = []
    llm = 0
    for ev in trace:
        if ev.get("event") == "llm":
            llm += 1
            continue
        if llm:
            out.append({"event": "llm", "n": llm})
            llm = 0
        if ev.get("event") == "search_tree":
            ev = {k: v for k, v in ev.items() if k != "nodes"} | {"n_nodes": len(ev["nodes"])}
        out.append({k: v for k, v in ev.items() if k not in ("t0", "t1", "t", "traceback")})
    if llm:
        out.append({"event": "llm", "n": llm})
    return out


def main() -> None:
    run_dir = next(
        (a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("hydra.run.dir=")), None
    )
    if run_dir is None:
        sys.exit("make_candidates: pass hydra.run.dir=<dir>")
    out_path = Path(run_dir) / "candidates.jsonl"
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out = out_path.open("w", encoding="utf-8")
    original = episode._play

    async def play(
        ctx: Any, job: Any, task: Any, episode_tools: Any, llm: Any, sim_clock: Any,
        trace: list[dict[str, Any]],
    ) -> Any:  # fmt: skip
        end = await original(ctx, job, task, episode_tools, llm, sim_clock, trace)
        env = ctx.envs[job.env_name]
        g, r = end.grade, end.result
        line = {
            "planner": job.planner_name,
            "env": task.env,
            "complexity": task.complexity,
            "task_id": task.task_id,
            "trial": job.trial,
            "unreachable": task.unreachable,
            "goal": task.goal,
            "stop": r.stop,
            "detail": r.detail,
            "answer": None if r.answer is None else r.answer[:ANSWER_CHARS],
            "grade": {
                "success": g.success,
                "progress": g.progress,
                "trap_in_answer": g.trap_in_answer,
                "trap_touched": g.trap_touched,
                "saw_missing_data": g.saw_missing_data,
                "detail": g.detail,
            },
            "calls": [_call(env, task, c) for c in episode_tools.calls],
            "events": _events(trace),
            "failure_mode": end.mode,
        }
        out.write(json.dumps(line, sort_keys=True, default=str) + "\n")
        out.flush()
        return end

    episode._play = play  # type: ignore[assignment]
    from planarena.experiments.run.runner import main as run_main

    sys.argv = [sys.argv[0], "workers=1", "resume=false", *sys.argv[1:]]
    run_main()


if __name__ == "__main__":
    main()
