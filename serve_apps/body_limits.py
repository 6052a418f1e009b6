"""Request bodies at a bounded cost: read as a stream and refused (413, naming the `limits` setting) as
soon as the declared length or the bytes read pass the cap; the rest is never read. `parse_body` turns
the bytes into a pydantic model with FastAPI's 422 (each error's location under "body", no input echoed).
"""

from __future__ import annotations

from typing import TypeVar

from fastapi import HTTPException, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

from cluster.errors import LimitExceeded
from cluster.settings import limit_name

__all__ = ["parse_body", "read_capped_body"]

M = TypeVar("M", bound=BaseModel)


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
