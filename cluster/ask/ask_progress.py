"""What an ask reports while it runs: plan made, round n of N, each tool called, synthesis started, done.

The pipeline and the gathering loop emit `AskProgress` events at the points where those things
happen; a caller that wants them passes an async callback to `AskPipeline.ask` (the MCP tool turns
them into progress notifications, `POST /rlm/ask` into server-sent events). Events are numbered in
the order they happen and delivered one at a time, in that order. A listener never fails an ask: a
callback that raises is logged and the ask carries on; one that hangs is given up after a timeout
and not called again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Literal

from pydantic import Field

from cluster.types import Strict

log = logging.getLogger("samespace.ask")

CALLBACK_TIMEOUT_S = 5.0  # a listener slower than this is stuck: it is not called again for this ask

ProgressKind = Literal["plan", "round", "tool", "synthesis", "done"]


class AskProgress(Strict):
    """One step of an ask, as it happens."""

    kind: ProgressKind
    step: int = Field(ge=1, description="This event's place in the ask: 1, 2, 3, … (only increases).")
    total: int | None = Field(default=None, description="How many steps the ask took; known at `done` only.")
    message: str
    round: int | None = Field(default=None, description="The round (round, tool); 0 for the planned searches.")
    rounds: int | None = Field(default=None, description="The most rounds this ask may take.")
    tool: str | None = Field(default=None, description="The tool called, with its arguments (tool).")


ProgressCallback = Callable[[AskProgress], Awaitable[None]]


class ProgressReporter:
    """One ask's events: numbered, delivered in order one at a time, never raising into the ask."""

    def __init__(self, callback: ProgressCallback | None, timeout_s: float = CALLBACK_TIMEOUT_S) -> None:
        self._callback = callback
        self._timeout_s = timeout_s
        self._step = 0
        self._lock = asyncio.Lock()

    async def emit(
        self,
        kind: ProgressKind,
        message: str,
        *,
        round: int | None = None,
        rounds: int | None = None,
        tool: str | None = None,
        final: bool = False,
    ) -> None:
        async with self._lock:  # FIFO: events reach the listener in the order they were emitted
            self._step += 1
            event = AskProgress(
                kind=kind,
                step=self._step,
                total=self._step if final else None,
                message=message,
                round=round,
                rounds=rounds,
                tool=tool,
            )
            log.debug("ask progress %d %s: %s", event.step, kind, message)
            await self._deliver(event)

    async def done(self, message: str) -> None:
        await self.emit("done", message, final=True)

    async def _deliver(self, event: AskProgress) -> None:
        callback = self._callback
        if callback is None:
            return
        try:
            await asyncio.wait_for(callback(event), self._timeout_s)
        except TimeoutError:
            log.warning("ask progress: the listener took over %.0f s; no more events for this ask", self._timeout_s)
            self._callback = None
        except Exception as exc:  # noqa: BLE001 - a listener never fails the ask: logged, and the ask carries on
            log.warning(
                "ask progress: the listener raised %s on %s; the ask carries on", type(exc).__name__, event.kind
            )
