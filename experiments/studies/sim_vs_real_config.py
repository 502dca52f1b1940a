"""The ``sim_vs_real`` job's config, taken from the recorded run it is compared with.

A comparison is fair only when the simulator plays the real run's own episodes: the same
planners (with their settings), envs, complexities, tasks, seed, trials, faults and budget.
Typing them again on the command line is how they drift apart, so they are copied from the
real run's ``.hydra/config.yaml`` into the job's config before the job starts, by a Hydra
callback that ``configs/experiment/sim_vs_real.yaml`` installs (:class:`MirrorRealRun`; it
runs before Hydra makes the run dir, so a refused job leaves nothing behind). The study then
checks the job's config against the real run's again (:func:`mismatch`), so a config that
did not come through the callback (``planarena.run`` from Python) is refused, never compared.
"""

from __future__ import annotations

import copy
import functools
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict
from planarena.experiments.records.identity import FAMILY_DIGEST, SETTINGS_SINCE
from planarena.planners.llm.profiles import SKILLS, SkillProfile

if TYPE_CHECKING:
    import pandas as pd

BLOCK = "sim_vs_real"
PROFILE_NAME = "profile.yaml"
"""Where a fitted profile sits by default: beside the real run dir (``<real_run>/../``)."""

MIRRORED: tuple[str, ...] = (
    "planner",
    "env",
    "complexity",
    "n_tasks",
    "seed",
    "trials",
    "trial_faults",
    "faults",
    "budget.max_tokens_per_episode",
    "budget.max_llm_calls_per_episode",
    "concurrent_llm_calls",
    "executor",
)
"""The keys that make the real run's episodes what they are, copied as they are. A cost cap
(``budget.max_cost_usd``) is not: it prices a real model, and the simulator costs nothing."""


FAMILY_DIGEST_KEYS = (FAMILY_DIGEST,)
"""Keys the runner adds to a family-file env's spec (its content's digest): not the user's."""


COMPLEXITY_RANK: Mapping[str, int] = {"simple": 0, "medium": 1, "complex": 2}
"""A complexity's rank in :func:`held_out` (any other name ranks 0)."""


def held_out(task_id: str) -> bool:
    """True iff ``k + r`` is odd, ``k`` the integer after ``task_id``'s last '-' and ``r``
    the rank of the part before it (:data:`COMPLEXITY_RANK`): the tasks sim_vs_real compares
    on; calibration fits on the others, so the two never overlap. With one task per (env,
    complexity) cell the medium tasks are held out and the fit sees simple and complex (the
    held-out tasks lie between fitted ones); with two or more, every cell splits in half."""
    head, _, index = task_id.rpartition("-")
    rank = COMPLEXITY_RANK.get(head.rpartition("-")[2], 0)
    return (int(index) + rank) % 2 == 1


def split(df: pd.DataFrame, *, held: bool) -> pd.DataFrame:
    """The records of the held-out tasks (``held``) or of the fitted half."""
    mask = df["task_id"].astype(str).map(held_out)
    return df[mask if held else ~mask].reset_index(drop=True)


class SimVsRealError(ValueError):
    """A ``sim_vs_real`` input that is missing or does not fit (one line)."""


def repo_root() -> Path:
    """The repository (or installed tree) holding ``planarena``'s top-level folders, against
    which the default recording's relative path is read."""
    return Path(__file__).resolve().parents[2]


def resolve_path(value: str | Path, key: str) -> Path:
    """``value`` as an existing path: absolute as given, else relative to the working dir
    if something is there, else to the repository root; a :class:`SimVsRealError` naming
    ``key`` and both places when neither holds it."""
    path = Path(str(value)).expanduser()
    candidates = [path] if path.is_absolute() else [Path.cwd() / path, repo_root() / path]
    for c in candidates:
        if c.exists():
            return c.resolve()
    where = " or ".join(str(c) for c in candidates)
    raise SimVsRealError(f"{BLOCK}.{key}={value}: no such file or dir ({where})")


