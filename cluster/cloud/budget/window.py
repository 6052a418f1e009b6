"""The sliding window of request starts: a known rate becomes "at most N starts in any window_s"."""

from __future__ import annotations

from collections import deque

__all__ = ["StartWindow"]


class StartWindow:
    """Start times inside the last `window_s`; the gate is full when it holds `limit` of them."""

    def __init__(self, window_s: float) -> None:
        self._window_s = window_s
        self._starts: deque[float] = deque()

    def __len__(self) -> int:
        return len(self._starts)

    def record(self, now: float) -> None:
        self._starts.append(now)

    def expire(self, now: float) -> None:
        """Forget starts that have left the window."""
        while self._starts and self._starts[0] + self._window_s <= now:
            self._starts.popleft()

    def full(self, limit: int | None) -> bool:
        """No further start fits under `limit`; never full when no gate is armed (None)."""
        return limit is not None and len(self._starts) >= limit

    def frees_at(self, limit: int) -> float:
        """When one more start fits under `limit` (call only when `full(limit)`)."""
        return self._starts[len(self._starts) - limit] + self._window_s
