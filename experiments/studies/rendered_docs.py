"""Docs pages whose numbers are rendered from shipped runs, never typed: every page with
rendered blocks (:class:`~.rendered_blocks.Page`), rendered again by
``python -m planarena.experiments.studies.rendered_docs``; a test per page fails when the page
and its data disagree.
"""

from __future__ import annotations

from planarena.experiments.studies import (
    auto_docs,
    decision_map_docs,
    planners_docs,
    seed_tables_docs,
    sim_vs_real_docs,
    simulator_docs,
)
from planarena.experiments.studies.rendered_blocks import Page


def pages() -> list[Page]:
    """Every rendered page."""
    return [
        auto_docs.README,
        decision_map_docs.DECISION_MAP,
        planners_docs.PLANNERS,
        seed_tables_docs.SEED_TABLES,
        simulator_docs.SIMULATOR,
        sim_vs_real_docs.SIM_VS_REAL,
    ]


def main() -> int:
    for page in pages():
        print(f"rendered {page.rewrite()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
