"""What a run dir's records are: file names, required keys, failure modes no table counts.

The lowest layer of :mod:`planarena.experiments.records`: the reading, repair and identity
modules and the analysis package all take these names from here, so none of them has to
import another to agree on what a record is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

EPISODES = "episodes.jsonl"
TRACES = "traces.jsonl"

RECORD_KEYS = ("planner", "env", "complexity", "task_id", "seed", "trial")
"""Keys every episode record must have to be read at all."""

INFRASTRUCTURE_ERROR = "infrastructure_error"
"""The failure mode of an episode whose LLM endpoint failed (unreachable, timed out, refused
the key, an HTTP 4xx/5xx error, a prompt beyond the model's context): not an outcome of the
agent, so tables leave it out (:func:`measured`) and a resumed job runs it again."""

NOT_MEASURED = ("harness_error", INFRASTRUCTURE_ERROR)
"""Failure modes that say nothing about the agent (our bug; the endpoint's failure)."""

JOB_COST_CAP = "job_cost_cap"
"""The stop reason of an episode cut by the job's cost cap (``budget.max_cost_usd``): its
failure mode is ``budget_exhausted``, and a resumed job runs it again (under the new cap)."""


def runs_again(row: Mapping[str, Any]) -> bool:
    """Whether a resumed job drops this record and runs its episode again: it was not
    measured (:data:`NOT_MEASURED`), or the job's cost cap cut it."""
    return row.get("failure_mode") in NOT_MEASURED or row.get("stop_reason") == JOB_COST_CAP


def measured(df: pd.DataFrame) -> pd.DataFrame:
    """The records the tables and figures are computed from: all but ``infrastructure_error``
    (the endpoint failed; the agent's completion rate must not count it as a failure) and
    the episode the job's cost cap cut (stop reason ``job_cost_cap``: the cap, a setting of
    the run, ended it, not the agent; a resumed job with a higher cap runs it again)."""
    if "failure_mode" not in df.columns:
        return df
    keep = df["failure_mode"] != INFRASTRUCTURE_ERROR
    if "stop_reason" in df.columns:
        keep &= df["stop_reason"] != JOB_COST_CAP
    return df if bool(keep.all()) else df[keep].reset_index(drop=True)


NOTE_KEYS = ("auto_choice", "auto_reason")
"""Keys a planner adds to its own records through the trace (``records.planner_notes``):
``planner=auto``'s strategy and the features and map entry it chose by. Absent from the
records of every other planner, so a reader tests for the column first."""


class RecordsError(ValueError):
    """A records file that cannot be read or trusted; the message names the file and line."""
