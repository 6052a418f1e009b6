"""Waiting for a condition instead of for a guessed time.

On a shared 2-core machine a fixed sleep is either wasted or too short. These helpers poll a
predicate until it holds, with a generous deadline, and fail saying what was awaited and what the
predicate last returned.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

DEADLINE_S = 60.0  # generous: a condition that holds at all holds well within this on a loaded machine
INTERVAL_S = 0.1


def wait_until(
    predicate: Callable[[], T],
    timeout_s: float = DEADLINE_S,
    interval_s: float = INTERVAL_S,
    what: str = "the condition",
) -> T:
    """Poll `predicate` until it returns something truthy; return that. AssertionError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what} (last: {value!r})")
        time.sleep(interval_s)


async def wait_until_async(
    predicate: Callable[[], T],
    timeout_s: float = DEADLINE_S,
    interval_s: float = INTERVAL_S,
    what: str = "the condition",
) -> T:
    """`wait_until` for a test running on an event loop: sleeps without blocking the loop."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what} (last: {value!r})")
        await asyncio.sleep(interval_s)
