"""Replays a run dir's episodes with an observer on the LLM backend: every request becomes a
:class:`~planarena.experiments.calibrate.registry.Decision`.

The run is replayed from its own saved config (``.hydra/config.yaml``) through the one episode
loop, so the planners send exactly the requests they sent when the run was made. A simulated
run is replayed with its simulator; a real-model run against its response cache
(``llm.cache_dir``, or ``cache=``), with no server: a request the cache does not hold stops the
replay with :class:`CacheMiss`, naming the episode.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from planarena.envs.base import Env, Task
from planarena.experiments.calibrate.oracle_view import OracleView
from planarena.experiments.calibrate.registry import Decision
from planarena.experiments.run import recording
from planarena.experiments.run.episode import run_episode
from planarena.experiments.run.llm_factory import ConfigError, model_profiles
from planarena.experiments.run.prepare import prepare, validate
from planarena.experiments.studies.sim_vs_real import held_out
from planarena.planners.formats import PLAN_REVISION
from planarena.planners.llm.base import Completion, LLMBackend, Message, Request
from planarena.planners.llm.profiles import ModelProfile
from planarena.planners.llm.protocol import RequestContext

SPLITS = ("fit", "held_out", "all")


class CacheMiss(RuntimeError):
    """A real-model run's request is not in its response cache: the replay cannot go on
    without a server (the message names the episode)."""


class RunDirError(RuntimeError):
    """A run dir that cannot be replayed (no saved config, an unreadable one)."""


def in_split(task_id: str, split: str) -> bool:
    """Whether a task belongs to ``split``: ``held_out`` (:func:`held_out`: task index plus
    complexity rank odd), ``fit`` (the others), ``all``."""
    if split == "all":
        return True
    return held_out(task_id) == (split == "held_out")


def snapshot(context: RequestContext | None) -> RequestContext | None:
    """A copy of a request's context that later changes by the planner cannot touch (a
    transcript list that grows, a partial plan edited in place)."""
    if context is None:
        return None
    return replace(
        context,
        observations=None if context.observations is None else tuple(context.observations),
        plan=None if context.plan is None else copy.deepcopy(list(context.plan)),
        candidates=None if context.candidates is None else copy.deepcopy(list(context.candidates)),
        pending=tuple(context.pending),
        reflections=tuple(context.reflections),
    )


@dataclass
class Episode:
    """What the observer knows of the episode it watches."""

    planner: str
    env: str
    complexity: str
    task_id: str
    trial: int

    @property
    def name(self) -> str:
        return f"{self.planner} on {self.env}/{self.complexity}/{self.task_id} trial {self.trial}"


class Observer:
    """Wraps one episode's backend: passes every request through and records it."""

    name = "observer"

    def __init__(
        self,
        inner: LLMBackend,
        view: OracleView,
        episode: Episode,
        scales: Mapping[str, float],
        sink: Callable[[Decision], None],
        *,
        cache_only: bool = False,
        plan_revision: int = PLAN_REVISION,
    ) -> None:
        self.inner = inner
        self.plan_revision = plan_revision
        self.view = view
        self.episode = episode
        self.scales = scales
        self.sink = sink
        self.cache_only = cache_only
        self.native_tools = getattr(inner, "native_tools", False)
        self.index = 0
        self.missed: str | None = None
        self.first: dict[tuple[str, float], str] = {}  # each prompt's first answer

    def _check_cached(
        self, messages: Sequence[Message], request: Request, tools: Sequence[Any] | None
    ) -> None:
        inner: Any = self.inner
        path = inner.cache_path(messages, request, tools)
        if path is None or not path.exists():
            self.missed = (
                f"no cached response for request {self.index} ({request.kind}) of "
                f"{self.episode.name}" + ("" if path is None else f" (expected {path})")
            )
            raise CacheMiss(self.missed)

    async def generate(
        self,
        messages: Sequence[Message],
        *,
        role: str,
        model: ModelProfile,
        request: Request,
        tools: Sequence[Any] | None = None,
    ) -> Completion:
        if self.cache_only:
            self._check_cached(messages, request, tools)
        extra = {"tools": tools} if tools else {}
        out = await self.inner.generate(messages, role=role, model=model, request=request, **extra)
        e = self.episode
        tokens = request.o200k_prompt
        scale = float(self.scales.get(role, self.scales.get("default", 1.0)))
        text = str(out.text)
        first = self.first.setdefault((request.digest, scale), text)
        same = None if request.occurrence == 0 else first == text
        self.sink(
            Decision(
                kind=str(request.kind),
                role=role,
                context=snapshot(request.context),
                text=text,
                prompt_tokens=int(tokens or 0),
                occurrence=request.occurrence,
                index=self.index,
                planner=e.planner,
                env=e.env,
                complexity=e.complexity,
                task_id=e.task_id,
                trial=e.trial,
                view=self.view,
                error_scale=scale,
                same_as_first=same,
                plan_revision=self.plan_revision,
            )
        )
        self.index += 1
        return out


