"""Command-line checks made before Hydra composes: a misspelt key, group option or a secret on
the command line is refused in one line."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from planarena.configs import CONFIG_DIR

CHECKED_GROUPS = ("planner", "env", "llm", "faults", "experiment")
"""Config groups whose options are files of the config search path: a typo in one is refused
with one line before Hydra composes (Hydra's own error is a block of text, and for the
optional ``experiment`` group no error at all: the job ran without it). The groups the root
config's defaults list names (``preset``, ...) are checked too: :func:`root_groups`."""

PACKAGED_GROUPS = ("planner", "env")
"""Groups whose options each sit at ``<group>.<option>`` (``# @package planner.react``); the
other groups' chosen option is the whole ``<group>`` node."""

WHOLE_NODE_GROUPS = ("llm", "faults")
"""Groups whose chosen option is the whole ``<group>`` node (their keys are checked against
the chosen option's file)."""


@lru_cache(maxsize=1)
def root_groups() -> tuple[tuple[str, ...], dict[str, str]]:
    """(the config groups planarena's root config chooses from, in its defaults order, with
    :data:`CHECKED_GROUPS`; the option it chooses for each group with one option by default:
    ``llm: sim``, ``faults: default``)."""
    node = OmegaConf.to_container(OmegaConf.load(CONFIG_DIR / "config.yaml"), resolve=False)
    entries = node.get("defaults", []) if isinstance(node, dict) else []
    groups: list[str] = []
    chosen: dict[str, str] = {}
    for entry in entries if isinstance(entries, list) else []:
        for name, value in entry.items() if isinstance(entry, dict) else []:
            group = str(name).split()[-1].lstrip("/")  # "optional experiment", "override /x"
            groups.append(group)
            if isinstance(value, str):
                chosen[group] = value
    return tuple(dict.fromkeys([*groups, *CHECKED_GROUPS])), chosen


_VALUE_FLAGS = ("-cd", "--config-dir", "-cp", "--config-path", "-cn", "--config-name")
"""Hydra's flags that take a value (``-cd DIR`` or ``-cd=DIR``): the value is no override."""

_OWN_PRIMARY = ("-cp", "--config-path", "-cn", "--config-name")
"""Flags that replace the root config: its keys are then not planarena's (left to Hydra)."""


@dataclass(frozen=True)
class SearchPath:
    """The config dirs Hydra will read, in its order: planarena's own tree, then a
    ``--config-dir``, then the ``hydra.searchpath`` entries (plugin trees among them).
    ``complete`` is False when an entry could not be read here (a package that is not
    importable, a schema other than ``pkg``/``file``): an option missing from ``dirs`` may
    then still exist, and only Hydra can tell."""

    dirs: tuple[Traversable, ...]
    complete: bool = True

    def options(self, group: str) -> list[str]:
        """Every option of ``group`` on the path (each once)."""
        names = {
            f.name[: -len(".yaml")]
            for d in self.dirs
            for f in _children(d.joinpath(group))
            if f.name.endswith(".yaml") and f.is_file()
        }
        return sorted(names)

    def option_file(self, group: str, option: str) -> Traversable | None:
        """The file Hydra reads for ``group=option``: the first dir's that has one."""
        for d in self.dirs:
            f = d.joinpath(group, f"{option}.yaml") if group else d.joinpath(f"{option}.yaml")
            if f.is_file():
                return f
        return None


def _children(d: Traversable) -> Iterator[Traversable]:
    return d.iterdir() if d.is_dir() else iter(())


def resolve_entry(entry: str) -> Traversable | None:
    """The dir a search-path entry names (``pkg://x.y`` through importlib.resources, as
    Hydra reads it; ``file://path`` or a plain path, relative to the working dir), or None
    when it cannot be read here."""
    scheme, sep, rest = entry.partition("://")
    if not sep:
        scheme, rest = "file", entry
    if scheme == "file":
        path = Path(rest)
        return path if path.is_dir() else None
    if scheme != "pkg":
        return None
    package = rest.replace("/", ".").rstrip(".")
    try:
        found = resources.files(package)
    except Exception:  # noqa: BLE001 - not importable (or broken): Hydra says it is unavailable
        return None
    return found if found.joinpath("__init__.py").is_file() else None  # Hydra requires it


def search_path(args: Sequence[str]) -> SearchPath:
    """The config search path a command line gives Hydra (planarena's tree first)."""
    entries: list[str] = []
    complete = True
    overrides, flags = split_args(args)
    for flag, value in flags:
        if flag in ("-cd", "--config-dir"):
            if value is None:
                complete = False
            else:
                entries.append(os.path.abspath(value))
    for arg in overrides:
        key = arg.split("=", 1)[0].lstrip("+~")
        if key != "hydra.searchpath":
            continue
        value = _searchpath_entries(arg)
        if value is None:
            complete = False
        else:
            entries += value
        break  # Hydra reads the first one only
    dirs: list[Traversable] = [CONFIG_DIR]
    for entry in entries:
        found = resolve_entry(entry)
        if found is None:
            complete = False
        else:
            dirs.append(found)
    return SearchPath(tuple(dirs), complete)


