"""Assumptions and claims: every chosen value registered with its range and provenance
(:mod:`.assumptions`), so a finding can be tested over them."""

from planarena.experiments.claims.assumptions import (
    Assumption,
    load_assumptions,
    provenance_counts,
    render_markdown,
)

__all__ = ["Assumption", "load_assumptions", "provenance_counts", "render_markdown"]
