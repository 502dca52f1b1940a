"""Typed constructor parameters of the planners, checked when a planner is built.

A planner's settings come from a config (``planner.mcts.c=-1``); a value of the wrong type or
out of range must stop the job before its first episode with a message naming the key, not
surface as a ``harness_error`` in every episode. Each planner's ``__init__`` is wrapped in
:func:`pydantic.validate_call` with these types, so the signature is the schema."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, validate_call

Count = Annotated[int, Field(ge=1, strict=True)]
"""How many of something a planner may do or keep (turns, nodes, candidates): at least 1."""

Times = Annotated[int, Field(ge=0, strict=True)]
"""How often a recovery may happen (replans, rethinks): 0 turns it off."""

Ratio = Annotated[float, Field(ge=0.0, le=1.0)]
"""A judge's score relative to the best candidate's at the same point, between 0 and 1."""

NonNegative = Annotated[float, Field(ge=0.0)]
"""An exploration constant, seconds, dollars: 0 or more."""

Backoff = tuple[NonNegative, ...]
"""Seconds waited before each retry of a step."""

ToolCalling = Literal["text", "native"]
"""How actions are asked for: in the prompt's text format, or the API's tool interface."""

checked = validate_call
"""Decorator for a planner's ``__init__``: validates its arguments against their types."""

__all__ = ["Backoff", "Count", "NonNegative", "Ratio", "Times", "ToolCalling", "checked"]
