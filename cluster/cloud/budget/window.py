"""The sliding window of request starts: a known rate becomes "at most N starts in any window_s".

The key counts a request when it arrives, some time between our grant and its answer, and network and
scheduling jitter moves that moment. A start therefore stays in the window until `window_s` after its
request was answered (while it is in flight it stays in, however long that takes): a new grant can
then never reach the key inside the window of one it replaces, whatever the jitter. Counting from
the grant instead lets a grant made the instant an old start leaves reach the key before that start's
window has passed there, and be refused (measured: 3 to 5 such 429s in 20 s at a 5 s window).
The cost is one round trip per window (a 0.3 s latency on a 60 s window: 0.5 %).
"""

from __future__ import annotations

__all__ = ["StartWindow"]


class StartWindow:
    """Starts not yet `window_s` past their answer; the gate is full when it holds `limit` of them."""

    def __init__(self, window_s: float) -> None:
        self._window_s = window_s
        self._answered_at: dict[int, float | None] = {}  # grant seq -> when it was answered (None: in flight)

    def __len__(self) -> int:
        return len(self._answered_at)

    def record(self, seq: int) -> None:
        """The request granted as `seq` started; it counts until `window_s` after `settle`."""
        self._answered_at[seq] = None

    def settle(self, seq: int, now: float) -> None:
        """The request granted as `seq` was answered at `now` (unknown seqs, already expired: ignored)."""
        if seq in self._answered_at:
            self._answered_at[seq] = now

    def expire(self, now: float) -> None:
        """Forget starts answered `window_s` or longer ago."""
        gone = [s for s, at in self._answered_at.items() if at is not None and at + self._window_s <= now]
        for seq in gone:
            del self._answered_at[seq]

    def full(self, limit: int | None) -> bool:
        """No further start fits under `limit`; never full when no gate is armed (None)."""
        return limit is not None and len(self._answered_at) >= limit

    def frees_at(self, limit: int) -> float | None:
        """When one more start fits under `limit` (call only when `full(limit)`); None when that waits
        on a request still in flight (its answer frees it, `window_s` later)."""
        leaving = sorted(at + self._window_s for at in self._answered_at.values() if at is not None)
        needed = len(self._answered_at) - limit + 1
        return leaving[needed - 1] if len(leaving) >= needed else None
