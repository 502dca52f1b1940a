"""Command-line checks made before Hydra composes: a misspelt key, group option or a secret on
the command line is refused in one line."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from planarena.configs import CONFIG_DIR

CHECKED_GROUPS = ("planner", "env", "llm", "faults", "experiment")
"""Config groups whose options are this package's files: a typo in one is refused with one
line before Hydra composes (Hydra's own error is a block of text, and for the optional
``experiment`` group no error at all: the job ran without it)."""


def group_options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml"))


def unknown_group_choice(args: Sequence[str]) -> str | None:
    """``group=value: ...`` for the first command-line choice of a config group that names no
    config file (a sweep's values and ``[a,b]`` lists each checked), else None. Skipped when
    the config search path is extended (other config dirs may hold the option)."""
    if any("searchpath" in a or a.startswith(("-cd", "--config-dir", "-cp")) for a in args):
        return None
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import Glob

    overrides = [a for a in args if not a.startswith("-") and "=" in a]
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception:  # noqa: BLE001 - not ours to judge: Hydra reports its own syntax errors
        return None
    for o in parsed:
        group = o.key_or_group
        if group not in CHECKED_GROUPS or o.is_delete():
            continue
        if isinstance(o.value(), Glob):
            continue
        if o.is_sweep_override():
            values = list(o.sweep_string_iterator())
        else:
            value = o.value()
            values = [str(v) for v in value] if isinstance(value, list) else [str(value)]
        options = group_options(group)
        for v in values:
            if v not in options and not (group == "experiment" and v == "null"):
                return f"{group}={v}: no such {group} config; choose from {', '.join(options)}"
    return None


PACKAGED_GROUPS = ("planner", "env")
"""Groups whose options each sit at ``<group>.<option>`` (``# @package planner.react``); the
other groups' chosen option is the whole ``<group>`` node."""


def unknown_key_override(args: Sequence[str]) -> str | None:
    """One line for the first command-line override of a key the config does not have
    (``n_taks=3``, ``planner.react.paralel=true``), naming the keys it could have meant;
    Hydra refuses these after composing, in a block of text, with exit status 1.

    Checked before Hydra composes, from the config files: the root config's keys, the
    group option files' keys, and those of a chosen experiment (which may add keys and
    choose options). Only a key that certainly does not exist is refused; anything this
    cannot settle (Hydra's own keys, an option with no file here, a key inside a value, an
    extended search path) is left to Hydra. ``+key=`` adds a key and is checked after
    composing, against the schema."""
    if any("searchpath" in a or a.startswith(("-cd", "--config-dir", "-cp")) for a in args):
        return None
    overrides = [a for a in args if not a.startswith("-") and "=" in a]
    if not overrides:
        return None
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception:  # noqa: BLE001 - not ours to judge: Hydra reports its own syntax errors
        return None
    chosen = {"llm": "sim", "faults": "default"}  # config.yaml's defaults
    given = {
        o.key_or_group: o.value()
        for o in parsed
        if o.key_or_group in ("llm", "faults", "experiment")
        and not o.is_sweep_override()
        and isinstance(o.value(), str)
    }
    known = _option_keys_at(CONFIG_DIR / "config.yaml")
    experiment = given.pop("experiment", None)
    if experiment not in (None, "null"):
        path = CONFIG_DIR / "experiment" / f"{experiment}.yaml"
        if not path.is_file():
            return None  # refused elsewhere, by name
        known.update(_option_keys_at(path))
        chosen.update(_experiment_choices(path))
    chosen.update(given)
    for o in parsed:
        key = o.key_or_group
        if o.is_add() or o.is_force_add() or o.is_delete() or o.package or "@" in key:
            continue
        if "/" in key:  # a nested config group's choice (hydra/launcher=joblib): Hydra's
            continue
        head, *path = key.split(".")
        note = ""  # the option a group's keys come from
        if head == "hydra" or not path:
            if head not in known and head != "hydra" and head not in CHECKED_GROUPS:
                return _no_such_key(
                    o.input_line, head, "", {**known, **dict.fromkeys(CHECKED_GROUPS)}
                )
            continue  # Hydra's own settings; a root key; a group choice (checked by name)
        if head in PACKAGED_GROUPS:
            option, *path = path
            where = f"{head}.{option}"
            group_file = CONFIG_DIR / head / f"{option}.yaml"
        elif head in ("llm", "faults"):
            where, note = head, f" (with {head}={chosen[head]})"
            group_file = CONFIG_DIR / head / f"{chosen[head]}.yaml"
        else:
            where, group_file = "", None
        if group_file is not None:
            if not group_file.is_file() or not path:
                continue  # an option with no file here, or the whole option replaced
            node: Any = _option_keys_at(group_file)
        else:
            node, path = known, [head, *path]
        for part in path:
            if not isinstance(node, dict):
                break  # inside a value (a list, a string): Hydra's to judge
            if part not in node:
                return _no_such_key(o.input_line, part, where, node, note)
            node = node[part]
            where = f"{where}.{part}" if where else part
    return None


def _option_keys_at(path: Path) -> dict[str, Any]:
    """What a config file puts in the config: its keys but its defaults list."""
    node = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    return {k: v for k, v in node.items() if k != "defaults"} if isinstance(node, dict) else {}


def _experiment_choices(path: Path) -> dict[str, str]:
    """The llm and faults options an experiment file chooses (``override /llm: sim``)."""
    defaults = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    out = {}
    entries = defaults.get("defaults", []) if isinstance(defaults, dict) else []
    for entry in entries if isinstance(entries, list) else []:
        for name, value in entry.items() if isinstance(entry, dict) else []:
            group = str(name).removeprefix("override").strip().lstrip("/")
            if group in ("llm", "faults") and isinstance(value, str):
                out[group] = value
    return out


def _no_such_key(line: str, part: str, where: str, node: dict[str, Any], note: str = "") -> str:
    from difflib import get_close_matches

    names = sorted(str(k) for k in node if not str(k).startswith("_"))
    near = get_close_matches(part, names, n=1)
    hint = f"; did you mean {near[0]}?" if near else ""
    scope = f" in {where}{note}" if where else ""
    return f"{line}: no key {part!r}{scope}{hint} (keys: {', '.join(names)})"


def secret_on_command_line(args: Sequence[str]) -> str | None:
    """One line refusing an override that would put a secret into the config
    (``+llm.api_key=sk-...``, or the key pasted as ``llm.api_key_env``), checked before
    Hydra writes anything (a sweep's ``multirun.yaml`` lists its overrides); never shows
    the value."""
    from planarena.experiments.run.llm_factory import secret_in_config

    for arg in args:
        if arg.startswith("-") or "=" not in arg:
            continue
        key, value = arg.split("=", 1)
        *head, last = key.lstrip("+~").split(".")
        problem = secret_in_config({last: value}, ".".join(head) or "llm")
        if problem is not None:
            return problem
    return None


