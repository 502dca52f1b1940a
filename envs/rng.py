"""Deterministic random streams derived from the config seed.

Every random draw in planarena comes from a ``random.Random`` built here from the run seed and
a tuple of keys that name *what* the draw is for (task generation, a fault on one tool call, one
LLM call). Keying by meaning rather than by call order keeps records byte-identical whatever the
concurrency, and gives every planner the same world (common random numbers).
"""

from __future__ import annotations

import hashlib
import random


def derive_seed(*keys: object) -> int:
    """A 64-bit integer seed from any printable keys (stable across processes and platforms)."""
    material = "\x1f".join(repr(k) for k in keys).encode()
    return int.from_bytes(hashlib.blake2b(material, digest_size=8).digest(), "big")


def derive_rng(*keys: object) -> random.Random:
    """A fresh ``random.Random`` for the stream named by ``keys``."""
    return random.Random(derive_seed(*keys))


def uniform01(*keys: object) -> float:
    """One uniform draw in [0, 1) named by ``keys``, without building a Random object."""
    return derive_seed(*keys) / 2**64
