"""The process-wide caches of the episode phase, and one call that empties them all.

Episodes reuse what the episodes before them computed (token counts of repeated message
texts, parsed plans, a task's world and fault exposure). Once a job's episodes are done, the
tables and figures need none of it: :func:`clear_all` frees it before they run, so the
figure processes forked afterwards do not start from a heap the size of those caches.
"""

from __future__ import annotations

from collections.abc import Callable

_CLEARS: list[Callable[[], None]] = []


def register(clear: Callable[[], None]) -> None:
    """Call ``clear`` (a cache's ``cache_clear`` or ``dict.clear``) in :func:`clear_all`."""
    _CLEARS.append(clear)


def clear_all() -> None:
    """Empty every registered cache; the next episode simply fills them again."""
    for clear in _CLEARS:
        clear()
