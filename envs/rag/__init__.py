"""The ``rag`` task family: the second source article's RAG plan-and-execute workflow.

Questions about rock climbing near Taipei (the nearest crag to a station, its easiest route and
grade, its season, how to get there) are answered from a shipped corpus of short guide pages
(``planarena.envs.rag.corpus``), retrieved with BM25 (``bm25s``, built in memory from the
shipped file; no download, no stemmer). Three tools:

- ``retrieve(query)``: BM25 over the whole corpus, top 3 documents;
- ``retrieve_conditional(query)``: retrieval conditioned on an earlier result: the query carries
  that result (a plan writes ``{dep_result}``, filled by the executor from the step it depends
  on) and the condition is the first crag the query names; only that crag's documents rank;
- ``synthesize(question, context)``: the answer, written only from the retrieval results in
  ``context``.

Multi-hop questions (medium, complex) need the conditional step: the crag is only known after
the first retrieval. Retrieval quality is a world property: some facts also exist in an
outdated near-duplicate (an old guide naming a crag closed since, or an old season or grade)
that ranks first for a vague query; its date (``top_year``) is the warning sign.

The article's three silent bugs are loud here. A query that still holds a placeholder
(``{dep_result}`` or any ``{name}``) is refused (``ERROR plan_logic``); a conditional query
that names no crag (``{dep_result}`` filled from the wrong step, or no dependency at all) is
refused; and ``synthesize`` refuses to answer a question part no context document supports (a
skipped or missing ``retrieve_conditional``), instead of writing a fluent answer without it.

The modules, each importing only those before it: ``corpus`` (the corpus generator and its
tables), ``index`` (the shipped corpus, BM25-indexed), ``world`` (the tools and what a
question asks), ``oracle`` (the right remaining steps) and ``env``. The package does not
bind the name ``corpus``: it is the corpus tool's module (the index's loader is
``planarena.envs.rag.index.corpus``).
"""

from planarena.envs.rag.env import RagEnv, generate_tasks, grade
from planarena.envs.rag.index import Corpus, first_crag, split_conditional
from planarena.envs.rag.oracle import RagOracle
from planarena.envs.rag.world import (
    LATENCY,
    SLOTS,
    SPECS,
    Branch,
    RagWorld,
    branches_of,
    nearest_queries,
    nearest_vague,
    required_facts,
    stale_facts,
)

__all__ = [
    "LATENCY",
    "SLOTS",
    "SPECS",
    "Branch",
    "Corpus",
    "RagEnv",
    "RagOracle",
    "RagWorld",
    "branches_of",
    "first_crag",
    "generate_tasks",
    "grade",
    "nearest_queries",
    "nearest_vague",
    "required_facts",
    "split_conditional",
    "stale_facts",
]
