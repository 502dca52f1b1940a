"""The rendered block of docs/seed-tables.md: the seed article's tables as one run measured
them, never typed.

``docs/data/seed_tables/`` holds a copy of one run of ``planarena experiment=seed_tables``:
its ``seed_tables.md``, the ``seed_table_*.csv`` behind it and its ``run.json`` (the code it
ran). ``python -m planarena.experiments.studies.rendered_docs`` renders the page's block from
it; ``tests/test_seed_tables.py`` fails when the page and the copy disagree.
"""

from __future__ import annotations

from pathlib import Path

from planarena.experiments.studies.rendered_blocks import DOCS, Page, measured_by

DATA = DOCS / "data" / "seed_tables"


def tables(data: Path = DATA) -> str:
    """The run's seed_tables.md below its title, after a line naming the code it ran."""
    body = (data / "seed_tables.md").read_text(encoding="utf-8").split("\n", 1)[1].strip()
    return f"{measured_by(data, 'seed_tables')}\n\n{body}\n"


SEED_TABLES = Page(DOCS / "seed-tables.md", DATA, {"seed_tables": tables})
