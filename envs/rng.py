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


class KeyedDraws:
    """Draws under a fixed key prefix (an episode's seed keys), the prefix hashed once.

    ``KeyedDraws(*prefix).uniform01(*keys) == uniform01(*prefix, *keys)`` exactly: the hash
    state after the prefix is copied rather than recomputed, which matters in the simulator's
    hot loop (many draws per LLM call, each re-reading the same prefix otherwise)."""

    __slots__ = ("prefix", "_state")

    def __init__(self, *prefix: object) -> None:
        if not prefix:
            raise ValueError("KeyedDraws needs at least one prefix key")
        self.prefix = prefix
        material = "\x1f".join(repr(k) for k in prefix).encode()
        self._state = hashlib.blake2b(material, digest_size=8)

    def under(self, *keys: object) -> KeyedDraws:
        """Draws under this prefix extended by ``keys`` (hashed once here):
        ``d.under(*a).uniform01(*b) == d.uniform01(*a, *b)``."""
        child = object.__new__(KeyedDraws)
        child.prefix = (*self.prefix, *keys)
        child._state = self._state.copy()
        if keys:
            child._state.update(("\x1f" + "\x1f".join(map(repr, keys))).encode())
        return child

    def seed(self, *keys: object) -> int:
        if not keys:
            return int.from_bytes(self._state.digest(), "big")
        state = self._state.copy()
        state.update(("\x1f" + "\x1f".join(map(repr, keys))).encode())
        return int.from_bytes(state.digest(), "big")

    def uniform01(self, *keys: object) -> float:
        # seed(*keys) / 2**64, inlined: the simulator draws many of these per LLM call
        state = self._state.copy()
        if keys:
            state.update(("\x1f" + "\x1f".join(map(repr, keys))).encode())
        return int.from_bytes(state.digest(), "big") / 2**64

    def rng(self, *keys: object) -> random.Random:
        return random.Random(self.seed(*keys))
