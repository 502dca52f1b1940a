"""One command timed as the benchmarks time it (standard library only, so that
:mod:`.versus_inspect` runs under any interpreter).

Wall seconds are ``perf_counter`` around the command; CPU seconds are ``ru_utime + ru_stime``
of the child as ``os.wait4`` reports them, which include the children it waited for
(``getrusage(RUSAGE_CHILDREN)`` would mix in every earlier child of this process).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path


def timed(
    cmd: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    log: Path | None = None,
) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of ``cmd``, its output into ``log`` (discarded without
    one); a failing command raises, with the log's tail when there is one."""
    with log.open("wb") if log is not None else open(os.devnull, "wb") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(
            list(cmd), stdout=out, stderr=subprocess.STDOUT, env=None if env is None else dict(env),
            cwd=cwd,
        )  # fmt: skip
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    if proc.returncode != 0:
        tail = "" if log is None else f"; {log}:\n{log.read_text(errors='replace')[-3000:]}"
        raise RuntimeError(f"{' '.join(cmd[:3])} ... exited {proc.returncode}{tail}")
    return wall, usage.ru_utime + usage.ru_stime
