"""A failing LLM endpoint is not a failing agent (issue 10): connection refused, timeouts, a
rejected key, HTTP 4xx/5xx errors and a prompt beyond the model's context are recorded as
``infrastructure_error``, left out of the tables, and run again on resume. Against the loopback
fake server (tests/fake_server.py): real episodes, real runner."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import make_planner, tasks
from fake_server import PROMPT_TOKENS, FakeOpenAI
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig
from planarena.envs.report.env import ReportEnv
from planarena.experiments.records.repair import repair_run_dir
from planarena.experiments.run.episode import EpisodeRecord, run_one
from planarena.experiments.run.llm_factory import InfrastructureError
from planarena.experiments.run.runner import finish, run
from planarena.planners.llm.openai_backend import OpenAIBackend
from planarena.planners.llm.profiles import ModelProfile

ROOT = Path(__file__).resolve().parents[1]
MODELS = {"default": ModelProfile(name="fake")}
CONTEXT_400 = "This model's maximum context length is 8192 tokens; the prompt has 9001"
DEAD_URL = "http://127.0.0.1:9/v1"  # the discard port: connection refused


def episode(url: str, planner: str = "react", **backend: Any) -> tuple[EpisodeRecord, dict]:
    task = tasks("simple", 1)[0]
    keys = (0, task.env, task.task_id, 0)
    llm = OpenAIBackend("fake", base_url=url, **{"max_retries": 0, **backend})
    return asyncio.run(
        run_one(
            planner_name=planner,
            planner=make_planner(planner),
            env=ReportEnv(),
            task=task,
            backend=llm.for_episode(keys),
            llm_label="openai:fake",
            models=MODELS,
            rules=[],
            seed=0,
            trial=0,
        )
    )


def assert_infrastructure(record: EpisodeRecord, trace: dict, kind: str) -> None:
    assert record.failure_mode == "infrastructure_error", record.detail
    assert record.stop_reason == "infrastructure_error" and not record.success
    assert record.detail.startswith(f"{kind}: "), record.detail
    (event,) = [e for e in trace["events"] if e["event"] == "infrastructure_error"]
    assert event["error"].startswith(kind)
    assert not [e for e in trace["events"] if e["event"] == "harness_error"]


@pytest.mark.parametrize(
    ("status", "message", "kind"),
    [
        (400, CONTEXT_400, "ContextLengthExceeded"),
        (400, "unsupported parameter", "BadRequestError"),
        (401, "invalid api key", "AuthenticationError"),
        (404, "model 'fake' not found", "NotFoundError"),
        (429, "rate limited", "RateLimitError"),
        (500, "internal error", "InternalServerError"),
        (503, "overloaded", "InternalServerError"),
    ],
)
def test_an_http_error_of_the_endpoint_is_an_infrastructure_error(
    server: FakeOpenAI, status: int, message: str, kind: str
) -> None:
    server.fail_next, server.fail_status, server.fail_message = 100, status, message
    for planner in ("react", "plan_execute"):  # whichever planner made the call
        record, trace = episode(server.url, planner)
        assert_infrastructure(record, trace, kind)
        assert record.detail == f"{kind}: HTTP {status}: {message}"  # the server's words


def test_connection_refused_and_timeouts_are_infrastructure_errors(server: FakeOpenAI) -> None:
    record, trace = episode(DEAD_URL)
    assert_infrastructure(record, trace, "APIConnectionError")
    assert "Connect" in record.detail  # the cause (httpx's ConnectError) is named
    server.delay_s = 1.0
    record, trace = episode(server.url, timeout_s=0.2)
    assert_infrastructure(record, trace, "APITimeoutError")


def cfg_overrides(url: str) -> list[str]:
    """A small job against ``url``: ReAct, 3 simple report tasks, no faults, no cache."""
    return [
        "llm=openai",
        f"llm.base_url={url}",
        "llm.model=fake",
        "llm.max_retries=0",
        "llm.cache_dir=null",
        "env=report",
        "planner=react",
        "complexity=simple",
        "n_tasks=3",
        "faults=none",
        "progress=false",
    ]


def cfg_of(url: str, *overrides: str) -> DictConfig:
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "configs")):
        return compose(config_name="config", overrides=[*cfg_overrides(url), *overrides])


def records(run_dir: Path) -> list[dict[str, Any]]:
    rows = [json.loads(x) for x in (run_dir / "episodes.jsonl").read_text().splitlines()]
    timing = ("wall_s", "llm_queue_s", "latency_s")  # a real LLM's time is measured
    return [{k: v for k, v in r.items() if k not in timing} for r in rows]


def test_a_context_length_400_is_left_out_of_the_tables_and_measured_on_resume(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    clean = tmp_path / "clean"
    run(cfg_of(server.url), clean)
    out = tmp_path / "run"
    server.fail_next, server.fail_status, server.fail_message = 1, 400, CONTEXT_400
    run(cfg_of(server.url), out)  # one error is no reason to stop the job
    first = records(out)
    modes = [r["failure_mode"] for r in first]
    assert modes[0] == "infrastructure_error" and modes.count("infrastructure_error") == 1
    assert first[0]["detail"].startswith("ContextLengthExceeded: HTTP 400")
    # the tables count the agent's episodes only: n is 2, and the summary says why
    finish(out, 0, ["react"], figures=False)
    summary = pd.read_csv(out / "summary.csv")
    assert summary["n"].tolist() == [2]  # not a failure of the agent's: not in the denominator
    assert "1 infrastructure_error episode(s)" in (out / "summary.md").read_text()
    assert "infrastructure_error" not in (out / "summary.md").read_text().split("## Method")[0]
    # resume: the same command measures it, and the records are those of a clean run
    repaired = repair_run_dir(out)
    assert len(repaired.done) == 2 and "will run again" in " ".join(repaired.messages)
    run(cfg_of(server.url), out)
    key = json.dumps
    assert sorted(records(out), key=key) == sorted(records(clean), key=key)


def test_an_endpoint_that_goes_away_is_recorded_and_stops_the_job(tmp_path: Path) -> None:
    with pytest.raises(InfrastructureError, match="APIConnectionError"):
        run(cfg_of(DEAD_URL, "llm.timeout_s=5"), tmp_path)
    (row,) = records(tmp_path)  # recorded, then the job stopped: not three refused episodes
    assert row["failure_mode"] == "infrastructure_error"
    assert row["detail"].startswith("APIConnectionError")
    assert not repair_run_dir(tmp_path).done  # and it runs again on resume


def test_a_job_with_an_infrastructure_error_exits_1_naming_it(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    server.fail_next, server.fail_status, server.fail_message = 1, 503, "overloaded"
    env = {
        k: v
        for k, v in os.environ.items()
        if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "openai_base_url")
    }
    env.update(NO_PROXY="127.0.0.1,localhost", PYTHONPATH=str(ROOT))
    cmd = [
        sys.executable,
        "-m",
        "planarena.experiments.run.runner",
        *cfg_overrides(server.url),
        "figures=false",
        f"hydra.run.dir={tmp_path}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("planarena:")]
    assert "1 infrastructure_error episode(s)" in line and "InternalServerError" in line
    assert "harness_error" not in line and "rerun the same command" in line
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["status"] == "infrastructure_errors" and status["exit_code"] == 1


@pytest.mark.parametrize("mode", ["not_json", "cut_json", "no_choices"])
def test_a_reply_that_is_no_completion_is_the_endpoints_failure(
    server: FakeOpenAI, mode: str
) -> None:
    """A hostile or broken server answers 200 with an HTML page, a body cut off mid-JSON or
    a JSON object without choices: the endpoint failed (infrastructure_error, rerun on
    resume), never the harness (it was a harness_error)."""
    for planner in ("react", "plan_execute"):
        server.hostile = [mode] * 10
        record, trace = episode(server.url, planner)
        assert_infrastructure(record, trace, "MalformedResponse")
        assert "the reply is not a chat completion" in record.detail


def test_a_reply_without_usage_is_counted_and_says_so(server: FakeOpenAI) -> None:
    """A reply without its usage block is still an answer: the episode goes on, its tokens
    are counted here (o200k_base) and the record says whose count it holds; with usage, the
    record holds exactly the server's numbers."""
    server.hostile = ["no_usage"] * 50
    record, _ = episode(server.url)
    assert record.failure_mode not in ("harness_error", "infrastructure_error"), record.detail
    assert record.tokenizer == "o200k_base" and record.tokens_prompt > 0
    server.hostile = []
    record, trace = episode(server.url)
    calls = [e for e in trace["events"] if e["event"] == "llm"]
    assert record.tokenizer == "server:fake"
    assert record.tokens_prompt == PROMPT_TOKENS * len(calls)


def test_the_preflight_waits_as_long_as_a_call_would_up_to_a_minute(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A local server on busy cores answers ``GET /models`` in tens of seconds: the check
    waits the call's own timeout (at most a minute), not a fixed 5 s that declared a live
    server gone."""
    import openai
    from planarena.experiments.run.llm_factory import PREFLIGHT_TIMEOUT_S, preflight

    waits: list[float] = []

    class Client:
        def __init__(self, **kw: Any) -> None:
            waits.append(kw["timeout"])
            self.models = self

        def list(self) -> None:
            return None

        def close(self) -> None:
            return None

    monkeypatch.setattr(openai, "OpenAI", Client)
    for timeout_s in (600.0, 20.0):
        preflight({"backend": "openai", "base_url": "http://127.0.0.1:9", "timeout_s": timeout_s})
    assert waits == [PREFLIGHT_TIMEOUT_S, 20.0] and PREFLIGHT_TIMEOUT_S >= 30
