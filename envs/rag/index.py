"""The rag family's corpus as the tools read it: the shipped documents, BM25-indexed in memory.

The index is built once per process from the shipped file (``planarena.envs.rag.corpus``
writes it); ``bm25s`` is imported when the index is first needed, not when the env's modules
are (its import pulls in numpy and scipy, which the corpus tool and a run without the rag env
do not need).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from planarena.envs.rag.tables import DATA_FILE


@dataclass(frozen=True)
class Corpus:
    """The documents in corpus order, by id, the crag names and the BM25 retriever."""

    docs: tuple[dict[str, Any], ...]
    by_id: dict[str, dict[str, Any]]
    crags: tuple[str, ...]  # every crag name, longest first (for matching)
    retriever: Any

    def scores(self, query: str) -> list[float]:
        """Each document's BM25 score for ``query`` (zeros for a query of stopwords only)."""
        import bm25s  # loaded with the index (see the module's docstring)

        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)[0]
        if not tokens:
            return [0.0] * len(self.docs)
        return [float(s) for s in self.retriever.get_scores(tokens)]


@lru_cache(maxsize=1)
def corpus() -> Corpus:
    """The shipped corpus and its BM25 index (built once per process, in memory)."""
    import bm25s  # here, not at the top: see the module's docstring

    logging.getLogger("bm25s").setLevel(logging.WARNING)  # its index build logs at DEBUG
    docs = tuple(json.loads(line) for line in DATA_FILE.read_text("utf-8").splitlines() if line)
    texts = [f"{d['title']}. {d['text']}" for d in docs]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    crags = tuple(sorted({d["crag"] for d in docs if d["crag"]}, key=lambda c: (-len(c), c)))
    return Corpus(docs, {d["doc_id"]: d for d in docs}, crags, retriever)


def first_crag(text: str) -> str | None:
    """The crag a text names first (the condition of a conditional retrieval)."""
    low = text.lower()
    best: tuple[int, str] | None = None
    for crag in corpus().crags:
        at = low.find(crag.lower())
        if at >= 0 and (best is None or at < best[0]):
            best = (at, crag)
    return best[1] if best else None


def split_conditional(query: str) -> tuple[str, str]:
    """(the text that carries the condition, the words that are asked) of a conditional
    query: an earlier result filled in as JSON is the condition and the rest is asked;
    a query with no JSON in it (a crag named in plain words) is both."""
    at = query.find("{")
    if at >= 0:
        try:
            _, length = json.JSONDecoder().raw_decode(query[at:])
        except json.JSONDecodeError:
            return query, query
        rest = f"{query[:at]} {query[at + length :]}".strip()
        return query[at : at + length], rest or query
    return query, query


# an unfilled placeholder: {dep_result}, {{step_1.result}}, {anything} left in a query
