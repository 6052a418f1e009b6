"""AIMD over the permit ceiling (DESIGN §7): a 429 halves, each clean ramp interval adds one back.

A halving starts a jittered cooldown in which nothing starts; the cooldown base doubles per halving
(up to a cap) and resets once the permits are back at the ceiling for a clean interval. 429s of
requests granted before a halving are the same congestion event: they honour Retry-After only.
"""

from __future__ import annotations

from collections.abc import Callable

from cluster.cloud.budget.model import BudgetState

__all__ = ["Aimd"]


class Aimd:
    """Effective permits under a moving ceiling, over an injected clock reading and random source.

    permits:         the starting effective permits (the ceiling when the budget is built).
    now:             clock time at construction; the first ramp interval starts here.
    ramp_interval_s: each clean interval this long adds one permit back.
    base_backoff_s:  the first cooldown base; it doubles per halving up to max_backoff_s.
    random:          uniform [0, 1) source for the cooldown jitter.
    """

    def __init__(
        self,
        *,
        permits: int,
        now: float,
        ramp_interval_s: float,
        base_backoff_s: float,
        max_backoff_s: float,
        random: Callable[[], float],
    ) -> None:
        self._ramp_interval_s = ramp_interval_s
        self._base_backoff_s = base_backoff_s
        self._max_backoff_s = max_backoff_s
        self._random = random
        self._effective = permits
        self._backoff_s = base_backoff_s
        self._cooldown_until: float | None = None
        self._ramp_mark = now  # last 429 or last ramp step; kept at `now` while at the ceiling
        self._last_429_at: float | None = None
        # 429s on requests granted up to this seq are already answered (one halving per congestion event).
        self._answered_seq = 0

    @property
    def effective(self) -> int:
        """Permits allowed now (call `sync` first for the current time)."""
        return self._effective

    @property
    def backoff_s(self) -> float:
        """The base of the next cooldown."""
        return self._backoff_s

    def cooling(self, now: float) -> bool:
        """Inside a post-429 cooldown: nothing starts."""
        return self._cooldown_until is not None and now < self._cooldown_until

    def cooldown_until(self, now: float) -> float | None:
        """When the current cooldown ends; None when none is active at `now`."""
        return self._cooldown_until if self.cooling(now) else None

    def state(self, now: float, ceiling: int) -> BudgetState:
        if self.cooling(now):
            return BudgetState.BACKING_OFF
        if self._effective < ceiling:
            return BudgetState.RAMPING
        return BudgetState.STEADY

    def sync(self, now: float, ceiling: int) -> None:
        """Apply what time alone changes: clamp to the ceiling, ramp, reset the backoff."""
        self._effective = min(self._effective, ceiling)
        # DESIGN §7: every clean ramp interval since the last 429 or ramp adds one permit back.
        while self._effective < ceiling and self._ramp_mark + self._ramp_interval_s <= now:
            self._effective += 1
            self._ramp_mark += self._ramp_interval_s
        if self._effective >= ceiling:
            self._ramp_mark = now  # at the ceiling the ramp idles; a raised ceiling starts a fresh interval
            if self._last_429_at is None or self._last_429_at + self._ramp_interval_s <= now:
                self._backoff_s = self._base_backoff_s

    def raise_to(self, ceiling: int) -> None:
        """Jump straight to `ceiling` if below it (nothing has pushed back yet)."""
        self._effective = max(self._effective, ceiling)

    def permit_due_at(self, in_flight: int, ceiling: int) -> float | None:
        """When ramping frees a permit for one more request beside `in_flight`; None if the ceiling forbids it."""
        steps = in_flight - self._effective + 1
        if self._effective + steps > ceiling:
            return None
        return self._ramp_mark + steps * self._ramp_interval_s

    def answered(self, seq: int) -> bool:
        """The request granted as `seq` started before the last halving: its 429 is the same event."""
        return seq <= self._answered_seq

    def honour_retry_after(self, now: float, latest_seq: int, retry_after_s: float | None) -> None:
        """A 429 that must not halve: mark everything granted so far answered and honour Retry-After only."""
        self._answered_seq = max(self._answered_seq, latest_seq)
        if retry_after_s is not None:
            self._cooldown_until = max(self._cooldown_until or now, now + retry_after_s)

    def halve(self, now: float, ceiling: int, latest_seq: int, retry_after_s: float | None) -> None:
        """DESIGN §7: a 429 halves the effective permits (min 1) and starts a jittered cooldown."""
        self._effective = max(1, min(self._effective, ceiling) // 2)
        if retry_after_s is not None:
            until = now + retry_after_s + self._random() * (retry_after_s / 2)
        else:
            base = self._backoff_s
            until = now + base / 2 + self._random() * base
        self._cooldown_until = max(self._cooldown_until or now, until)
        self._backoff_s = min(self._max_backoff_s, self._backoff_s * 2)
        self._ramp_mark = now
        self._last_429_at = now
        self._answered_seq = latest_seq
