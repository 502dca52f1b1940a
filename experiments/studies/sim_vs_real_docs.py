"""The rendered block of docs/sim-vs-real.md: the study's result on the shipped recording,
never typed or pasted.

``docs/data/sim_vs_real/`` holds one run's ``sim_vs_real.md`` and ``run.json`` (the code it
ran). The block is the run's ranking, nulls, completion, cross-planner hold-out and verdict
sections, one heading level down; the per-episode tables stay in the copy.
"""

from __future__ import annotations

from pathlib import Path

from planarena.experiments.studies.rendered_blocks import DOCS, Page, measured_by

DATA = DOCS / "data" / "sim_vs_real"
SECTIONS = (
    "Ranking",
    "Against unfitted profiles (nulls)",
    "Completion per planner (held-out tasks)",
    "Planner pairs by completion (held-out tasks)",
    "Cross-planner hold-out",
    "Verdict",
)


SECTIONS_NO_COMPLETION = tuple(
    s for s in SECTIONS if "by completion" not in s and not s.startswith("Completion")
)  # a recording that completes nothing: its completion tables are all 0 %
SMALL = "qwen2.5-coder-0.5b"
"""The subfolder holding the run on the 0.5B recording, rendered in a block of its own."""


def sections(
    data: Path = DATA, folder: str = "sim_vs_real", names: tuple[str, ...] = SECTIONS
) -> str:
    """The copy's sections ``names``, in that order, after a line naming the code it ran."""
    text = (data / "sim_vs_real.md").read_text(encoding="utf-8")
    parts = {}
    for chunk in text.split("\n## ")[1:]:
        title, _, body = chunk.partition("\n")
        parts[title.strip()] = body.strip()
    missing = [s for s in names if s not in parts]
    if missing:
        raise ValueError(f"{data / 'sim_vs_real.md'}: no section {missing[0]!r}")
    body = "\n\n".join(f"### {name}\n\n{parts[name]}" for name in names)
    return f"{measured_by(data, folder)}\n\n{body}\n"


def small_sections(data: Path = DATA) -> str:
    """The same for the 0.5B recording's run (``docs/data/sim_vs_real/qwen2.5-coder-0.5b/``),
    one heading level further down, without the completion tables."""
    body = sections(data / SMALL, f"sim_vs_real/{SMALL}", SECTIONS_NO_COMPLETION)
    return body.replace("\n### ", "\n#### ")


SIM_VS_REAL = Page(
    DOCS / "sim-vs-real.md", DATA, {"sim_vs_real": sections, "sim_vs_real_small": small_sections}
)
