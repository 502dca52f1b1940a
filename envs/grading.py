"""Grading an answer by the facts it carries, whatever its wording (``grading=facts``).

The exact policy (``grading=exact``) wants the answer tool's own wording on a line naming the
item: ``stock: 421`` next to the item's name. A model that writes "There are 421 units of
Widget A in stock." did the work and says so; under ``facts`` that counts. One policy holds for
every planner and every family; the run records which (``grading`` in ``run.json``).

A fact is (entity, field, value). The answer carries it when the stretch of the answer about
the entity (from a mention of it, by normalised match, to the mentions of the task's other
entities on either side: a line, a sentence, or a heading with its bullets) states the value:

- a number: a number written there (``$41.2 million``, ``41.2``, ``1,200``) equal to it at
  its own precision (41.2 is stated by 41.2 or 41.24, not by 41.3 or 41; 60.0 by 60 or
  60.0, not by 60.4; 421 only by 421).
  When the entity has several numeric facts, the field must be named too (a word of its
  name: ``revenue``, ``warranty``) and the number that word states (the first after it, else
  the last before it) is the one compared: "revenue 41.2, profit 5.3" carries each figure
  for its own field only;
- a string: its normalised text inside the segment's;
- a boolean: the field's word, with no negation (``not``, ``fail``) for true, or with one for
  false.

What the grader refuses under either policy: a missing or wrong value (``false_success``),
and a decoy's or a stale document's value stated for the entity (a trap in the answer).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache

GRADINGS = ("facts", "exact")

_NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?")
_NEGATION = re.compile(r"\b(not|no|fail\w*|never)\b")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")
_LONE_POINT = re.compile(r"(?<!\d)\.|\.(?!\d)")
_NOT_WORD = re.compile(r"[^a-z0-9.]+")


@lru_cache(maxsize=4096)
def normalise(text: str) -> str:
    """Lower case, every run of characters other than letters, digits and a decimal point
    between digits folded to one space. (Cached: a grade normalises the same answer, entity
    and value once per fact.)"""
    text = _THOUSANDS.sub("", text.lower())
    text = _LONE_POINT.sub(" ", text)
    return " ".join(_NOT_WORD.sub(" ", text).split())


def segments(answer: str) -> list[str]:
    """The answer's lines, normalised."""
    return [s for s in (normalise(x) for x in answer.splitlines()) if s]


@dataclass(frozen=True)
class Fact:
    """One fact an answer must state: about ``entity``, its ``field`` has ``value``."""

    entity: str
    field: str
    value: object

    @property
    def numeric(self) -> bool:
        return isinstance(self.value, int | float) and not isinstance(self.value, bool)


def _field_stems(field: str) -> list[str]:
    return [w[:5] for w in re.split(r"[_\W]+", field.lower()) if len(w) >= 3]


def _field_positions(segment: str, field: str) -> list[int]:
    out = []
    for stem in _field_stems(field):
        out += [m.start() for m in re.finditer(rf"\b{re.escape(stem)}", segment)]
    return out


def _close(x: float, value: float) -> bool:
    """``x`` states ``value`` to the value's own precision: half a unit of its last decimal as
    the value is written (a float ``60.0`` has one decimal, so ``60.4`` does not state it);
    an int exactly."""
    exponent = 0 if isinstance(value, int) else Decimal(repr(value)).as_tuple().exponent
    decimals = max(0, -int(exponent))  # repr: 60.0 -> 1; 1e+16 -> 0 (no "." to split on)
    return abs(x - value) < 0.5 * 10.0**-decimals + 1e-9


@lru_cache(maxsize=1024)
def _numbers(segment: str) -> tuple[tuple[int, float], ...]:
    return tuple((m.start(), float(m.group(0).replace(",", ""))) for m in _NUMBER.finditer(segment))


