"""planarena from Python: run a job, read records, play one episode, list the registries.

Each function does what the ``planarena`` command does, through the same code: the config is
composed by Hydra from ``pkg://planarena.configs`` and the config trees of the
``planarena.configs`` entry-point group, checked by the command's one-line checks, validated,
and run by the command's own job function. Nothing here is imported by the rest of planarena.
"""

from __future__ import annotations

import asyncio
import os
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd
    from omegaconf import DictConfig

__all__ = [
    "RunError",
    "compose",
    "env_names",
    "episode",
    "load",
    "options",
    "planner_names",
    "run",
    "study_names",
]


class RunError(RuntimeError):
    """A job that did not run to its end, with the command's exit status (2: a config or
    run-dir error, nothing ran; 3: stopped by an infrastructure or repeated error) and its
    one-line message (the line the command prints)."""

    def __init__(self, exit_status: int, message: str) -> None:
        super().__init__(message)
        self.exit_status = exit_status
        self.message = message


def _with_plugins(overrides: Sequence[str] | None) -> list[str]:
    """The overrides with the plugin trees on the search path, refused in one line (a
    :class:`RunError`, exit status 2) where the command would refuse them."""
    from planarena.experiments.run.overrides import (
        secret_on_command_line,
        unknown_group_choice,
        unknown_key_override,
    )
    from planarena.experiments.run.plugins import discover, with_plugin_searchpath

    args = list(overrides or [])
    flags = [a for a in args if a.startswith("-")]
    if flags:  # -m, --cfg, -cd: the command's; a search path is hydra.searchpath=[...] here
        raise RunError(2, f"planarena: {flags[0]}: flags are the command's; pass overrides")
    packages, broken = discover()
    for why in broken:
        warnings.warn(why, stacklevel=3)
    args = with_plugin_searchpath(args, packages)
    problem = (
        secret_on_command_line(args) or unknown_group_choice(args) or unknown_key_override(args)
    )
    if problem is not None:
        raise RunError(2, f"planarena: {problem}")
    return args


def _compose(args: list[str]) -> DictConfig:
    """The config Hydra composes for ``args`` (with its ``hydra`` node), as the command's;
    any Hydra already initialized in this process (a notebook's) is left as it was."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.initialize import get_gh_backup, restore_gh_from_backup

    import planarena.experiments.run.runner  # noqa: F401 - registers the run dir's resolvers

    backup = get_gh_backup()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module("planarena.configs", version_base="1.3"):
            return hydra_compose("config", overrides=args, return_hydra_config=True)
    finally:
        restore_gh_from_backup(backup)


def compose(overrides: Sequence[str] | None = None) -> DictConfig:
    """The job config the command composes for ``overrides`` (``["planner=react",
    "n_tasks=3"]``), plugin trees included, without Hydra's own node: to read, change and
    pass to :func:`run` as ``config=``. Refused overrides raise :class:`RunError`."""
    from omegaconf import open_dict

    cfg = _compose(_with_plugins(overrides))
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg


def run(
    overrides: Sequence[str] | None = None,
    *,
    config: DictConfig | None = None,
    run_dir: str | os.PathLike[str] | None = None,
) -> tuple[Path, pd.DataFrame]:
    """Run one job like ``planarena <overrides>``; returns its run dir and its records.

    ``config`` (from :func:`compose`, maybe changed) replaces ``overrides``. The run dir is
    ``run_dir``, else ``hydra.run.dir=`` of the overrides, else the command's default
    (``results/runs/<date>/<time>-<pid>`` under the working dir); a dir that holds records
    of the same configuration is resumed, as by the command. The job writes the same files
    and prints the same table; a job that stops raises :class:`RunError` (Ctrl-C:
    ``KeyboardInterrupt``), one that ends with unmeasured episodes or at its cost cap warns.
    """
    from omegaconf import open_dict

    if config is not None and overrides:
        raise TypeError("run() takes overrides or config=, not both")
    if config is None:
        cfg = _compose(_with_plugins(overrides))
        task_overrides = [str(o) for o in cfg.hydra.overrides.task]
    else:
        cfg = config.copy()
        if "hydra" not in cfg:  # the command's defaults: run dir, sweep dir, job name
            with open_dict(cfg):
                cfg.hydra = _compose(_with_plugins([])).hydra
        task_overrides = []
    out_dir = Path(run_dir if run_dir is not None else str(cfg.hydra.run.dir))
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(out_dir.resolve())
    return _execute(cfg, out_dir, task_overrides)


def _execute(cfg: DictConfig, out_dir: Path, task_overrides: list[str]) -> tuple[Path, Any]:
    """The command's job function on ``cfg`` (with its ``hydra`` node), with Hydra's job
    config set for its duration (the job saves it into ``.hydra/``)."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from planarena.experiments.run.runner import execute, write_status

    holder = HydraConfig.instance()
    before = holder.cfg
    holder.set_config(cfg)
    job = cfg.copy()
    with open_dict(job):
        del job["hydra"]
    try:
        code, message = execute(job, out_dir, in_sweep=False)
    finally:
        holder.cfg = before
    if code == 0 and job.get("dry_run"):  # an estimate: nothing was written
        return out_dir, _empty_frame()
    if code != 2:
        write_status(out_dir, code, message, task_overrides)
    if code == 130:
        raise KeyboardInterrupt(message)
    if code not in (0, 1, 5):
        raise RunError(code, message)
    if code:
        warnings.warn(message, stacklevel=3)
    return out_dir, load(out_dir)


