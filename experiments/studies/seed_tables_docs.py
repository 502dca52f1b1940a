"""The rendered block of docs/seed-tables.md: the seed article's tables as one run measured
them, never typed.

``docs/data/seed_tables/`` holds a copy of one run of ``planarena experiment=seed_tables``:
its ``seed_tables.md``, the ``seed_table_*.csv`` behind it and its ``run.json`` (the code it
ran). ``python -m planarena.experiments.studies.seed_tables_docs`` renders the page's block
from it; ``tests/test_seed_tables.py`` fails when the page and the copy disagree.
"""

from __future__ import annotations

import json
from pathlib import Path

from planarena.experiments.studies.rendered_docs import Renderer, fill_blocks, rewrite

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "docs" / "data" / "seed_tables"
PAGE = ROOT / "docs" / "seed-tables.md"


def tables(data: Path = DATA) -> str:
    """The run's seed_tables.md below its title, after a line naming the code it ran."""
    code = json.loads((data / "run.json").read_text(encoding="utf-8"))["code"]
    dirty = " with uncommitted changes" if code.get("git_dirty") else ""
    source = (
        f"Measured by planarena {code['planarena']} at commit "
        f"`{str(code.get('git_commit'))[:7]}`{dirty} (`docs/data/seed_tables/run.json`)."
    )
    body = (data / "seed_tables.md").read_text(encoding="utf-8").split("\n", 1)[1].strip()
    return f"{source}\n\n{body}\n"


RENDERERS: dict[str, Renderer] = {"seed_tables": tables}


def render_page(text: str, data: Path = DATA) -> str:
    """``text`` with its rendered block replaced by a fresh render."""
    return fill_blocks(text, RENDERERS, data, "docs/seed-tables.md")


def main() -> int:
    print(f"rendered {rewrite(PAGE, RENDERERS, DATA)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
