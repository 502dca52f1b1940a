"""Docs pages whose numbers are rendered from shipped runs, never typed.

A page marks each rendered block ``<!-- rendered: <name> -->`` ... ``<!-- /rendered -->``;
:func:`fill_blocks` replaces every block's body with its renderer's output from the page's
data folder (copies of a study run's outputs under ``docs/data/``). Each page's module runs it
(``python -m ...``) and a test fails when the page and its data disagree. The claims lint
(``experiments/claims/lint.py``) skips rendered blocks: what is in them comes from a run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path

BLOCK = re.compile(r"(<!-- rendered: (\w+) -->\n)(.*?)(<!-- /rendered -->)", re.S)

Renderer = Callable[[Path], str]


def fill_blocks(text: str, renderers: Mapping[str, Renderer], data: Path, page: str) -> str:
    """``text`` with every rendered block's body replaced by a fresh render from ``data``."""

    def fill(m: re.Match[str]) -> str:
        name = m.group(2)
        if name not in renderers:
            raise ValueError(f"{page}: no renderer for block {name!r}")
        return m.group(1) + renderers[name](data) + m.group(4)

    return BLOCK.sub(fill, text)


def rewrite(page: Path, renderers: Mapping[str, Renderer], data: Path) -> Path:
    """Render ``page`` in place."""
    text = page.read_text(encoding="utf-8")
    page.write_text(fill_blocks(text, renderers, data, f"docs/{page.name}"), encoding="utf-8")
    return page
