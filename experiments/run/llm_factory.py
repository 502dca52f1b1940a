"""Builds the LLM backend and model profiles an episode uses, from the ``llm=`` config."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from typing import Any, Literal

from planarena.envs.base import Env, Task
from planarena.planners.formats import MAX_TOKENS
from planarena.planners.llm.base import LLMBackend
from planarena.planners.llm.profiles import SKILLS, ModelProfile, SkillProfile
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    create_model,
    field_validator,
)


class ConfigError(ValueError):
    """A user's config value that cannot run; the message is one line naming key and value."""


def describe(exc: ValidationError, prefix: str, model: type[BaseModel] | None = None) -> str:
    """One line per pydantic error, joined: ``key=value: what is allowed``."""
    parts = []
    for err in exc.errors():
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
        key = f"{prefix}{loc}".strip(".")
        value = err.get("input")
        shown = "" if err["type"] == "missing" else f"={json.dumps(value, default=str)}"
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown key"
            if model is not None and len(err["loc"]) == 1:
                message += "; allowed: " + ", ".join(sorted(model.model_fields))
        parts.append(f"{key}{shown}: {message}")
    return "; ".join(parts)


def validated(model: type[BaseModel], data: Mapping[str, Any], prefix: str) -> Any:
    """``model(**data)``, a :class:`ConfigError` naming key and value if it does not validate."""
    try:
        return model(**dict(data))
    except ValidationError as exc:
        raise ConfigError(describe(exc, prefix, model)) from None


def skill_overrides(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in dict(cfg.get("skill_overrides") or {}).items() if v is not None}


PROFILE_SUFFIXES = (".yaml", ".yml")
"""``llm.skill`` ending so names a profile file (``planarena-calibrate --out`` writes one)."""


def is_profile_file(name: str) -> bool:
    """Whether ``llm.skill`` names a YAML profile file rather than a shipped profile."""
    return name.lower().endswith(PROFILE_SUFFIXES)


def load_skill_file(path: str) -> SkillProfile:
    """A skill profile from a YAML file of top-level :class:`SkillProfile` fields (``name``
    plus any fields; the rest keep the model's defaults, which are ``strong``'s). A missing
    file, a file that is not a mapping, an unknown field or a value out of range is a
    one-line :class:`ConfigError` naming the file and the key."""
    import yaml

    where = f"llm.skill={path}"
    try:
        with open(path) as f:
            data = yaml.safe_load(f)
    except FileNotFoundError:
        raise ConfigError(f"{where}: no such profile file") from None
    except (OSError, yaml.YAMLError) as exc:
        text = " ".join(str(exc).split())
        raise ConfigError(f"{where}: cannot read the profile file: {text}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{where}: the profile file must hold SkillProfile fields (a mapping), got "
            f"{type(data).__name__}"
        )
    data = {str(k): v for k, v in data.items()}
    data.setdefault("name", os.path.splitext(os.path.basename(path))[0])
    try:
        return SkillProfile(**data)
    except ValidationError as exc:
        raise ConfigError(f"{where}: {describe(exc, '', SkillProfile)}") from None


def named_skill(name: str) -> SkillProfile:
    """A shipped profile by name, or a profile file by path (``*.yaml``/``*.yml``)."""
    if is_profile_file(name):
        return load_skill_file(name)
    if name not in SKILLS:
        raise ConfigError(
            f"llm.skill={name}: unknown skill; choose one of {sorted(SKILLS)} or a profile "
            "file (path ending .yaml/.yml)"
        )
    return SKILLS[name]


def skill_profile(cfg: Mapping[str, Any]) -> SkillProfile:
    """The named profile (or profile file) with the overrides applied, validated by the
    model itself (ranges, types, unknown fields), so a new field of :class:`SkillProfile`
    validates with no change here."""
    base = named_skill(str(cfg.get("skill", "strong")))
    overrides = skill_overrides(cfg)
    if not overrides:
        return base
    merged = {**base.model_dump(), **overrides}
    return validated(SkillProfile, merged, "llm.skill_overrides")


def model_profiles(cfg: Mapping[str, Any]) -> dict[str, ModelProfile]:
    models = {
        role: validated(ModelProfile, dict(spec), f"llm.models.{role}")
        for role, spec in (cfg.get("models") or {}).items()
    }
    if "default" not in models:
        models["default"] = ModelProfile(name=str(cfg.get("model", "default")))
    return models


def overrides_digest(cfg: Mapping[str, Any]) -> str:
    """A short hash of everything that changes the named skill (empty when nothing does)."""
    changes: dict[str, Any] = {}
    if skill_overrides(cfg):
        changes["skill_overrides"] = skill_overrides(cfg)
    for key in ("roles", "role_skills"):  # per-role profiles, where the config has them
        if cfg.get(key):
            changes[key] = cfg.get(key)
    if not changes:
        return ""
    text = json.dumps(changes, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:6]


