"""The record columns the tables and figures read, and the summary columns they write.

Defined here, below :mod:`planarena.experiments.analysis`, because the records layer needs
them too: the job copies only these columns of its records to the frame the tables read, and
a swept override key that would clash with a summary column is renamed
(:func:`planarena.experiments.records.runs.override_column`).
"""

from __future__ import annotations

FAILURE_MODES: tuple[str, ...] = (
    "dead_end",
    "gave_up_after_tool_failure",
    "precondition_unverified",
    "plan_logic_error",
    "hallucinated_tool_call",
    "malformed_output",
    "budget_exhausted",
    "false_success",
    "harness_error",
    "correctly_reported_unreachable",
)
"""Canonical failure-mode order used for failure-distribution columns."""


ROLE_TOKEN_COLUMNS: tuple[str, ...] = (
    "tokens_planner",
    "tokens_executor",
    "tokens_evaluator",
    "tokens_replanner",
    "tokens_rollout",
)
"""Optional per-role token columns; missing values inside a present column count as 0."""


TASK_KEYS: tuple[str, ...] = ("planner", "seed", "env", "complexity", "task_id")
"""Base task identity; :func:`task_keys` adds every swept config column of a record set."""


CONFIG_KEYS: tuple[str, ...] = ("seed", "llm", "faults")
"""Record columns that name a run's configuration; a swept one becomes a group key."""


SUMMARY_COLUMNS: tuple[str, ...] = (
    "n",
    "n_tasks",
    "trials_max",
    "successes",
    "completion_rate",
    "completion_ci_low",
    "completion_ci_high",
    "completion_ci_method",
    "progress_mean",
    "tokens_mean",
    "tokens_mean_ci_low",
    "tokens_mean_ci_high",
    "tokens_prompt_mean",
    "tokens_completion_mean",
    "llm_calls_mean",
    "tool_calls_mean",
    "retries_mean",
    "fallbacks_mean",
    "replans_mean",
    "latency_p50",
    "latency_p50_ci_low",
    "latency_p50_ci_high",
    "latency_p99",
    "latency_p99_ci_low",
    "latency_p99_ci_high",
    "cost_mean",
    "harness_errors",
    "successes_tokens_mean",
    "successes_cost_mean",
    "successes_latency_p50",
    "cost_per_success",
    "time_to_success_km_median",
)
"""Fixed summary columns that follow the group-key columns, in output order."""


# (output column, source column) pairs averaged per cell, in output order.
MEAN_COLUMNS: tuple[tuple[str, str], ...] = (
    ("progress_mean", "progress"),
    ("tokens_mean", "tokens_total"),
    ("tokens_prompt_mean", "tokens_prompt"),
    ("tokens_completion_mean", "tokens_completion"),
    ("llm_calls_mean", "llm_calls"),
    ("tool_calls_mean", "tool_calls"),
    ("retries_mean", "retries"),
    ("fallbacks_mean", "fallbacks"),
    ("replans_mean", "replans"),
)


RESERVED_COLUMNS = frozenset(
    {*SUMMARY_COLUMNS, "recovery_rate_conditional", "n_faulted", "k", "n_pairs", "fault"}
)


REQUIRED_SUMMARY_INPUTS: tuple[str, ...] = (
    "success",
    "failure_mode",
    "latency_s",
    "cost_usd",
    "faults_injected",
    *(src for _, src in MEAN_COLUMNS),
)


CHECK_COLUMNS: tuple[str, ...] = (
    "postcondition_catches",
    "wrong_returned",
    "wrong_caught",
    "check_false_alarms",
)
"""Post-condition counts: rejections, and the ground truth of them
(:mod:`planarena.experiments.records.checks`); records written before it lack the last three,
and a table that reads them says so."""


NOTE_COLUMNS: tuple[str, ...] = ("auto_choice", "auto_reason")
"""Keys only ``planner=auto``'s records carry (``records.schema.NOTE_KEYS``): left out of
:data:`EPISODE_COLUMNS` (the tables' frame needs every chunk of records to share its
columns); ``experiment=decision_map`` reads them from the records themselves."""


EPISODE_COLUMNS: tuple[str, ...] = tuple(
    dict.fromkeys(
        (
            *TASK_KEYS,
            "trial",
            *CONFIG_KEYS,
            *REQUIRED_SUMMARY_INPUTS,
            *ROLE_TOKEN_COLUMNS,
            *CHECK_COLUMNS,
            "exposed_faults",
            "stop_reason",  # job_cost_cap: an episode the job's cost cap cut, not measured
            "overrides",
            "run_dir",
        )
    )
)
"""Record columns the tables (and figures) read; with an ``overrides`` column, the columns
its keys name too (:func:`table_columns`). Every other record column is left unread."""


CATEGORY_COLUMNS: tuple[str, ...] = (
    "planner",
    "env",
    "complexity",
    "llm",
    "faults",
    "failure_mode",
    "exposed_faults",
    "stop_reason",
)
"""String columns with few distinct values, held as categoricals (categories sorted) in the
frame the tables read: one byte a row instead of a string, and grouped without hashing."""
