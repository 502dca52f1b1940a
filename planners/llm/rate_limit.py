"""Client-side rate limits in the units providers publish: requests and tokens per minute.

One :class:`RateLimiter` is shared by every episode of a job that talks to one endpoint (a
real model runs in one process, its episodes as concurrent tasks), so the job as a whole stays
under the limits however many episodes are in flight. Each limit is a token bucket that
refills continuously at ``limit / 60`` per second and holds at most ten seconds' worth (a
provider's per-minute limit is also enforced over shorter windows). A request reserves one
request and its tokens (the prompt, counted with o200k, plus the completion's allowance)
before it is sent; when the reply comes, the allowance not used is given back.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

BURST_S = 10.0


class _Bucket:
    def __init__(self, per_minute: float, clock: Callable[[], float]) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate * BURST_S)
        self.level = self.capacity
        self.clock = clock
        self.stamp = clock()

    def _refill(self) -> None:
        now = self.clock()
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def wait_for(self, amount: float) -> float:
        """Seconds until ``amount`` is available (a request larger than the bucket waits for
        a full bucket, then goes)."""
        self._refill()
        need = min(amount, self.capacity) - self.level
        return max(0.0, need / self.rate)

    def take(self, amount: float) -> None:
        self._refill()
        self.level -= amount

    def give_back(self, amount: float) -> None:
        self._refill()
        self.level = min(self.capacity, self.level + amount)


class RateLimiter:
    """``requests_per_minute`` and ``tokens_per_minute`` (either None: no limit)."""

    def __init__(
        self,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        for name, value in (("requests", requests_per_minute), ("tokens", tokens_per_minute)):
            if value is not None and value <= 0:
                raise ValueError(f"llm.{name}_per_minute must be positive or null, not {value}")
        self.requests = _Bucket(requests_per_minute, clock) if requests_per_minute else None
        self.tokens = _Bucket(tokens_per_minute, clock) if tokens_per_minute else None
        self._lock = asyncio.Lock()
        self.waited_s = 0.0  # total time requests spent waiting here

    @property
    def active(self) -> bool:
        return self.requests is not None or self.tokens is not None

    async def acquire(self, tokens: int) -> None:
        """Wait (first come, first served) until one request and ``tokens`` fit, then take them."""
        if not self.active:
            return
        async with self._lock:
            while True:
                wait = max(
                    self.requests.wait_for(1) if self.requests else 0.0,
                    self.tokens.wait_for(tokens) if self.tokens else 0.0,
                )
                if wait <= 0:
                    break
                self.waited_s += wait
                await asyncio.sleep(wait)
            if self.requests:
                self.requests.take(1)
            if self.tokens:
                self.tokens.take(tokens)

    def settle(self, reserved: int, used: int) -> None:
        """Give back what a request reserved and did not use."""
        if self.tokens is not None and reserved > used:
            self.tokens.give_back(reserved - used)
