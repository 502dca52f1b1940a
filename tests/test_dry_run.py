"""``dry_run=true`` (issue 10): the number of LLM calls, tokens and dollars a job would spend,
from a short pass with the simulated LLM over the job's first tasks; nothing is sent or
written. Checked against the records of the same job actually run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fake_server import FakeOpenAI
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig
from planarena.experiments.records.store import load_records
from planarena.experiments.run.dry_run import SAMPLE_TASKS, tally
from planarena.experiments.run.runner import prepare, run, validate

ROOT = Path(__file__).resolve().parents[1]
JOB = ["env=report", "planner=[react,plan_execute_replan]", "complexity=[simple,medium]"]


def cfg_of(*overrides: str) -> DictConfig:
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "configs")):
        return compose(config_name="config", overrides=[*JOB, "progress=false", *overrides])


def dry(*overrides: str):  # noqa: ANN201 - DryRun
    cfg = cfg_of("dry_run=true", *overrides)
    return tally(cfg, prepare(cfg, validate(cfg)))


def test_a_job_of_at_most_three_tasks_is_estimated_exactly(tmp_path: Path) -> None:
    """The sample is the job's first tasks: with n_tasks <= 3 it is the whole job."""
    estimate = dry(f"n_tasks={SAMPLE_TASKS}", "faults=default")
    run(cfg_of(f"n_tasks={SAMPLE_TASKS}", "faults=default"), tmp_path)
    df = load_records(tmp_path / "episodes.jsonl")
    for planner, e in estimate.planners.items():
        mine = df[df["planner"] == planner]
        assert e.episodes == len(mine)
        assert e.llm_calls == mine["llm_calls"].sum()
        assert e.tokens_prompt == mine["tokens_prompt"].sum()
        assert e.tokens_completion == mine["tokens_completion"].sum()
        assert e.cost_usd == pytest.approx(mine["cost_usd"].sum())
    assert estimate.total.llm_calls == df["llm_calls"].sum() > 0
    assert estimate.episodes == estimate.sampled == len(df)


def test_the_first_tasks_are_scaled_per_cell_to_the_configured_job(tmp_path: Path) -> None:
    estimate = dry("n_tasks=7", "trials=2")
    run(cfg_of("n_tasks=7", "trials=2"), tmp_path)
    df = load_records(tmp_path / "episodes.jsonl")
    expected_calls = expected_tokens = 0.0
    for (_, complexity), cell in df.groupby(["planner", "complexity"]):
        first = sorted(cell["task_id"].unique())[:SAMPLE_TASKS]
        sample = cell[cell["task_id"].isin(first) & (cell["trial"] == 0)]
        scale = len(cell) / len(sample)  # 7 tasks x 2 trials from 3 tasks x 1 trial
        assert scale == pytest.approx(14 / 3), complexity
        expected_calls += sample["llm_calls"].sum() * scale
        expected_tokens += sample["tokens_prompt"].sum() * scale
    assert estimate.episodes == len(df) and estimate.total.episodes == pytest.approx(len(df))
    assert estimate.sampled == 2 * 2 * SAMPLE_TASKS  # planners x complexities x tasks
    assert estimate.total.llm_calls == pytest.approx(expected_calls)
    assert estimate.total.tokens_prompt == pytest.approx(expected_tokens)


def test_a_real_model_is_priced_at_its_own_prices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a dry run needs no key
    sim = dry("n_tasks=3")
    for model, (usd_in, usd_out) in {"gpt-4o-mini": (0.15, 0.6), "gpt-4o": (2.5, 10.0)}.items():
        estimate = dry("n_tasks=3", "llm=openai", f"llm.model={model}")
        assert estimate.model == model and estimate.price == (usd_in, usd_out)
        t = estimate.total  # the same simulated tokens, at this model's prices
        assert (t.llm_calls, t.tokens_prompt) == (sim.total.llm_calls, sim.total.tokens_prompt)
        assert t.cost_usd == pytest.approx(
            (t.tokens_prompt * usd_in + t.tokens_completion * usd_out) / 1e6
        )
    unpriced = dry("n_tasks=3", "llm=openai", "llm.model=local-q4")
    assert unpriced.total.cost_usd is None and unpriced.total.llm_calls > 0


def cli(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "openai_base_url")
        and k != "OPENAI_API_KEY"
    }
    env.update(NO_PROXY="127.0.0.1,localhost", PYTHONPATH=str(ROOT))
    cmd = [
        sys.executable,
        "-m",
        "planarena.experiments.run.runner",
        *JOB,
        "dry_run=true",
        *overrides,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)


def total_row(stdout: str) -> list[str]:
    (row,) = [x for x in stdout.splitlines() if x.startswith("| total")]
    return [c.strip() for c in row.strip("|").split("|")]


def test_the_cli_prints_the_estimate_and_writes_nothing(server: FakeOpenAI, tmp_path: Path) -> None:
    # a real model with no key set, at a loopback server: no request of any kind reaches it
    out = tmp_path / "run"
    proc = cli(
        tmp_path,
        "llm=openai",
        f"llm.base_url={server.url}",
        "llm.model=gpt-4o",
        "budget.max_cost_usd=0.01",
        f"hydra.run.dir={out}",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert server.requests == 0 and server.gets == 0  # not even the pre-flight GET /models
    assert "no LLM request sent, nothing written" in proc.stdout and "gpt-4o" in proc.stdout
    name, episodes, calls, prompt, completion, usd = total_row(proc.stdout)
    assert (name, episodes) == ("total", "80")  # 2 planners x 2 complexities x 20 tasks
    tokens_in, tokens_out = (int(x.replace(",", "")) for x in (prompt, completion))
    expected = (tokens_in * 2.5 + tokens_out * 10.0) / 1e6
    assert float(usd.lstrip("$").replace(",", "")) == pytest.approx(expected, abs=0.006)
    assert re.search(r"budget.max_cost_usd=0.01: the job would stop at the cap", proc.stdout)
    assert not out.exists()  # nothing written (Hydra's empty job log is removed with its dir)
    # into a dir holding a run's records (a dry run before resuming): nothing changes there
    run(cfg_of("n_tasks=1"), out)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    proc = cli(tmp_path, "n_tasks=1", f"hydra.run.dir={out}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert total_row(proc.stdout)[:2] == ["total", "4"] and "sim:strong" in proc.stdout
    after = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and p.suffix != ".log"}
    assert after == {p: b for p, b in before.items() if p.suffix != ".log"}
