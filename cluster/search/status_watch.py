"""Resource subscriptions' source of changes: while anyone watches, the index summaries are read every
`period_s` and each change (`changes_between`) is published.

A replica holds its subscribers' streams (`subscriptions/listen`), so each replica watches for its
own: the watch starts with its first watcher and stops with its last, and reads nothing while nobody
watches. A read is one call of the index actor's recorded state (no git): at the default period a
replica with subscribers adds one small call a second. The first watcher waits for the baseline
read, so a change made after its subscription is acknowledged is never folded into the baseline. A
read that fails or takes over `timeout_s` (the actor restarting) is logged and tried again next
period; the baseline is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from cluster.search.index_resources import IndexSummary, ResourceChanges, changes_between

__all__ = ["STATUS_POLL_S", "StatusWatch"]

log = logging.getLogger("samespace.resources")

STATUS_POLL_S = 1.0  # how often a replica with subscribers reads the index summaries
READ_TIMEOUT_S = 10.0  # a read that takes longer (the index actor restarting) is given up, tried next period

ReadSummaries = Callable[[], Awaitable[Sequence[IndexSummary]]]
PublishChanges = Callable[[ResourceChanges], Awaitable[None]]


class StatusWatch:
    """Reads the summaries every `period_s` while `watching()` is held; publishes what changed."""

    def __init__(
        self,
        read: ReadSummaries,
        publish: PublishChanges,
        period_s: float = STATUS_POLL_S,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        timeout_s: float = READ_TIMEOUT_S,
    ) -> None:
        self._read = read
        self._publish = publish
        self._period_s = period_s
        self._timeout_s = timeout_s
        self._sleep = sleep
        self._watchers = 0
        self._last: Sequence[IndexSummary] | None = None
        self._task: asyncio.Task[None] | None = None
        self._start = asyncio.Lock()
        self._ending: set[asyncio.Task[None]] = set()  # cancelled loops, referenced until they end

    @property
    def watchers(self) -> int:
        return self._watchers

    @property
    def running(self) -> bool:
        return self._task is not None

    @contextlib.asynccontextmanager
    async def watching(self) -> AsyncIterator[None]:
        """Hold the watch for one subscriber: the first starts it (after a baseline read), the last
        stops it."""
        self._watchers += 1
        try:
            async with self._start:
                if self._task is None:
                    self._last = await self._read_or_none()
                    self._task = asyncio.get_running_loop().create_task(self._loop())
            yield
        finally:
            self._watchers -= 1
            if self._watchers == 0:
                self._stop()

    async def poll(self) -> ResourceChanges | None:
        """Read once and publish what changed since the last read (None: the read failed, or it is
        the baseline)."""
        now = await self._read_or_none()
        if now is None:
            return None
        before, self._last = self._last, now
        if before is None:
            return None
        changes = changes_between(before, now)
        if not changes.empty:
            await self._publish(changes)
        return changes

    async def _loop(self) -> None:
        while True:
            await self._sleep(self._period_s)
            await self.poll()

    async def _read_or_none(self) -> Sequence[IndexSummary] | None:
        try:
            return await asyncio.wait_for(self._read(), self._timeout_s)
        except Exception as exc:  # noqa: BLE001 - a failed read (an actor restarting, anything) must not end the watch
            log.warning("index summaries not read (tried again in %.1fs): %r", self._period_s, exc)
            return None

    def _stop(self) -> None:
        task, self._task, self._last = self._task, None, None
        if task is not None:
            task.cancel()
            self._ending.add(task)
            task.add_done_callback(self._ending.discard)
