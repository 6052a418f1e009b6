"""The frames the sidecar sends, and the command payloads it accepts (JSON objects, camelCase fields)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "AGENT_ID_HEADER",
    "CREDENTIAL_HEADER",
    "ChatCommand",
    "EmbedCommand",
    "ModelsCommand",
    "PONG",
    "RerankCommand",
    "describe_invalid",
    "error_result",
    "ok_result",
    "result_frame",
]

PONG: dict[str, Any] = {"type": "pong"}
# The HTTP fallback names and proves the agent on every call after register (the master's
# cluster/fleet/protocol.py spells the same headers).
AGENT_ID_HEADER = "X-Sidecar-Agent"
CREDENTIAL_HEADER = "X-Sidecar-Credential"


def result_frame(command_id: Any, fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "result", "id": command_id, **fields}


def error_result(command_id: Any, message: str) -> dict[str, Any]:
    return {"type": "result", "id": command_id, "error": message}


def ok_result(command_id: Any) -> dict[str, Any]:
    return {"type": "result", "id": command_id, "ok": True}


# --- command payloads (flat beside type, id and action) --------------------------------------------


class _Command(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, hide_input_in_errors=True)

    role: str = Field(min_length=1)


class EmbedCommand(_Command):
    model: str | None = None
    texts: list[str] = Field(min_length=1)


class RerankCommand(_Command):
    model: str | None = None
    query: str
    documents: list[str]


class ChatCommand(_Command):
    model: str | None = None
    request: dict[str, Any]


class ModelsCommand(_Command):
    pass


def describe_invalid(exc: ValidationError) -> str:
    """'bad command: texts: Field required' (the first problem, never the input)."""
    first = exc.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(p) for p in first["loc"]) or "payload"
    return f"bad command: {where}: {first['msg']}"
