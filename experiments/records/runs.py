"""Several runs read as one frame: :func:`load`, and the columns their overrides differ in.

A sweep's runs differ in their command-line overrides (``.hydra/overrides.yaml``, held in the
``overrides`` column): each key that differs becomes a column, filled for a run that did not
override it with the value its configuration used (``run.json`` or ``.hydra/``), so a default
run beside ``n_tasks=4`` reads ``20``, not blank.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from planarena.experiments.records.columns import RESERVED_COLUMNS
from planarena.experiments.records.identity import OUTPUT_ONLY_KEYS, RUN_FILE
from planarena.experiments.records.store import concat_records, read_run, record_files

if TYPE_CHECKING:  # pandas is imported where it is used: the runner imports records at
    import pandas as pd  # start-up and loads pandas only once there are records to read


_NOT_CONFIG_KEYS = frozenset(OUTPUT_ONLY_KEYS) - {"budget.max_cost_usd"}
"""Overrides that change how a job runs or prints, never what its episodes are: the run
identity's output-only keys, but the cost cap (a capped sweep shows its cap as a column)."""


def parse_overrides(text: object) -> dict[str, str]:
    """``"planner=react seed=1 llm.skill=weak"`` -> ``{"planner": "react", ...}``.

    The ``overrides`` column :func:`experiments.load` adds is the job's command-line overrides
    joined by spaces; ``+``/``++`` prefixes are dropped, deletions (``~key``), Hydra's own
    ``hydra.*`` keys and output-only keys (``progress``, ``concurrency``, ...) are ignored.
    """
    if not isinstance(text, str):
        return {}
    out: dict[str, str] = {}
    for token in text.split():
        if "=" not in token or token.startswith("~"):
            continue
        key, value = token.split("=", 1)
        key = key.lstrip("+")
        if key.startswith("hydra.") or key in _NOT_CONFIG_KEYS:
            continue
        out[key] = value
    return out


def override_column(key: str) -> str:
    """Column name of an override key: the key itself, or ``config.<key>`` when the key would
    clash with a summary column (``n_tasks=50`` is a config value, not a count of tasks)."""
    return f"config.{key}" if key in RESERVED_COLUMNS else key


def with_swept_columns(df: pd.DataFrame) -> pd.DataFrame:
    """Add one column per command-line override that differs between the runs of ``df``.

    A multirun over ``llm.skill=weak,strong`` gives a column ``llm.skill``; keys that are
    already record columns (``planner``, ``seed``, ...) keep the record's value. Returns
    ``df`` itself when there is nothing to add.
    """
    import pandas as pd

    if "overrides" not in df.columns:
        return df
    texts = df["overrides"].fillna("").astype(str)  # a run without .hydra/ has none
    parsed = {text: parse_overrides(text) for text in pd.unique(texts)}
    keys = sorted(
        k for k in {k for d in parsed.values() for k in d} if override_column(k) not in df.columns
    )
    keys = [k for k in keys if k not in df.columns]
    varying = [k for k in keys if len({d.get(k) for d in parsed.values()}) > 1]
    if not varying:
        return df
    out = df.copy()
    for key in varying:
        out[override_column(key)] = [parsed[text].get(key, "") for text in texts]
    return out


def _override_text(value: Any) -> str:
    """A config value written as a command-line override writes it (``true``, ``null``,
    ``[a,b]``), so a run's default compares equal to another run's explicit override."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_override_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_override_text(v)}" for k, v in value.items()) + "}"
    return str(value)


def _run_configs(run_dir: str | Path) -> tuple[dict[str, Any], ...]:
    """The configurations a run dir records, most trusted first: ``run.json``'s (the resolved
    configuration the records were made with), ``.hydra/config.yaml`` and the config-group
    choices of ``.hydra/hydra.yaml`` (``experiment``, ...). Unreadable files are skipped."""
    root = Path(run_dir)
    out: list[dict[str, Any]] = []
    try:
        run = json.loads((root / RUN_FILE).read_text(encoding="utf-8"))
        if isinstance(run, dict) and isinstance(run.get("config"), dict):
            out.append(run["config"])
    except (OSError, ValueError):
        pass
    for name, pick in (("config.yaml", ()), ("hydra.yaml", ("hydra", "runtime", "choices"))):
        try:
            doc = yaml.safe_load((root / ".hydra" / name).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            continue
        for key in pick:
            doc = doc.get(key) if isinstance(doc, dict) else None
        if isinstance(doc, dict):
            out.append(doc)
    return tuple(out)


def run_config_value(
    run_dir: str | Path, key: str, configs: Sequence[dict[str, Any]] | None = None
) -> str | None:
    """The value of the dotted config ``key`` (``n_tasks``, ``llm.skill``, ``experiment``)
    that the run in ``run_dir`` used, written as an override would write it; None if no
    configuration file of the run has the key (``configs``: the run's, already read)."""
    for config in _run_configs(run_dir) if configs is None else configs:
        if key in config:  # a group choice is one key with a slash (hydra/launcher)
            return _override_text(config[key])
        node: Any = config
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                break
            node = node[part]
        else:
            return _override_text(node)
    return None


def with_run_defaults(df: pd.DataFrame, before: Iterable[str]) -> pd.DataFrame:
    """Fill the swept override columns :func:`with_swept_columns` added (those not in
    ``before``) where a run's overrides do not name the key: that run used its configured
    value (a default run beside ``n_tasks=4`` ran 20 tasks), read from its ``run.json`` or
    ``.hydra/``. A value no file of the run records stays blank."""
    import pandas as pd

    before = set(before)
    if "overrides" not in df.columns or "run_dir" not in df.columns:
        return df
    keys = {k for t in pd.unique(df["overrides"].fillna("")) for k in parse_overrides(t)}
    configs: dict[str, tuple[dict[str, Any], ...]] = {}
    for key in sorted(keys):
        column = override_column(key)
        if column in before or column not in df.columns:
            continue
        blank = (df[column] == "").to_numpy()
        if not blank.any():
            continue
        runs = df["run_dir"].astype(str).to_numpy()
        for run in pd.unique(runs[blank]):
            if run not in configs:
                configs[run] = _run_configs(run)
            value = run_config_value(run, key, configs[run])
            if value is not None:
                df.loc[blank & (runs == run), column] = value
    return df


def load(
    path_or_glob: str | Path,
    *,
    columns: Iterable[str] | None = None,
    categories: Iterable[str] = (),
) -> pd.DataFrame:
    """All episodes under a run dir, a sweep dir, a file, or a glob of any of these; with
    ``columns``, only those of each record (:func:`read_run`). Runs whose command-line
    overrides differ get a column per swept key, filled for a run that did not override it
    with the value it used (a default run beside ``n_tasks=4``: ``config.n_tasks`` 20, not
    blank), as ``planarena-report`` and the sweep aggregate fill it."""
    columns = None if columns is None else tuple(columns)
    categories = tuple(categories)
    frames = [
        read_run(f, columns=columns, categories=categories) for f in record_files(path_or_glob)
    ]
    df = concat_records(frames, categories)
    return with_run_defaults(with_swept_columns(df), df.columns)
