"""Registered claims: findings about planners, each tested over the assumption registry.

A claim names two planners, a metric, a population of tasks and a direction (``a`` above
``b`` by at least ``threshold_pp`` points). ``claims.yaml`` beside this module holds the
findings planarena's own docs made; a user's file has the same layout and is read the same
way (``claims.files=[...]``). The ``claims`` study (:mod:`planarena.experiments.studies.claims`)
gives each a verdict with its conditions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Literal

from planarena.experiments.claims.assumptions import read_entries
from pydantic import BaseModel, ConfigDict, Field, model_validator

CLAIMS = Path(__file__).with_name("claims.yaml")
LITERATURE = Path(__file__).with_name("literature.yaml")


class ClaimsError(ValueError):
    """A claims file that cannot be read: one line naming the file and the claim."""


class Population(BaseModel):
    """Which tasks a claim is about."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    env: tuple[str, ...] | None = None
    complexity: tuple[str, ...] | None = None
    min_steps: int | None = Field(None, ge=1)
    max_steps: int | None = Field(None, ge=1)

    @model_validator(mode="after")
    def _steps_in_order(self) -> Population:
        if self.min_steps and self.max_steps and self.min_steps > self.max_steps:
            raise ValueError(f"min_steps {self.min_steps} above max_steps {self.max_steps}")
        return self

    def describe(self) -> str:
        parts = []
        if self.min_steps and self.max_steps:
            parts.append(f"{self.min_steps}-{self.max_steps} steps")
        elif self.min_steps:
            parts.append(f"{self.min_steps}+ steps")
        elif self.max_steps:
            parts.append(f"at most {self.max_steps} steps")
        if self.env:
            parts.append("on " + ", ".join(self.env))
        if self.complexity:
            parts.append(", ".join(self.complexity))
        return "; ".join(parts) or "every task"


class Published(BaseModel):
    """Where a claim from the literature was published and what was reported there."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    paper: str
    where: str  # the table, figure or sentence the number is quoted from
    reported: str  # the published numbers, quoted
    value: float | None = None  # the published effect in the claim's units (pp, or a ratio)
    mapping: str = ""  # how the published setting maps onto planarena's


class Claim(BaseModel):
    """One finding: ``a``'s ``metric`` above (``direction: greater``) or below (``less``)
    ``b``'s on ``population``: by ``threshold_pp`` points for completion, by the factor
    ``ratio`` (``a / b``) for tokens and latency."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    statement: str
    source: str
    a: str
    b: str
    metric: Literal["completion", "tokens", "latency"] = "completion"
    direction: Literal["greater", "less"] = "greater"
    population: Population = Population()
    threshold_pp: float = 0.0
    ratio: float | None = Field(None, gt=0)
    published: Published | None = None
    needs: str | None = None  # a setting the screen does not run (the claim is then listed)

    @model_validator(mode="after")
    def _two_planners(self) -> Claim:
        if self.a == self.b:
            raise ValueError(f"a and b are both {self.a}")
        if self.metric == "completion" and self.ratio is not None:
            raise ValueError("ratio is for tokens and latency; completion takes threshold_pp")
        return self

    def threshold(self) -> float:
        """The claimed bound on the judged quantity: points as a share for completion, the
        log of the ratio for tokens and latency (0: a direction only)."""
        if self.metric == "completion":
            return self.threshold_pp / 100.0
        return math.log(self.ratio) if self.ratio else 0.0


def read_claims(path: Path) -> list[Claim]:
    """The claims of one file, validated (a bad file: one line naming file and claim)."""
    return read_entries(Path(path), "claims", Claim, "claim", ClaimsError)


@cache
def _shipped() -> tuple[Claim, ...]:
    return (*read_claims(CLAIMS), *read_claims(LITERATURE))


def load_claims(files: Sequence[str | Path] = ()) -> list[Claim]:
    """The shipped claims, then each file's, in order; an id used twice is refused."""
    out = [*_shipped(), *(c for f in files for c in read_claims(Path(f)))]
    seen: set[str] = set()
    for c in out:
        if c.id in seen:
            raise ClaimsError(f"claim {c.id}: the id is used twice")
        seen.add(c.id)
    return out