def profile_label(path: str) -> str:
    """A profile file's label: its stem and a short hash of its bytes (an edited file is
    another model), e.g. ``calibrated@1a2b3c``."""
    stem = os.path.splitext(os.path.basename(path))[0]
    try:
        with open(path, "rb") as f:
            content = f.read()
    except OSError:
        return stem
    return f"{stem}@{hashlib.sha256(content).hexdigest()[:6]}"


def llm_label(cfg: Mapping[str, Any]) -> str:
    """``sim:strong``, ``sim:strong+3fa2c1`` with overrides (the full overrides are in the
    run's config), or ``openai:<model>``."""
    if cfg.get("backend", "sim") == "sim":
        digest = overrides_digest(cfg)
        skill = str(cfg.get("skill", "strong"))
        if is_profile_file(skill):  # a profile file: its name and a digest of its content
            skill = profile_label(skill)
        return f"sim:{skill}" + (f"+{digest}" if digest else "")
    return f"{cfg.get('backend')}:{cfg.get('model')}"


def model_price(cfg: Mapping[str, Any]) -> tuple[float, float] | None:
    """A real model's (input, output) USD per million tokens from ``llm.prices``, by the model
    name sent to the server; None without an entry (its cost is then recorded as null)."""
    entry = (cfg.get("prices") or {}).get(str(cfg.get("model")))
    if entry is None:
        return None
    try:
        return float(entry["usd_per_mtok_input"]), float(entry["usd_per_mtok_output"])
    except (KeyError, TypeError, ValueError):
        raise ConfigError(
            f"llm.prices.{cfg.get('model')}={json.dumps(entry, default=str)}: needs numbers "
            "usd_per_mtok_input and usd_per_mtok_output (USD per million tokens)"
        ) from None


def check_cost_cap(container: Mapping[str, Any]) -> None:
    """A job cost cap needs every call priced: with a real model that has no ``llm.prices``
    entry its cost would be null, and the cap could not bind. A config error at the start."""
    cap = (container.get("budget") or {}).get("max_cost_usd")
    llm = container.get("llm") or {}
    if cap is None or llm.get("backend", "sim") != "openai" or model_price(llm) is not None:
        return
    model = llm.get("model")
    raise ConfigError(
        f"budget.max_cost_usd={cap}: llm.model={model} has no price in llm.prices, so its "
        "cost would be recorded as null and the cap could not bind; add its price in USD per "
        f"million tokens ('+llm.prices.{model}={{usd_per_mtok_input:...,usd_per_mtok_output:...}}'"
        " or an entry in configs/llm/openai.yaml)"
    )


SECRET_KEY = re.compile(r"^(api_?key|openai_api_key|secret|password|access_token)$", re.I)
"""A config key that would hold a secret: refused by name, its value never shown."""

ENV_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def secret_in_config(cfg: Mapping[str, Any], prefix: str = "llm") -> str | None:
    """One line refusing a key of ``cfg`` that would hold a secret (``llm.api_key``), or an
    ``api_key_env`` that is not the name of a variable (the key itself, pasted there), without
    showing the value; None when there is none."""
    for key in cfg:
        if SECRET_KEY.match(str(key)):
            return (
                f"{prefix}.{key}: a secret never goes into the config (it would be written to "
                ".hydra/config.yaml and run.json); export it in the environment variable named "
                "by llm.api_key_env (default OPENAI_API_KEY); the value is not shown"
            )
    variable = cfg.get("api_key_env")
    if variable is not None and not ENV_VARIABLE.match(str(variable)):
        return (
            f"{prefix}.api_key_env: must name an environment variable (letters, digits, _), "
            "e.g. OPENAI_API_KEY, not hold the key; the value is not shown"
        )
    return None


class _StrictSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _as_text(value: Any) -> Any:
    """A name the command line parsed as a number (``llm.cache_dir=2025``) is still a name."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


class SimLLMSettings(_StrictSettings):
    """``llm=sim``'s keys (``configs/llm/sim.yaml``); the skill overrides and model profiles
    are validated by their own models (:func:`skill_profile`, :func:`model_profiles`)."""

    backend: Literal["sim"] = "sim"
    skill: str = "strong"  # a shipped profile's name, or a profile file (*.yaml, *.yml)
    skill_overrides: dict[str, Any] | None = None
    models: dict[str, dict[str, Any]] | None = None


class PriceSettings(_StrictSettings):
    usd_per_mtok_input: NonNegativeFloat
    usd_per_mtok_output: NonNegativeFloat


FormatTokens = create_model(  # llm.max_tokens_by_format: one allowance per request format
    "FormatTokens",
    __base__=_StrictSettings,
    **{name: (PositiveInt | None, None) for name in MAX_TOKENS},  # type: ignore[call-overload]
)


class OpenAISettings(_StrictSettings):
    """``llm=openai``'s keys (``configs/llm/openai.yaml``), typed: a value the backend would
    choke on mid-job (``max_concurrency=0`` hung the job, ``timeout_s=-1`` ended every episode
    as a timeout, ``max_retries=-1`` as a harness error) is refused before anything runs."""

    backend: Literal["openai"] = "openai"
    model: str = Field(min_length=1)
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    max_concurrency: PositiveInt = 4
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    max_tokens: PositiveInt | None = None
    max_tokens_by_format: FormatTokens | None = None  # type: ignore[valid-type]
    stop: bool = True
    timeout_s: PositiveFloat = 120.0
    max_retries: NonNegativeInt = 2
    write_text: bool = True
    json_mode: bool = False
    offline: bool = False
    requests_per_minute: PositiveFloat | None = None
    tokens_per_minute: PositiveFloat | None = None
    cache_dir: str | None = None
    prices: dict[str, PriceSettings] | None = None

    @field_validator("model", "cache_dir", "base_url", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        return _as_text(value)


def check_llm(cfg: Mapping[str, Any]) -> None:
    """The ``llm`` group against its backend's schema: no unknown key (``+llm.foo=1`` was
    accepted and ignored), typed values, no secret; a :class:`ConfigError` naming the key."""
    problem = secret_in_config(cfg)
    if problem is not None:
        raise ConfigError(problem)
    kind = cfg.get("backend", "sim")
    if kind == "sim":
        validated(SimLLMSettings, cfg, "llm")
    elif kind == "openai":
        validated(OpenAISettings, cfg, "llm")


class InfrastructureError(RuntimeError):
    """Not the agent's fault: the endpoint is unreachable or refuses us. Stops the job."""


