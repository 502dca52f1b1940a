"""Findings typed by hand: sentences of the README and docs that compare planners without a
registered claim behind them.

A sentence is a *finding* when it names a planner (or a family of them) and compares it (more,
fewer, wins, leads, trails, cheaper, faster, stronger, the most, ...). A finding may stand in
the docs only where its numbers are not typed:

- on a page rendered from a study's output (its first lines say ``do not edit by hand``), or
  between ``<!-- rendered: ... -->`` and ``<!-- /rendered -->``;
- naming the registered claim it states, as ``(claim `id`)``: its verdict and conditions are
  then the claims study's (docs/claims.md);
- on a page that quotes the source articles (first lines say ``quotes the source articles``),
  or between ``<!-- quoted: ... -->`` and ``<!-- /quoted -->``: what the articles claim is a
  published claim, not ours.

``python -m planarena.experiments.claims.lint`` prints each remaining one as
``file:line: sentence``; ``tests/test_claims.py`` fails on any that is neither one of these nor
in the ratchet list ``pending_findings.txt``: findings typed before this check, each to be
registered or rendered; the list may only shrink (an entry no longer in the docs fails too).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

PLANNER_WORDS = re.compile(
    r"\b(ReAct|Reflexion|Plan-and-Execute|P&E(?:\+R)?|plan_execute(?:_replan|_rerun)?|"
    r"replanning|replanner|static plans?|ToT|Tree-of-Thoughts|BFS|DFS|MCTS|topo|LLMCompiler|"
    r"ReWOO|self_refine|search planners?|linear plan)\b",
    re.IGNORECASE,
)
COMPARISON = re.compile(
    r"\b(wins?|won|beats?|leads?|outperforms?|trails?|complete[sd]? (?:more|fewer|less|the most)|"
    r"more than|fewer than|cheaper|faster|slower|better than|worse than|(?:is|was|are) the best|"
    r"ahead of|behind|dominates?|separably (?:ahead|behind|better|worse)|stronger|weaker|"
    r"recovers? (?:more|less)|higher completion|lower completion)\b"
)
CLAIM_REF = re.compile(r"\(claims? `([a-z0-9_]+)`")
RENDERED_PAGE = "do not edit by hand"
QUOTING_PAGE = "quotes the source articles"
RENDERED_BLOCK = re.compile(r"<!-- (rendered|quoted):.*?<!-- /\1 -->", re.S)
CODE_BLOCK = re.compile(r"```.*?```", re.S)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z*(`\[])")


@dataclass(frozen=True)
class Finding:
    """A sentence comparing planners: where it is, and the claim it names (if any)."""

    path: Path
    line: int
    sentence: str
    claim: str | None

    def key(self) -> str:
        """How the ratchet list names it: the page and the sentence, whitespace folded."""
        return f"{self.path.name}: {' '.join(self.sentence.split())}"


def _blank(match: re.Match[str]) -> str:
    return "\n" * match.group(0).count("\n")


def findings(path: Path) -> Iterator[Finding]:
    """Every planner comparison on a page that is neither rendered nor quoting."""
    text = path.read_text(encoding="utf-8")
    head = text[:800]
    if RENDERED_PAGE in head or QUOTING_PAGE in head:
        return
    text = RENDERED_BLOCK.sub(_blank, CODE_BLOCK.sub(_blank, text))
    for line, sentence in _sentences(text):
        if PLANNER_WORDS.search(sentence) and COMPARISON.search(sentence):
            ref = CLAIM_REF.search(sentence)
            yield Finding(path, line, sentence.strip(), ref.group(1) if ref else None)


def _sentences(text: str) -> Iterator[tuple[int, str]]:
    """(line, sentence): a table row and a list item stand alone; prose is split at sentence
    ends, across its line breaks."""
    prose: list[str] = []
    start = 0

    def flush() -> Iterator[tuple[int, str]]:
        if prose:
            for sentence in SENTENCE_END.split(" ".join(prose)):
                yield start, sentence
            prose.clear()

    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not stripped or stripped.startswith(("|", "- ", "#")) or re.match(r"\d+\. ", stripped):
            yield from flush()
            if stripped.startswith("|"):
                yield number, stripped
                continue
            if stripped.startswith(("- ", "#")) or re.match(r"\d+\. ", stripped):
                prose.append(stripped)
                start = number
            continue
        if not prose:
            start = number
        prose.append(stripped)
    yield from flush()


def pages(root: Path) -> list[Path]:
    """The README and every docs page."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def unregistered(root: Path, registered: Iterable[str]) -> list[Finding]:
    """Findings that name no registered claim (or an unknown one)."""
    known = set(registered)
    return [f for p in pages(root) for f in findings(p) if f.claim not in known]


PENDING = Path(__file__).with_name("pending_findings.txt")


def pending() -> set[str]:
    """The ratchet list's keys (:meth:`Finding.key`), comments and blank lines left out."""
    lines = PENDING.read_text(encoding="utf-8").splitlines() if PENDING.is_file() else []
    return {x for x in lines if x.strip() and not x.startswith("#")}


def main() -> int:
    from planarena.experiments.claims.claims import load_claims

    root = Path(__file__).resolve().parents[2]
    known = pending()
    left = [f for f in unregistered(root, (c.id for c in load_claims())) if f.key() not in known]
    for f in left:
        print(f"{f.path.relative_to(root)}:{f.line}: {' '.join(f.sentence.split())[:200]}")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
