"""Episode records on disk: reading them, and keeping a run dir consistent.

A run dir holds ``episodes.jsonl`` and ``traces.jsonl`` (one line per episode each, appended;
the trace line is written before its episode line, so a complete episode line *commits* an
episode), ``run.json`` (the fingerprint of the configuration that made the records) and a lock
file held by the one job writing there. Nothing here rewrites a records file in place: repair
truncates to the last complete record (``os.truncate``), and the rare rewrite (dropping
``harness_error`` records so they rerun, or a foreign trace line in the middle) writes a new
file and renames it over the old one atomically. A kill at any instant loses at most the
episodes in flight.

Readers (:func:`load`, :func:`read_jsonl`) name the file and line of anything they cannot read:
a torn last line of a run still being written is skipped with a warning, anything else is
refused.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

EPISODES = "episodes.jsonl"
TRACES = "traces.jsonl"
RUN_FILE = "run.json"
LOCK_FILE = ".planarena.lock"
STATUS_FILE = "status.json"

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


OUTPUT_ONLY_KEYS = (
    "progress",
    "concurrency",
    "workers",
    "resume",
    "write_traces",
    "figures",
    "fail_fast",
    "report_extra",
    "hydra",
    "llm.max_concurrency",
    "llm.cache_dir",
    "dry_run",
    "budget.max_cost_usd",  # the only records it changes (cut by the cap) run again on resume
)
"""Config keys that change how a job runs or what it prints, never what its episodes are."""


class RecordsError(ValueError):
    """A records file that cannot be read or trusted; the message names the file and line."""


class RunDirError(RuntimeError):
    """A run dir this job may not write into (locked, or made by another configuration)."""


# --------------------------------------------------------------------------- reading


def _warn(message: str) -> None:
    print(f"WARNING: {message}", file=sys.stderr)


def iter_jsonl(path: str | Path, required: Iterable[str] = ()) -> Iterator[dict[str, Any]]:
    """The JSON objects of a ``.jsonl`` file, one per line, read line by line.

    A torn last line (no newline at the end: a job still writing, or killed mid-write) is
    skipped with a warning; any other unreadable line, or a record lacking a ``required`` key,
    raises :class:`RecordsError` naming ``file:line``.
    """
    path = Path(path)
    required = tuple(required)
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            if not raw.endswith(b"\n"):
                if raw.strip():
                    _warn(f"{path}:{number}: skipped a torn last line (a job still writing?)")
                return
            if not raw.strip():
                continue
            try:
                row = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise RecordsError(f"{path}:{number}: not a JSON record ({exc.msg})") from None
            except UnicodeDecodeError:
                raise RecordsError(f"{path}:{number}: not UTF-8 text") from None
            if not isinstance(row, dict):
                raise RecordsError(f"{path}:{number}: not a JSON object")
            missing = [k for k in required if k not in row]
            if missing:
                raise RecordsError(f"{path}:{number}: record lacks the key(s) {missing}")
            yield row


def read_jsonl(path: str | Path, required: Iterable[str] = ()) -> list[dict[str, Any]]:
    """:func:`iter_jsonl` as a list."""
    return list(iter_jsonl(path, required))


CHUNK_ROWS = 2_000
"""Records parsed into one DataFrame at a time (bounds the parsed dicts held at once)."""


def load_records(path: str | Path) -> pd.DataFrame:
    """One row per episode from an ``episodes.jsonl`` (or ``.parquet``) file."""
    import pandas as pd

    path = Path(path)
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    frames: list[pd.DataFrame] = []
    rows: list[dict[str, Any]] = []
    for row in iter_jsonl(path, RECORD_KEYS):
        rows.append(row)
        if len(rows) == CHUNK_ROWS:
            frames.append(pd.DataFrame(rows))
            rows = []
    if rows or not frames:
        frames.append(pd.DataFrame(rows))
    if len(frames) == 1:
        return frames[0]
    # a column that is all null in one chunk is `object` there: infer once more after concat
    return pd.concat(frames, ignore_index=True).infer_objects()


ROW_GROUP_ROWS = 8 * CHUNK_ROWS
"""Records per Parquet row group :func:`write_parquet` writes (the Arrow chunks of one row
group are what it holds of the file at once, a few MB)."""


def _chunks(rows: Iterable[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    chunk: list[dict[str, Any]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _categoricals() -> bool:
    """Whether to hold repeated strings as categoricals: with pandas 3, whose ``groupby``
    leaves unobserved categories out by default (with pandas 2, code that does not pass
    ``observed=True`` would get empty groups)."""
    import pandas as pd

    return int(pd.__version__.split(".")[0]) >= 3


def as_categories(df: pd.DataFrame, columns: Iterable[str]) -> pd.DataFrame:
    """``df`` with each of ``columns`` that holds strings as a categorical (categories sorted,
    so grouping with ``sort=True`` orders them as it orders the strings); a column already
    categorical, or not of strings, stays as it is (and every column, without
    :func:`_categoricals`)."""
    import pandas as pd

    if not _categoricals():
        return df
    change = {
        c: df[c].astype("category")
        for c in columns
        if c in df.columns
        and not isinstance(df[c].dtype, pd.CategoricalDtype)
        and pd.api.types.infer_dtype(df[c], skipna=True) == "string"
    }
    return df.assign(**change) if change else df


def _count_lines(path: Path) -> int:
    """Newlines in a file: at least as many as its complete records."""
    with path.open("rb") as fh:
        return sum(block.count(b"\n") for block in iter(lambda: fh.read(1 << 20), b""))


class _Column:
    """One kept column of :func:`write_parquet`, filled chunk by chunk into one array sized
    for every record (no per-chunk pieces to concatenate: those leave the heap fragmented).
    Numbers and booleans go straight into their numpy array; strings to categorize become
    codes; anything else is held as Python objects and given the chunks' dtype at the end."""

    def __init__(self, dtype: Any, size: int, categorical: bool) -> None:
        import numpy as np

        self.dtype = dtype
        self.categorical = categorical
        if categorical:
            self.values = np.empty(size, dtype=np.int32)
            self.codes: dict[Any, int] = {}
        elif isinstance(dtype, np.dtype) and dtype.kind in "biuf":
            self.values = np.empty(size, dtype=dtype)
        else:
            self.values = np.empty(size, dtype=object)

    def fill(self, at: int, series: pd.Series) -> None:
        import numpy as np
        import pandas as pd

        end = at + len(series)
        if self.categorical:
            local, uniques = pd.factorize(series)  # missing: -1, kept as -1
            lookup = np.array(
                [self.codes.setdefault(u, len(self.codes)) for u in uniques] + [-1],
                dtype=np.int32,
            )
            self.values[at:end] = lookup[local]
        elif self.values.dtype == object:
            self.values[at:end] = series.to_numpy(dtype=object)
        else:
            self.values[at:end] = series.to_numpy()

    def finish(self, n: int) -> Any:
        import numpy as np
        import pandas as pd

        values = self.values[:n]
        if self.categorical:
            first_seen = list(self.codes)
            order = sorted(range(len(first_seen)), key=first_seen.__getitem__)
            rank = np.empty(len(order) + 1, dtype=np.int32)
            rank[order] = np.arange(len(order), dtype=np.int32)
            rank[-1] = -1
            categories = pd.Index([first_seen[i] for i in order], dtype=self.dtype)
            return pd.Categorical.from_codes(rank[values], categories=categories)
        if values.dtype == object and self.dtype != object:
            return pd.array(values, dtype=self.dtype)
        return values


