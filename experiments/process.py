"""How the command-line programs end: as soon as their work is done.

Tearing the interpreter down after a job (freeing every module, cache and table it loaded:
pandas, pyarrow, matplotlib, the tokenizer) took about half a second, more than a small job's
tables. Once a command has returned, every file it wrote is closed, so :func:`run_and_exit`
does what the interpreter does first at exit (wait for threads and run their exit hooks, e.g.
the joblib launcher's worker shutdown; then the exit handlers: logging's flush,
multiprocessing's clean-up) and ends the process without the teardown that follows.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from collections.abc import Callable
from typing import NoReturn


def run_and_exit(command: Callable[[], int | None]) -> NoReturn:
    """Run ``command`` (a CLI's ``main``) and end the process with its exit status, as
    ``sys.exit(command())`` would, but without the interpreter's teardown. An exception
    other than ``SystemExit`` propagates as usual (its traceback is shown by Python)."""
    try:
        status: int | str | None = command()
    except SystemExit as exc:
        status = exc.code
    except BrokenPipeError:  # the reader went away (``planarena --help | head``): not an error
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = 0
    if isinstance(status, str):  # sys.exit("message"): printed, status 1
        print(status, file=sys.stderr)
        status = 1
    # what Python runs at exit before its teardown, in its order: threads joined and their
    # exit hooks (loky, the joblib launcher's executor, shuts its workers down there: skipped,
    # multiprocessing's handler below waited 300 s for them), then the atexit handlers
    threading._shutdown()  # type: ignore[attr-defined]  # noqa: SLF001
    atexit._run_exitfuncs()  # noqa: SLF001
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe or stream
            stream.flush()
    os._exit(int(status or 0))
