"""Episode records on disk: reading them, and copying them to Parquet.

A run dir holds ``episodes.jsonl`` and ``traces.jsonl``, one line per episode each, appended
(:mod:`~planarena.experiments.records.schema`). Readers (:func:`load`, :func:`read_jsonl`)
name the file and line of anything they cannot read: a torn last line of a run still being
written is skipped with a warning, anything else is refused. The Parquet writers parse the
records a chunk at a time, so a large run is never held whole.
"""

from __future__ import annotations

import glob
import json
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from planarena.experiments.records.schema import EPISODES, RECORD_KEYS, RecordsError

if TYPE_CHECKING:
    import pandas as pd


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
    for number, raw in record_lines(path):
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


def record_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(line number, text) of the lines :func:`iter_jsonl` parses, unparsed: a reader that
    has seen every record once can go back for a few without parsing the rest again."""
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            if not raw.endswith(b"\n"):
                if raw.strip():
                    _warn(f"{path}:{number}: skipped a torn last line (a job still writing?)")
                return
            if raw.strip():
                yield number, raw


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
group are what it holds of the file at once)."""


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
        """Put a chunk's values at rows ``at`` onwards."""
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
        """The first ``n`` values as the column of a frame (categories sorted)."""
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

    # One function on purpose: the writer, its temporary file and the column buffers are
    # one piece of state that the ``finally`` below closes and unlinks whichever chunk fails.
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
    return parquet_of(load_records(path), dest, columns=columns, categories=categories)


def parquet_of(
    records: pd.DataFrame,
    dest: str | Path | None,
    *,
    columns: Iterable[str] | None = None,
    categories: Iterable[str] = (),
) -> pd.DataFrame:
    """:func:`write_parquet` of records already parsed whole (``load_records(path)``): the
    same file and frame, for a reader that holds every record anyway (a study) and so need
    not parse them twice. The file is written beside ``dest`` and renamed over it."""
    if dest is not None:
        dest = Path(dest)
        tmp = dest.with_name(f".{dest.name}.tmp")
        try:
            records.to_parquet(tmp, index=False)
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
    wanted = None if columns is None else set(columns)
    if wanted is not None and "overrides" not in records.columns:
        records = records[[c for c in records.columns if c in wanted]]
    return as_categories(records, categories)


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