def _stated_for(numbers: Sequence[tuple[int, float]], mark: int) -> float:
    """The number a field word at ``mark`` states: the first after it, else the last before."""
    after = [x for pos, x in numbers if pos > mark]
    return after[0] if after else [x for pos, x in numbers if pos < mark][-1]


def _states(segment: str, fact: Fact, needs_field: bool) -> bool:
    if fact.numeric:
        numbers = _numbers(segment)
        if not needs_field:
            return any(_close(x, fact.value) for _, x in numbers)  # type: ignore[arg-type]
        marks = _field_positions(segment, fact.field)
        if not marks or not numbers:
            return False
        stated = {_stated_for(numbers, m) for m in marks}
        return any(_close(x, fact.value) for x in stated)  # type: ignore[arg-type]
    if isinstance(fact.value, bool):
        if not _field_positions(segment, fact.field):
            return False
        return (_NEGATION.search(segment) is None) == fact.value
    return normalise(str(fact.value)) in segment


def _occurrences(text: str, entity: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in re.finditer(rf"\b{re.escape(entity)}\b", text)]


_CLAUSE_END = re.compile(r"[!?\n]|\.(?!\d)")
CLAUSE = "|"


def windows(answer: str, entity: str, others: Sequence[str] = ()) -> list[str]:
    """The stretches of the normalised answer about ``entity``: from each mention of it on to
    the next mention of another entity (a heading and its bullet lines, the rest of a line),
    and back to the start of its sentence or line ("the revenue of Acme was ...", "rows:
    466887; step: cohort_retention") unless another entity is named earlier in it."""
    return list(_windows(answer, entity, tuple(others)))


@lru_cache(maxsize=1024)
def _clauses(answer: str) -> str:
    """The normalised answer, its sentences and lines kept apart by ``CLAUSE``."""
    return f" {CLAUSE} ".join(normalise(p) for p in _CLAUSE_END.sub(CLAUSE, answer).split(CLAUSE))


@lru_cache(maxsize=1024)
def _windows(answer: str, entity: str, others: tuple[str, ...]) -> tuple[str, ...]:
    """:func:`windows`, cached: an entity's facts are judged on the same stretches."""
    text = _clauses(answer)
    own = _occurrences(text, normalise(entity))
    if not own:
        return ()
    marks = sorted(
        span
        for other in {normalise(o) for o in others} - {normalise(entity)}
        if other
        for span in _occurrences(text, other)
        if not any(s < span[1] and span[0] < e for s, e in own)  # not inside our own name
    )
    out = []
    for start, end in own:
        clause = text.rfind(CLAUSE, 0, start) + 1
        # the text before a mention is its own up to the clause start, unless another entity
        # is named earlier in the clause: then that text is the other's ("A ...; B ...")
        shared = any(clause <= s and e <= start for s, e in marks)
        after = [s for s, e in marks if s >= end]
        out.append(text[(start if shared else clause) : (after[0] if after else len(text))])
    return tuple(out)


def carries(
    answer: str, fact: Fact, siblings: Sequence[Fact] = (), others: Sequence[str] = ()
) -> bool:
    """Whether ``answer`` states ``fact``. ``siblings``: the entity's other facts (with another
    numeric one the field must be named); ``others``: the other entities the task names
    (their stretches of the answer are theirs)."""
    needs_field = fact.numeric and any(s.numeric and s.field != fact.field for s in siblings)
    return any(_states(w, fact, needs_field) for w in _windows(answer, fact.entity, tuple(others)))


def count_carried(answer: str, facts: Sequence[Fact]) -> int:
    """How many of ``facts`` the answer carries (each judged beside its entity's others)."""
    entities = sorted({f.entity for f in facts})
    return sum(
        carries(answer, f, [g for g in facts if g.entity == f.entity], entities) for f in facts
    )


def check_grading(value: str) -> str:
    if value not in GRADINGS:
        raise ValueError(f"grading must be one of {', '.join(GRADINGS)}, not {value!r}")
    return value