def real_run_dir(block: Mapping[str, Any] | None) -> Path:
    """The real run dir named by the study's block (``configs/experiment/sim_vs_real.yaml``
    names the shipped recording), checked to be a run dir (``.hydra/config.yaml`` and
    ``episodes.jsonl``)."""
    value = (block or {}).get("real_run")
    if not value:
        raise SimVsRealError(f"{BLOCK}.real_run: name the recorded run dir to compare with")
    path = resolve_path(value, "real_run")
    for need in (Path(".hydra") / "config.yaml", Path("episodes.jsonl")):
        if not (path / need).is_file():
            raise SimVsRealError(
                f"{BLOCK}.real_run={value}: {path} is not a run dir (no {need.as_posix()})"
            )
    return path


def profile_of(block: Mapping[str, Any] | None, real_run: Path) -> str:
    """The skill the simulator plays: a fitted profile's path (``.yaml``/``.yml``; default
    ``<real_run>/../profile.yaml``), made absolute, or a named skill (``strong``, ``weak``:
    what the uncalibrated simulator predicts)."""
    value = (block or {}).get("profile")
    if value is None:
        default = real_run.parent / PROFILE_NAME
        if not default.is_file():
            raise SimVsRealError(
                f"{BLOCK}.profile: no fitted profile at {default} (the default, beside the real "
                f"run); fit one with planarena-calibrate {real_run} --out {default}, or name "
                f"one with {BLOCK}.profile=PATH.yaml (or a named skill, e.g. strong)"
            )
        return str(default)
    text = str(value)
    if text.endswith((".yaml", ".yml")):
        return str(resolve_path(text, "profile"))
    return text


