"""planarena: which LLM-agent planning strategy wins, on which task, under which faults, at
what cost.

The Python API (``docs/python-api.md``): :func:`run` a job, :func:`load` records,
:func:`episode` plays one, :func:`compose` a config, and the registries
:func:`planner_names`, :func:`env_names`, :func:`study_names` and :func:`options`. They live
in :mod:`planarena.api` and are imported on first use, so ``import planarena`` loads neither
Hydra nor pandas nor any planner.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

__all__ = [
    "RunError",
    "__version__",
    "compose",
    "env_names",
    "episode",
    "load",
    "options",
    "planner_names",
    "run",
    "study_names",
]

if TYPE_CHECKING:
    from planarena.api import (
        RunError,
        compose,
        env_names,
        episode,
        load,
        options,
        planner_names,
        run,
        study_names,
    )

_LAZY = frozenset(__all__) - {"__version__"}


def __getattr__(name: str) -> Any:
    """The API's names, imported from :mod:`planarena.api` when first asked for."""
    if name in _LAZY:
        from planarena import api

        value = getattr(api, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'planarena' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