def write_parquet(
    path: str | Path,
    dest: str | Path | None,
    *,
    columns: Iterable[str] | None = None,
    categories: Iterable[str] = (),
) -> pd.DataFrame:
    """``load_records(path).to_parquet(dest, index=False)`` without holding every record, and
    the records' ``columns`` (all if None) as a frame, ``categories`` as categoricals
    (:func:`as_categories`). With ``dest`` None nothing is written: the frame alone, for a
    reader that needs a few columns of many records.

    The records are parsed :data:`CHUNK_ROWS` at a time and written a row group at a time;
    the kept columns are filled into arrays sized for every record. The file reads back
    equal to the whole-frame one (columns, their order, dtypes, values), and the frame equals
    ``as_categories(load_records(path)[kept columns], categories)``, as long as every chunk
    has the same columns and dtypes (records of one job do). Records whose chunks differ (a
    key only later records have, a column all null in one chunk) are read whole, as
    :func:`load_records` infers them. Records with an ``overrides`` column keep every column
    (its keys may name any). The file is written beside ``dest`` and renamed over it.
    """
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pandas.api.types import is_object_dtype

    path = Path(path)
    dest = None if dest is None else Path(dest)
    wanted = None if columns is None else set(columns)
    categorize = set(categories) if _categoricals() else set()
    tmp = None if dest is None else dest.with_name(f".{dest.name}.tmp")
    writer: pq.ParquetWriter | None = None
    schema: pa.Schema | None = None
    dtypes: list[tuple[str, Any]] = []
    kept: dict[str, _Column] = {}
    pending: list[pa.Table] = []
    size = n = 0
    uniform = True
    try:
        for rows in _chunks(iter_jsonl(path, RECORD_KEYS), CHUNK_ROWS):
            frame = pd.DataFrame(rows)
            del rows
            if schema is None:
                dtypes = list(frame.dtypes.items())
                size = _count_lines(path)
                everything = wanted is None or "overrides" in frame.columns
                kept = {
                    c: _Column(d, size, c in categorize and isinstance(d, pd.StringDtype))
                    for c, d in dtypes
                    if everything or c in (wanted or ())
                }
            elif list(frame.dtypes.items()) != dtypes:
                uniform = False
                break
            # the Arrow types tell apart object columns the dtypes do not (strings, nulls);
            # without a file to write, only the kept object columns' need to agree
            if tmp is not None:
                table = pa.Table.from_pandas(frame, preserve_index=False)
            else:
                objects = [c for c, d in dtypes if c in kept and is_object_dtype(d)]
                table = pa.Table.from_pandas(frame[objects], preserve_index=False)
            if schema is None:
                schema = table.schema
                if tmp is not None:
                    writer = pq.ParquetWriter(tmp, schema, compression="snappy")
            elif not table.schema.equals(schema, check_metadata=True):
                uniform = False
                break
            if n + len(frame) > size:  # appended to since it was counted
                uniform = False
                break
            for c, column in kept.items():
                column.fill(n, frame[c])
            n += len(frame)
            del frame
            if writer is None:
                continue
            pending.append(table)
            if sum(t.num_rows for t in pending) >= ROW_GROUP_ROWS:
                writer.write_table(pa.concat_tables(pending))
                pending = []
        if schema is not None and uniform:
            if writer is not None and dest is not None and tmp is not None:
                if pending:
                    writer.write_table(pa.concat_tables(pending))
                    pending = []
                writer.close()
                writer = None
                os.replace(tmp, dest)
            out = {c: kept.pop(c).finish(n) for c in list(kept)}
            return pd.DataFrame(out, index=pd.RangeIndex(n), copy=False)
    finally:
        if writer is not None:
            writer.close()
        if tmp is not None:
            tmp.unlink(missing_ok=True)
    # no records, or chunks that differ: the whole frame, as load_records infers it
    df = load_records(path)
    if dest is not None:
        df.to_parquet(dest, index=False)
    if wanted is not None and "overrides" not in df.columns:
        df = df[[c for c in df.columns if c in wanted]]
    return as_categories(df, categories)