def real_config(real_run: Path) -> dict[str, Any]:
    """The real run's config (``.hydra/config.yaml``, interpolations resolved); a fresh copy,
    read once per file version (the job reads it at its start, its cells and its render)."""
    path = real_run / ".hydra" / "config.yaml"
    stat = path.stat()
    return copy.deepcopy(_read_config(path, stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=8)
def _read_config(path: Path, mtime_ns: int, size: int) -> dict[str, Any]:
    del mtime_ns, size  # the cache key: an edited file is read again
    real_run = path.parent.parent
    loaded = OmegaConf.load(path)
    container = OmegaConf.to_container(loaded, resolve=True)
    if not isinstance(container, dict):
        raise SimVsRealError(f"{real_run}/.hydra/config.yaml: not a mapping")
    if container.get("study"):
        raise SimVsRealError(
            f"{BLOCK}.real_run={real_run}: a run of study {container['study']}; compare a "
            "plain run (one cell)"
        )
    return container


def _get(config: Mapping[str, Any], dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _bare(value: Any) -> Any:
    """``value`` without what the runner adds (env digests), lists and mappings compared as
    plain JSON-like values."""
    if isinstance(value, Mapping):
        return {str(k): _bare(v) for k, v in value.items() if k not in FAMILY_DIGEST_KEYS}
    if isinstance(value, (list, tuple)):
        return [_bare(v) for v in value]
    return value


def mirrored(real: Mapping[str, Any], real_run: Path | None = None) -> dict[str, Any]:
    """The real run's values of :data:`MIRRORED` and of the keys added since the first
    recordings (``SETTINGS_SINCE``: grading, plan revision, recovery; a run made before a key
    gets its value then) (dotted key -> value); with ``real_run``, its envs on the tasks it was
    made on (:func:`pinned_env`)."""
    out = {key: _bare(_get(real, key)) for key in MIRRORED}
    for key, before in SETTINGS_SINCE.items():
        value = _get(real, key)
        out[key] = before if value is None else _bare(value)
    if real_run is not None and isinstance(out.get("env"), dict):
        out["env"] = pinned_env(out["env"], real_run)
    if real_run is not None and isinstance(out.get("planner"), dict):
        out["planner"] = pinned_planners(out["planner"], real_run)
    return out


def pinned_planners(planners: Mapping[str, Any], real_run: Path) -> dict[str, Any]:
    """``planners`` with auto reading the decision map a recording carries (a map reinstalled
    since would choose other strategies for the same tasks), as replay and calibration do."""
    from planarena.experiments.records.recorded_families import pinned_map

    out = copy.deepcopy(dict(planners))
    chosen_with = pinned_map(real_run.parent)
    if chosen_with is not None and isinstance(out.get("auto"), dict):
        out["auto"]["map_path"] = str(chosen_with)
    return out


def pinned_env(env: Mapping[str, Any], real_run: Path) -> dict[str, Any]:
    """``env`` with each family file a recording carries in place of the shipped one (a
    family edited since would give other tasks under the same ids), as replay and
    calibration read them. A run that is not a packed recording carries none."""
    from planarena.experiments.records.recorded_families import pinned_families

    out = copy.deepcopy(dict(env))
    for name, family in pinned_families(real_run.parent).items():
        if isinstance(out.get(name), dict):
            out[name]["path"] = str(family)
    return out


def mismatch(
    config: Mapping[str, Any], real: Mapping[str, Any], real_run: Path | None = None
) -> str | None:
    """The first mirrored key whose value in the job's ``config`` differs from the real
    run's (``real_run``: its envs pinned to its own family files), as one line, else None."""
    want = mirrored(real, real_run)
    for key, value in want.items():
        have = _bare(_get(config, key))
        if isinstance(value, list) != isinstance(have, list) and key == "complexity":
            value, have = _as_list(value), _as_list(have)
        if have != value:
            return (
                f"{key} is {_short(have)} here but {_short(value)} in the real run; run it as "
                f"planarena experiment=sim_vs_real (the real run's settings are copied in)"
            )
    llm = config.get("llm") or {}
    if llm.get("backend", "sim") != "sim":
        return f"llm.backend={llm.get('backend')}: sim_vs_real runs the simulator (llm=sim)"
    return None


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def mirror_into(cfg: DictConfig) -> None:
    """Copy the real run's settings and the profile into the composed ``cfg`` in place."""
    block = OmegaConf.to_container(cfg.get(BLOCK) or {}, resolve=True)
    assert isinstance(block, dict)
    real_run = real_run_dir(block)
    real = real_config(real_run)
    profile = profile_of(block, real_run)
    with open_dict(cfg):
        for key, value in mirrored(real, real_run).items():
            OmegaConf.update(cfg, key, value, merge=False, force_add=True)
        cfg[BLOCK].real_run = str(real_run)
        cfg[BLOCK].profile = profile
        cfg.llm.skill = profile
        same_roles(cfg, real)
    holdout = holdout_of(block)
    if holdout is not None and not block.get(HOLDOUT_FIT_KEY):
        from planarena.experiments.studies.sim_vs_real_holdout import fit_on_planners

        planners = list(real.get("planner") or {})
        fitted = fit_on_planners(real_run, holdout.chosen(planners)[0], block.get("calibrate"))
        with open_dict(cfg):
            cfg[BLOCK][HOLDOUT_FIT_KEY] = fitted


def same_roles(cfg: DictConfig, real: Mapping[str, Any]) -> None:
    """The roles' skill as in the real run: a simulated stand-in's model profiles are copied;
    a real model answered every role itself, so no role is simulated weaker (error_scale 1)."""
    real_llm = real.get("llm") or {}
    if real_llm.get("backend", "sim") == "sim" and real_llm.get("models"):
        OmegaConf.update(cfg, "llm.models", real_llm["models"], merge=False, force_add=True)
        return
    for role in cfg.llm.get("models") or {}:
        cfg.llm.models[role].error_scale = 1.0


FITTED = "fitted"
"""The cell (and profile label) of the fitted profile: the first cell, the job's reference."""
HOLDOUT = "holdout"
"""The cell of the profile fitted on the hold-out's fit planners only."""
HOLDOUT_FIT_KEY = "holdout_fitted"
"""Where :func:`mirror_into` puts the hold-out's fit (its fields, the planners and episodes it
read) in the study's block: the profile travels in the run's config, so a report made again
from the records (``planarena-report``) plays the same profile without fitting again."""


@dataclass(frozen=True)
class NullProfile:
    """An unfitted profile the fitted one must beat: a named skill or a profile file
    (``skill``), with some fields set (``overrides``)."""

    name: str
    skill: str
    overrides: Mapping[str, Any] = field(default_factory=dict)

    def cell_overrides(self) -> dict[str, Any]:
        """The config overrides of its cell: the skill, and each field set."""
        out: dict[str, Any] = {"llm.skill": self.skill}
        out.update({f"llm.skill_overrides.{k}": v for k, v in self.overrides.items()})
        return out

    def describe(self) -> str:
        """``strong``, or ``strong with p_correct 0.1, p_malformed 0.4``."""
        base = Path(self.skill).name if self.skill.endswith((".yaml", ".yml")) else self.skill
        if not self.overrides:
            return f"`{base}`"
        fields = ", ".join(f"`{k}` {v:g}" if isinstance(v, float) else f"`{k}` {v}"
                           for k, v in self.overrides.items())  # fmt: skip
        return f"`{base}` with {fields}"


def nulls_of(block: Mapping[str, Any]) -> tuple[NullProfile, ...]:
    """The block's ``nulls`` (a list of skill names, profile files, or mappings ``{name,
    skill, overrides}``), each checked to load as a skill profile; a ValueError (one line)
    names the entry that does not."""
    raw = block.get("nulls")
    if raw is None:
        return ()
    if not isinstance(raw, (list, tuple)):
        raise ValueError(f"{BLOCK}.nulls={raw!r}: a list of skills or {{name, skill, overrides}}")
    out: list[NullProfile] = []
    for item in raw:
        if isinstance(item, str):
            skill = str(resolve_path(item, "nulls")) if item.endswith((".yaml", ".yml")) else item
            null = NullProfile(Path(item).stem if skill != item else item, skill)
        elif isinstance(item, Mapping) and item.get("name"):
            skill = str(item.get("skill") or "strong")
            if skill.endswith((".yaml", ".yml")):
                skill = str(resolve_path(skill, "nulls"))
            null = NullProfile(str(item["name"]), skill, dict(item.get("overrides") or {}))
        else:
            raise ValueError(
                f"{BLOCK}.nulls: {item!r} is neither a skill nor a mapping with a name"
            )
        if null.name in (FITTED, HOLDOUT) or null.name in {n.name for n in out}:
            raise ValueError(f"{BLOCK}.nulls: the name {null.name!r} is taken; name it apart")
        try:
            skill_of(null.skill, null.overrides)
        except Exception as exc:  # noqa: BLE001 - a one-line refusal naming the entry
            raise ValueError(f"{BLOCK}.nulls: {null.name}: {exc}".splitlines()[0]) from None
        out.append(null)
    return tuple(out)


def skill_of(skill: str, overrides: Mapping[str, Any] | None = None) -> SkillProfile:
    """The profile a null plays (checked here, so a typo stops the job before any episode;
    the run builds it again itself): a shipped skill or a profile file, fields set."""
    import yaml

    if skill.endswith((".yaml", ".yml")):
        data = yaml.safe_load(Path(skill).read_text()) or {}
        base = {**SKILLS["strong"].model_dump(), **dict(data)}
    elif skill in SKILLS:
        base = SKILLS[skill].model_dump()
    else:
        raise ValueError(f"unknown skill {skill!r}; one of {sorted(SKILLS)} or a .yaml file")
    return SkillProfile(**{**base, **dict(overrides or {})})


@dataclass(frozen=True)
class Holdout:
    """The cross-planner hold-out: a profile fitted on the ``fit`` planners' episodes only
    predicts the ``predict`` planners (both as asked; :meth:`chosen` keeps the run's)."""

    fit: tuple[str, ...]
    predict: tuple[str, ...]

    def chosen(self, planners: list[str]) -> tuple[list[str], list[str]]:
        """(the fit planners, the predicted ones) the run has, in its order; a ValueError
        (one line) when either is empty."""
        fit = [p for p in planners if p in self.fit]
        predict = [p for p in planners if p in self.predict and p not in self.fit]
        if not fit or not predict:
            missing = []
            if not fit:
                missing.append(f"none of the fit planners {list(self.fit)}")
            if not predict:
                missing.append(f"none of the planners to predict {list(self.predict)}")
            raise SimVsRealError(
                f"{BLOCK}.holdout=planners: the real run has {' and '.join(missing)}; set "
                f"{BLOCK}.holdout_fit / holdout_predict, or {BLOCK}.holdout=null"
            )
        return fit, predict


HOLDOUTS = ("planners",)


def holdout_of(block: Mapping[str, Any]) -> Holdout | None:
    """The block's hold-out: ``holdout: planners`` with ``holdout_fit`` and
    ``holdout_predict``, or None (``holdout: null``)."""
    kind = block.get("holdout")
    if kind in (None, False, "none", "null"):
        return None
    if kind not in HOLDOUTS:
        raise ValueError(f"{BLOCK}.holdout={kind!r}: planners or null")
    fit, predict = block.get("holdout_fit") or [], block.get("holdout_predict") or []
    for key, value in (("holdout_fit", fit), ("holdout_predict", predict)):
        if not isinstance(value, (list, tuple)) or not value:
            raise ValueError(f"{BLOCK}.{key}={value!r}: a non-empty list of planner names")
    return Holdout(tuple(map(str, fit)), tuple(map(str, predict)))


@dataclass(frozen=True)
class Settings:
    """The study's block (``sim_vs_real:`` in the config), checked."""

    real_run: Path
    profile: str
    n_boot: int
    top_gaps: int
    min_gap: float
    nulls: tuple[NullProfile, ...] = ()
    holdout: Holdout | None = None
    holdout_fitted: Mapping[str, Any] | None = None
    """The hold-out's fit as :func:`mirror_into` left it in the config (fields, planners,
    episodes)."""

    @staticmethod
    def of(config: Mapping[str, Any]) -> Settings:
        """Read and check the block; a ValueError (one line) names what is wrong."""
        block = config.get(BLOCK) or {}
        real_run = real_run_dir(block)
        n_boot = block.get("n_boot", 2000)
        top = block.get("top_gaps", 3)
        min_gap = block.get("min_gap", 0.05)
        for key, value in (("n_boot", n_boot), ("top_gaps", top)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{BLOCK}.{key}={value!r}: a positive whole number")
        if isinstance(min_gap, bool) or not isinstance(min_gap, (int, float)) or min_gap < 0:
            raise ValueError(f"{BLOCK}.min_gap={min_gap!r}: a share in [0, 1]")
        return Settings(
            real_run,
            profile_of(block, real_run),
            n_boot,
            top,
            float(min_gap),
            nulls_of(block),
            holdout_of(block),
            block.get(HOLDOUT_FIT_KEY),
        )


def check_config(config: Mapping[str, Any], s: Settings) -> dict[str, Any]:
    """The real run's config, after checking that the job's config runs the real run's
    episodes (a ValueError naming the first key that differs)."""
    real = real_config(s.real_run)
    problem = mismatch(config, real, s.real_run)
    if problem is not None:
        raise ValueError(f"{BLOCK}: {problem}")
    return real


class MirrorRealRun(Callback):
    """Hydra callback of ``experiment=sim_vs_real``: the real run's settings into the job's
    config before Hydra makes the run dir; a missing or unfit input stops the command with
    one line and exit status 2, leaving nothing written."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        del kwargs
        try:
            mirror_into(config)
        except SimVsRealError as exc:
            _refuse(str(exc))
        except Exception as exc:  # noqa: BLE001 - Hydra would only warn and run the defaults
            _refuse(f"{BLOCK}: {type(exc).__name__}: {exc}")

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        del config, kwargs
        _refuse(
            f"{BLOCK}: one job per comparison; drop -m (each real run is compared in its own job)"
        )


def _refuse(message: str) -> None:
    print(f"planarena: {message}", file=sys.stderr)
    sys.exit(2)
