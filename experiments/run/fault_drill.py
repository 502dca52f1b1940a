"""A fault drill: one planarena job driven through the fault proxy until it is complete.

The drill is what a user would do by hand against a hostile endpoint, measured: start the job,
kill it with SIGKILL while requests are in flight, then rerun the same command until it exits
0. It then checks what the contract promises and prints the evidence:

- every episode recorded exactly once, none a ``harness_error``;
- the infrastructure errors of each pass, rerun by the next (the last pass has none);
- every 429's ``Retry-After`` waited for;
- the tokens stored for every reply equal to the tokens the server reported serving;
- the resume after the kill asking for no reply that was already cached.

``python -m planarena.experiments.run.fault_drill --upstream http://127.0.0.1:8080 --out DIR
-- llm=local env=report n_tasks=100 ...`` (the overrides after ``--`` are the job's; the drill
adds ``llm.base_url``, ``llm.cache_dir`` and ``hydra.run.dir``). ``tests/test_fault_proxy.py``
runs it against the stub server; docs/llm-backends.md has a run against llama.cpp.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from planarena.experiments.run.fault_proxy import FaultProxy, FaultSchedule, parse_rates


@dataclass
class DrillPass:
    """One run of the job's command."""

    exit_status: int
    infrastructure_errors: int
    harness_errors: int
    seconds: float
    killed: bool = False
    last_error: str = ""  # the job's last line on stderr when it stopped for another reason


@dataclass
class DrillResult:
    """What the drill observed; :meth:`problems` lists every broken promise."""

    passes: list[DrillPass] = field(default_factory=list)
    episodes: int = 0
    distinct_episodes: int = 0
    proxy: dict[str, Any] = field(default_factory=dict)
    stored_prompt_tokens: int = 0
    stored_completion_tokens: int = 0
    entries_without_usage: int = 0
    killed_after: int | None = None  # replies delivered before the kill (settled)
    cache_entries: int = 0  # stored by the passes after the kill (all passes without one)
    delivered: int = 0  # replies the proxy delivered to those passes
    served: tuple[int, int] = (0, 0)  # prompt, completion tokens the server reported for them
    hidden_usage: int = 0  # replies whose usage block the proxy removed

    def problems(self) -> list[str]:
        out = []
        if self.episodes != self.distinct_episodes:
            out.append(f"{self.episodes - self.distinct_episodes} episode(s) recorded twice")
        if any(p.harness_errors for p in self.passes):
            out.append("harness_error recorded")
        if not self.passes or self.passes[-1].exit_status != 0:
            out.append("the job never completed")
        waits = self.proxy.get("retry_waits", [])
        if self.proxy.get("retry_after_honoured", 0) != len(waits):
            out.append("a Retry-After was not waited for")
        if self.cache_entries != self.delivered:  # after a kill: a cached reply asked again
            out.append(f"{self.delivered} replies delivered, {self.cache_entries} stored")
        stored = (self.stored_prompt_tokens, self.stored_completion_tokens)
        if tuple(self.served) != stored:
            out.append(f"tokens stored {stored[0]}/{stored[1]}"
                       f" != served {self.served[0]}/{self.served[1]}")  # fmt: skip
        if self.entries_without_usage != self.hidden_usage:
            out.append("replies without usage miscounted")
        return out


def job_command(overrides: Sequence[str], base_url: str, run: Path, cache: Path) -> list[str]:
    """The job's command line: the user's overrides pointed at the proxy."""
    return [
        sys.executable, "-m", "planarena.experiments.run.runner", *overrides,
        f"llm.base_url={base_url}", f"llm.cache_dir={cache}", f"hydra.run.dir={run}",
        "progress=false",
    ]  # fmt: skip


def child_env() -> dict[str, str]:
    """The environment without proxy variables: loopback must not go through a proxy."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env["NO_PROXY"] = "127.0.0.1,localhost"
    return env


def records(run: Path) -> list[dict[str, Any]]:
    path = run / "episodes.jsonl"
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def cache_entries(cache: Path) -> dict[Path, dict[str, Any]]:
    return {p: json.loads(p.read_text()) for p in cache.rglob("*.json")}


def settled_forwarded(proxy: FaultProxy, quiet_s: float = 1.0) -> int:
    """The proxy's count of delivered replies once it stops moving (nothing in flight)."""
    last, still = proxy.stats()["forwarded"], 0.0
    while still < quiet_s:
        time.sleep(0.1)
        now = proxy.stats()["forwarded"]
        last, still = now, (still + 0.1 if now == last else 0.0)
    return last


