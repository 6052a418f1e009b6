"""The master's sidecar endpoints on the Serve app: `/sidecar` WebSocket and HTTP fallback.

    ws   /sidecar             register → registered; heartbeat, result, pong; we send command, config, ping
    POST /sidecar/register    the HTTP fallback's explicit registration
    POST /sidecar/heartbeat   applies to a known agent only (never creates a registry entry)
    POST /sidecar/poll        pending commands, held open up to waitS
    POST /sidecar/result      a command's result

Every handshake and request needs `Authorization: Bearer <SAMESPACE_FLEET_TOKEN>`; without a
configured token the fleet is closed. After register, every HTTP call also names its agent and
proves it (`X-Sidecar-Agent`, `X-Sidecar-Credential`: the id and credential issued at
registration); the replica hands the fleet actor only the credential's sha256.

A thin shell: frames go to the fleet actor, which holds the registry and the commands; this
replica only holds the socket. Sizes are enforced here, before anything is parsed: a WebSocket
frame over the limit is answered with an `error` frame and never reaches the actor; an HTTP body
is refused on its Content-Length and read as a capped stream (413).

Every open socket and every held poll is an ongoing request of this replica, so the deployment
must allow many more than Serve's default of 5 (`REPLICA_MAX_ONGOING_REQUESTS`): with 5, five
connected sidecars (or four and one hostile socket) queued every other HTTP call, heartbeats and
MCP queries alike, until a socket closed (a heartbeat once stalled for over 60 s).
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

from cluster.fleet.frames import AGENT_ID_HEADER, CREDENTIAL_HEADER, MAX_FRAME_BYTES, MAX_RESULT_BYTES, error_frame
from cluster.fleet.hub import CLOSE_SOCKET
from cluster.fleet.identity import credential_digest
from cluster.settings import MAX_HOSTS, SamespaceSettings
from serve_apps.auth import bearer_matches

log = logging.getLogger("samespace.sidecar")

SIDECAR_ROUTE = "/sidecar"
NEXT_WAIT_S = 5.0  # how long one outbox read waits on the fleet actor before asking again
POLICY_VIOLATION = 1008
# POST /sidecar/<path> → the fleet actor's method that answers it, and the largest body it takes.
FALLBACK_ROUTES = {
    "register": "http_register",
    "heartbeat": "http_heartbeat",
    "poll": "http_poll",
    "result": "http_result",
}
BODY_LIMITS = {
    "register": MAX_FRAME_BYTES,
    "heartbeat": MAX_FRAME_BYTES,
    "poll": MAX_FRAME_BYTES,
    "result": MAX_RESULT_BYTES,
}
# A socket per agent (up to MAX_HOSTS), a held poll per HTTP agent, and room for MCP calls beside them.
REPLICA_MAX_ONGOING_REQUESTS = 4 * MAX_HOSTS


def frame_too_large(raw: str | bytes, limit: int = MAX_RESULT_BYTES) -> dict[str, Any] | None:
    """The `error` frame for a WebSocket frame over `limit` bytes, or None (checked without parsing)."""
    size = len(raw)
    if isinstance(raw, str) and size <= limit:  # characters ≤ bytes: encode only when it can matter
        size = len(raw.encode("utf-8"))
    return error_frame(f"frame too large: {size} bytes (limit {limit})") if size > limit else None


async def read_capped(request: Request, limit: int) -> bytes | None:
    """The request body, or None once it passes `limit` bytes (the rest is never read)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def add_sidecar_routes(api: FastAPI, settings: SamespaceSettings, fleet: Callable[[], ActorHandle]) -> None:
    """Mount the fleet endpoints on `api`; `fleet()` returns the fleet actor (started on first use)."""

    @api.websocket(SIDECAR_ROUTE)
    async def sidecar_socket(websocket: WebSocket) -> None:
        await _serve_socket(websocket, settings, fleet)

    def route(path: str) -> Callable[[Request], Awaitable[Response]]:
        async def handle(request: Request) -> Response:
            return await _fallback(request, path, settings, fleet)

        return handle

    for path in FALLBACK_ROUTES:
        api.add_api_route(f"{SIDECAR_ROUTE}/{path}", route(path), methods=["POST"], name=f"sidecar_{path}")


async def _serve_socket(websocket: WebSocket, settings: SamespaceSettings, fleet: Callable[[], ActorHandle]) -> None:
    """One sidecar's socket: the token before accept, then frames both ways until either side closes."""
    if not settings.fleet.websocket or not bearer_matches(websocket.headers.get("authorization"), settings.fleet_token):
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
            refused = frame_too_large(raw)
            if refused is not None:  # never forwarded: the fleet actor parses nothing this large
                await send(refused)
                continue
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


async def _fallback(
    request: Request, path: str, settings: SamespaceSettings, fleet: Callable[[], ActorHandle]
) -> Response:
    """One POST of the HTTP fallback: the token before the body, the body capped, then the fleet actor."""
    if not settings.fleet.http_fallback:
        return Response(status_code=404)
    if not bearer_matches(request.headers.get("authorization"), settings.fleet_token):
        return Response(status_code=401)  # no detail, before the body is read
    limit = BODY_LIMITS[path]
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > limit):
        return JSONResponse(status_code=413, content=error_frame(f"body too large (limit {limit} bytes)"))
    body = await read_capped(request, limit)
    if body is None:
        return JSONResponse(status_code=413, content=error_frame(f"body too large (limit {limit} bytes)"))
    actor = fleet()
    if path == "register":
        status, answer = await actor.http_register.remote(body)
    else:
        credential = request.headers.get(CREDENTIAL_HEADER)
        digest = credential_digest(credential) if credential else None
        agent_id = request.headers.get(AGENT_ID_HEADER)
        status, answer = await getattr(actor, FALLBACK_ROUTES[path]).remote(body, agent_id, digest)
    return JSONResponse(status_code=status, content=answer)
