"""Embed a query once: a TTL + LRU cache with single-flight (DESIGN §9, peer `embedQueryCached`).

An ask searches the same strings many times (the question, then sub-questions in every round);
without this each search re-encodes its text. Concurrent misses of one key share one computation;
a failed computation is not cached. Pure asyncio; the clock is injected.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from cluster.types import Clock

V = TypeVar("V")


class QueryVectorCache(Generic[V]):
    """ttl_s: how long a value is served; max_entries: least recently used entries go first."""

    def __init__(self, *, ttl_s: float, max_entries: int, clock: Clock) -> None:
        if ttl_s <= 0 or max_entries < 1:
            raise ValueError("ttl_s must be positive and max_entries at least 1")
        self._ttl_s = ttl_s
        self._max = max_entries
        self._clock = clock
        self._entries: OrderedDict[Hashable, tuple[float, V]] = OrderedDict()
        self._in_flight: dict[Hashable, asyncio.Future[V]] = {}
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    async def get_or_compute(self, key: Hashable, compute: Callable[[], Awaitable[V]]) -> V:
        entry = self._entries.get(key)
        if entry is not None:
            stored_at, value = entry
            if self._clock() - stored_at < self._ttl_s:
                self._entries.move_to_end(key)
                self.hits += 1
                return value
            del self._entries[key]
        pending = self._in_flight.get(key)
        if pending is not None:
            self.hits += 1
            return await asyncio.shield(pending)
        self.misses += 1
        future: asyncio.Future[V] = asyncio.get_running_loop().create_future()
        self._in_flight[key] = future
        try:
            value = await compute()
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # marked retrieved: waiters re-raise it, nobody else has to
            raise
        else:
            future.set_result(value)
            self._store(key, value)
            return value
        finally:
            del self._in_flight[key]

    def invalidate(self, key: Hashable | None = None) -> None:
        """Forget one key, or everything (e.g. when the index refused a cached vector's space)."""
        if key is None:
            self._entries.clear()
        else:
            self._entries.pop(key, None)

    def _store(self, key: Hashable, value: V) -> None:
        self._entries[key] = (self._clock(), value)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)
