"""The HTTP fallback link (WebSocket blocked): register, heartbeat, long-poll for commands, post results.

    POST <master>/sidecar/register   register frame        → {"type":"registered","ok":true}
    POST <master>/sidecar/heartbeat  heartbeat frame       → {"ok":true,"commands":[...]}  (409: register again)
    POST <master>/sidecar/poll       {"agentUrl","waitS"}  → {"commands":[...]}  (held up to waitS)
    POST <master>/sidecar/result     result frame          → {"ok":true}

Every call after register carries X-Sidecar-Agent and X-Sidecar-Credential (issued at register).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Iterator
from typing import Any

import httpx

from sidecar._link import AgentLink
from sidecar._tasks import CommandTasks, run_all_or_fail
from sidecar.errors import AuthRejected, ConnectionLost, MasterRejected
from sidecar.wire import FrameType

__all__ = ["HttpSession"]

logger = logging.getLogger("sidecar.http")

REQUEST_TIMEOUT_S = 30.0
POLL_GRACE_S = 10.0  # the master holds a poll up to waitS; give up waitS + this later
UNKNOWN_AGENT_STATUS = 409
MAX_UNKNOWN_AGENT_IN_A_ROW = 3  # a master that forgets us right after each register: reconnect instead
AUTH_STATUSES = (401, 403)


@contextlib.contextmanager
def _master_faults(where: str) -> Iterator[None]:
    try:
        yield
    except httpx.TransportError as exc:  # includes timeouts
        raise ConnectionLost(f"{where}: {type(exc).__name__}") from exc
    except ValueError as exc:
        raise ConnectionLost(f"{where}: the master's answer is not JSON") from exc


class HttpSession:
    """One HTTP fallback session. `run(until_s)` returns after until_s (auto mode: time to retry
    WebSocket), having let the commands in flight finish; otherwise it raises why it ended."""

    def __init__(self, agent: AgentLink, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._agent = agent
        self._settings = agent.settings
        self._master = agent.master
        self._transport = transport
        self._ending = asyncio.Event()
        self._commands = CommandTasks(logger)
        self._register_lock = asyncio.Lock()
        self._generation = 0
        self._client: httpx.AsyncClient | None = None

    async def run(self, until_s: float | None = None) -> None:
        token = self._master.fleet_token.get_secret_value()
        async with httpx.AsyncClient(
            headers={"Authorization": f"Bearer {token}"}, timeout=REQUEST_TIMEOUT_S, transport=self._transport
        ) as client:
            self._client = client
            try:
                await self._register()
                logger.info("connected to %s over HTTP (long-poll)", self._master.url)
                loops = [self._heartbeats(), self._polls()]
                if until_s is not None:
                    loops.append(self._end_after(until_s))
                await run_all_or_fail(*loops)
                await self._commands.drain(self._settings.upstream_timeout_s)
                logger.info("ending the HTTP session to retry WebSocket")
            finally:
                await self._commands.cancel()
                self._client = None

    # --- requests ---

    async def _post(self, endpoint: str, body: dict[str, Any], *, timeout_s: float | None = None) -> httpx.Response:
        assert self._client is not None
        with _master_faults(endpoint):
            timeout = timeout_s if timeout_s is not None else REQUEST_TIMEOUT_S
            response = await self._client.post(
                self._master.http_url(endpoint), json=body, timeout=timeout, headers=self._agent.agent_headers()
            )
        if response.status_code in AUTH_STATUSES:
            raise AuthRejected(response.status_code, f"HTTP {endpoint}")
        return response

    def _json(self, endpoint: str, response: httpx.Response) -> dict[str, Any]:
        if response.status_code // 100 != 2:
            raise MasterRejected(response.status_code, f"HTTP {endpoint}")
        with _master_faults(endpoint):
            body = response.json()
        if not isinstance(body, dict):
            raise ConnectionLost(f"{endpoint}: the master's answer is not a JSON object")
        return body

    async def _register(self) -> None:
        response = await self._post("register", self._agent.register_frame())
        body = self._json("register", response)
        if body.get("type") != FrameType.REGISTERED or body.get("ok") is not True:
            raise ConnectionLost("the master did not accept the registration")
        self._generation += 1
        self._agent.on_registered("HTTP", body)

    async def _register_again(self, seen_generation: int) -> None:
        """After a 409 'unknown agent' (the master restarted): register once, however many loops saw it."""
        async with self._register_lock:
            if self._generation == seen_generation:
                logger.info("the master does not know this agent; registering again")
                await self._register()

    # --- loops ---

    async def _end_after(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        self._ending.set()

    async def _heartbeats(self) -> None:
        unknown = 0
        while not self._ending.is_set():
            generation = self._generation
            response = await self._post("heartbeat", await self._agent.heartbeat_frame())
            if response.status_code == UNKNOWN_AGENT_STATUS:
                unknown = self._count_unknown(unknown, "heartbeat")
                await self._register_again(generation)
                continue  # heartbeat right after registering
            unknown = 0
            self._start_commands(self._json("heartbeat", response).get("commands"))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ending.wait(), self._settings.heartbeat_s)

    async def _polls(self) -> None:
        wait_s = self._settings.poll_wait_s
        body = {"agentUrl": self._settings.agent_url, "waitS": wait_s}
        unknown = 0
        while not self._ending.is_set():
            generation = self._generation
            response = await self._post("poll", body, timeout_s=wait_s + POLL_GRACE_S)
            if response.status_code == UNKNOWN_AGENT_STATUS:
                unknown = self._count_unknown(unknown, "poll")
                await self._register_again(generation)
                continue
            unknown = 0
            self._start_commands(self._json("poll", response).get("commands"))

    @staticmethod
    def _count_unknown(seen: int, endpoint: str) -> int:
        if seen + 1 >= MAX_UNKNOWN_AGENT_IN_A_ROW:
            raise ConnectionLost(f"{endpoint}: the master answered 'unknown agent' {seen + 1} times in a row")
        return seen + 1

    def _start_commands(self, commands: Any) -> None:
        if not isinstance(commands, list):
            return
        for frame in commands:
            if isinstance(frame, dict):
                command = {"type": FrameType.COMMAND.value, **frame}
                self._commands.start(functools.partial(self._answer, command))

    async def _answer(self, frame: dict[str, Any]) -> None:
        reply = await self._agent.handle_frame(frame)
        if reply is None:
            return
        try:
            response = await self._post("result", reply)
        except (ConnectionLost, MasterRejected) as exc:
            logger.warning("result %s not delivered: %s", frame.get("id"), exc)
            return
        if response.status_code // 100 != 2:
            logger.warning("result %s refused: HTTP %d", frame.get("id"), response.status_code)
