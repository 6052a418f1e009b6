"""One key's cloud budget (DESIGN §7): the four state machines composed behind one ticket API.

Pure logic over an injected clock and random source; no asyncio, no Ray. `BudgetActor` wraps one
`BudgetController` and only turns its tickets into awaitables: `enqueue` → `grant` (now, or again at
`next_wakeup()` / after a `release`) → `release` with the outcome.

The permit unit is concurrency (one permit = one in-flight cloud request); `ceiling.py` says where
the ceiling comes from. The parts: `FairQueue` (who goes next), `Aimd` (how many may run),
`StartWindow` (a credible or learned rate as a sliding window of starts) and `RateLearner` (a rate
measured at a 429, and the probes above it). This class owns what they share: the key's facts, the
latency EWMA, the in-flight table and the grant sequence that numbers every start.
"""

from __future__ import annotations

import math
import random as _random
from collections.abc import Callable

from cluster.cloud.budget.aimd import Aimd
from cluster.cloud.budget.ceiling import credible_rpm, explain, gate_limit, permits_ceiling, window_rpm
from cluster.cloud.budget.learning import RateLearner
from cluster.cloud.budget.model import BudgetLimits, BudgetSnapshot, KeyFacts, Outcome, Priority
from cluster.cloud.budget.queue import FairQueue
from cluster.cloud.budget.window import StartWindow
from cluster.types import Clock

__all__ = ["BudgetController"]


