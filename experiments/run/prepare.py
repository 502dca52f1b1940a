"""From a composed config to everything an episode needs, validated before anything is written."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from planarena.envs.base import Env, ParamError
from planarena.envs.faults import FaultConfig, with_duration_scale
from planarena.experiments.records.identity import FAMILY_DIGEST, LEGACY_PLAN_REVISION
from planarena.experiments.records.provenance import code_version, plugin_sources
from planarena.experiments.run.episode import EpisodeContext
from planarena.experiments.run.jobs import JobList, build_jobs, fault_config
from planarena.experiments.run.llm_factory import (
    BackendFactory,
    ConfigError,
    check_cost_cap,
    describe,
    llm_label,
    model_profiles,
    validated,
)
from planarena.experiments.run.settings import RunSettings
from planarena.experiments.studies.registry import Cell, cell_labels, cells_of
from planarena.experiments.studies.registry import names as study_names
from planarena.planners.base import Planner
from planarena.planners.llm.base import Budget
from pydantic import (
    ValidationError,
)


def instantiate_group(node: DictConfig | None, group: str) -> dict[str, Any]:
    if node is None:
        return {}
    out = {}
    for name, spec in node.items():
        try:
            out[name] = instantiate(spec)
        except Exception as exc:  # noqa: BLE001 - a constructor rejecting a config value
            cause = exc.__cause__ or exc
            if isinstance(cause, ValidationError):  # a typed constructor (planners.params)
                raise ConfigError(describe(cause, f"{group}.{name}")) from None
            if isinstance(cause, ParamError):  # an env's range check: "key=value: allowed"
                raise ConfigError(f"{group}.{name}.{cause}") from None
            # one line: a message's own lines (a family file's every problem) joined by "; "
            text = "; ".join(" ".join(x.split()) for x in str(cause).splitlines() if x.strip())
            raise ConfigError(f"{group}.{name}: {type(cause).__name__}: {text}") from None
    return out


@dataclass
class Prepared:
    """A validated config, its planners, envs, faults and jobs: nothing touched on disk."""

    cfg: DictConfig
    container: dict[str, Any]
    planners: dict[str, Planner]
    envs: dict[str, Env]
    faults: FaultConfig
    jobs: JobList
    contexts: list[EpisodeContext]
    """One per cell of the study (one in a plain run), without the run's ``config_id``
    (:func:`with_config_id` adds it once the run dir is claimed)."""
    plugins: list[dict[str, Any]] = field(default_factory=list)
    """The code outside planarena the planners and envs come from (``run.json``'s
    ``code.plugins``: a resume under an edited plug-in is refused)."""

    def code(self) -> dict[str, Any]:
        """This run's code version: planarena's, and the plug-ins it loaded."""
        return {**code_version(), "plugins": self.plugins}

    @property
    def cells(self) -> list[str]:
        return self.jobs.cells


def shard_of(cells: list[Cell], container: Mapping[str, Any]) -> list[Cell]:
    """The cells this job runs: those with ``index % shards == shard`` (a study spread over
    a launcher's jobs, each one shard; ``planarena-report`` merges their records)."""
    shard, shards = int(container.get("shard", 0)), int(container.get("shards", 1))
    if shard >= shards:
        raise ConfigError(f"shard={shard}: must be below shards={shards}")
    mine = [c for i, c in enumerate(cells) if i % shards == shard]
    if not mine:
        raise ConfigError(
            f"shard={shard} of shards={shards}: the run has {len(cells)} cell(s), none for "
            "this shard; use at most as many shards as cells"
        )
    return mine


def with_config_id(contexts: list[EpisodeContext], config_id: str) -> list[EpisodeContext]:
    return [replace(ctx, config_id=config_id) for ctx in contexts]


def with_overrides(container: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``container`` with a cell's dotted-key ``overrides`` set."""
    out = copy.deepcopy(container)
    for dotted, value in overrides.items():
        *head, last = dotted.split(".")
        node = out
        for part in head:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[last] = value
    return out


def context_for(
    cfg: DictConfig,
    container: dict[str, Any],
    planners: dict[str, Planner],
    envs: dict[str, Env],
    faults: FaultConfig,
    cell: Cell,
) -> EpisodeContext:
    """What the episodes of ``cell`` share: the run's config with the cell's overrides (a
    cell varies the model, the faults' rates, budgets or planner settings, never the tasks)."""
    task_keys = ("env", "n_tasks", "complexity", "seed", "trials")
    if any(k.split(".")[0] in task_keys for k in cell.overrides):
        raise ConfigError(f"cell {cell.label}: a cell may not change the tasks (env, seed, ...)")
    cell_cfg = with_overrides(container, cell.overrides)
    llm_cfg = cell_cfg["llm"]
    factory = BackendFactory(llm_cfg, check_key=not container.get("dry_run"))
    rules = faults.rules
    scale = (cell_cfg.get("faults") or {}).get("rate_scale")
    if scale is not None:  # a study's knob: every fault rule's rate times this
        rules = [r.model_copy(update={"rate": min(1.0, r.rate * float(scale))}) for r in rules]
    lengths = (cell_cfg.get("faults") or {}).get("duration_scale")
    if lengths is not None:  # a study's knob: every outage window's length times this
        try:
            rules = with_duration_scale(rules, float(lengths))
        except ValueError:
            raise ConfigError(
                f"faults.duration_scale={lengths!r}: must be a positive number"
            ) from None
    if any(k.startswith("planner.") for k in cell.overrides):
        planners = instantiate_group(OmegaConf.create(cell_cfg["planner"]), "planner")
    budget_cfg = cell_cfg.get("budget") or {}
    return EpisodeContext(
        planners=planners,
        envs=envs,
        backend_for=factory.for_episode,
        models=model_profiles(llm_cfg),
        llm_label=llm_label(llm_cfg),
        faults_label=faults.name,
        rules=rules,
        seed=int(cfg.seed),
        budget=Budget(
            max_tokens=budget_cfg.get("max_tokens_per_episode"),
            max_calls=budget_cfg.get("max_llm_calls_per_episode"),
        ),
        concurrent_llm_calls=bool(cfg.get("concurrent_llm_calls", True)),
        redraw_faults=cfg.get("trial_faults", "same") == "redraw",
        # a saved config without the key is a run made before it: revision 1
        plan_revision=int(cell_cfg.get("plan_revision", LEGACY_PLAN_REVISION)),
        cell=cell.record_fields(),
    )


RECOVERIES = ("article", "equal")
"""``recovery=``: the first article's recovery budget (each replanning planner's own
``max_replans``, a cheaper and weaker replanner model), or an equal one for every planner."""


def apply_recovery(cfg: DictConfig) -> None:
    """``recovery=equal``, applied to ``cfg`` in place before anything reads it: every
    planner's ``max_replans`` set to ReAct's turn cap (replans as uncapped as ReAct's turns),
    the replanner the default model itself (its ``error_scale`` 1, its prices and latency),
    and, unless one is set, an LLM-call budget of that many calls per episode for every
    planner alike. ``recovery=article`` (the default) changes nothing. Idempotent."""
    mode = OmegaConf.select(cfg, "recovery", default="article")
    if mode not in RECOVERIES:
        raise ConfigError(f"recovery={mode}: must be one of {', '.join(RECOVERIES)}")
    if mode == "article":
        return
    cap = int(OmegaConf.select(cfg, "equal_recovery_calls", default=40))
    for spec in (cfg.get("planner") or {}).values():
        if "max_replans" in spec:
            spec.max_replans = cap
    models = OmegaConf.select(cfg, "llm.models")
    if models is not None and "replanner" in models and "default" in models:
        models.replanner = copy.deepcopy(models.default)
    if OmegaConf.select(cfg, "budget.max_llm_calls_per_episode") is None:
        OmegaConf.update(cfg, "budget.max_llm_calls_per_episode", cap, force_add=True)


def validate(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config, checked against its schema (and the LLM's skill and model
    profiles); raises :class:`ConfigError` naming key, value and what is allowed."""
    apply_recovery(cfg)
    container = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(container, dict)
    container.pop("hydra", None)
    study = container.get("study")
    if study is not None and study not in study_names():
        raise ConfigError(f"study={study}: no such study; registered: {', '.join(study_names())}")
    # a study's own parameters sit under its name; the schema checks the rest
    settings = validated(RunSettings, {k: v for k, v in container.items() if k != study}, "")
    # the skill profile with its overrides; the backend's key (a dry run needs none)
    BackendFactory(container["llm"], check_key=not settings.dry_run)
    model_profiles(container["llm"])
    check_cost_cap(container)  # a cost cap needs the model's price
    if isinstance(settings.workers, int) and settings.workers > 1 and not settings.dry_run:
        if container["llm"].get("backend", "sim") != "sim":
            raise ConfigError(
                f"workers={settings.workers}: worker processes run the simulated LLM; a real "
                "LLM's episodes overlap in one process with concurrency=N (and "
                "llm.max_concurrency)"
            )
        if settings.budget.max_cost_usd is not None:
            raise ConfigError(
                f"workers={settings.workers} with budget.max_cost_usd: the cost cap charges "
                "episodes in job order in one process; drop one of them"
            )
    return container


def prepare(cfg: DictConfig, container: dict[str, Any] | None = None) -> Prepared:
    """Validate the whole config and build everything an episode needs (planners, envs,
    faults, jobs) before any episode runs; nothing is touched on disk."""
    container = container or validate(cfg)
    parallel = OmegaConf.select(cfg, "executor.parallel")
    if parallel is not None:  # the ablation switch: one value for every plan planner
        for spec in cfg.planner.values():
            if "parallel" in spec:
                spec.parallel = bool(parallel)
    planners: dict[str, Planner] = instantiate_group(cfg.planner, "planner")
    envs: dict[str, Env] = instantiate_group(cfg.env, "env")
    if not planners or not envs:
        raise ConfigError("select at least one planner and one env")
    grading = str(container.get("grading", "facts"))
    for env in envs.values():  # one grading policy for every built-in env (envs/grading.py)
        if hasattr(env, "grading"):
            env.grading = grading
    for name, env in envs.items():  # a family file's content is part of the run's identity
        spec = container.get("env", {}).get(name)
        if isinstance(spec, dict) and spec.get("path") is not None and hasattr(env, "digest"):
            spec[FAMILY_DIGEST] = env.digest  # (the path alone: an edited file resumed)
    faults = fault_config(cfg)
    try:
        cells = shard_of(cells_of(container), container)
        labels = cell_labels(cells)
    except (KeyError, ValueError) as exc:
        raise ConfigError(f"study={container.get('study')}: {exc.args[0]}") from None
    contexts = [context_for(cfg, container, planners, envs, faults, c) for c in cells]
    jobs = build_jobs(cfg, planners, envs, faults, cells=labels)
    plugins = plugin_sources([*planners.values(), *envs.values()])
    return Prepared(cfg, container, planners, envs, faults, jobs, contexts, plugins)
