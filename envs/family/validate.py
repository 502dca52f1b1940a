"""Loading a family file: every problem of a malformed file reported at once, before a run.

A file fails with :class:`FamilyError`, one line per problem, each naming the file, the key
and what was expected: the fields' own errors, the cross-references between keys and the
template errors a dry run of every complexity meets. Reporting them together spares the
author one run per mistake.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from planarena.envs.base import COMPLEXITIES
from planarena.envs.family.schema import (
    DEFER_REFERENCES,
    FamilyDecl,
    FamilyError,
    reference_problems,
)
from planarena.envs.family.tasks import generate
from planarena.envs.family.templates import TemplateError
from pydantic import ValidationError


def load_declaration(path: str | Path) -> FamilyDecl:
    """Read and validate a family file; raises :class:`FamilyError` naming, for every
    problem found, the file, the key and what was expected (one line each): the fields'
    errors, the cross-references (:func:`reference_problems`) and the template errors of a
    dry run of every complexity (on the fields that did validate). A template error ends its
    complexity's dry run, so two in one complexity are reported one after the other."""
    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise FamilyError(f"{p}: cannot read the family file: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise FamilyError(f"{p}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise FamilyError(
            f"{p}: <top>: expected a mapping of family keys, got {type(raw).__name__}"
        )
    problems: list[str] = []
    decl: FamilyDecl | None
    try:
        decl = FamilyDecl.model_validate(raw, context={DEFER_REFERENCES: True})
        references = reference_problems(decl.model_dump())
    except ValidationError as exc:
        problems += _validation_problems(exc)
        references = reference_problems(raw)
        decl = _without_invalid_fields(raw, exc)
    problems += [f"{k}: {v}" for k, v in references]
    if decl is not None:
        problems += _dry_run_problems(decl, quiet=bool(problems))
    if problems:
        raise FamilyError("\n".join(f"{p}: {line}" for line in dict.fromkeys(problems)))
    assert decl is not None
    return decl


def _validation_problems(exc: ValidationError) -> list[str]:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-"))
        msg = err["msg"].removeprefix("Value error, ")
        value = err.get("input")
        shown = "" if isinstance(value, (dict, list)) else f" (got {value!r})"
        lines.append(f"{loc or '<top>'}: {msg}{shown}")
    return lines


def _without_invalid_fields(raw: dict[str, Any], exc: ValidationError) -> FamilyDecl | None:
    """A declaration of ``raw`` with the fields that failed validation removed (each error's
    deepest key that the file has: a default, if any, takes its place), for the template
    dry run to find the problems the field errors would hide; None if none validates."""
    data = copy.deepcopy(raw)
    for _ in range(100):  # one removal a round: list indices stay right
        parent: Any = None
        key: Any = None
        node: Any = data
        for part in exc.errors()[0]["loc"]:
            in_dict = isinstance(node, dict) and part in node
            in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
            if not (in_dict or in_list):
                break
            parent, key, node = node, part, node[part]
        if parent is None:  # the error is the file's own (a required key is missing)
            return None
        del parent[key]
        try:
            return FamilyDecl.model_validate(data, context={DEFER_REFERENCES: True})
        except ValidationError as again:
            exc = again
    return None


def _dry_run_problems(decl: FamilyDecl, *, quiet: bool) -> list[str]:
    """Generate one task of every complexity the file sizes, so a template error (an unknown
    {var}, a ref to a missing field) is reported now, naming the key, not in the middle of a
    run. With ``quiet`` (other problems found) a failure that is not a template error is
    taken for their consequence and left out."""
    out: list[str] = []
    for c in COMPLEXITIES:
        if c not in decl.sizes:
            continue  # reference_problems: sizes needs an entry for every complexity
        try:
            generate(decl, 1, seed=0, complexity=c, unreachable_rate=1.0)
        except TemplateError as exc:
            out.append(str(exc))
        except (ValueError, TypeError, KeyError, IndexError) as exc:  # a shape we did not foresee
            if not quiet:
                out.append(f"sizes.{c}: cannot generate a task: {exc!r}")
    return out
