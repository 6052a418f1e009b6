"""The master's sidecar endpoints on the Serve app (issue 9): `/sidecar` WebSocket and HTTP fallback.

    ws   /sidecar             register → registered; heartbeat, result, pong; we send command, config, ping
    POST /sidecar/register    the HTTP fallback's explicit registration
    POST /sidecar/heartbeat   applies to a known agent only (never creates a registry entry)
    POST /sidecar/poll        pending commands, held open up to waitS
    POST /sidecar/result      a command's result

Every handshake and request needs `Authorization: Bearer <SAMESPACE_FLEET_TOKEN>`; without a
configured token the fleet is closed. A thin shell: frames go to the fleet actor, which holds the
registry and the commands; this replica only holds the socket.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse, Response
from ray.actor import ActorHandle

from actors.fleet import CLOSE_SOCKET
from cluster.settings import SamespaceSettings
from cluster.sidecar_protocol import MAX_RESULT_BYTES, error_frame
from serve_apps.auth import bearer_matches

log = logging.getLogger("samespace.sidecar")

SIDECAR_ROUTE = "/sidecar"
NEXT_WAIT_S = 5.0  # how long one outbox read waits on the fleet actor before asking again
POLICY_VIOLATION = 1008
# POST /sidecar/<path> → the fleet actor's method that answers it.
FALLBACK_ROUTES = {"register": "http_register", "heartbeat": "http_heartbeat", "poll": "http_poll", "result": "http_result"}


def add_sidecar_routes(api: FastAPI, settings: SamespaceSettings, fleet: Callable[[], ActorHandle]) -> None:
    """Mount the fleet endpoints on `api`; `fleet()` returns the fleet actor (started on first use)."""
    fleet_settings = settings.fleet

    @api.websocket(SIDECAR_ROUTE)
    async def sidecar_socket(websocket: WebSocket) -> None:
        if not fleet_settings.websocket or not bearer_matches(websocket.headers.get("authorization"), settings.fleet_token):
            await websocket.close(code=POLICY_VIOLATION)  # before accept: the handshake is refused (403)
            return
        await websocket.accept()
        actor = fleet()
        connection: str = await actor.ws_opened.remote()
        sending = asyncio.Lock()

        async def send(frame: dict[str, Any]) -> None:
            async with sending:
                await websocket.send_text(json.dumps(frame))

        async def outbound() -> None:
            while True:
                for frame in await actor.ws_next.remote(connection, NEXT_WAIT_S):
                    if frame.get("type") == CLOSE_SOCKET:
                        log.info("closing sidecar socket %s: %s", connection, frame.get("reason"))
                        await websocket.close(code=POLICY_VIOLATION)
                        return
                    await send(frame)

        writer = asyncio.create_task(outbound())
        try:
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    break
                raw = message.get("text")
                if raw is None:
                    raw = message.get("bytes") or b""
                frames, close = await actor.ws_frame.remote(connection, raw)
                for frame in frames:
                    await send(frame)
                if close:
                    await websocket.close(code=POLICY_VIOLATION)
                    break
                if writer.done():  # the fleet closed this socket
                    break
        except (WebSocketDisconnect, RuntimeError):
            pass  # the peer went away mid-send; cleaned up below
        finally:
            writer.cancel()
            await actor.ws_closed.remote(connection)

    async def _fallback(request: Request, call: str) -> Response:
        if not fleet_settings.http_fallback:
            return Response(status_code=404)
        if not bearer_matches(request.headers.get("authorization"), settings.fleet_token):
            return Response(status_code=401)  # no detail, before the body is read
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_RESULT_BYTES):
            return JSONResponse(status_code=413, content=error_frame("body too large"))
        body = await request.body()
        if len(body) > MAX_RESULT_BYTES:
            return JSONResponse(status_code=413, content=error_frame("body too large"))
        status, answer = await getattr(fleet(), call).remote(body)
        return JSONResponse(status_code=status, content=answer)

    def route(call: str) -> Callable[[Request], Awaitable[Response]]:
        async def handle(request: Request) -> Response:
            return await _fallback(request, call)

        return handle

    for path, call in FALLBACK_ROUTES.items():
        api.add_api_route(f"{SIDECAR_ROUTE}/{path}", route(call), methods=["POST"], name=f"sidecar_{path}")