def _empty_frame() -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame()


def load(
    run_dirs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    columns: Iterable[str] | None = None,
) -> pd.DataFrame:
    """The episode records of one or more run dirs, sweep dirs, files or globs, as one
    frame (``run_dir`` and, for runs whose overrides differ, one column per swept key);
    ``columns`` keeps only those of each record. A path with no records is an error."""
    from planarena.experiments.records.runs import with_run_defaults, with_swept_columns
    from planarena.experiments.records.store import concat_records, read_run, record_files

    paths = [run_dirs] if isinstance(run_dirs, (str, os.PathLike)) else list(run_dirs)
    files = [f for p in paths for f in record_files(Path(p))]  # none: FileNotFoundError
    keep = None if columns is None else tuple(columns)
    df = concat_records([read_run(f, columns=keep) for f in files])
    return with_run_defaults(with_swept_columns(df), df.columns)


def episode(
    planner: str,
    env: str,
    *,
    complexity: str = "simple",
    task: int = 0,
    seed: int = 0,
    skill: str = "strong",
    faults: str = "default",
    trial: int = 0,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One episode with the simulated LLM: planner ``planner`` on task number ``task`` of
    env ``env`` (config options by name, plugin trees included), built from the configs as
    the command builds them. Returns (record, trace): the record equals the line the command
    writes for this episode (its ``wall_s`` aside, and ``config_id`` empty: the episode
    belongs to no run), the trace its line of ``traces.jsonl``."""
    from planarena.experiments.run.episode import OneJob, run_episode
    from planarena.experiments.run.prepare import prepare

    args = [
        f"planner=[{planner}]",
        f"env=[{env}]",
        f"complexity={complexity}",
        f"faults={faults}",
        "llm=sim",
        f"llm.skill={skill}",
        f"seed={seed}",
        f"n_tasks={task + 1}",
        f"trials={trial + 1}",
    ]
    cfg = compose(args)
    prepared = prepare(cfg)
    made = prepared.envs[env].generate(
        1,
        seed=seed,
        complexity=complexity,
        unreachable_rate=prepared.faults.unreachable_rate,
        start=task,
    )
    job = OneJob(planner, env, made[0], trial)
    record, trace = asyncio.run(run_episode(prepared.contexts[0], job))
    return record.model_dump(), trace


def options(group: str) -> list[str]:
    """The options of a config group (``planner``, ``env``, ``llm``, ``faults``,
    ``experiment``): planarena's and the plugin trees'."""
    from planarena.experiments.run.overrides import search_path

    return search_path(_with_plugins([])).options(group)


def planner_names() -> list[str]:
    """Every planner a run can name (``planner=<name>``), plugin trees included."""
    return options("planner")


def env_names() -> list[str]:
    """Every env a run can name (``env=<name>``), plugin trees included."""
    return options("env")


def study_names() -> list[str]:
    """Every registered study (its own and the ``planarena.studies`` entry points')."""
    from planarena.experiments.studies.registry import names

    return names()
