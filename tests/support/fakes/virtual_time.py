"""An asyncio event loop on virtual time, for deterministic and instant scheduler tests.

When every task is blocked the loop moves its clock to the next timer instead of waiting; a
wait with no timer at all is a deadlock and raises.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class VirtualClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []  # what the code under test asked to wait

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        await asyncio.sleep(seconds)


class _JumpingSelector(selectors.DefaultSelector):
    """A wait for I/O becomes a jump of virtual time to the next timer."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__()
        self._clock = clock

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:
            raise RuntimeError("deadlock: every task waits and no timer is set")
        self._clock.now += timeout
        return super().select(0)


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self, clock: VirtualClock) -> None:
        self._virtual = clock
        super().__init__(selector=_JumpingSelector(clock))

    def time(self) -> float:
        return self._virtual.now


def run_virtual(main: Callable[[VirtualClock], Coroutine[Any, Any, T]]) -> T:
    """Run `main(clock)` to completion on a fresh virtual-time loop."""
    clock = VirtualClock()
    with asyncio.Runner(loop_factory=lambda: VirtualTimeLoop(clock)) as runner:
        return runner.run(main(clock))
