"""The status watch on virtual time: it reads nothing until someone watches, takes its baseline before
the first watcher goes on, publishes each change once, outlives a failed read, runs one loop for any
number of watchers and stops with the last."""

from __future__ import annotations

import asyncio

from cluster.errors import SamespaceError
from cluster.search import INDEXES_URI, IndexSummary, ResourceChanges, StatusWatch, status_uri
from tests.support.fakes.virtual_time import VirtualClock, run_virtual

PERIOD_S = 1.0


def summary(name: str, build: str) -> IndexSummary:
    return IndexSummary(name=name, status_uri=status_uri(name), build=build)


class Recorded:
    """What the index actor answers (settable), each read's time, and what was published."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.now: list[IndexSummary] | Exception = [summary("shop", "b1")]
        self.reads: list[float] = []
        self.published: list[ResourceChanges] = []

    async def read(self) -> list[IndexSummary]:
        self.reads.append(self.clock.now)
        if isinstance(self.now, Exception):
            raise self.now
        return list(self.now)

    async def publish(self, changes: ResourceChanges) -> None:
        self.published.append(changes)


def watch_of(recorded: Recorded) -> StatusWatch:
    return StatusWatch(recorded.read, recorded.publish, PERIOD_S, sleep=recorded.clock.sleep)


def test_nothing_is_read_until_someone_watches_and_the_baseline_comes_first() -> None:
    async def main(clock: VirtualClock) -> None:
        recorded = Recorded(clock)
        watch = watch_of(recorded)
        await asyncio.sleep(5 * PERIOD_S)
        assert recorded.reads == [] and not watch.running
        async with watch.watching():
            assert recorded.reads == [5.0]  # the baseline, before the watcher goes on
            recorded.now = [summary("shop", "b2")]
            await asyncio.sleep(PERIOD_S + 0.5)
        assert [c.updated for c in recorded.published] == [[INDEXES_URI, status_uri("shop")]]

    run_virtual(main)


def test_a_change_is_published_once_and_a_failed_read_keeps_the_baseline() -> None:
    async def main(clock: VirtualClock) -> None:
        recorded = Recorded(clock)
        watch = watch_of(recorded)
        async with watch.watching():
            await asyncio.sleep(3.5 * PERIOD_S)
            assert recorded.published == []  # three reads, nothing changed
            recorded.now = SamespaceError("index actor restarting")
            await asyncio.sleep(PERIOD_S)
            recorded.now = [summary("shop", "b2"), summary("docs", "d1")]
            await asyncio.sleep(3 * PERIOD_S)
        assert len(recorded.published) == 1
        changes = recorded.published[0]
        assert changes.list_changed and changes.updated == [INDEXES_URI, status_uri("docs"), status_uri("shop")]

    run_virtual(main)


def test_one_loop_serves_every_watcher_and_the_last_one_out_stops_it() -> None:
    async def main(clock: VirtualClock) -> None:
        recorded = Recorded(clock)
        watch = watch_of(recorded)
        first, second = asyncio.Event(), asyncio.Event()

        async def watcher(done: asyncio.Event) -> None:
            async with watch.watching():
                await done.wait()

        tasks = [asyncio.create_task(watcher(first)), asyncio.create_task(watcher(second))]
        await asyncio.sleep(2.5 * PERIOD_S)
        assert (watch.watchers, watch.running, len(recorded.reads)) == (2, True, 3)  # a baseline, two periods
        first.set()
        await asyncio.sleep(PERIOD_S)
        assert (watch.watchers, watch.running, len(recorded.reads)) == (1, True, 4)
        second.set()
        await asyncio.gather(*tasks)
        reads = len(recorded.reads)
        await asyncio.sleep(5 * PERIOD_S)
        assert (watch.watchers, watch.running, len(recorded.reads)) == (0, False, reads)
        async with watch.watching():  # a new watcher starts it again, from a new baseline
            assert watch.running and len(recorded.reads) == reads + 1

    run_virtual(main)


def test_a_read_that_hangs_is_given_up_and_the_watch_goes_on() -> None:
    async def main(clock: VirtualClock) -> None:
        recorded = Recorded(clock)
        hang = asyncio.Event()

        async def stuck() -> list[IndexSummary]:
            await hang.wait()
            return []

        watch = StatusWatch(stuck, recorded.publish, PERIOD_S, sleep=clock.sleep, timeout_s=2.0)
        async with watch.watching():
            assert clock.now == 2.0 and watch.running  # the baseline read gave up at the timeout

    run_virtual(main)
