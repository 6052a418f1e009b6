"""Small asyncio helpers for this package only."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

__all__ = ["CommandTasks", "run_all_or_fail"]


async def run_all_or_fail(*coros: Coroutine[Any, Any, None]) -> None:
    """Run the coroutines together; return when all return, or cancel the rest and raise the first error."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            error = None if task.cancelled() else task.exception()
            if error is not None:
                raise error
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task


class CommandTasks:
    """The commands in flight on one session: started as tasks, awaited or cancelled when it ends."""

    def __init__(self, logger: logging.Logger) -> None:
        self._tasks: set[asyncio.Task[None]] = set()
        self._logger = logger

    def __len__(self) -> int:
        return len(self._tasks)

    def start(self, work: Callable[[], Awaitable[None]]) -> None:
        async def guarded() -> None:
            try:
                await work()
            except asyncio.CancelledError:
                raise
            except Exception:
                self._logger.exception("a command task failed")

        task = asyncio.ensure_future(guarded())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self, timeout_s: float) -> None:
        """Let the commands in flight finish (their results are still sent), then cancel what is left."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout_s)
        await self.cancel()

    async def cancel(self) -> None:
        tasks = set(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
