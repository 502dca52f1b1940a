"""Fitting the simulated LLM's skill profile to a run's traces (``planarena-calibrate``).

Importing the package registers every extractor and fit: the proposer side here (act, plans,
proposals, malformed output) and the judge side in :mod:`.fit_judge`.
"""

from __future__ import annotations

from planarena.experiments.calibrate import (  # noqa: F401 - the proposer side
    extract,
    fit,
    fit_judge,  # noqa: F401 - registers the judge side
)
from planarena.experiments.calibrate.registry import (
    EXTRACTORS,
    FITS,
    Decision,
    Estimate,
    FitOptions,
    Row,
    register_extractor,
    register_fit,
)

__all__ = [
    "EXTRACTORS",
    "FITS",
    "Decision",
    "Estimate",
    "FitOptions",
    "Row",
    "register_extractor",
    "register_fit",
]
