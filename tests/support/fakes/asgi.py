"""One HTTP request straight into an ASGI app, its body in chunks, counting how many of them the app
read: what shows that a route refused a body without reading the rest of it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

LOCAL_HOST = (b"host", b"127.0.0.1:8000")


@dataclass
class Answer:
    status: int
    body: bytes
    chunks_read: int  # body messages the app took from `receive`


def drive(
    app: Any,
    path: str,
    chunks: Sequence[bytes],
    headers: Sequence[tuple[bytes, bytes]] = (),
    query: bytes = b"",
    method: str = "POST",
) -> Answer:
    """`method path?query` with `headers` (plus a loopback Host) and the body as `chunks`."""
    pending = list(chunks)
    read = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal read
        if not pending:
            await asyncio.sleep(3600)  # the client has nothing more; a disconnect would end the request early
        read += 1
        body = pending.pop(0)
        return {"type": "http.request", "body": body, "more_body": bool(pending)}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query,
        "headers": [LOCAL_HOST, *headers],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    asyncio.run(asyncio.wait_for(app(scope, receive, send), 30))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return Answer(start["status"], body, read)
