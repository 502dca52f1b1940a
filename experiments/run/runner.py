"""The ``planarena`` command: a Hydra app that runs planners x envs x complexities x tasks.

Every job writes into its Hydra run directory: ``episodes.jsonl`` (one record per episode,
appended in a fixed order as episodes finish, so a crash loses nothing and a rerun resumes),
``traces.jsonl``, ``episodes.parquet``, ``summary.md/.csv/.tex``, ``run.json`` (the
configuration's fingerprint) and ``status.json``; it prints the completion table. The same
command and seed give byte-identical records (``wall_s`` aside) whatever ``concurrency`` is.

Before any episode the config is validated (one line naming key, value and what is allowed),
a real LLM endpoint gets one request, and the run dir is locked and bound to the
configuration's fingerprint and code version (see :mod:`planarena.experiments.records.identity`).
Errors that are not the agent's stop the job with one line and a non-zero exit; they are never
recorded as episodes.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import json
import os
import shlex
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from planarena.envs import caches
from planarena.experiments.analysis.report_html import write_report_html
from planarena.experiments.records import (
    EPISODES,
    INFRASTRUCTURE_ERROR,
    NOT_MEASURED,
    STATUS_FILE,
    TRACES,
    RecordsError,
    RunDirError,
    RunLock,
    claim_identity,
    load_records,
    measured,
    repair_run_dir,
    write_json_atomic,
)
from planarena.experiments.records.provenance import DETERMINISTIC
from planarena.experiments.run.cost_cap import CostCapReached
from planarena.experiments.run.llm_factory import (
    ConfigError,
    InfrastructureError,
    preflight,
)
from planarena.experiments.run.loop import HarnessStop, run_jobs
from planarena.experiments.run.overrides import (
    group_options,
    secret_on_command_line,
    unknown_group_choice,
    unknown_key_override,
)
from planarena.experiments.run.plugins import discover, with_plugin_searchpath
from planarena.experiments.run.prepare import Prepared, prepare, validate, with_config_id
from planarena.experiments.studies.registry import canonical

if TYPE_CHECKING:
    import pandas as pd


def return_freed_memory() -> None:
    """Give the heap's free pages back to the system (Arrow's pool, and glibc's
    ``malloc_trim``; elsewhere a no-op). Emptied caches and the Parquet copy's parsed chunks
    leave free pages the allocators otherwise keep: the page written next, and the figure
    workers forked from this process, would start from them."""
    arrow = sys.modules.get("pyarrow")
    if arrow is not None:  # its own allocator keeps freed pages too
        arrow.default_memory_pool().release_unused()
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    trim = getattr(libc, "malloc_trim", None)
    if trim is not None:
        trim(0)


def _unique_suffix() -> str:
    return str(os.getpid())


def _job_dir_name(override_dirname: str) -> str:
    """A sweep job's dir from its overrides (``planner=react,seed=1``): stable when a sweep
    is extended; ``/`` escaped, very long names shortened with a hash."""
    import hashlib

    name = override_dirname.replace("/", "%2F") or "default"
    if len(name) > 200:
        name = name[:180] + "~" + hashlib.sha256(name.encode()).hexdigest()[:12]
    return name


# ``${planarena_unique:}`` makes default run dirs unique (the pid beside the time: two jobs
# started in the same second cannot share a dir); ``${planarena_job_dir:...}`` names sweep job
# dirs. Cached, so every read of the run dir in one job gives the same value.
OmegaConf.register_new_resolver("planarena_unique", _unique_suffix, use_cache=True, replace=True)
OmegaConf.register_new_resolver("planarena_job_dir", _job_dir_name, replace=True)


# One encoder for every trace line (``json.dumps`` with options builds one per call).
def run(
    cfg: DictConfig,
    out_dir: Path,
    *,
    prepared: Prepared | None = None,
    lock: RunLock | None = None,
    on_claim: Callable[[str], None] | None = None,
    endpoint_answered: bool = False,
) -> Path:
    """Run the configured sweep into ``out_dir``; returns the episodes file.

    Validates first; then, holding the dir's lock (``lock``, or one taken here for the call),
    binds the dir to the config's fingerprint, repairs the records files and runs the
    episodes not yet recorded under that fingerprint (``harness_error`` and
    ``infrastructure_error`` ones, and one the cost cap cut, run again). Raises
    :class:`CostCapReached` when the job stopped at ``budget.max_cost_usd``.
    """
    prepared = prepared or prepare(cfg)
    out_dir.mkdir(parents=True, exist_ok=True)
    own_lock = lock is None
    held = lock or RunLock(out_dir)
    try:
        resume: bool | str = "force" if cfg.resume == "force" else bool(cfg.resume)
        config_id = claim_identity(out_dir, prepared.container, resume=resume, code=prepared.code())
        if on_claim is not None:
            on_claim(config_id)
        done: set[tuple[str, str, str, str, int, int, str, str]] = set()
        spent_usd = 0.0  # what the kept records cost counts toward budget.max_cost_usd
        if resume:
            repaired = repair_run_dir(out_dir)
            for message in repaired.messages:  # what a resume sets right: expected, no alarm
                print(f"resume: {message}", file=sys.stderr)
            done, spent_usd = repaired.done, repaired.spent_usd
        seed = int(cfg.seed)
        contexts = with_config_id(prepared.contexts, config_id)
        open_cells = set(range(len(prepared.cells)))
        looks = [int(n) for n in (prepared.container.get("sequential") or {}).get("stages") or []]
        for look, n_tasks in enumerate([*looks, int(cfg.n_tasks)], start=1):
            stage = prepared.jobs.upto(n_tasks, open_cells) if looks else prepared.jobs
            todo = stage.without(lambda j, known=done: j.key(seed, config_id) in known)
            recorded = len(stage) - len(todo)
            if recorded and look == 1:  # a resumed run says what it reuses
                print(
                    f"planarena: {recorded} episode(s) already recorded in {out_dir}, "
                    f"{len(todo)} to run",
                    file=sys.stderr,
                )
            asyncio.run(
                run_jobs(
                    cfg, todo, contexts, out_dir, spent_usd, endpoint_answered=endpoint_answered
                )
            )
            if look > len(looks):
                break
            repaired = repair_run_dir(out_dir)  # what the next stage finds recorded
            done, spent_usd = repaired.done, repaired.spent_usd
            open_cells -= settled_at_look(out_dir, prepared, open_cells)
            print(
                f"planarena: look {look} of {len(looks)}, at {n_tasks} task(s) per env x "
                f"complexity: {len(prepared.cells) - len(open_cells)} of "
                f"{len(prepared.cells)} cell(s) settled",
                file=sys.stderr,
            )
            if not open_cells:
                break
    finally:
        if own_lock:
            held.release()
    return out_dir / EPISODES


def settled_at_look(out_dir: Path, prepared: Prepared, open_cells: set[int]) -> set[int]:
    """The still-running cells (by index) whose records now settle them: the study's
    :meth:`~planarena.experiments.studies.registry.Study.settled_cells` under the run's
    :class:`~planarena.experiments.studies.sequential.Rule`."""
    from planarena.experiments.records.store import write_parquet
    from planarena.experiments.studies.registry import get
    from planarena.experiments.studies.sequential import Rule

    config = canonical(prepared.container)
    rule = Rule.of(config)
    assert rule is not None  # only a run with stages looks
    labels = {prepared.cells[i]: i for i in open_cells}
    frame = write_parquet(out_dir / EPISODES, None, columns=LOOK_COLUMNS)
    frame = frame[frame["cell"].isin(list(labels))]
    settled = get(str(config["study"])).settled_cells(frame, config, rule)
    return {labels[c] for c in settled if c in labels}


LOOK_COLUMNS = (
    "cell",
    "planner",
    "env",
    "complexity",
    "task_id",
    "trial",
    "success",
    "failure_mode",
    "tokens_total",
    "latency_s",
    "cost_usd",
)
"""The record columns a study's look reads."""


