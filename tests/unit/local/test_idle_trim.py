"""cluster.local.memory: the embedder's freed heap goes back to the OS once bulk batches stop."""

from __future__ import annotations

import os
import threading
import time

from cluster.local.memory import IdleTrim, return_free_heap


def test_the_trim_runs_once_after_the_last_touch_and_not_while_touches_keep_coming() -> None:
    trimmed: list[float] = []
    done = threading.Event()
    idle = IdleTrim(idle_s=1.0, trim=lambda: (trimmed.append(time.monotonic()), done.set()))
    for _ in range(5):  # a running reindex: a batch every 0.05 s
        last_touch = time.monotonic()
        idle.touch()
        time.sleep(0.05)
    assert trimmed == []
    assert done.wait(5)
    time.sleep(0.3)
    assert len(trimmed) == 1 and trimmed[0] - last_touch >= 1.0  # once, and only idle_s after the last batch


def test_cancel_stops_a_pending_trim() -> None:
    trimmed: list[int] = []
    idle = IdleTrim(idle_s=0.1, trim=lambda: trimmed.append(1))
    idle.touch()
    idle.cancel()
    time.sleep(0.25)
    assert trimmed == []


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_return_free_heap_gives_back_what_a_thread_freed() -> None:
    kept: list[bytearray] = []

    def bulk_batch() -> None:  # as torch does in the actor's batch thread: its own arena
        blocks = [bytearray(4000) for _ in range(50_000)]  # about 200 MB in 4 KB pieces
        kept.append(blocks[-1])  # the last piece stays in use: glibc cannot shrink past it by itself
        del blocks

    worker = threading.Thread(target=bulk_batch)
    worker.start()
    worker.join()
    before = _rss_mb()
    assert return_free_heap() is True
    assert before - _rss_mb() > 100