def _searchpath_entries(arg: str) -> list[str] | None:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        (parsed,) = OverridesParser.create().parse_overrides([arg])
    except Exception:  # noqa: BLE001 - a syntax error: Hydra's to report
        return None
    value = parsed.value()
    if parsed.is_sweep_override() or not isinstance(value, list):
        return None
    return [str(v) for v in value]


def split_args(args: Sequence[str]) -> tuple[list[str], list[tuple[str, str | None]]]:
    """(the overrides of a command line, its value-taking flags with their values). A flag's
    value is never read as an override (``-cd a=b``)."""
    overrides: list[str] = []
    flags: list[tuple[str, str | None]] = []
    items = list(args)
    i = 0
    while i < len(items):
        arg = items[i]
        i += 1
        flag, eq, value = arg.partition("=")
        if flag in _VALUE_FLAGS:
            if not eq:
                value = items[i] if i < len(items) else ""
                i += 1
            flags.append((flag, value or None))
        elif arg.startswith(("-cd", "--config-dir")):  # a spelling not read here (-cdDIR)
            flags.append(("-cd", None))
        elif not arg.startswith("-") and "=" in arg:
            overrides.append(arg)
    return overrides, flags


def active_search_path() -> SearchPath:
    """The search path of the running job (read from Hydra's ``runtime.config_sources``), or
    outside a job planarena's tree and the installed plugin trees."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        from planarena.experiments.run.plugins import plugin_searchpath

        return search_path([f"hydra.searchpath=[{','.join(plugin_searchpath())}]"])
    dirs: list[Traversable] = []
    complete = True
    for source in HydraConfig.get().runtime.config_sources:
        if source.provider in ("hydra", "schema") or source.schema == "structured":
            continue
        found = resolve_entry(f"{source.schema}://{source.path}")
        if found is None:
            complete = False
        else:
            dirs.append(found)
    return SearchPath(tuple(dirs), complete)


def group_options(group: str, path: SearchPath | None = None) -> list[str]:
    """The options of ``group`` on ``path`` (default: :func:`active_search_path`)."""
    return (path or active_search_path()).options(group)


def unknown_group_choice(args: Sequence[str]) -> str | None:
    """``group=value: ...`` for the first command-line choice of a config group that names no
    config file on the search path (a sweep's values and ``[a,b]`` lists each checked), else
    None. Left to Hydra when part of the search path cannot be read here."""
    if any(f in _OWN_PRIMARY for f, _ in split_args(args)[1]):
        return None
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import Glob

    overrides, _ = split_args(args)
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception:  # noqa: BLE001 - not ours to judge: Hydra reports its own syntax errors
        return None
    path: SearchPath | None = None
    for o in parsed:
        group = o.key_or_group
        groups, _ = root_groups()
        if group not in groups or "/" in group or o.is_delete():
            continue
        if isinstance(o.value(), Glob):
            continue
        if o.is_sweep_override():
            values = list(o.sweep_string_iterator())
        else:
            value = o.value()
            items = value if isinstance(value, list) else [value]
            if None in items:  # Hydra stops on it with a traceback
                return (
                    f"{o.input_line}: {group} cannot be null; to choose none, leave "
                    f"{group}= out (or delete the default with ~{group})"
                )
            values = [str(v) for v in items]
        path = path or search_path(args)
        options = path.options(group)
        for v in values:
            if v in options and group in PACKAGED_GROUPS:
                problem = _unpackaged(path, group, v)
                if problem is not None:
                    return problem
            if v in options:
                continue
            if not path.complete:
                return None  # a dir Hydra will read and we cannot may hold it
            return f"{group}={v}: no such {group} config; choose from {', '.join(options)}"
    return None


def _unpackaged(path: SearchPath, group: str, option: str) -> str | None:
    """The line refusing a planner or env option file without a ``# @package`` line: its
    keys would land in ``<group>`` itself, where the runner takes each key for an option
    (Hydra composes it; the job then stops on ``_target_``)."""
    found = path.option_file(group, option)
    if found is None or _package_of(found):
        return None
    return (
        f"{group}={option}: {found} has no '# @package {group}.{option}' first line; "
        f"without it its keys land in {group} itself"
    )


def unknown_key_override(args: Sequence[str]) -> str | None:
    """One line for the first command-line override of a key the config does not have
    (``n_taks=3``, ``planner.react.paralel=true``), naming the keys it could have meant;
    Hydra refuses these after composing, in a block of text, with exit status 1.

    Checked before Hydra composes, from the config files of the search path (planarena's,
    a ``--config-dir``, ``hydra.searchpath`` and plugin trees): the root config's keys, the
    group option files' keys, and those of a chosen experiment or preset (a ``_global_``
    option of a group the root config's defaults list names: it may add keys and choose
    options). Only a key that certainly does not exist is refused; anything this
    cannot settle (Hydra's own keys, an option with no file here, a key inside a value, a
    file whose ``# @package`` puts its keys elsewhere, another root config) is left to
    Hydra. ``+key=`` adds a key and is checked after composing, against the schema."""
    # Long on purpose: one walk from the command line down the config tree, each branch the
    # rule for one kind of key (root, packaged group option, chosen option, Hydra's own).
    overrides, flags = split_args(args)
    if not overrides or any(f in _OWN_PRIMARY for f, _ in flags):
        return None
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception:  # noqa: BLE001 - not ours to judge: Hydra reports its own syntax errors
        return None
    sp = search_path(args)
    groups, defaults = root_groups()
    chosen = {g: v for g, v in defaults.items() if g in WHOLE_NODE_GROUPS}
    given = {
        o.key_or_group: o.value()
        for o in parsed
        if o.key_or_group in groups
        and o.key_or_group not in PACKAGED_GROUPS
        and not o.is_sweep_override()
        and isinstance(o.value(), str)
    }
    known = _option_keys_at(CONFIG_DIR / "config.yaml")
    chosen.update({g: v for g, v in given.items() if g in WHOLE_NODE_GROUPS})
    for group in groups:  # in the defaults' order: a later choice (an experiment) wins
        option = given.get(group, defaults.get(group))
        if group in PACKAGED_GROUPS or group in WHOLE_NODE_GROUPS or option in (None, "null"):
            continue
        path = sp.option_file(group, str(option))
        if path is None:
            return None  # refused elsewhere, by name (or a dir we cannot read holds it)
        package = _package_of(path)
        if package == "_global_":  # adds keys and chooses options (preset, experiment)
            known.update(_option_keys_at(path))
            choices = _experiment_choices(path)
            chosen.update({g: v for g, v in choices.items() if g not in given})
        elif package in ("", group):
            known[group] = _option_keys_at(path)
        else:
            return None  # its keys sit where we cannot tell
    for o in parsed:
        key = o.key_or_group
        if o.is_add() or o.is_force_add() or o.is_delete() or o.package or "@" in key:
            continue
        if "/" in key:  # a nested config group's choice (hydra/launcher=joblib): Hydra's
            continue
        head, *path = key.split(".")
        note = ""  # the option a group's keys come from
        if head == "hydra" or not path:
            if head not in known and head != "hydra" and head not in groups:
                return _no_such_key(o.input_line, head, "", {**known, **dict.fromkeys(groups)})
            continue  # Hydra's own settings; a root key; a group choice (checked by name)
        group_file: Traversable | None
        if head in PACKAGED_GROUPS:
            option, *path = path
            where = f"{head}.{option}"
            group_file = sp.option_file(head, option)
            if group_file is not None and _package_of(group_file) != where:
                continue  # its keys sit elsewhere: Hydra's to judge
        elif head in WHOLE_NODE_GROUPS:
            where, note = head, f" (with {head}={chosen[head]})"
            group_file = sp.option_file(head, chosen[head])
            if group_file is not None and _package_of(group_file) not in ("", head):
                continue
        else:
            where, group_file = "", None
        if head in PACKAGED_GROUPS or head in WHOLE_NODE_GROUPS:
            if group_file is None or not path:
                continue  # an option with no file here, or the whole option replaced
            node: Any = _option_keys_at(group_file, partial(sp.option_file, head))
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


def _package_of(path: Traversable) -> str:
    """A config file's ``# @package``, read as Hydra reads its header (the ``# @key value``
    lines before any other line of the first 512 characters); "" when it has none."""
    with path.open("r", encoding="utf-8") as fh:
        head = fh.read(512)
    for line in head.splitlines():
        text = line.strip()
        if not text:
            continue
        if not re.match(r"^#\s*@", text):
            break
        key, _, value = text.lstrip("#").strip().partition(" ")
        if key == "@package":
            return value.strip()
    return ""


def _option_keys_at(
    path: Traversable,
    sibling: Callable[[str], Traversable | None] = lambda _name: None,
    depth: int = 0,
) -> dict[str, Any]:
    """What a config file puts in the config: its own keys and those of the options of its
    group it extends through its defaults list (``llm=local`` extends ``openai``)."""
    with path.open("r", encoding="utf-8") as fh:
        node = OmegaConf.to_container(OmegaConf.load(fh), resolve=False)
    if not isinstance(node, dict):
        return {}
    keys: dict[str, Any] = {}
    extends = (node.get("defaults") or []) if depth < 8 else []  # 8: a cycle's bound
    for entry in extends:
        base = sibling(entry) if isinstance(entry, str) and entry != "_self_" else None
        if base is not None:
            keys.update(_option_keys_at(base, sibling, depth + 1))
    keys.update({k: v for k, v in node.items() if k != "defaults"})
    return keys


def _experiment_choices(path: Traversable) -> dict[str, str]:
    """The llm and faults options a ``_global_`` file (an experiment, a preset) chooses
    (``override /llm: sim``)."""
    with path.open("r", encoding="utf-8") as fh:
        defaults = OmegaConf.to_container(OmegaConf.load(fh), resolve=False)
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
