"""Episode records and run dirs: what a record is, reading it, a run dir's identity, repair.

The layer below :mod:`planarena.experiments.analysis` and :mod:`planarena.experiments.run`:
nothing here imports either. The public names are re-exported here
(``experiments.records.measured(df)``); each lives in one module by concern:
:mod:`.schema` (file names, keys, failure modes that are not measured), :mod:`.store`
(reading records, Parquet copies), :mod:`.identity` (fingerprint, lock, setting a run
aside), :mod:`.repair` (making a run dir consistent before appending).
"""

from planarena.experiments.records.identity import (
    LOCK_FILE,
    OUTPUT_ONLY_KEYS,
    RUN_FILE,
    STATUS_FILE,
    RunDirError,
    RunLock,
    claim_identity,
    differences,
    fingerprint,
    identity,
    set_aside,
    write_json_atomic,
)
from planarena.experiments.records.repair import Repair, record_key, repair_run_dir
from planarena.experiments.records.runs import load
from planarena.experiments.records.schema import (
    EPISODES,
    INFRASTRUCTURE_ERROR,
    JOB_COST_CAP,
    NOT_MEASURED,
    RECORD_KEYS,
    TRACES,
    RecordsError,
    measured,
    runs_again,
)
from planarena.experiments.records.store import (
    as_categories,
    concat_records,
    iter_jsonl,
    load_records,
    merge_parquet,
    read_jsonl,
    read_run,
    record_files,
    run_overrides,
    write_parquet,
)

__all__ = [
    "EPISODES",
    "INFRASTRUCTURE_ERROR",
    "JOB_COST_CAP",
    "LOCK_FILE",
    "NOT_MEASURED",
    "OUTPUT_ONLY_KEYS",
    "RECORD_KEYS",
    "RUN_FILE",
    "STATUS_FILE",
    "TRACES",
    "RecordsError",
    "Repair",
    "RunDirError",
    "RunLock",
    "as_categories",
    "claim_identity",
    "concat_records",
    "differences",
    "fingerprint",
    "identity",
    "iter_jsonl",
    "load",
    "load_records",
    "measured",
    "merge_parquet",
    "read_jsonl",
    "read_run",
    "record_files",
    "record_key",
    "repair_run_dir",
    "run_overrides",
    "runs_again",
    "set_aside",
    "write_json_atomic",
    "write_parquet",
]
