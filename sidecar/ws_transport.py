"""The WebSocket link: dial <master>/sidecar with the fleet token, register, heartbeat, answer frames."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from sidecar._link import AgentLink
from sidecar._tasks import CommandTasks, run_all_or_fail
from sidecar.errors import AuthRejected, ConnectionLost, MasterRejected
from sidecar.wire import MAX_RESULT_BYTES, FrameType

__all__ = ["WsSession", "decode_frame"]

logger = logging.getLogger("sidecar.ws")
# websockets logs every handshake header (the bearer token) and every frame at DEBUG: keep it at INFO.
_wire_logger = logging.getLogger("sidecar.wire")
_wire_logger.setLevel(logging.INFO)

OPEN_TIMEOUT_S = 10.0
# The largest message we take from the master: the one WebSocket cap the master itself enforces
# (a result frame's), so neither side sends what the other refuses. A larger one closes the socket (1009).
MAX_MESSAGE_BYTES = MAX_RESULT_BYTES


def decode_frame(message: str | bytes) -> dict[str, Any] | None:
    """A JSON object, or None (logged) for anything else."""
    try:
        value = json.loads(message)
    except (ValueError, UnicodeDecodeError):
        logger.warning("ignoring a frame that is not JSON (%d bytes)", len(message))
        return None
    if not isinstance(value, dict):
        logger.warning("ignoring a frame that is not a JSON object")
        return None
    return value


class WsSession:
    """One WebSocket connection. `run` raises why it ended: MasterRejected / AuthRejected (the handshake
    was answered with a status) or ConnectionLost (refused, reset, closed by the master, no 'registered')."""

    def __init__(self, agent: AgentLink) -> None:
        self._agent = agent
        self._settings = agent.settings
        self._master = agent.master
        self._registered = asyncio.Event()
        self._send_lock = asyncio.Lock()
        self._commands = CommandTasks(logger)

    async def run(self) -> None:
        url = self._master.ws_url
        token = self._master.fleet_token.get_secret_value()
        try:
            ws = await connect(
                url,
                additional_headers={"Authorization": f"Bearer {token}"},
                max_size=MAX_MESSAGE_BYTES,
                open_timeout=OPEN_TIMEOUT_S,
                logger=_wire_logger,
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            error = AuthRejected if status == 401 else MasterRejected
            raise error(status, "WebSocket handshake") from exc
        except (OSError, TimeoutError, InvalidHandshake) as exc:
            raise ConnectionLost(f"cannot connect to {url}: {type(exc).__name__}: {exc}") from exc
        logger.info("connected to %s", url)
        try:
            await self._send(ws, self._agent.register_frame())
            await run_all_or_fail(self._read(ws), self._heartbeats(ws))
        finally:
            await self._commands.cancel()
            await ws.close()
        raise ConnectionLost("WebSocket session ended")  # not reached: _read raises when the socket closes

    async def _send(self, ws: ClientConnection, frame: dict[str, Any]) -> None:
        async with self._send_lock:
            await ws.send(json.dumps(frame, separators=(",", ":")))

    async def _read(self, ws: ClientConnection) -> None:
        try:
            async for message in ws:
                frame = decode_frame(message)
                if frame is not None:
                    await self._on_frame(ws, frame)
        except ConnectionClosed:
            pass
        code = ws.close_code
        raise ConnectionLost(f"master closed the WebSocket (code {code})" if code else "WebSocket connection lost")

    async def _on_frame(self, ws: ClientConnection, frame: dict[str, Any]) -> None:
        kind = frame.get("type")
        if kind == FrameType.REGISTERED:
            if frame.get("ok") is not True:
                raise ConnectionLost("the master did not accept the registration")
            if not self._registered.is_set():
                self._registered.set()
                self._agent.on_registered("WebSocket", frame)
            return
        if kind == FrameType.COMMAND:
            self._commands.start(lambda: self._answer(ws, frame))
            return
        reply = await self._agent.handle_frame(frame)
        if reply is not None:
            await self._send(ws, reply)

    async def _answer(self, ws: ClientConnection, frame: dict[str, Any]) -> None:
        reply = await self._agent.handle_frame(frame)
        if reply is not None:
            try:
                await self._send(ws, reply)
            except ConnectionClosed:
                logger.debug("result %s not sent: the socket closed", frame.get("id"))

    async def _heartbeats(self, ws: ClientConnection) -> None:
        try:
            await asyncio.wait_for(self._registered.wait(), self._settings.register_timeout_s)
        except TimeoutError as exc:
            raise ConnectionLost(f"no 'registered' answer within {self._settings.register_timeout_s:g} s") from exc
        while True:
            frame = await self._agent.heartbeat_frame()
            try:
                await self._send(ws, frame)
            except ConnectionClosed:
                return  # _read reports why
            await asyncio.sleep(self._settings.heartbeat_s)