def kill_mid_request(cmd: list[str], proxy: FaultProxy, after: int, timeout_s: float) -> DrillPass:
    """Start the job and SIGKILL its process group once ``after`` replies were delivered."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=child_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    while proxy.stats()["forwarded"] < after and time.monotonic() - start < timeout_s:
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    return DrillPass(-signal.SIGKILL, 0, 0, time.monotonic() - start, killed=True)


def run_pass(cmd: list[str], run: Path, timeout_s: float) -> DrillPass:
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=child_env(), timeout=timeout_s)
    if "Traceback" in proc.stderr:
        raise RuntimeError(f"the job raised:\n{proc.stderr[-2000:]}")
    modes = [r["failure_mode"] for r in records(run)]
    said = [x for x in proc.stderr.splitlines() if x.strip()] if proc.returncode > 1 else []
    return DrillPass(proc.returncode, modes.count("infrastructure_error"),
                     modes.count("harness_error"), time.monotonic() - start,
                     last_error=said[-1] if said else "")  # fmt: skip


def drill(
    proxy: FaultProxy,
    overrides: Sequence[str],
    out: Path,
    *,
    kill_after: int = 0,
    max_passes: int = 8,
    pass_timeout_s: float = 3600.0,
) -> DrillResult:
    """Run the job through ``proxy`` (killed once after ``kill_after`` replies, if > 0) and
    rerun it until it exits 0 or ``max_passes`` runs were made."""
    run, cache = out / "run", out / "cache"
    cmd = job_command(overrides, proxy.url, run, cache)
    result = DrillResult()
    before: set[Path] = set()
    if kill_after:
        result.passes.append(kill_mid_request(cmd, proxy, kill_after, pass_timeout_s))
        settled_forwarded(proxy)
        result.killed_after = proxy.stats()["forwarded"]
        before = set(cache_entries(cache))
    asked_before = proxy.stats()  # what the resumes are served is counted from here
    for _ in range(max_passes):
        result.passes.append(run_pass(cmd, run, pass_timeout_s))
        if result.passes[-1].exit_status != 1:  # 1: some episodes failed and will rerun
            break
    _tally(result, proxy, run, cache, asked_before, before)
    return result


def _tally(
    result: DrillResult,
    proxy: FaultProxy,
    run: Path,
    cache: Path,
    asked_before: dict[str, Any],
    before: set[Path],
) -> None:
    """Count the records, and the replies and tokens of the passes after ``asked_before``."""
    rows = records(run)
    result.episodes = len(rows)
    result.distinct_episodes = len(
        {(r["planner"], r["env"], r["task_id"], r["trial"]) for r in rows}
    )
    stats = proxy.stats()
    result.proxy = stats
    entries = cache_entries(cache)
    counted = {k: v for k, v in entries.items() if k not in before}
    result.cache_entries = len(counted)
    result.delivered = stats["forwarded"] - asked_before["forwarded"]
    result.served = (
        stats["served_prompt_tokens"] - asked_before["served_prompt_tokens"],
        stats["served_completion_tokens"] - asked_before["served_completion_tokens"],
    )
    with_usage = [e for e in counted.values() if e["prompt_tokens"] is not None]
    result.entries_without_usage = len(counted) - len(with_usage)
    result.hidden_usage = stats["hidden_usage_replies"] - asked_before["hidden_usage_replies"]
    result.stored_prompt_tokens = sum(e["prompt_tokens"] for e in with_usage)
    result.stored_completion_tokens = sum(e["completion_tokens"] for e in with_usage)


def report(result: DrillResult) -> str:
    """The drill's evidence in a few lines."""
    p = result.proxy
    waits = p.get("retry_waits", [])
    scope = "whole job"
    if result.killed_after is not None:
        scope = f"killed after {result.killed_after} replies; the resumes"
    lines = [
        f"requests {p.get('requests')}, replies delivered {p.get('forwarded')}, written to a "
        f"client that had hung up {p.get('abandoned')}",
        f"injected: {json.dumps(p.get('injected', {}))}",
        "passes: " + "; ".join(
            ("killed" if x.killed else f"exit {x.exit_status}")
            + f", {x.infrastructure_errors} infrastructure error(s), {x.seconds:.0f} s"
            + (f" ({x.last_error})" if x.last_error else "")
            for x in result.passes
        ),
        f"episodes recorded {result.episodes}, distinct {result.distinct_episodes}",
        f"429s retried {len(waits)}, Retry-After honoured {p.get('retry_after_honoured')}"
        + (f" (waited {min(w['waited_s'] for w in waits):.1f}-"
           f"{max(w['waited_s'] for w in waits):.1f} s)" if waits else ""),
        f"{scope}: {result.delivered} replies delivered, {result.cache_entries} stored; tokens "
        f"served {result.served[0]} prompt / {result.served[1]} completion, stored "
        f"{result.stored_prompt_tokens} / {result.stored_completion_tokens}; usage hidden "
        f"{result.hidden_usage}, counted by us {result.entries_without_usage}",
    ]  # fmt: skip
    problems = result.problems()
    lines.append("problems: " + ("; ".join(problems) if problems else "none"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    overrides: list[str] = []
    if "--" in args:
        cut = args.index("--")
        args, overrides = args[:cut], args[cut + 1 :]
    parser = argparse.ArgumentParser(
        prog="python -m planarena.experiments.run.fault_drill",
        description="Run a job through the fault proxy, killed once, until it completes.",
    )
    parser.add_argument("--upstream", required=True, help="e.g. http://127.0.0.1:8080")
    parser.add_argument("--out", required=True, type=Path, help="run/, cache/, drill.json")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rates", default="all=0.02", help="kind=rate,... or all=rate")
    parser.add_argument("--slow-s", type=float, default=3.0, help="set it past llm.timeout_s")
    parser.add_argument("--kill-after", type=int, default=40, help="replies; 0: no kill")
    parser.add_argument("--max-passes", type=int, default=8)
    ns = parser.parse_args(args)
    schedule = FaultSchedule(ns.seed, parse_rates(ns.rates), slow_s=ns.slow_s)
    proxy = FaultProxy(ns.upstream, schedule).start()
    try:
        result = drill(proxy, overrides, ns.out, kill_after=ns.kill_after,
                       max_passes=ns.max_passes)  # fmt: skip
    finally:
        proxy.stop()
    ns.out.mkdir(parents=True, exist_ok=True)
    (ns.out / "drill.json").write_text(json.dumps(asdict(result), indent=1) + "\n")
    print(report(result))
    return 0 if not result.problems() else 1


if __name__ == "__main__":
    sys.exit(main())