def record_files(path_or_glob: str | Path) -> list[Path]:
    """The ``episodes.jsonl`` files under a run dir, a sweep dir, a file, or a glob of any of
    these, in the order :func:`load` reads them."""
    matches = sorted(glob.glob(str(path_or_glob), recursive=True)) or [str(path_or_glob)]
    files: list[Path] = []
    for m in matches:
        p = Path(m)
        if p.is_dir():
            files += sorted(p.rglob(EPISODES))
        elif p.exists():
            files.append(p)
    if not files:
        raise FileNotFoundError(f"no {EPISODES} under {path_or_glob}")
    return files


def run_overrides(run_dir: Path) -> str | None:
    """The command-line overrides that made a run (``.hydra/overrides.yaml``) joined by
    spaces, as :func:`load`'s ``overrides`` column holds them; None without the file."""
    overrides = run_dir / ".hydra" / "overrides.yaml"
    if not overrides.exists():
        return None
    import yaml

    return " ".join(map(str, yaml.safe_load(overrides.read_text()) or []))


def read_run(
    path: Path,
    *,
    columns: Iterable[str] | None = None,
    categories: Iterable[str] = (),
    copy: Path | None = None,
) -> pd.DataFrame:
    """One records file as :func:`load` reads it: its records with a ``run_dir`` column and,
    when the run has them, its ``overrides``. With ``columns`` only those records' columns
    are kept (read a chunk at a time, :func:`write_parquet`), ``categories`` as categoricals:
    a report over many episodes holds a few columns of each, not every record. With ``copy``
    every column is also written there as Parquet in the same pass (for
    :func:`merge_parquet`)."""
    categories = tuple(categories)
    if columns is None and not categories and copy is None:
        frame = load_records(path)
    else:
        frame = write_parquet(path, copy, columns=columns, categories=categories)
    frame["run_dir"] = str(path.parent)
    overrides = run_overrides(path.parent)
    if overrides is not None:
        frame["overrides"] = overrides
    return frame


