"""``python -m planarena.experiments.claims``: render docs/assumptions.md from the registry."""

from pathlib import Path

from planarena.experiments.claims.assumptions import render_markdown

docs = Path(__file__).resolve().parents[2] / "docs" / "assumptions.md"
docs.write_text(render_markdown(), encoding="utf-8")
print(f"wrote {docs}")