PREFLIGHT_TIMEOUT_S = 60.0
"""The longest the check waits for an answer (the call's own ``llm.timeout_s`` when shorter).
A refused connection fails at once; a local server on busy cores can take tens of seconds
even for ``GET /models`` (one on 2 shared cores missed 5 s and ended eight jobs of a
recording in a row)."""


def preflight(cfg: Mapping[str, Any], timeout_s: float | None = None) -> bool:
    """One cheap request (``GET /models``) to a real endpoint before any episode: an endpoint
    that cannot be reached or rejects the key raises :class:`InfrastructureError`. Any other
    answer (even a 404 or 501 from a server without that route) shows the server is there;
    returns whether a server answered (False: nothing to reach)."""
    if cfg.get("backend", "sim") != "openai" or cfg.get("offline"):
        return False  # the simulator, or a replay from the response cache: nothing to reach
    import openai

    if timeout_s is None:
        timeout_s = min(float(cfg.get("timeout_s") or PREFLIGHT_TIMEOUT_S), PREFLIGHT_TIMEOUT_S)

    base_url = cfg.get("base_url")
    key = os.environ.get(str(cfg.get("api_key_env", "OPENAI_API_KEY"))) or "not-needed"
    client = openai.OpenAI(api_key=key, base_url=base_url, timeout=timeout_s, max_retries=0)
    where = base_url or "the OpenAI API"
    try:
        client.models.list()
    except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
        raise InfrastructureError(
            f"{where} rejected the API key from {cfg.get('api_key_env', 'OPENAI_API_KEY')} "
            f"(HTTP {exc.status_code})"
        ) from None
    except openai.APIStatusError:
        return True  # the server answered: reachable
    except (openai.APIConnectionError, openai.APITimeoutError) as exc:
        cause = exc.__cause__ or exc
        raise InfrastructureError(f"cannot reach llm.base_url={where}: {cause}") from None
    finally:
        client.close()
    return True


INFRASTRUCTURE_ERRORS = (
    "APIConnectionError",
    "APITimeoutError",
    "AuthenticationError",
    "PermissionDeniedError",
    "InfrastructureError",
)
"""Exception names that, recorded as an episode's harness error, stop the job at once."""


class BackendFactory:
    """One shared real backend (so its cache and concurrency bound are shared), or a fresh
    simulator bound to each episode's oracle."""

    def __init__(self, cfg: Mapping[str, Any], *, check_key: bool = True) -> None:
        self.cfg = dict(cfg)
        self.kind = self.cfg.get("backend", "sim")
        if self.kind not in ("sim", "openai"):
            raise ConfigError(f"llm.backend={self.kind}: unknown backend; choose sim or openai")
        check_llm(self.cfg)
        self.skill = skill_profile(self.cfg) if self.kind == "sim" else None
        self._shared: LLMBackend | None = None
        if self.kind == "openai" and check_key and not self.cfg.get("base_url"):
            variable = str(self.cfg.get("api_key_env", "OPENAI_API_KEY"))
            if not os.environ.get(variable):  # fail at the start, not once per episode
                raise ConfigError(
                    f"llm=openai needs an API key in the environment variable {variable} "
                    "(or llm.base_url for a local server)"
                )

    def for_episode(self, env: Env, task: Task, seed_keys: tuple[object, ...]) -> LLMBackend:
        if self.kind == "sim":
            from planarena.planners.llm.sim import SimLLM

            assert self.skill is not None
            return SimLLM(self.skill, env.oracle(task), seed_keys=seed_keys)
        if self._shared is None:
            from planarena.planners.llm.openai_backend import OpenAIBackend

            self._shared = OpenAIBackend.from_config(self.cfg)
        # the episode's identity keys its response cache (seed, env, task, trial: no planner)
        return self._shared.for_episode(seed_keys)  # type: ignore[attr-defined]