def concat_records(frames: Sequence[pd.DataFrame], categories: Iterable[str] = ()) -> pd.DataFrame:
    """``pd.concat(frames, ignore_index=True)`` with ``categories`` kept categorical: a column
    categorical in every frame gets their categories' sorted union first (concatenated as
    they are, different categories would become strings, each row an object again)."""
    import pandas as pd

    frames = list(frames)
    categories = tuple(categories)
    for c in categories:
        dtypes = [f[c].dtype for f in frames if c in f.columns]
        if len(dtypes) < len(frames) or not all(isinstance(d, pd.CategoricalDtype) for d in dtypes):
            continue
        if all(d == dtypes[0] for d in dtypes):
            continue
        union = dtypes[0].categories
        for d in dtypes[1:]:
            union = union.union(d.categories)
        common = pd.CategoricalDtype(union.sort_values())
        frames = [f.assign(**{c: f[c].astype(common)}) for f in frames]
    return as_categories(pd.concat(frames, ignore_index=True), categories)


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
    from planarena.experiments.analysis.metrics import with_run_defaults, with_swept_columns

    columns = None if columns is None else tuple(columns)
    categories = tuple(categories)
    frames = [
        read_run(f, columns=columns, categories=categories) for f in record_files(path_or_glob)
    ]
    df = concat_records(frames, categories)
    return with_run_defaults(with_swept_columns(df), df.columns)


