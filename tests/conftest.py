"""Shared test helpers: run real episodes (no mocks of our own code; they take milliseconds)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from fake_server import FakeOpenAI, serve
from hydra.utils import instantiate
from omegaconf import OmegaConf
from planarena.configs import default_choices
from planarena.envs.base import Task
from planarena.envs.faults import FaultRule
from planarena.envs.report.env import ReportEnv
from planarena.experiments.run.episode import EpisodeRecord, simulate
from planarena.planners.base import Planner
from planarena.planners.llm.profiles import SKILLS, ModelProfile, SkillProfile

MODELS = {
    "default": ModelProfile(name="sim-large"),
    "replanner": ModelProfile(name="sim-small", usd_per_mtok_input=0.15, usd_per_mtok_output=0.6),
}


ALL_PLANNERS = default_choices("planner")  # the default set, defined once in config.yaml
CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def make_planner(name: str, **kwargs: Any) -> Planner:
    """A planner built from its Hydra config (the same object a run would use)."""
    return instantiate(OmegaConf.load(CONFIGS / "planner" / f"{name}.yaml"), **kwargs)


def episode(
    planner: Planner | str,
    task: Task,
    *,
    rules: Sequence[FaultRule] = (),
    skill: str | SkillProfile = "perfect",
    seed: int = 0,
    trial: int = 0,
    env: ReportEnv | None = None,
) -> tuple[EpisodeRecord, dict[str, Any]]:
    """Run one real episode with the simulated LLM."""
    env = env or ReportEnv()
    if isinstance(planner, str):
        name, planner = planner, make_planner(planner)
    else:
        name = planner.name
    profile = SKILLS[skill] if isinstance(skill, str) else skill
    return simulate(
        name, planner, env, task, skill=profile, rules=rules, models=MODELS, seed=seed, trial=trial
    )


def assert_unchanged_by(
    planner: str, skill: SkillProfile, update: dict[str, Any], *,
    rules: Sequence[FaultRule] = (), n: int = 3,
) -> None:  # fmt: skip
    """``planner`` runs ``n`` medium tasks to the same records (``wall_s`` aside) and traces
    with ``update`` applied to ``skill`` as without: the update draws nothing there."""
    changed = skill.model_copy(update=update)
    for task in tasks("medium", n=n):
        before, trace = episode(planner, task, skill=skill, rules=rules)
        after, after_trace = episode(planner, task, skill=changed, rules=rules)
        same = after.model_dump(exclude={"wall_s"}) == before.model_dump(exclude={"wall_s"})
        assert same and after_trace == trace, (planner, task.task_id, update)


def tasks(
    complexity: str, n: int = 5, seed: int = 0, unreachable_rate: float = 0.0, **env_kwargs: Any
) -> list[Task]:
    return ReportEnv(**env_kwargs).generate(
        n, seed=seed, complexity=complexity, unreachable_rate=unreachable_rate
    )


@pytest.fixture
def run_episode_fn():  # noqa: ANN201 - fixture returning the helper
    return episode


BIN = Path(sys.executable).parent
SMALL_RUN_ARGS = (
    "env=report",  # the default runs every family; these tests read the report env's run
    "planner=[react,plan_execute_replan,dfs,mcts]",  # one of each kind, search ones included
    "n_tasks=3",
    "complexity=[simple,medium]",
    "progress=false",
)


@pytest.fixture(scope="session")
def small_run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real ``planarena`` run shared by the report, trace-view and notebook tests."""
    run = tmp_path_factory.getbasetemp() / "planarena_small_run"
    if not (run / "figures" / "failure_modes.png").exists():
        shutil.rmtree(run, ignore_errors=True)
        cmd = [str(BIN / "planarena"), *SMALL_RUN_ARGS, f"hydra.run.dir={run}"]
        subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120)
    return run


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    """A loopback OpenAI-compatible server (``fake_server.py``) for the real-LLM path."""
    yield from serve()


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy or base-URL override from the developer's shell may redirect a request."""
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
