"""What a planner says about itself that belongs in its record: ``planner=auto``'s choice.

A planner reaches its record only through what the episode loop reads (its result, the trace);
a meta-planner's choice is a trace event (``auto_choice``: the strategy it ran and why), and
this module copies it into the record as :data:`~planarena.experiments.records.schema.NOTE_KEYS`
(after the fixed keys and a study cell's keys). Records of other planners carry none of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from planarena.experiments.records.schema import NOTE_KEYS
from pydantic import BaseModel

R = TypeVar("R", bound=BaseModel)


def planner_notes(events: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The record keys of the episode's last ``auto_choice`` event (none without one)."""
    for event in reversed(events):
        if event.get("event") == "auto_choice":
            return dict(zip(NOTE_KEYS, (str(event["choice"]), str(event["reason"])), strict=True))
    return {}


def with_planner_notes(record: R, events: Sequence[Mapping[str, Any]]) -> R:
    """``record`` with the planner's notes added (unchanged when it left none)."""
    notes = planner_notes(events)
    return record.model_copy(update=notes) if notes else record