class BudgetController:
    """One key's budget: tickets wait in fair queues, `grant()` admits what the budget allows now."""

    def __init__(self, limits: BudgetLimits, *, clock: Clock, random: Callable[[], float] = _random.random) -> None:
        self._limits = limits
        self._clock = clock
        now = clock()
        self._facts: KeyFacts | None = None
        self._last_discovery_at: float | None = None
        self._latency_s = limits.initial_latency_s
        self._grant_seq = 0  # numbers every start; also the count of requests started
        self._in_flight: dict[int, tuple[float, int]] = {}  # ticket -> (start, grant seq)
        self._rate_limited = 0
        self._queue = FairQueue()
        self._aimd = Aimd(
            permits=self._ceiling(),
            now=now,
            ramp_interval_s=limits.ramp_interval_s,
            base_backoff_s=limits.base_backoff_s,
            max_backoff_s=limits.max_backoff_s,
            random=random,
        )
        self._window = StartWindow(limits.window_s)
        self._learner = RateLearner(
            window_s=limits.window_s,
            probe_step_fraction=limits.probe_step_fraction,
            min_plausible_rpm_funded=limits.min_plausible_rpm_funded,
            now=now,
        )

    # ---- public API -------------------------------------------------------------------------

    @property
    def ceiling(self) -> int:
        self._sync(self._clock())
        return self._ceiling()

    @property
    def effective(self) -> int:
        self._sync(self._clock())
        return self._aimd.effective

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def apply_key_facts(self, facts: KeyFacts) -> None:
        """Adopt what discovery read; the ceiling follows (and clamps effective permits if it fell)."""
        now = self._clock()
        self._sync(now)
        self._facts = facts
        self._last_discovery_at = now
        if self._rate_limited == 0:
            # Nothing has pushed back yet: the timid start was for not knowing, not for a 429.
            # Jump to what discovery allows instead of climbing one permit per 15 s.
            self._aimd.raise_to(self._ceiling())
        self._sync(now)

    def enqueue(self, project: str, priority: Priority) -> int:
        """Queue one waiter; the returned ticket is admitted by a later `grant()`."""
        return self._queue.enqueue(project, priority)

    def cancel(self, ticket: int) -> None:
        """A waiter gave up. No-op if it was already granted (release it instead) or is unknown."""
        self._queue.cancel(ticket)

    def grant(self) -> list[int]:
        """Tickets that may start now, in fairness order; each is in flight from this call."""
        now = self._clock()
        self._sync(now)
        if self._aimd.cooling(now):
            return []
        limit = self._gate_limit()
        granted: list[int] = []
        while self._queue and len(self._in_flight) < self._aimd.effective:
            if self._window.full(limit):
                break
            ticket = self._queue.pop_next()
            self._grant_seq += 1
            self._in_flight[ticket] = (now, self._grant_seq)
            self._window.record(self._grant_seq)
            self._learner.record(now, self._grant_seq)
            granted.append(ticket)
        if self._window.full(limit):
            self._learner.mark_saturated()
        return granted

    def next_wakeup(self) -> float | None:
        """When `grant()` might next admit a waiter that cannot start now.

        `now` if one can start already; None if nothing waits or only a release can make room.
        """
        now = self._clock()
        self._sync(now)
        if not self._queue:
            return None
        blocks: list[float | None] = []
        if self._aimd.cooling(now):
            blocks.append(self._aimd.cooldown_until(now))
        if len(self._in_flight) >= self._aimd.effective:
            blocks.append(self._aimd.permit_due_at(len(self._in_flight), self._ceiling()))
        limit = self._gate_limit()
        if limit is not None and self._window.full(limit):
            frees_at = self._window.frees_at(limit)
            if self._learner.probe_pending(reported=self._reported()):
                due = self._learner.probe_due_at()
                frees_at = due if frees_at is None else min(frees_at, due)
            blocks.append(frees_at)
        if not blocks:
            return now
        times = [t for t in blocks if t is not None]
        return max(times) if len(times) == len(blocks) else None

    def release(self, ticket: int, *, latency_s: float, outcome: Outcome, retry_after_s: float | None = None) -> None:
        """A granted request finished: free its permit and learn from how it went."""
        if ticket not in self._in_flight:
            raise ValueError(f"ticket {ticket} is not in flight (never granted, or already released)")
        if not (latency_s >= 0 and math.isfinite(latency_s)):
            raise ValueError(f"latency_s must be a finite number >= 0, got {latency_s!r}")
        if retry_after_s is not None and not (retry_after_s >= 0 and math.isfinite(retry_after_s)):
            raise ValueError(f"retry_after_s must be a finite number >= 0 or None, got {retry_after_s!r}")
        outcome = Outcome(outcome)
        now = self._clock()
        self._sync(now)
        started_at, seq = self._in_flight.pop(ticket)
        self._window.settle(seq, now)
        if outcome is Outcome.OK:
            alpha = self._limits.latency_alpha
            self._latency_s = max(self._limits.latency_floor_s, self._latency_s * (1 - alpha) + latency_s * alpha)
        elif outcome is Outcome.RATE_LIMITED:
            self._on_rate_limited(now, started_at, seq, retry_after_s)
        self._sync(now)

    def set_override(self, override: int | None) -> None:
        """A manual ceiling (1..256) from the operator, or None to clear it; validated like the limits."""
        self._limits = BudgetLimits.model_validate({**self._limits.model_dump(), "override": override})
        self._sync(self._clock())

    def snapshot(self) -> BudgetSnapshot:
        now = self._clock()
        self._sync(now)
        ceiling = self._ceiling()
        source, reason = explain(self._limits, self._facts, self._latency_s, ceiling, self._learner.note)
        return BudgetSnapshot(
            ceiling=ceiling,
            effective=self._aimd.effective,
            in_flight=len(self._in_flight),
            waiting=self._queue.counts(),
            source=source,
            state=self._aimd.state(now, ceiling),
            reason=reason,
            rate_limited=self._rate_limited,
            requests=self._grant_seq,
            window_rpm=window_rpm(self._limits, self._facts, self._learner.learned),
            cooldown_until=self._aimd.cooldown_until(now),
            latency_ewma_s=self._latency_s,
            last_discovery_at=self._last_discovery_at,
        )

    # ---- what the parts share -----------------------------------------------------------------

    def _ceiling(self) -> int:
        return permits_ceiling(self._limits, self._facts, self._latency_s)

    def _gate_limit(self) -> int | None:
        return gate_limit(self._limits, self._facts, self._learner.learned)

    def _reported(self) -> bool:
        """A credible rpm is known: it, not a learned rate, gates the window."""
        return credible_rpm(self._limits, self._facts) is not None

    def _sync(self, now: float) -> None:
        """Apply everything that time alone changes: ceiling clamp, ramp, backoff reset, window, probe."""
        self._aimd.sync(now, self._ceiling())
        self._window.expire(now)
        self._learner.expire(now)
        self._learner.step_probe(now, self._grant_seq, reported=self._reported())

    def _on_rate_limited(self, now: float, started_at: float, seq: int, retry_after_s: float | None) -> None:
        self._rate_limited += 1
        refused_probe = self._learner.on_rate_limited(
            now,
            started_at,
            seq,
            learn=self._limits.learn_rate and not self._reported(),
            known_unfunded=self._facts is not None and not self._facts.funded,
        )
        if refused_probe or self._aimd.answered(seq):
            # A refused probe is our own experiment answering (the gate has stepped back, no halving);
            # a request granted before the last halving is the same congestion event. Either way only
            # Retry-After is honoured.
            self._aimd.honour_retry_after(now, self._grant_seq, retry_after_s)
            return
        self._aimd.halve(now, self._ceiling(), self._grant_seq, retry_after_s)
