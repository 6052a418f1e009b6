"""Reconnect delays: exponential with jitter, reset after a successful register."""

from __future__ import annotations

import random as _random
from collections.abc import Callable

__all__ = ["BACKOFF_FACTOR", "BACKOFF_INITIAL_S", "BACKOFF_JITTER", "BACKOFF_MAX_S", "Backoff"]

BACKOFF_INITIAL_S = 0.5
BACKOFF_FACTOR = 2.0
BACKOFF_MAX_S = 30.0
BACKOFF_JITTER = 0.2  # ±20 %


class Backoff:
    """0.5 s, 1 s, 2 s ... up to 30 s, each scaled by a random factor in [1 - jitter, 1 + jitter].

    `random` returns a float in [0, 1); 0.5 (or jitter=0) gives the bare sequence.
    """

    def __init__(
        self,
        *,
        initial_s: float = BACKOFF_INITIAL_S,
        factor: float = BACKOFF_FACTOR,
        max_s: float = BACKOFF_MAX_S,
        jitter: float = BACKOFF_JITTER,
        random: Callable[[], float] = _random.random,
    ) -> None:
        if initial_s <= 0 or factor < 1 or max_s < initial_s or not 0 <= jitter < 1:
            raise ValueError("backoff needs initial_s > 0, factor >= 1, max_s >= initial_s, 0 <= jitter < 1")
        self._initial_s = initial_s
        self._factor = factor
        self._max_s = max_s
        self._jitter = jitter
        self._random = random
        self._next_s = initial_s

    def next_delay(self) -> float:
        """The delay before the next attempt; the one after grows by `factor` (capped at max_s)."""
        base = self._next_s
        self._next_s = min(self._max_s, base * self._factor)
        return base * (1.0 + self._jitter * (2.0 * self._random() - 1.0))

    def reset(self) -> None:
        self._next_s = self._initial_s
