"""Commands to sidecars and their results, correlated by id (as in the peer).

The master never dials a sidecar: a command waits in its agent's outbox until the agent's live
WebSocket writer or its HTTP poll takes it, and the caller awaits the `result` frame that carries
the same id. An agent that disconnects or goes stale fails every command it holds at once (so
the fan-out re-queues the batch on another lane instead of waiting out the timeout). Pure
asyncio; ids and time are injected.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import secrets
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cluster.cloud import error_for_status
from cluster.errors import UpstreamError, UpstreamTimeout, UpstreamUnavailable
from cluster.fleet.frames import ResultFrame, command_frame, error_metadata

_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def _base36(value: int) -> str:
    out = ""
    while True:
        value, digit = divmod(value, 36)
        out = _BASE36[digit] + out
        if value == 0:
            return out


def new_command_id() -> str:
    """`cmd-<base36 ms>-<6 random>`, the peer's shape (configs are correlated by the same ids)."""
    return f"cmd-{_base36(int(time.time() * 1000))}-{''.join(secrets.choice(_BASE36) for _ in range(6))}"


@dataclass
class _Outbox:
    frames: deque[dict[str, Any]] = field(default_factory=deque)
    ready: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class _Pending:
    agent: str
    outbox: str
    future: asyncio.Future[dict[str, Any]]
    provider: str = ""


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
        return float(value)
    return None


def result_error(agent: str, provider: str, result: ResultFrame) -> UpstreamError:
    """A failed command's error. Without an HTTP `status`: the sidecar failed (UpstreamUnavailable,
    as before). With one (a virtual container's upstream answer), exactly the error the in-cluster
    OpenRouter client raises for it (`cluster.cloud.error_for_status`), from the result's `status`,
    `retryAfterS` and `metadata` (OpenRouter's error metadata, of which only the wire's whitelist is
    read: `reason` and `limit_source` tell a 402's transient in-flight budget from spent credits,
    `retry_after_seconds` stands in for a missing Retry-After)."""
    detail = f"sidecar: {(result.error or '')[:200]}"
    extra = result.payload()
    status = extra.get("status")
    if not isinstance(status, int) or isinstance(status, bool):
        return UpstreamUnavailable(agent, detail)
    metadata = error_metadata(extra.get("metadata"))
    return error_for_status(provider, detail, status, _number(extra.get("retryAfterS")), metadata)


class CommandDesk:
    """Outboxes (one per socket, or per agent on the HTTP fallback) and the commands waiting for
    their results."""

    def __init__(self, new_id: Callable[[], str] = new_command_id) -> None:
        self._new_id = new_id
        self._outboxes: dict[str, _Outbox] = {}
        self._pending: dict[str, _Pending] = {}

    async def send(
        self, agent: str, outbox: str, provider: str, action: str, payload: dict[str, Any], timeout_s: float
    ) -> dict[str, Any]:
        """Queue a `command` for `agent` in `outbox` and await its result's fields (UpstreamError on
        failure: the agent's error, its disconnection, or no result within `timeout_s`)."""

        def frame_of(command_id: str) -> dict[str, Any]:
            return command_frame(command_id, action, payload)

        return await self.request(agent, outbox, frame_of, timeout_s, provider, action)

    async def request(
        self,
        agent: str,
        outbox: str,
        frame_of: Callable[[str], dict[str, Any]],
        timeout_s: float,
        provider: str,
        what: str,
    ) -> dict[str, Any]:
        """Queue the frame `frame_of(new id)` (a command or a config) and await the result with that id."""
        command_id = self._new_id()
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[command_id] = _Pending(agent, outbox, future, provider)
        self.post(outbox, frame_of(command_id))
        try:
            return await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            raise UpstreamTimeout(provider, f"{what}: no result within {timeout_s:g} s") from None
        finally:
            self._pending.pop(command_id, None)
            self._unqueue(outbox, command_id)

    def post(self, outbox: str, frame: dict[str, Any]) -> None:
        box = self._outboxes.setdefault(outbox, _Outbox())
        box.frames.append(frame)
        box.ready.set()

    def agent_of(self, command_id: str) -> str | None:
        pending = self._pending.get(command_id)
        return pending.agent if pending is not None else None

    async def take(self, outbox: str, wait_s: float) -> list[dict[str, Any]]:
        """Every frame waiting in `outbox`, waiting up to `wait_s` for the first one."""
        box = self._outboxes.setdefault(outbox, _Outbox())
        if not box.frames and wait_s > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(box.ready.wait(), wait_s)
        frames = list(box.frames)
        box.frames.clear()
        box.ready.clear()
        return frames

    def resolve(self, agent: str, result: ResultFrame) -> bool:
        """Complete the command `result.id` of `agent`; False for an unknown id or another agent's."""
        pending = self._pending.get(result.id)
        if pending is None or pending.agent != agent or pending.future.done():
            return False
        if result.error is not None:
            pending.future.set_exception(result_error(agent, pending.provider or agent, result))
        else:
            pending.future.set_result(result.payload())
        return True

    def fail_agent(self, agent: str, why: str) -> int:
        """Fail every command `agent` holds (it disconnected or went stale); how many failed."""
        failed = 0
        for pending in list(self._pending.values()):
            if pending.agent == agent and not pending.future.done():
                pending.future.set_exception(UpstreamUnavailable(agent, why))
                failed += 1
        return failed

    def fail_outbox(self, outbox: str, why: str) -> int:
        """Fail every command sent through `outbox` (its socket closed, superseded or not)."""
        failed = 0
        for pending in list(self._pending.values()):
            if pending.outbox == outbox and not pending.future.done():
                pending.future.set_exception(UpstreamUnavailable(pending.agent, why))
                failed += 1
        self._outboxes.pop(outbox, None)
        return failed

    def in_flight(self, agent: str) -> int:
        return sum(1 for p in self._pending.values() if p.agent == agent and not p.future.done())

    def _unqueue(self, outbox: str, command_id: str) -> None:
        box = self._outboxes.get(outbox)
        if box is not None:
            box.frames = deque(f for f in box.frames if f.get("id") != command_id)
