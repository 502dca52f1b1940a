"""Every config composes and instantiates; the override grammar of the README works."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from omegaconf import OmegaConf
from planarena.envs.faults import FaultConfig
from planarena.experiments.run.llm_factory import BackendFactory, model_profiles, skill_profile
from planarena.planners.base import Planner

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONFIGS / group).glob("*.yaml"))


def composed(*overrides: str):  # noqa: ANN201 - DictConfig
    with initialize_config_dir(version_base="1.3", config_dir=str(CONFIGS)):
        return compose(config_name="config", overrides=list(overrides))


@pytest.mark.parametrize("planner", options("planner"))
def test_every_planner_config_instantiates(planner: str) -> None:
    cfg = composed(f"planner={planner}")
    assert list(cfg.planner) == [planner]
    obj = instantiate(cfg.planner[planner])
    assert isinstance(obj, Planner) and obj.name == planner


@pytest.mark.parametrize("env", options("env"))
def test_every_env_config_instantiates(env: str) -> None:
    cfg = composed(f"env={env}")
    assert instantiate(cfg.env[env]).name == env


@pytest.mark.parametrize("faults", options("faults"))
def test_every_faults_config_validates(faults: str) -> None:
    cfg = composed(f"faults={faults}")
    FaultConfig(**OmegaConf.to_container(cfg.faults, resolve=True))


@pytest.mark.parametrize("llm", options("llm"))
def test_every_llm_config_builds(llm: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # a real backend checks for its key
    cfg = OmegaConf.to_container(composed(f"llm={llm}").llm, resolve=True)
    assert isinstance(cfg, dict)
    assert model_profiles(cfg)["default"].name
    BackendFactory(cfg)
    assert "api_key" not in cfg  # only the *name* of the variable may appear


@pytest.mark.parametrize("experiment", options("experiment"))
def test_every_experiment_composes(experiment: str) -> None:
    cfg = composed(f"experiment={experiment}")
    assert cfg.planner and cfg.env
    assert cfg != composed()  # a named experiment changes the run it names
    for spec in cfg.planner.values():
        assert isinstance(instantiate(spec), Planner)


def test_seed_tables_runs_the_four_architectures_of_the_article() -> None:
    cfg = composed("experiment=seed_tables")
    assert list(cfg.planner) == ["react", "plan_execute", "plan_execute_replan", "tot"]
    assert cfg.study == "seed_tables" and cfg.faults.name == "default"


def test_default_runs_every_planner_and_env_at_three_complexities() -> None:
    cfg = composed()
    assert sorted(cfg.planner) == options("planner")
    full = composed("preset=full")  # the default runs two families; the full job every one
    assert sorted(full.env) == [e for e in options("env") if e != "file"]  # file: a loader
    assert set(cfg.env) < set(full.env) and full.planner == cfg.planner
    assert list(cfg.complexity) == ["simple", "medium", "complex"]
    assert cfg.n_tasks >= 20 and cfg.llm.backend == "sim" and cfg.llm.skill == "strong"


def test_readme_overrides() -> None:
    cfg = composed(
        "planner=[react,plan_execute]",
        "env=report",
        "complexity=complex",
        "faults=none",
        "llm.skill=perfect",
        "n_tasks=3",
        "seed=5",
    )
    assert list(cfg.planner) == ["react", "plan_execute"]
    assert cfg.complexity == "complex" and cfg.faults.rules == [] and cfg.seed == 5
    assert skill_profile(OmegaConf.to_container(cfg.llm)).p_correct == 1.0


def test_every_skill_field_can_be_overridden_from_the_command_line() -> None:
    from planarena.planners.llm.profiles import SkillProfile

    cfg = composed("llm.skill_overrides.p_trap=0.4")
    fields = set(SkillProfile.model_fields) - {"name"}
    assert set(cfg.llm.skill_overrides) == fields
    profile = skill_profile(OmegaConf.to_container(cfg.llm))
    assert profile.p_trap == 0.4 and profile.p_correct == 0.97


def test_help_lists_every_config_group_the_readme_names() -> None:
    """``planarena --help`` lists planner, env, llm, faults, experiment and hydra/launcher
    (Hydra's default template shows the launchers only under ``--hydra-help``)."""
    planarena = Path(sys.executable).parent / "planarena"
    proc = subprocess.run(
        [str(planarena), "--help"], capture_output=True, text=True, timeout=120, check=True
    )
    usage, groups = proc.stdout.split("== Configuration groups ==")
    for group in ("planner", "env", "llm", "faults", "experiment"):
        assert f"\n{group}: " in groups
    launchers = groups.split("\nhydra/launcher: ")[1].split("\n")[0].split(", ")
    assert {"basic", *options("hydra/launcher")} <= set(launchers)  # ours: local, ray_local, ...
    assert "react" in groups


def test_help_is_a_short_usage_page_naming_every_command_and_the_full_config() -> None:
    """``planarena --help`` starts with what the tool does, its usage, the most used overrides
    and the other commands, fits a screen or two (not Hydra's 300-line config dump), and says
    how to reach the composed config (``--cfg job``) and Hydra's own help."""
    planarena = Path(sys.executable).parent / "planarena"
    proc = subprocess.run(
        [str(planarena), "--help"], capture_output=True, text=True, timeout=120, check=True
    )
    usage = proc.stdout.split("== Configuration groups ==")[0]
    assert proc.stdout.startswith("planarena: ") and "== Usage ==" in usage
    for command in (
        "planarena-report",
        "planarena-trace",
        "planarena-calibrate",
        "planarena-local",
    ):
        assert f"\n  {command} " in usage
    assert "--cfg job" in usage and "--hydra-help" in usage and "docs/" in usage
    assert len(proc.stdout.splitlines()) < 60
    shown = subprocess.run(
        [str(planarena), "--cfg", "job"], capture_output=True, text=True, timeout=120, check=True
    )
    assert "n_tasks: 20" in shown.stdout  # the composed config, one command away
