"""Every docs page with rendered blocks (experiments/studies/rendered_docs.py) is exactly what its
shipped data renders: a number typed into a block, or data changed without rendering the page,
fails here."""

from __future__ import annotations

import pytest
from planarena.experiments.studies.rendered_blocks import BLOCK
from planarena.experiments.studies.rendered_docs import pages


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.path.name)
def test_each_rendered_page_equals_its_render(page) -> None:  # type: ignore[no-untyped-def]
    text = page.path.read_text(encoding="utf-8")
    assert {m.group(2) for m in BLOCK.finditer(text)} == set(page.renderers)
    assert page.render(text) == text, "run python -m planarena.experiments.studies.rendered_docs"


def test_a_typed_number_in_a_block_is_caught() -> None:
    page = next(p for p in pages() if p.path.name == "planners.md")
    text = page.path.read_text(encoding="utf-8")
    start = text.index("<!-- rendered: budget_curves -->")
    tampered = text[:start] + text[start:].replace("%", "% (typed)", 1)
    assert page.render(tampered) != tampered