def merge_parquet(parts: Sequence[tuple[Path, Mapping[str, Any]]], dest: Path) -> bool:
    """Write into ``dest`` the Parquet copies of several records files (:func:`write_parquet`)
    one after the other, each part's rows with the columns of its mapping set (name -> the
    part's values, a numpy or pandas array: added at the end in the mapping's order, or
    replaced in place), a row group at a time: what ``to_parquet`` of ``pd.concat`` of the
    parts' whole frames with those columns set writes, read back equal, without holding every
    record. Returns False, writing nothing, when parts differ in columns or types, or one has
    no rows (the whole frames' concat would unify their types)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tmp = dest.with_name(f".{dest.name}.tmp")
    writer: pq.ParquetWriter | None = None
    dtypes: list[tuple[str, Any]] = []
    pending: list[pa.Table] = []
    try:
        for source, extra in parts:
            copy = pq.ParquetFile(source)
            rows = copy.metadata.num_rows
            if rows == 0 or any(len(values) != rows for values in extra.values()):
                return False
            at = 0
            # read a chunk at a time: whole row groups leave tens of MB in Arrow's allocator
            for batch in copy.iter_batches(batch_size=CHUNK_ROWS):
                frame = batch.to_pandas()
                del batch
                for c, values in extra.items():
                    frame[c] = values[at : at + len(frame)]
                at += len(frame)
                table = pa.Table.from_pandas(frame, preserve_index=False)
                if writer is None:
                    dtypes = list(frame.dtypes.items())
                    writer = pq.ParquetWriter(tmp, table.schema, compression="snappy")
                elif list(frame.dtypes.items()) != dtypes or not table.schema.equals(
                    writer.schema, check_metadata=True
                ):
                    return False
                del frame
                pending.append(table)
                if sum(t.num_rows for t in pending) >= ROW_GROUP_ROWS:
                    writer.write_table(pa.concat_tables(pending))
                    pending = []
        if writer is None:
            return False
        if pending:
            writer.write_table(pa.concat_tables(pending))
        writer.close()
        writer = None
        os.replace(tmp, dest)
        return True
    finally:
        if writer is not None:
            writer.close()
        tmp.unlink(missing_ok=True)
        pa.default_memory_pool().release_unused()  # the chunks' memory, back to the system


# --------------------------------------------------------------------------- run identity


def _drop(tree: dict[str, Any], dotted: str) -> None:
    head, _, rest = dotted.partition(".")
    if head not in tree:
        return
    if not rest:
        del tree[head]
    elif isinstance(tree[head], dict):
        _drop(tree[head], rest)


def identity(config: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a resolved config that determines episodes (output-only keys removed)."""
    tree = json.loads(json.dumps(dict(config), default=str))
    for key in OUTPUT_ONLY_KEYS:
        _drop(tree, key)
    return tree


