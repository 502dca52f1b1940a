"""The job's cost cap, ``budget.max_cost_usd`` (issue 10): charged in job order, so a capped job
records the first episodes of the same job without a cap, then the episode the cap cuts
(``budget_exhausted``, stop reason ``job_cost_cap``), whatever ``concurrency``; a resumed job
counts the cost already recorded. Real episodes with the simulator, and the real-LLM path
against the loopback fake server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from fake_server import COMPLETION_TOKENS, PROMPT_TOKENS, FakeOpenAI
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig
from planarena.experiments.run import loop, runner
from planarena.experiments.run.cost_cap import CostCapReached, CostLedger
from planarena.experiments.run.llm_factory import ConfigError
from planarena.experiments.run.runner import run, validate

ROOT = Path(__file__).resolve().parents[1]
JOB = [
    "env=report",
    "planner=[react,tot,mcts]",
    "complexity=[simple,medium]",
    "n_tasks=4",
    "progress=false",
]


def cfg_of(*overrides: str) -> DictConfig:
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "configs")):
        return compose(config_name="config", overrides=[*JOB, *overrides])


def lines(run_dir: Path) -> list[str]:
    """The records without ``wall_s`` (the one field that is not reproducible)."""
    out = []
    for x in (run_dir / "episodes.jsonl").read_text().splitlines():
        row = json.loads(x)
        del row["wall_s"]
        out.append(json.dumps(row))
    return out


def rows(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in lines(run_dir)]


def capped(cfg: DictConfig, out: Path) -> bool:
    """Run; True if the job stopped at its cost cap."""
    try:
        run(cfg, out)
    except CostCapReached:
        return True
    return False


def prefix_cost(records: list[dict[str, Any]], n: int) -> float:
    """What the first ``n`` records cost, added in job order as the ledger adds them."""
    total = 0.0
    for r in records[:n]:
        total += r["cost_usd"]
    return total


@pytest.fixture(scope="module")
def uncapped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("uncapped")
    run(cfg_of(), out)
    return out


def cap_cutting(reference: list[dict[str, Any]], k: int) -> float:
    """A cap that leaves episode ``k`` (of the uncapped job) an allowance of one call."""
    assert reference[k]["llm_calls"] >= 2
    return prefix_cost(reference, k) + 1e-7


def test_a_capped_job_records_the_uncapped_jobs_first_episodes_then_the_cut_one(
    uncapped: Path, tmp_path: Path
) -> None:
    reference = rows(uncapped)
    k = len(reference) // 3
    cap = cap_cutting(reference, k)
    assert capped(cfg_of(f"budget.max_cost_usd={cap!r}"), tmp_path)
    got = rows(tmp_path)
    assert len(got) == k + 1 and got[:k] == reference[:k]  # then no new episode started
    cut = got[k]
    assert (cut["failure_mode"], cut["stop_reason"]) == ("budget_exhausted", "job_cost_cap")
    assert "budget.max_cost_usd" in cut["detail"]
    assert cut["llm_calls"] == 1 < reference[k]["llm_calls"]  # refused before the 2nd was sent
    assert (cut["planner"], cut["task_id"]) == (reference[k]["planner"], reference[k]["task_id"])
    assert prefix_cost(got, k) < cap <= prefix_cost(got, k + 1)
    traces = (tmp_path / "traces.jsonl").read_text().splitlines()
    assert len(traces) == k + 1  # records intact: one trace per record
    assert any(e["event"] == "budget_exhausted" for e in json.loads(traces[-1])["events"])


def test_the_episode_the_cap_cut_is_left_out_of_the_tables(uncapped: Path, tmp_path: Path) -> None:
    """The cap is a setting of the run, not the agent's failure: counted, it lowered a
    planner's completion rate (react 83.3 % with n=6 where the uncapped job's first six
    tasks all succeeded). The tables hold the episodes the cap let finish."""
    reference = rows(uncapped)
    k = len(reference) // 3
    assert capped(cfg_of(f"budget.max_cost_usd={cap_cutting(reference, k)!r}"), tmp_path)
    cfg = cfg_of()
    _, df = runner.finish(tmp_path, int(cfg.seed), list(cfg.planner), figures=False)
    assert len(df) == k + 1  # the records keep it (a resume with a higher cap reruns it)
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert int(summary["n"].sum()) == k
    assert int(summary["successes"].sum()) == sum(bool(r["success"]) for r in reference[:k])


def test_the_same_capped_command_writes_the_same_records_whatever_concurrency(
    uncapped: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledgers: list[CostLedger] = []

    class Observed(CostLedger):  # the real ledger, watched: did an episode run again?
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            ledgers.append(self)

    monkeypatch.setattr(loop, "CostLedger", Observed)
    reference = rows(uncapped)
    total = prefix_cost(reference, len(reference))
    reruns = 0
    for i, share in enumerate((0.15, 0.4, 0.55, 0.7)):
        cap = round(total * share, 6)
        outs = []
        for concurrency in (1, 3, 8):
            out = tmp_path / f"{i}-{concurrency}"
            assert capped(cfg_of(f"budget.max_cost_usd={cap}", f"concurrency={concurrency}"), out)
            outs.append(lines(out))
            reruns += ledgers[-1].reruns
            assert ledgers[-1].reruns == 0 or concurrency > 1  # one at a time: never needed
        assert outs[1] == outs[0] and outs[2] == outs[0], (cap, [len(o) for o in outs])
        n = len(outs[0])
        assert [json.loads(x) for x in outs[0][: n - 1]] == reference[: n - 1]
    # with episodes in flight, an episode that crossed the cap while earlier ones still ran
    # was run again with its exact allowance (the path these equalities depend on)
    assert reruns > 0


def test_resume_counts_the_recorded_cost_and_runs_the_cut_episode_again(
    uncapped: Path, tmp_path: Path
) -> None:
    reference = rows(uncapped)
    k = len(reference) // 4
    low, high = cap_cutting(reference, k), cap_cutting(reference, 2 * k)
    assert capped(cfg_of(f"budget.max_cost_usd={low!r}"), tmp_path)
    first = lines(tmp_path)
    # the same command again: the cost recorded counts, so the job stops where it stopped
    assert capped(cfg_of(f"budget.max_cost_usd={low!r}"), tmp_path)
    assert lines(tmp_path) == first
    # a higher cap resumes in the same dir (the cap is not part of the run's identity)
    fresh = tmp_path.parent / "fresh"
    assert capped(cfg_of(f"budget.max_cost_usd={high!r}", "concurrency=4"), fresh)
    assert capped(cfg_of(f"budget.max_cost_usd={high!r}"), tmp_path)
    assert lines(tmp_path) == lines(fresh) and len(lines(tmp_path)) == 2 * k + 1
    # no cap: the rest of the job, equal to the job that never had one
    assert not capped(cfg_of(), tmp_path)
    assert lines(tmp_path) == lines(uncapped)


def test_a_cap_needs_the_price_of_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    url = "llm.base_url=http://127.0.0.1:9/v1"
    with pytest.raises(ConfigError) as err:
        validate(cfg_of("llm=openai", url, "llm.model=local-q4", "budget.max_cost_usd=2"))
    message = str(err.value)
    assert "budget.max_cost_usd=2" in message and "llm.model=local-q4" in message
    assert "llm.prices" in message and "\n" not in message
    validate(cfg_of("llm=openai", url, "llm.model=local-q4"))  # no cap: a null cost is fine
    validate(cfg_of("llm=openai", url, "budget.max_cost_usd=2"))  # gpt-4o-mini has a price
    validate(cfg_of("budget.max_cost_usd=2"))  # the simulator's profiles price every call
    for bad in ("0", "-1", "abc"):
        with pytest.raises(ConfigError, match="budget.max_cost_usd"):
            validate(cfg_of(f"budget.max_cost_usd={bad}"))


@pytest.fixture
def loopback(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    return dict(os.environ)


CALL_USD = (PROMPT_TOKENS * 1.0 + COMPLETION_TOKENS * 2.0) / 1e6  # each fake call's usage


def real(url: str, *overrides: str) -> list[str]:
    """ReAct on 5 simple report tasks against ``url``, the fake model priced."""
    return [
        "env=report",
        "progress=false",
        "llm=openai",
        f"llm.base_url={url}",
        "llm.model=fake",
        "+llm.prices.fake.usd_per_mtok_input=1.0",
        "+llm.prices.fake.usd_per_mtok_output=2.0",
        "planner=react",
        "complexity=simple",
        "n_tasks=5",
        "faults=none",
        *overrides,
    ]


def test_a_real_models_calls_are_refused_before_they_are_sent(
    server: FakeOpenAI, loopback: dict[str, str], tmp_path: Path
) -> None:
    # ReAct against the fake server: two calls per episode. A cap of 4.5 calls: two whole
    # episodes, then one call of the third, whose second call is refused before it is sent
    cap = 4.5 * CALL_USD
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "configs")):
        cfg = compose(
            config_name="config",
            overrides=real(server.url, f"budget.max_cost_usd={cap!r}", "llm.cache_dir=null"),
        )
    assert capped(cfg, tmp_path / "one")
    got = rows(tmp_path / "one")
    assert [r["llm_calls"] for r in got] == [2, 2, 1] and server.requests == 5
    assert got[-1]["stop_reason"] == "job_cost_cap"
    assert [r["cost_usd"] for r in got] == pytest.approx([2 * CALL_USD, 2 * CALL_USD, CALL_USD])


def test_the_cli_stops_at_the_cap_with_exit_status_5_and_writes_the_tables(
    server: FakeOpenAI, loopback: dict[str, str], tmp_path: Path
) -> None:
    cap = 4.5 * CALL_USD
    runs = []
    for concurrency in (1, 4):  # in flight or not, the same records (the cache replays a rerun)
        out = tmp_path / f"c{concurrency}"
        cmd = [
            sys.executable,
            "-m",
            "planarena.experiments.run.runner",
            *real(server.url, f"budget.max_cost_usd={cap!r}", f"concurrency={concurrency}"),
            f"llm.cache_dir={tmp_path / f'cache{concurrency}'}",
            "figures=false",
            f"hydra.run.dir={out}",
        ]
        env = {**loopback, "PYTHONPATH": str(ROOT)}
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
        assert proc.returncode == 5, proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr
        (line,) = [x for x in proc.stderr.splitlines() if x.startswith("planarena:")]
        assert (
            "cost cap budget.max_cost_usd=" in line
            and "1 cut by the cap (left out of the tables), 2 not run" in line
        )
        assert json.loads((out / "status.json").read_text())["status"] == "cost_cap"
        assert (out / "summary.md").exists() and "react" in proc.stdout  # the tables so far
        runs.append(rows(out))
    timing = ("latency_s", "llm_queue_s", "llm_requests", "cache_hits")  # measured wall time
    a, b = ([{k: v for k, v in r.items() if k not in timing} for r in x] for x in runs)
    assert a == b and [r["llm_calls"] for r in a] == [2, 2, 1]


def test_a_cap_that_cuts_the_first_episode_ends_with_status_5_not_a_traceback(
    tmp_path: Path,
) -> None:
    """A cap below one episode's cost: the only record is the cut one, so no episode is left
    to tabulate. The tables said so and the job stopped with status 5; it crashed in the
    consistency table (int of NaN) with no status.json."""
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "planarena.experiments.run.runner",
        "env=report",
        "planner=react",
        "complexity=simple",
        "n_tasks=2",
        "progress=false",
        "budget.max_cost_usd=0.0001",
        f"hydra.run.dir={out}",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert proc.returncode == 5, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert json.loads((out / "status.json").read_text())["status"] == "cost_cap"
    (record,) = rows(out)
    assert record["stop_reason"] == "job_cost_cap"
    summary = (out / "summary.md").read_text()
    assert "No measured episode" in summary
    assert "1 episode(s) the job's cost cap cut" in summary
    assert "infrastructure_error episode" not in summary  # it was called one
    assert pd.read_csv(out / "summary.csv")["n"].sum() == 0
