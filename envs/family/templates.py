"""The template language of a family file: ``{var}`` strings and generator mappings.

A value in a family file is a literal, a format string over the context (``{name}``,
``{parent.slug}``), or a generator (``{int: [lo, hi]}``, ``{choice: [...]}``, ``{children:
...}``, ``{ref: parent, path: [...]}``). A template error names the key it came from, so the
loader can report it before any episode runs.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\}")


class TemplateError(ValueError):
    """A template that cannot be expanded (an unknown variable, a malformed generator)."""


@dataclass(frozen=True)
class RefSpec:
    """A ``{ref: parent<k>, path: [...]}`` before it is resolved against the parent's result."""

    target: str  # "parent" (the first parent) or "parent<k>"
    path: tuple[str, ...]


def slugify(text: str) -> str:
    """A name as an identifier-like slug (``Load balancer 2`` -> ``load_balancer_2``)."""
    out = re.sub(r"[^a-z0-9]+", "_", str(text).lower()).strip("_")
    return out or "x"


def _lookup(ctx: Mapping[str, Any], dotted: str, where: str) -> Any:
    value: Any = ctx
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            raise TemplateError(f"{where}: unknown variable {{{dotted}}}")
        value = value[part]
    return value


def fmt(text: str, ctx: Mapping[str, Any], where: str) -> Any:
    """``{var}`` / ``{var.key}`` substitution (no attribute access, no expressions). A string
    that is one placeholder keeps the value's type."""
    whole = _FIELD.fullmatch(text)
    if whole:
        return _lookup(ctx, whole.group(1), where)
    return _FIELD.sub(lambda m: str(_lookup(ctx, m.group(1), where)), text)


def expand(spec: Any, ctx: Mapping[str, Any], rng: random.Random, where: str) -> Any:
    """A value from a template: a literal, a format string, or a generator mapping."""
    if isinstance(spec, str):
        return fmt(spec, ctx, where)
    if isinstance(spec, list):
        return [expand(v, ctx, rng, f"{where}[{i}]") for i, v in enumerate(spec)]
    if isinstance(spec, dict):
        keys = set(spec)
        if keys == {"int"}:
            lo, hi = _pair(spec["int"], where)
            return rng.randint(int(lo), int(hi))
        if keys <= {"float", "digits"} and "float" in keys:
            lo, hi = _pair(spec["float"], where)
            return round(rng.uniform(float(lo), float(hi)), int(spec.get("digits", 2)))
        if keys == {"choice"}:
            options = spec["choice"]
            if not isinstance(options, list) or not options:
                raise TemplateError(f"{where}.choice: expected a non-empty list")
            return expand(rng.choice(options), ctx, rng, where)
        if keys <= {"children", "distractors"} and "children" in keys:
            return _links(spec, ctx, where)
        if keys == {"ref"} or keys == {"ref", "path"}:
            return RefSpec(str(spec["ref"]), tuple(spec.get("path", ())))
        return {k: expand(v, ctx, rng, f"{where}.{k}") for k, v in spec.items()}
    return spec


def _links(spec: Mapping[str, Any], ctx: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A ``{children: ..., distractors: k}`` mapping: a link per child (and per distractor
    name, so a page lists more than the way on), sorted by name."""
    links = {}
    for child in ctx.get("_children", []):
        links[child["name"]] = fmt(str(spec["children"]), child, f"{where}.children")
    pool = list(ctx.get("_distractors", []))
    for name in pool[: int(spec.get("distractors", 0))]:
        links[name] = f"{ctx.get('_base', '')}/{slugify(name)}"
    return dict(sorted(links.items()))


def _pair(value: Any, where: str) -> tuple[Any, Any]:
    if (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
        and value[0] <= value[1]
    ):
        return value[0], value[1]
    raise TemplateError(f"{where}: expected [low, high] with low <= high, got {value!r}")


def literal(args: Mapping[str, Any]) -> dict[str, Any]:
    """Resolved args as a call writes them: each ``$ref`` replaced by its literal value."""
    return {k: (v["value"] if isinstance(v, dict) and "$ref" in v else v) for k, v in args.items()}