def fingerprint(config: Mapping[str, Any]) -> str:
    """A short stable hash of :func:`identity` (the ``config_id`` of records)."""
    canonical = json.dumps(identity(config), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def differences(old: Any, new: Any, prefix: str = "") -> dict[str, tuple[Any, Any]]:
    """Dotted key -> (old, new) for every value that differs between two identity trees (a
    subtree present on one side only is one entry)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: dict[str, tuple[Any, Any]] = {}
        for k in sorted(old.keys() | new.keys()):
            out.update(differences(old.get(k, "<unset>"), new.get(k, "<unset>"), f"{prefix}{k}."))
        return out
    return {} if old == new else {prefix[:-1]: (old, new)}


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str) if value != "<unset>" else "unset"
    return text if len(text) <= 40 else text[:37] + "..."


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def write_json_atomic(path: Path, payload: Any) -> None:
    _write_atomic(path, json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n")


RUN_OUTPUTS = (EPISODES, TRACES, RUN_FILE, STATUS_FILE, "episodes.parquet", "figures")
"""What a job writes into its run dir under these names (``.hydra/`` is rewritten, Hydra's
job log kept) ..."""
RUN_OUTPUT_PATTERNS = (
    "summary.*",
    "comparisons.csv",
    "seed_table*",
    "sensitivity*",
    "budget_curves*",
    "scenarios*",
)
"""... and under these patterns (the tables, a named experiment's reports)."""


def set_aside(out_dir: Path) -> str | None:
    """Move a run's outputs out of the way (``resume=false``) as ``<name>.replaced``, or, if
    an earlier start-over already used that, ``<name>.replaced.2``, ``.3``, ... (one suffix
    for the whole set): no earlier run's records are ever overwritten, and no table or
    Parquet file of the old run stays beside the new records. Returns the suffix used."""
    found = [out_dir / name for name in RUN_OUTPUTS if (out_dir / name).exists()]
    for pattern in RUN_OUTPUT_PATTERNS:
        found += [p for p in sorted(out_dir.glob(pattern)) if ".replaced" not in p.name]
    if not found:
        return None
    taken = {p.name for p in out_dir.iterdir()}
    n = 1
    while True:
        suffix = ".replaced" if n == 1 else f".replaced.{n}"
        if not any(p.name + suffix in taken for p in found):
            break
        n += 1
    for path in found:
        os.replace(path, path.with_name(path.name + suffix))
    return suffix


def claim_identity(out_dir: Path, config: Mapping[str, Any], *, resume: bool) -> str:
    """Bind ``out_dir`` to this configuration; returns its ``config_id``.

    With ``resume`` a dir made by another configuration is refused (naming the differing
    keys); without it the old run's records and tables are moved aside (:func:`set_aside`:
    ``*.replaced``, then ``*.replaced.2``, ...) and the run starts over.
    """
    ident = identity(config)
    config_id = fingerprint(config)
    run_file = out_dir / RUN_FILE
    has_records = (out_dir / EPISODES).exists() and (out_dir / EPISODES).stat().st_size > 0
    if resume and run_file.exists() and has_records:  # nothing recorded: nothing to protect
        old = json.loads(run_file.read_text())
        if old.get("config_id") != config_id:
            diff = differences(old.get("config", {}), ident)
            shown = ", ".join(
                f"{k} ({_short(a)} -> {_short(b)})" for k, (a, b) in list(diff.items())[:6]
            ) + (f" and {len(diff) - 6} more" if len(diff) > 6 else "")
            raise RunDirError(
                f"{out_dir} holds records of another configuration (differs in: {shown}); "
                "use a new hydra.run.dir, or resume=false to start over in this dir "
                "(the old records are kept as *.replaced)"
            )
    elif resume and has_records:
        raise RunDirError(
            f"{out_dir} holds records without a {RUN_FILE} fingerprint (an older planarena?); "
            "use a new hydra.run.dir, or resume=false to start over in this dir "
            "(the old records are kept as *.replaced)"
        )
    if not resume:
        set_aside(out_dir)
    if not resume or not has_records or not run_file.exists():
        write_json_atomic(run_file, {"config_id": config_id, "config": ident})
    return config_id


# --------------------------------------------------------------------------- locking


class RunLock:
    """An exclusive ``fcntl.flock`` on the run dir, held until :meth:`release` (or exit)."""

    def __init__(self, out_dir: Path) -> None:
        import fcntl

        self.path = out_dir / LOCK_FILE
        self.fh: IO[str] | None = self.path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(self.fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.fh.seek(0)
            holder = self.fh.read().strip() or "another process"
            self.fh.close()
            self.fh = None
            raise RunDirError(
                f"{out_dir} is in use by another planarena job ({holder}); wait for it to end "
                "or choose another hydra.run.dir"
            ) from None
        self.fh.seek(0)
        self.fh.truncate()
        self.fh.write(f"pid {os.getpid()}\n")
        self.fh.flush()

    def release(self) -> None:
        if self.fh is not None:
            self.fh.close()  # closing the descriptor drops the lock
            self.fh = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


# --------------------------------------------------------------------------- repair


def _episode_key(r: Mapping[str, Any]) -> tuple[str, str, int]:
    """What a trace line and its record share."""
    return (str(r.get("planner")), str(r.get("task_id")), int(r.get("trial", 0)))


def record_key(r: Mapping[str, Any]) -> tuple[str, str, str, str, int, int, str]:
    """An episode's identity in a run dir: what ran, with which seed and configuration."""
    return (
        str(r["planner"]),
        str(r["env"]),
        str(r["complexity"]),
        str(r["task_id"]),
        int(r["seed"]),
        int(r["trial"]),
        str(r.get("config_id", "")),
    )


def _complete_lines(path: Path) -> Iterator[tuple[int, int, bytes]]:
    """(line number, end offset, line) of each newline-terminated line."""
    offset = 0
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            offset += len(raw)
            if raw.endswith(b"\n"):
                yield number, offset, raw


def _rewrite_without(path: Path, drop: set[int]) -> None:
    """A copy of ``path`` without the lines numbered in ``drop`` nor a torn last line, renamed
    over it atomically (a kill leaves either the old file or the new one)."""
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as out:
        for number, _, raw in _complete_lines(path):
            if number not in drop:
                out.write(raw)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


@dataclass
class Repair:
    """What :func:`repair_run_dir` kept: the keys of the recorded episodes (no records are
    held in memory), and warnings for the user."""

    done: set[tuple[str, str, str, str, int, int, str]] = field(default_factory=set)
    messages: list[str] = field(default_factory=list)
    spent_usd: float = 0.0  # the kept records' cost_usd, summed in file order


def repair_run_dir(out_dir: Path, *, rerun_harness_errors: bool = True) -> Repair:
    """Make ``episodes.jsonl`` and ``traces.jsonl`` consistent before appending to them.

    Episodes: everything after the last complete record (a torn line) is truncated away; with
    ``rerun_harness_errors`` the records of episodes that were not measured (``harness_error``,
    ``infrastructure_error``) or were cut by the job's cost cap are dropped (new file, atomic
    rename) so they run again; ``spent_usd`` is the cost of the records kept. Traces: one per
    kept episode, in the file's order; torn lines, duplicates and traces of episodes not in
    ``episodes.jsonl`` are dropped (by truncation when they are all at the end, else by an
    atomic rewrite). Idempotent, and safe to kill at any
    instant: every step leaves both files readable and the next call finishes the job.
    """
    result = Repair()
    episodes, traces = out_dir / EPISODES, out_dir / TRACES
    wanted: set[tuple[str, str, int]] = set()
    if episodes.exists():
        good_end = 0
        errors: set[int] = set()
        for number, end, raw in _complete_lines(episodes):
            if not raw.strip():
                errors.add(number)
                continue
            try:
                row = json.loads(raw)
            except json.JSONDecodeError:
                row = None
            if not isinstance(row, dict) or any(k not in row for k in RECORD_KEYS):
                raise RecordsError(
                    f"{episodes}:{number}: not an episode record; move the file aside or run "
                    "with resume=false"
                )
            good_end = end
            if rerun_harness_errors and runs_again(row):
                errors.add(number)
                continue
            result.done.add(record_key(row))
            result.spent_usd += float(row.get("cost_usd") or 0.0)
            wanted.add(_episode_key(row))
        size = episodes.stat().st_size
        if errors:
            _rewrite_without(episodes, errors)
        elif size > good_end:
            os.truncate(episodes, good_end)
        if size > good_end:
            result.messages.append(
                f"{episodes}: dropped a torn last line ({size - good_end} bytes)"
            )
        if errors:
            result.messages.append(
                f"{episodes}: {len(errors)} episode(s) not measured (harness_error, "
                "infrastructure_error) or cut by the job's cost cap will run again"
            )
    if traces.exists():
        seen: set[tuple[str, str, int]] = set()
        dropped: set[int] = set()
        prefix_end = 0  # end of the longest run of kept lines from the start
        kept_after_drop = False
        last_end = 0
        for number, end, raw in _complete_lines(traces):
            last_end = end
            try:
                doc = json.loads(raw)
                key = _episode_key(doc) if isinstance(doc, dict) else None
            except (json.JSONDecodeError, ValueError, TypeError):
                key = None
            if key is not None and key in wanted and key not in seen:
                seen.add(key)
                if dropped:
                    kept_after_drop = True
                else:
                    prefix_end = end
            else:
                dropped.add(number)
        size = traces.stat().st_size
        if kept_after_drop:
            _rewrite_without(traces, dropped)
        elif size > prefix_end:  # only the tail goes (the usual case after a kill)
            os.truncate(traces, prefix_end)
        if dropped or size > prefix_end:
            result.messages.append(
                f"{traces}: dropped {len(dropped)} trace line(s) without a recorded episode"
                + (" and a torn last line" if size > last_end else "")
            )
    return result
