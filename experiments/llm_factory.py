"""Builds the LLM backend and model profiles an episode uses, from the ``llm=`` config."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from envs.base import Env, Task
from planners.llm.base import LLMBackend
from planners.llm.profiles import SKILLS, ModelProfile, SkillProfile


def skill_profile(cfg: Mapping[str, Any]) -> SkillProfile:
    name = str(cfg.get("skill", "strong"))
    if name not in SKILLS:
        raise ValueError(f"unknown llm.skill {name!r}; choose one of {sorted(SKILLS)}")
    overrides = {k: v for k, v in dict(cfg.get("skill_overrides") or {}).items() if v is not None}
    return SKILLS[name].model_copy(update=overrides) if overrides else SKILLS[name]


def model_profiles(cfg: Mapping[str, Any]) -> dict[str, ModelProfile]:
    models = {role: ModelProfile(**dict(spec)) for role, spec in (cfg.get("models") or {}).items()}
    if "default" not in models:
        models["default"] = ModelProfile(name=str(cfg.get("model", "default")))
    return models


def llm_label(cfg: Mapping[str, Any]) -> str:
    if cfg.get("backend", "sim") == "sim":
        return f"sim:{cfg.get('skill', 'strong')}"
    return f"{cfg.get('backend')}:{cfg.get('model')}"


class BackendFactory:
    """One shared real backend (so its cache and concurrency bound are shared), or a fresh
    simulator bound to each episode's oracle."""

    def __init__(self, cfg: Mapping[str, Any]) -> None:
        self.cfg = dict(cfg)
        self.kind = self.cfg.get("backend", "sim")
        self.skill = skill_profile(self.cfg) if self.kind == "sim" else None
        self._shared: LLMBackend | None = None
        if self.kind not in ("sim", "openai"):
            raise ValueError(f"unknown llm.backend {self.kind!r}; choose sim or openai")
        if self.kind == "openai" and not self.cfg.get("base_url"):
            variable = str(self.cfg.get("api_key_env", "OPENAI_API_KEY"))
            if not os.environ.get(variable):  # fail at the start, not once per episode
                raise ValueError(
                    f"llm=openai needs an API key in the environment variable {variable} "
                    "(or llm.base_url for a local server)"
                )

    def for_episode(self, env: Env, task: Task, seed_keys: tuple[object, ...]) -> LLMBackend:
        if self.kind == "sim":
            from planners.llm.sim import SimLLM

            assert self.skill is not None
            return SimLLM(self.skill, env.oracle(task), seed_keys=seed_keys)
        if self._shared is None:
            from planners.llm.openai_backend import OpenAIBackend

            self._shared = OpenAIBackend.from_config(self.cfg)
        # the episode's identity keys its response cache (seed, env, task, trial: no planner)
        return self._shared.for_episode(seed_keys)  # type: ignore[attr-defined]