def load_config(run_dir: Path, cache: str | None = None) -> Any:
    """The run's saved config, with ``llm.cache_dir`` replaced by ``cache`` if given."""
    path = run_dir / ".hydra" / "config.yaml"
    if not path.exists():
        raise RunDirError(f"{run_dir}: no .hydra/config.yaml (not a run dir made by planarena)")
    cfg = OmegaConf.load(path)
    for env, family in recording.pinned_families(run_dir.parent).items():
        if env in (cfg.get("env") or {}):  # a recording's envs as it was made
            cfg.env[env].path = str(family)
    chosen_with = recording.pinned_map(run_dir.parent)
    if chosen_with is not None and "auto" in (cfg.get("planner") or {}):
        cfg.planner.auto.map_path = str(chosen_with)  # the map auto chose with when recorded
    if cache is not None:
        if cfg.llm.get("backend", "sim") != "openai":
            raise RunDirError(f"{run_dir}: --cache is for a real-model run (this one is sim)")
        cfg.llm.cache_dir = str(cache)
    return cfg


def recorded(run_dir: Path) -> set[tuple[str, str, int]] | None:
    """(planner, task_id, trial) of the episodes the run recorded and measured (None when
    the run has no episodes.jsonl: every job of its config is replayed)."""
    path = run_dir / "episodes.jsonl"
    if not path.exists():
        return None
    out = set()
    with path.open() as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            if r.get("failure_mode") == "infrastructure_error":
                continue
            out.add((r["planner"], r["task_id"], int(r["trial"])))
    return out


def decisions(
    run_dir: str | Path, *, cache: str | None = None, split: str = "fit"
) -> Iterator[Decision]:
    """Every LLM request of the run's episodes on ``split``'s tasks, as decisions."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    run_dir = Path(run_dir)
    cfg = load_config(run_dir, cache)
    try:
        container = validate(cfg)
        prepared = prepare(cfg, container)
    except ConfigError as exc:
        raise RunDirError(f"{run_dir}: its config does not validate: {exc}") from None
    llm_cfg = container["llm"]
    real = llm_cfg.get("backend", "sim") != "sim"
    if real and not llm_cfg.get("cache_dir"):
        raise RunDirError(f"{run_dir}: a real-model run needs its response cache (--cache DIR)")
    # the error scale the simulator applied per role (a real model's roles are one model)
    scales = {r: (1.0 if real else m.error_scale) for r, m in model_profiles(llm_cfg).items()}
    keep = recorded(run_dir)
    out: list[Decision] = []
    for job in prepared.jobs:
        task_id = job.ref.task_id
        if not in_split(task_id, split):
            continue
        if keep is not None and (job.planner_name, task_id, job.trial) not in keep:
            continue
        ctx = prepared.contexts[job.cell]
        episode = Episode(job.planner_name, job.ref.env, job.ref.complexity, task_id, job.trial)
        watched: list[Observer] = []

        def backend_for(
            env: Env, task: Task, seed_keys: tuple[object, ...], _ctx: Any = ctx,
            _episode: Episode = episode, _watched: list[Observer] = watched,
        ) -> LLMBackend:  # fmt: skip
            inner = _ctx.backend_for(env, task, seed_keys)
            view = OracleView(env.oracle(task), seed_keys)
            observer = Observer(
                inner,
                view,
                _episode,
                scales,
                out.append,
                cache_only=real,
                plan_revision=_ctx.plan_revision,
            )
            _watched.append(observer)
            return observer

        asyncio.run(run_episode(replace(ctx, backend_for=backend_for), job))
        for observer in watched:
            if observer.missed is not None:
                raise CacheMiss(observer.missed)
        yield from out
        out.clear()


def observe(run_dir: str | Path, cache: str | None = None, split: str = "fit") -> list[Decision]:
    """Every LLM request of the run's episodes on ``split``'s tasks (see :func:`decisions`)."""
    return list(decisions(run_dir, cache=cache, split=split))