@dataclass
class StudyWork:
    """A study job's records, parsed once for both its tables and its analysis, and that
    analysis: :func:`finish` runs it while the figure workers draw; ``printed`` holds what it
    returned once it has run."""

    records: pd.DataFrame
    analyse: Callable[[pd.DataFrame], str]
    printed: str = ""

    def run(self) -> None:
        self.printed = self.analyse(self.records)


def study_work(cfg: DictConfig, out_dir: Path) -> StudyWork:
    """The job's study analysis over every record of ``out_dir``."""
    from planarena.experiments.studies.report import render_study

    config = canonical(config_of(cfg))
    return StudyWork(
        load_records(out_dir / EPISODES),
        lambda records: render_study(out_dir, config, out_dir, records=records),
    )


def finish(
    out_dir: Path,
    seed: int,
    planner_order: Sequence[str],
    *,
    figures: bool = True,
    reference_cell: str = "",
    study: StudyWork | None = None,
) -> tuple[str, pd.DataFrame]:
    """Parquet copy, summaries and (optionally) figures; returns the completion table and the
    records' columns the tables, figures and the job's messages read (``detail`` too). In a
    study's grid the summaries are its ``reference_cell``'s (its first cell's) records.

    The records are copied to Parquet a chunk at a time, keeping only those columns (repeated
    strings as categoricals): about 0.2 KB an episode is held, not its whole record. A study's
    job holds every record anyway: its ``study`` records are copied, not read again, and its
    analysis runs while the figure workers draw (or here, without figures)."""
    from planarena.experiments.analysis.tables import format_completion_table, write_summaries
    from planarena.experiments.records.columns import CATEGORY_COLUMNS, EPISODE_COLUMNS
    from planarena.experiments.records.store import parquet_of, write_parquet

    cell = (reference_cell,) if reference_cell else ()
    # detail: for harness_error_summary (mostly "", so a categorical)
    columns = (*EPISODE_COLUMNS, "detail", *("cell" for _ in cell))
    categories = (*CATEGORY_COLUMNS, "detail", *("cell" for _ in cell))
    dest = out_dir / "episodes.parquet"
    if study is None:
        df = write_parquet(out_dir / EPISODES, dest, columns=columns, categories=categories)
    else:
        df = parquet_of(study.records, dest, columns=columns, categories=categories)
    if reference_cell:  # a study's grid: the job's own tables are its reference cell's
        df = df[df["cell"] == reference_cell].reset_index(drop=True)
    return_freed_memory()  # the parsed chunks' pages
    summary = write_summaries(df, out_dir, seed=seed, planner_order=list(planner_order))
    if figures:
        return_freed_memory()  # the figure workers fork from this heap: its RSS is theirs
        from planarena.experiments.analysis.figures import write_figures

        order = list(planner_order)
        write_figures(
            measured(df), out_dir, seed=seed, planner_order=order, summary=summary,
            meanwhile=study.run if study is not None else None,
        )  # fmt: skip
    elif study is not None:
        study.run()
    return format_completion_table(summary), df


