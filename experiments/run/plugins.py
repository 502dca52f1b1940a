"""Config trees from other packages: the ``planarena.configs`` entry-point group.

A user's package names the package holding its Hydra config tree (``planner/``, ``env/``,
... option files) in this group (``my_pkg = "my_pkg.conf"``); the command and
``planarena.run`` put every such tree on Hydra's search path, after planarena's own (so a
built-in option keeps its name), and its options are then chosen like the built-in ones.
Nothing of the tree is imported but the package itself (as Hydra's ``pkg://`` does).
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Sequence
from importlib.metadata import entry_points

ENTRY_POINT_GROUP = "planarena.configs"
"""Entry-point group naming config-tree packages (the value: ``my_pkg.conf``)."""

SEARCHPATH_KEY = "hydra.searchpath"

_PLAIN = re.compile(r"^[\w./:~+-]+$")  # an entry Hydra's override grammar reads unquoted


def discover() -> tuple[list[str], list[str]]:
    """(packages of the group's entry points, in entry-point name order, each once; one
    line per entry point whose package cannot be found). A leftover entry point of an
    uninstalled package is skipped, not put on the search path, where Hydra would only warn
    and every option of the search path would become uncertain."""
    packages: list[str] = []
    problems: list[str] = []
    found = sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: (e.name, e.value))
    for entry in found:
        package = entry.module
        if package in packages:
            continue
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError) as exc:  # a parent package missing or broken
            spec, why = None, f"{type(exc).__name__}: {exc}"
        else:
            why = "no such package"
        if spec is None or not spec.submodule_search_locations:
            problems.append(
                f"entry point {entry.name} = {entry.value} ({ENTRY_POINT_GROUP}): {why}; skipped"
            )
            continue
        packages.append(package)
    return packages, problems


def plugin_searchpath(packages: Sequence[str] | None = None) -> list[str]:
    """The search-path entries of the plugin trees (``pkg://my_pkg.conf``)."""
    return [f"pkg://{p}" for p in (discover()[0] if packages is None else packages)]


def with_plugin_searchpath(args: Sequence[str], packages: Sequence[str] | None = None) -> list[str]:
    """``args`` with the plugin trees on Hydra's search path: merged into a given
    ``hydra.searchpath=[...]`` (its entries first, none twice; Hydra reads only the first
    such override), else added as one, beside the first override (Hydra's argument parser
    takes the overrides as one run of arguments: ``a=1 -m b=2`` is refused), or first when
    there is none (``--info`` would read a last one as its value). Unchanged when there is
    no plugin, or when the given override is not a plain list (Hydra reports that)."""
    extra = plugin_searchpath(packages)
    if not extra:
        return list(args)
    out = list(args)
    for i, arg in enumerate(out):
        given = _searchpath_value(arg)
        if given is None:
            continue
        if isinstance(given, str):  # not a list: Hydra's error, not ours to rewrite
            return out
        merged = [*given, *(e for e in extra if e not in given)]
        prefix = arg[: arg.index(SEARCHPATH_KEY)]
        out[i] = f"{prefix}{searchpath_override(merged)}"
        return out
    at = _first_override(out)
    at = 0 if at is None else at + 1
    return [*out[:at], searchpath_override(extra), *out[at:]]


_VALUE_FLAGS = ("-cd", "--config-dir", "-cp", "--config-path", "-cn", "--config-name")


def _first_override(args: Sequence[str]) -> int | None:
    """The index of the first override (``key=value``, not a flag's value), or None."""
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
        elif arg in _VALUE_FLAGS or arg == "--experimental-rerun":
            skip = True
        elif not arg.startswith("-") and "=" in arg:
            return i
    return None


def searchpath_override(entries: Sequence[str]) -> str:
    """``hydra.searchpath=[a,b]``, each entry quoted where Hydra's grammar needs it."""
    return f"{SEARCHPATH_KEY}=[{','.join(_quoted(e) for e in entries)}]"


def _quoted(entry: str) -> str:
    if _PLAIN.match(entry):
        return entry
    return f"'{entry}'" if "'" not in entry else f'"{entry}"'


def _searchpath_value(arg: str) -> list[str] | str | None:
    """The entries of a ``hydra.searchpath=`` override (a string when it is not a list of
    strings), None for any other argument."""
    if arg.startswith("-"):
        return None
    key = arg.split("=", 1)[0].lstrip("+~")
    if key != SEARCHPATH_KEY or "=" not in arg:
        return None
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        (parsed,) = OverridesParser.create().parse_overrides([arg])
    except Exception:  # noqa: BLE001 - a syntax error: Hydra's to report
        return arg
    value = parsed.value()
    if parsed.is_sweep_override() or not isinstance(value, list):
        return arg
    if not all(isinstance(v, str) for v in value):
        return arg
    return [str(v) for v in value]
