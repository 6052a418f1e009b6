"""Request bodies at a bounded cost: read as a stream and refused (413, naming the `limits` setting) as
soon as the declared length or the bytes read pass the cap; the rest is never read. `parse_body` turns
the bytes into a pydantic model with FastAPI's 422 (each error's location under "body", no input echoed).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

from fastapi import HTTPException, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import Message, Receive, Scope

from cluster.errors import LimitExceeded
from cluster.settings import limit_name

__all__ = ["body_too_large", "buffer_body", "parse_body", "read_capped_body", "replay_body"]

M = TypeVar("M", bound=BaseModel)


async def buffer_body(scope: Scope, receive: Receive, limit: int) -> list[Message] | None:
    """An ASGI request's messages up to the end of its body, for a middleware that reads the body before the
    app does (`replay_body` hands them on); None past `limit` bytes, declared or read (the rest unread)."""
    declared = Headers(raw=scope.get("headers") or []).get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        return None
    buffered: list[Message] = []
    size = 0
    while True:
        message = await receive()
        buffered.append(message)
        size += len(message.get("body", b""))
        if size > limit:
            return None
        if message["type"] != "http.request" or not message.get("more_body", False):
            return buffered


def replay_body(buffered: list[Message], receive: Receive) -> Receive:
    """A `receive` that gives the buffered messages again, then reads on (a disconnect, later)."""
    pending: Iterator[Message] = iter(list(buffered))

    async def replay() -> Message:
        return next(pending, None) or await receive()

    return replay


def body_too_large() -> Response:
    """What an ASGI middleware answers a body over its cap (the MCP endpoint's 413)."""
    return Response(b'{"error": "request body too large"}', status_code=413, media_type="application/json")


async def read_capped_body(request: Request, max_bytes: int, setting: str) -> bytes:
    """The whole body, at most `max_bytes` of it; `setting` is the `limits` field that sets the cap."""
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > max_bytes:
        raise _too_large(int(declared), max_bytes, setting)  # refused before a byte is read
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise _too_large(size, max_bytes, setting)
        chunks.append(chunk)
    return b"".join(chunks)


def parse_body(model: type[M], body: bytes) -> M:
    """`body` as JSON into `model`; RequestValidationError (FastAPI's 422) naming the bad fields."""
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        errors = [
            {**error, "loc": ("body", *error["loc"])}
            for error in exc.errors(include_url=False, include_input=False, include_context=False)
        ]
        raise RequestValidationError(errors) from exc


def _too_large(size: int, max_bytes: int, setting: str) -> HTTPException:
    return HTTPException(413, str(LimitExceeded("request body bytes", size, max_bytes, limit_name(setting))))
