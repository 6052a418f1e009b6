"""One MCP endpoint, two response modes: a tool call that asks for progress (its request carries a
`progressToken`) is answered as an SSE stream, on which the progress notifications travel; every
other request gets a single JSON body (the fast path: no stream, no writer task).

The MCP SDK picks the mode per app, not per request (JSON mode drops a request's notifications), so
the endpoint holds one app of each and routes each POST by its body. Bodies are read here, so they
are capped here.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from serve_apps.body_limits import body_too_large, buffer_body, replay_body

MAX_BODY_BYTES = 1 << 20  # an MCP request of this service is a few KB; more is refused
PROGRESS_MARKER = b'"progressToken"'


class ProgressRouter:
    def __init__(self, json_app: ASGIApp, sse_app: ASGIApp) -> None:
        self._json_app = json_app
        self._sse_app = sse_app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self._json_app(scope, receive, send)
            return
        buffered = await buffer_body(scope, receive, MAX_BODY_BYTES)
        if buffered is None:
            await body_too_large()(scope, receive, send)
            return
        body = b"".join(m.get("body", b"") for m in buffered)
        app = self._sse_app if PROGRESS_MARKER in body else self._json_app
        await app(scope, replay_body(buffered, receive), send)
