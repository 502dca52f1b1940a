"""The job's cost cap (``budget.max_cost_usd``), accounted in job order.

**What the records say, whatever ``concurrency``.** Episodes are charged in job order. An
episode may spend the cap minus the cost recorded before it (the run dir's records from an
earlier run first, then the episodes before it in this job): its *allowance*. A call made when
the episode's own cost has reached its allowance is refused before it is sent, and the episode
ends as ``budget_exhausted`` with the stop reason ``job_cost_cap``. After that episode, or once
the recorded cost reaches the cap, the job starts no new episode and stops
(:class:`CostCapReached`); a rerun with a higher cap resumes, and the episode the cap cut runs
again. So a capped job records the first episodes of the same job without a cap, then at most
one episode cut at the call that would have crossed the cap.

**How that stays deterministic with episodes in flight.** While earlier episodes still run, an
episode's allowance is not known yet. Each of its calls is checked against a lower bound of
what the earlier episodes spent (their running totals): that check never refuses a call the
exact rule would allow, and it keeps the money actually spent within the cap plus the calls in
flight. When the episode's turn to be recorded comes (every earlier one recorded or dropped),
its allowance is exact; if it sent a call the exact rule would have refused, it is run again
with its exact allowance (a real LLM's response cache replays what it already asked). Only
the episode that crosses the cap can need this; episodes after it are dropped unrecorded.
"""

from __future__ import annotations

import asyncio

from planarena.planners.llm.base import JobBudgetExhausted, Usage


class CostCapReached(RuntimeError):
    """The job stopped at its cost cap; every record written is complete and valid."""


class CostLedger:
    """The cost recorded so far, in job order, and whose turn it is to be recorded.

    Positions are the indices of the job's episodes still to run, in job order."""

    def __init__(self, cap: float, spent: float = 0.0) -> None:
        self.cap = cap
        self.spent = spent  # recorded cost: earlier records, then each episode in order
        self.running: dict[int, Usage] = {}  # unrecorded episodes' live usage, by position
        self.stopped = spent >= cap
        self.cut = 0  # episodes the cap cut (recorded as budget_exhausted)
        self.dropped = 0  # episodes not recorded because the job had stopped
        self.reruns = 0  # episodes run again with their exact allowance
        self._next = 0
        self._turns: dict[int, asyncio.Event] = {}

    def lower_bound(self, position: int) -> float:
        """At most what the episodes before ``position`` will have recorded: the recorded
        cost plus the running totals of earlier unrecorded episodes, added in job order (so
        it never exceeds the exact sum, in floating point too)."""
        total = self.spent
        for q in sorted(self.running):
            if q >= position:
                break
            total += self.running[q].cost_usd
        return total

    def may_start(self, position: int) -> bool:
        """False once the episodes before ``position`` have certainly spent the cap."""
        return not self.stopped and self.lower_bound(position) < self.cap

    def gate(self, position: int, allowance: float | None = None) -> JobCostGate:
        """The gate of one episode: against the live lower bound, or an exact allowance."""
        return JobCostGate(self, position, allowance)

    async def turn(self, position: int) -> None:
        """Wait until every episode before ``position`` is recorded or dropped."""
        if position != self._next:
            await self._turns.setdefault(position, asyncio.Event()).wait()

    def allowance(self) -> float:
        """The exact allowance of the episode whose turn it is."""
        return self.cap - self.spent

    def done(self, position: int, cost: float | None, *, cut: bool = False) -> None:
        """``position`` was recorded with ``cost`` (None: dropped); the next one's turn."""
        self.running.pop(position, None)
        if cost is None:
            self.dropped += 1
        else:
            self.spent += cost
            self.cut += cut
            self.stopped = self.stopped or cut or self.spent >= self.cap
        self._next = position + 1
        event = self._turns.pop(position + 1, None)
        if event is not None:
            event.set()

    def summary(self, recorded: int) -> str:
        again = " (the episode it cut runs again)" if self.cut else ""
        return (
            f"the job's cost cap budget.max_cost_usd={self.cap:g} is reached "
            f"(${self.spent:.6f} recorded); {recorded} episode(s) recorded by this run, "
            f"{self.cut} cut by the cap (left out of the tables), {self.dropped} not run; "
            f"rerun with a higher budget.max_cost_usd to continue{again}"
        )


class JobCostGate:
    """Refuses an episode's LLM call once its own cost reaches its allowance: the exact one,
    or (while earlier episodes run) the cap minus a lower bound of what they spend."""

    def __init__(self, ledger: CostLedger, position: int, allowance: float | None) -> None:
        self.ledger = ledger
        self.position = position
        self.allowance = allowance
        self.max_sent: float | None = None  # the largest own cost at which a call was let through
        self.refused_at: float | None = None  # the own cost at which a call was refused

    def check(self, usage: Usage) -> None:
        ledger = self.ledger
        ledger.running[self.position] = usage  # live: later episodes' bound includes it
        limit = self.allowance
        if limit is None:
            limit = ledger.cap - ledger.lower_bound(self.position)
        spent = usage.cost_usd
        if spent >= limit:
            self.refused_at = spent
            raise JobBudgetExhausted(
                f"the job's cost cap of ${ledger.cap:g} is reached (budget.max_cost_usd)"
            )
        self.max_sent = spent if self.max_sent is None else max(self.max_sent, spent)

    def agrees_with(self, allowance: float) -> bool:
        """Whether the exact rule with ``allowance`` would have decided every call as this gate
        did (let through below it, refused at or above it): then the episode ran exactly as it
        would have with that allowance."""
        sent_ok = self.max_sent is None or self.max_sent < allowance
        return sent_ok and (self.refused_at is None or self.refused_at >= allowance)
