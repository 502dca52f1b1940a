"""The rendered block of docs/simulator.md's sensitivity section: the verdicts of one run of
``planarena experiment=sensitivity``, never typed.

``docs/data/sensitivity/`` holds that run's ``sensitivity.md`` and ``run.json`` (the code it
ran). ``python -m planarena.experiments.studies.rendered_docs`` renders the block from its
verdict counts, the orderings each assumption reverses and the pairs the assumptions decide
(the design and the per-group tables stay in the copy); ``tests/test_studies.py`` fails when
the page and the copy disagree.
"""

from __future__ import annotations

from pathlib import Path

from planarena.experiments.studies.rendered_blocks import DOCS, measured_by

DATA = DOCS / "data" / "sensitivity"
FIRST, LAST = "## Verdicts", "## Design"


def verdicts(data: Path = DATA) -> str:
    """The copy's sections from its verdicts to its design, one heading level down."""
    text = (data / "sensitivity.md").read_text(encoding="utf-8")
    body = text[text.index(FIRST) : text.index(LAST)].strip()
    body = "\n".join("#" + line if line.startswith("## ") else line for line in body.splitlines())
    return f"{measured_by(data, 'sensitivity')}\n\n{body}\n"
