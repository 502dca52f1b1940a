"""A docs page's rendered blocks: what a page module declares (:mod:`.rendered_docs` renders
them all).

A page marks each rendered block ``<!-- rendered: <name> -->`` ... ``<!-- /rendered -->``; a
:class:`Page` names its renderers and its data folder (copies of study runs' outputs under
``docs/data/``) and replaces every block's body with a fresh render. The claims lint
(``experiments/claims/lint.py``) skips rendered blocks: what is in them comes from a run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

BLOCK = re.compile(r"(<!-- rendered: (\w+) -->\n)(.*?)(<!-- /rendered -->)", re.S)
DOCS = Path(__file__).resolve().parents[2] / "docs"

Renderer = Callable[[Path], str]


@dataclass(frozen=True)
class Page:
    """A docs page, the folder its blocks are rendered from, and a renderer per block."""

    path: Path
    data: Path
    renderers: Mapping[str, Renderer]

    def render(self, text: str | None = None) -> str:
        """``text`` (the page as it is, by default) with every block's body rendered again."""
        text = self.path.read_text(encoding="utf-8") if text is None else text

        def fill(m: re.Match[str]) -> str:
            name = m.group(2)
            if name not in self.renderers:
                raise ValueError(f"docs/{self.path.name}: no renderer for block {name!r}")
            return m.group(1) + self.renderers[name](self.data) + m.group(4)

        return BLOCK.sub(fill, text)

    def rewrite(self) -> Path:
        """Render the page in place."""
        self.path.write_text(self.render(), encoding="utf-8")
        return self.path


def measured_by(data: Path, folder: str) -> str:
    """A line naming the code a shipped run ran (its ``run.json``): the commit, or, for a run
    from a copy of the sources outside git, their digest (equal digests: the same code)."""
    code = json.loads((data / "run.json").read_text(encoding="utf-8"))["code"]
    if code.get("git_commit"):
        dirty = " with uncommitted changes" if code.get("git_dirty") else ""
        where = f"at commit `{str(code['git_commit'])[:7]}`{dirty}"
    else:
        where = f"from sources with digest `{str(code.get('source_sha256'))[:12]}`"
    return f"Measured by planarena {code['planarena']} {where} (`docs/data/{folder}/run.json`)."