OUTPUTS_STAMP = ".planarena.outputs.json"
"""What a completed job's tables, figures and study were made from, and what it printed: a
rerun that runs nothing, of the same records, config, code and figures setting, prints that
again instead of redrawing (a no-op rerun starts and ends in about a second)."""


def records_state(out_dir: Path) -> list[list[int]]:
    """Size and modification time of the records and traces: any write changes them."""
    state = []
    for name in (EPISODES, TRACES):
        path = out_dir / name
        st = path.stat() if path.exists() else None
        state.append([st.st_size, st.st_mtime_ns] if st else [0, 0])
    return state


def current_outputs(out_dir: Path, stamp: dict[str, Any]) -> str | None:
    """What the job printed when its outputs were made from exactly ``stamp``, or None (no
    stamp, another stamp, or an output since removed)."""
    try:
        saved = json.loads((out_dir / OUTPUTS_STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if {k: saved.get(k) for k in stamp} != json.loads(json.dumps(stamp)):
        return None
    needed = ["episodes.parquet", "summary.csv", *(["figures"] if stamp["figures"] else [])]
    if not all((out_dir / name).exists() for name in needed):
        return None
    return str(saved.get("shown", ""))


_NOT_MEASURED_WHY = {
    "harness_error": "errors of the harness or of a planner's code, see traces.jsonl",
    INFRASTRUCTURE_ERROR: "the LLM endpoint failed, not the agent; left out of the tables",
}
DETAIL_CHARS = 240
"""How much of one error's detail a summary line shows (cut at a word, marked with ...)."""


def _shortened(detail: str, limit: int = DETAIL_CHARS) -> str:
    """``detail`` on one line, cut at a word boundary with ``...`` when longer than ``limit``
    (never mid-word, and never ending on an opening bracket the cut left open)."""
    text = " ".join(str(detail).split())
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0].rstrip(" ,;:([{") + " ..."


def harness_error_summary(df: pd.DataFrame) -> str:
    """``N harness_error episode(s) (...): 3x KeyError: ...; ...`` (the most common first),
    and the same for ``infrastructure_error``; then what to do: rerun (an endpoint's failure),
    or fix the code first (an error whose detail says a rerun repeats it)."""
    parts, deterministic = [], False
    for mode, why in _NOT_MEASURED_WHY.items():
        errors = df[df["failure_mode"] == mode]
        if errors.empty:
            continue
        counts = Counter(_shortened(d) for d in errors["detail"])
        deterministic |= any(DETERMINISTIC in str(d) for d in errors["detail"])
        top = "; ".join(f"{n}x {d}" for d, n in counts.most_common(3))
        more = f"; and {len(counts) - 3} other error(s)" if len(counts) > 3 else ""
        parts.append(f"{len(errors)} {mode} episode(s) ({why}): {top}{more}")
    advice = (
        "fix the code the error names, then rerun the same command to run them again"
        if deterministic
        else "rerun the same command to run them again"
    )
    return "; ".join(parts) + f"; {advice}"


def save_hydra_files(out_dir: Path, cfg: DictConfig) -> None:
    """``.hydra/config.yaml``, ``hydra.yaml`` and ``overrides.yaml``, written once the job
    holds the dir (``hydra.output_subdir`` is null so a refused job never overwrites them)."""
    hc = HydraConfig.get()
    target = out_dir / ".hydra"
    target.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(cfg, target / "config.yaml")
    OmegaConf.save(OmegaConf.create({"hydra": OmegaConf.to_container(hc)}), target / "hydra.yaml")
    OmegaConf.save(hc.overrides.task, target / "overrides.yaml")


def _saved(out_dir: Path) -> int:
    path = out_dir / EPISODES
    if not path.exists():
        return 0
    with path.open("rb") as fh:
        return sum(1 for line in fh if line.endswith(b"\n"))


STATUS = {0: "ok", 1: "harness_errors", 5: "cost_cap"}
"""``status.json``'s status by exit status (any other: failed); 1 with only infrastructure
errors is ``infrastructure_errors``."""


def execute(cfg: DictConfig, out_dir: Path, *, in_sweep: bool) -> tuple[int, str]:
    """One job from validation to tables; returns (exit status, one-line outcome).

    Exit status: 0 done (or a dry run); 1 done, but some episodes were not measured (harness
    or infrastructure errors); 2 a config or run-dir error (nothing ran); 3 stopped by an
    infrastructure error or a repeated error; 5 stopped at the job's cost cap
    (``budget.max_cost_usd``; the tables hold the episodes recorded); 130 interrupted (4: a
    bug of ours in a sweep job, which :func:`app` records so the sweep goes on).
    """
    # One function from validation to tables on purpose: each stop (an exception class)
    # maps to one exit status and one line, and the lock is released on every path.
    lock: RunLock | None = None
    capped: CostCapReached | None = None
    try:
        choices = HydraConfig.get().runtime.choices if HydraConfig.initialized() else {}
        experiment = choices.get("experiment")
        if experiment is not None and experiment not in group_options("experiment"):
            options = ", ".join(group_options("experiment"))
            raise ConfigError(f"experiment={experiment}: no such experiment; choose from {options}")
        container = validate(cfg)
        if container.get("dry_run"):  # no request, no lock, nothing written
            from planarena.experiments.run.dry_run import estimate

            print(estimate(cfg, prepare(cfg, container)))
            return 0, ""
        reached = preflight(container["llm"])  # a dead endpoint stops the job before it starts
        prepared = prepare(cfg, container)
        out_dir.mkdir(parents=True, exist_ok=True)
        lock = RunLock(out_dir)
        claimed: list[str] = []
        name = cfg.get("study")
        studied = bool(name) and int(cfg.get("shards", 1)) <= 1  # renders itself below

        def on_claim(config_id: str) -> None:
            claimed.append(config_id)
            save_hydra_files(out_dir, cfg)

        before = records_state(out_dir)
        try:
            run(
                cfg, out_dir, prepared=prepared, lock=lock, on_claim=on_claim,
                endpoint_answered=reached,
            )  # fmt: skip
        except CostCapReached as exc:  # a clean stop: the records written are complete
            capped = exc
        figures = cfg.get("figures")
        draw = bool(figures) if figures is not None else not in_sweep  # the aggregate draws them
        stamp = {
            "records": records_state(out_dir),
            "config_id": claimed[-1] if claimed else None,
            "code": prepared.code(),
            "figures": draw,
        }
        shown = current_outputs(out_dir, stamp) if stamp["records"] == before else None
        if capped is None and shown is not None:
            print(shown)  # nothing ran and the outputs are of these records: shown, not redone
            return 0, ""
        reference = prepared.cells[0]
        del prepared  # the jobs and their tasks (1-2 KB each): the tables read the records
        caches.clear_all()  # and the episode phase's caches: none of it is read again
        gc.collect()
        return_freed_memory()
        # a study reads every record: parsed once, for the tables and for its analysis,
        # which runs while the figures are drawn
        study = study_work(cfg, out_dir) if studied else None
        table, df = finish(
            out_dir,
            int(cfg.seed),
            list(cfg.planner),
            figures=draw,
            reference_cell=reference,
            study=study,
        )
        printed = study.printed if study is not None else ""
        del study  # its records: the page and messages read ``df``
    except (ConfigError, RunDirError, RecordsError) as exc:
        return 2, f"planarena: {exc}"
    except (InfrastructureError, HarnessStop) as exc:
        return 3, (
            f"planarena: stopped: {exc}; {_saved(out_dir)} episode(s) saved in {out_dir} "
            f"(fix the cause, then resume: {resume_command(out_dir, in_sweep=in_sweep)})"
        )
    except KeyboardInterrupt:
        return 130, (
            f"planarena: interrupted; {_saved(out_dir)} episode(s) saved in {out_dir}; "
            f"to resume: {resume_command(out_dir, in_sweep=in_sweep)}"
        )
    finally:
        if lock is not None:
            lock.release()
    from planarena.experiments.analysis.headline import headline  # pandas: records exist
    from planarena.experiments.analysis.tables import (
        completion_heading,  # pandas: loaded once records exist
    )

    shown = [
        f"\n{completion_heading(measured(df))} — {out_dir}\n{table}",
        "\n" + headline(measured(df), out_dir, seed=int(cfg.seed)),
    ]
    if name and not studied:  # one shard's cells: the sweep renders them all
        shown.append(
            f"\nstudy {name}: shard {cfg.shard} of {cfg.shards}; the sweep's aggregate (or "
            "planarena-report on the sweep dir) writes the study from every shard's records"
        )
    elif studied:  # the study's own analysis, from the run's records alone (run by finish)
        shown.append("\n" + printed)
    print("\n".join(shown))
    errors = df["failure_mode"].isin(NOT_MEASURED).any()
    if capped is None and not errors:  # a rerun with nothing to do shows these again
        write_json_atomic(out_dir / OUTPUTS_STAMP, {**stamp, "shown": "\n".join(shown)})
    if capped is not None:
        also = f"; {harness_error_summary(df)}" if errors else ""
        return 5, f"planarena: stopped: {capped}{also}"
    if errors:
        return 1, f"planarena: {harness_error_summary(df)}"
    return 0, ""


def write_status(out_dir: Path, code: int, message: str, overrides: list[str]) -> None:
    status = STATUS.get(code, "failed")
    if code == 1 and "harness_error episode" not in message:
        status = "infrastructure_errors"
    if code == 2 and not out_dir.exists():
        return
    write_json_atomic(
        out_dir / STATUS_FILE,
        {"status": status, "exit_code": code, "message": message, "overrides": overrides},
    )


RUN_DIR_KEYS = ("hydra.run.dir=", "hydra.sweep.dir=")


def resume_command(out_dir: Path, *, in_sweep: bool) -> str:
    """The exact command that resumes this run: the command line as given, with the run
    dir (or a sweep's dir) named, so a timestamped default dir is not replaced by a new one."""
    args = [a for a in sys.argv[1:] if not a.startswith(RUN_DIR_KEYS)]
    if in_sweep and HydraConfig.initialized():
        where = f"hydra.sweep.dir={Path(HydraConfig.get().sweep.dir).resolve()}"
    else:
        where = f"hydra.run.dir={out_dir.resolve()}"
    return shlex.join(["planarena", *args, where])


def _remove_if_only_empty_logs(out_dir: Path) -> None:
    """Remove ``out_dir`` if all it holds is Hydra's empty job log (``<job>.log``)."""
    if not out_dir.is_dir():
        return
    entries = list(out_dir.iterdir())
    if all(p.is_file() and p.suffix == ".log" and p.stat().st_size == 0 for p in entries):
        for p in entries:
            p.unlink()
        out_dir.rmdir()
        _remove_empty_parents(out_dir.parent)


def _remove_empty_parents(path: Path) -> None:
    """Empty dirs Hydra made above a removed run dir (``results/runs/<date>``), up to the
    working dir."""
    stop = Path.cwd().resolve()
    path = path.resolve()
    while path != stop and stop in path.parents and not any(path.iterdir()):
        path.rmdir()
        path = path.parent


@hydra.main(version_base="1.3", config_path="pkg://planarena.configs", config_name="config")
def app(cfg: DictConfig) -> None:
    hc = HydraConfig.get()
    out_dir = Path(hc.runtime.output_dir)
    in_sweep = hc.mode == RunMode.MULTIRUN
    try:
        code, message = execute(cfg, out_dir, in_sweep=in_sweep)
    except Exception as exc:
        if not in_sweep:
            raise  # a bug of ours: Hydra shows the traceback
        import traceback

        traceback.print_exc()  # in a sweep: shown, recorded, and the other jobs go on
        code, message = 4, f"planarena: {type(exc).__name__}: {exc}"
    if message:
        print(message, file=sys.stderr)
    if code == 0 and cfg.get("dry_run"):  # a dry run leaves no dir behind (Hydra's empty
        _remove_if_only_empty_logs(out_dir)  # job log aside, it wrote nothing)
        return
    if code != 2 or in_sweep:  # a refused job leaves another job's dir untouched
        write_status(out_dir, code, message, list(hc.overrides.task))
        if (out_dir / EPISODES).is_file():  # the run's page, showing its final status
            write_report_html(out_dir)
    elif code == 2:  # a refused run leaves nothing behind (Hydra's empty job log aside)
        _remove_if_only_empty_logs(out_dir)
    if code == 130 or (code and not in_sweep):  # in a sweep the other jobs go on (the
        sys.exit(code)  # aggregate names this one), unless the user stopped the sweep


def main() -> None:
    """Checks the command line in one line each, then runs :func:`app` with the config trees
    of the ``planarena.configs`` entry-point group on Hydra's search path."""
    packages, broken = discover()
    for why in broken:  # a leftover of an uninstalled package: said, not fatal
        print(f"WARNING: {why}", file=sys.stderr)
    args = with_plugin_searchpath(sys.argv[1:], packages)
    problem = (
        secret_on_command_line(args) or unknown_group_choice(args) or unknown_key_override(args)
    )
    if problem is not None:
        print(f"planarena: {problem}", file=sys.stderr)
        sys.exit(2)
    sys.argv[1:] = args  # what Hydra reads
    app()


def cli() -> None:
    """The ``planarena`` command: :func:`main`, ended without the interpreter's teardown."""
    from planarena.experiments.process import run_and_exit

    run_and_exit(main)


def config_of(cfg: DictConfig) -> dict[str, Any]:
    container = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(container, dict)
    container.pop("hydra", None)
    return container


if __name__ == "__main__":
    cli()
