"""The master's side of the sidecar wire protocol: parsing untrusted inbound frames, and what a
heartbeat says a host serves.

The wire itself (frame types, caps, headers, the frame models and builders) is `sidecar.wire`, the
one copy the reference sidecar and the master share; this module re-exports it, so the rest of the
cluster imports the protocol from here and only this module reaches into `sidecar`. Inbound frames
are untrusted: `parse_frame` turns any input (bad JSON, an unknown type, a missing field, a huge
payload) into either a validated frame or a `FrameRejected` carrying the `error` frame to send back,
never an exception.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from cluster.roles import Role
from sidecar.wire import (
    AGENT_ID_HEADER,
    CREDENTIAL_HEADER,
    INBOUND_TYPES,
    MAX_CONTAINERS,
    MAX_FRAME_BYTES,
    MAX_RESULT_BYTES,
    OPENROUTER_SOURCE,
    VIRTUAL_CONTAINER_MARK,
    VIRTUAL_ROLE_LABELS,
    Action,
    ContainerConfig,
    ContainersResult,
    ContainerStatus,
    FrameType,
    HeartbeatFrame,
    Inbound,
    InboundFrame,
    LoadedModel,
    PollRequest,
    PongFrame,
    RegisterFrame,
    ResultFrame,
    StatusData,
    VirtualContainerRow,
    VirtualEmbedCommand,
    VirtualRerankCommand,
    VirtualUsage,
    command_frame,
    config_frame,
    error_frame,
    error_metadata,
    key_config_frame,
    ping_frame,
    registered_frame,
)

__all__ = [
    "AGENT_ID_HEADER",
    "CREDENTIAL_HEADER",
    "INBOUND_TYPES",
    "MAX_CONTAINERS",
    "MAX_FRAME_BYTES",
    "MAX_RESULT_BYTES",
    "OPENROUTER_SOURCE",
    "ROLE_NAMES",
    "RUNNING",
    "VIRTUAL_CONTAINER_MARK",
    "VIRTUAL_ROLE_LABELS",
    "Action",
    "ContainerConfig",
    "ContainerStatus",
    "ContainersResult",
    "FrameRejected",
    "FrameType",
    "HeartbeatFrame",
    "Inbound",
    "InboundFrame",
    "LoadedModel",
    "PollRequest",
    "PongFrame",
    "RegisterFrame",
    "ResultFrame",
    "RoleCapability",
    "StatusData",
    "VirtualContainerRow",
    "VirtualEmbedCommand",
    "VirtualRerankCommand",
    "VirtualUsage",
    "capabilities",
    "command_frame",
    "config_frame",
    "error_frame",
    "error_metadata",
    "is_virtual_entry",
    "key_config_frame",
    "parse_frame",
    "ping_frame",
    "registered_frame",
    "role_of",
]

_INBOUND: TypeAdapter[Inbound] = TypeAdapter(InboundFrame)


class FrameRejected(BaseModel):
    """Why an inbound frame was refused, and the `error` frame that says so."""

    model_config = ConfigDict(frozen=True)

    message: str

    def frame(self) -> dict[str, Any]:
        return error_frame(self.message)


def parse_frame(
    raw: str | bytes, max_bytes: int = MAX_FRAME_BYTES, max_result_bytes: int = MAX_RESULT_BYTES
) -> Inbound | FrameRejected:
    """A validated inbound frame, or the reason it was refused (never raises, never echoes input).

    Results may be up to `max_result_bytes` (they carry vectors); every other frame `max_bytes`.
    """
    size = len(raw.encode("utf-8") if isinstance(raw, str) else raw)
    if size > max(max_bytes, max_result_bytes):
        return FrameRejected(message=f"frame too large: {size} bytes (limit {max_result_bytes})")
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return FrameRejected(message="invalid JSON")
    except RecursionError:  # '[[[[…' deeper than the parser's stack
        return FrameRejected(message="invalid JSON: nested too deeply")
    if not isinstance(value, dict):
        return FrameRejected(message="a frame must be a JSON object")
    kind = value.get("type")
    if not isinstance(kind, str) or not kind:
        return FrameRejected(message="missing type")
    if kind not in INBOUND_TYPES:
        return FrameRejected(message=f"unknown type {kind[:40]!r}; expected one of {', '.join(INBOUND_TYPES)}")
    if kind != FrameType.RESULT and size > max_bytes:
        return FrameRejected(message=f"frame too large: {size} bytes (limit {max_bytes} for {kind})")
    try:
        return _INBOUND.validate_python(value)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(p) for p in first["loc"][1:]) or kind
        return FrameRejected(message=f"{kind}: {where}: {first['msg']}")


# --- capabilities --------------------------------------------------------------------------------

# Container role names a sidecar reports → the role they serve (peer ROLE_KIND_MAP, in our roles).
ROLE_NAMES: dict[str, Role] = {
    "embedding": Role.EMBEDDING,
    "code-embedding": Role.CODE_EMBEDDING,
    "reranker": Role.RERANKER,
    "completion": Role.CODE_ASSISTANT,
    "code-assistant": Role.CODE_ASSISTANT,
    "rlm": Role.RLM,
}
RUNNING = "running"


class RoleCapability(BaseModel):
    """One role a host serves, as its latest heartbeat says (persisted with the registry entry)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Role
    available: bool
    models: list[str]
    endpoint: str | None = None
    port: int | None = None


def role_of(container_key: str, status: ContainerStatus) -> Role | None:
    """`code-embedding`, or the peer's `ss-code-embedding` container name, → Role.CODE_EMBEDDING."""
    for name in (container_key, status.name or ""):
        bare = name.removeprefix("ss-")
        if bare in ROLE_NAMES:
            return ROLE_NAMES[bare]
    return None


def is_virtual_entry(container_key: str, status: ContainerStatus) -> bool:
    """Whether a heartbeat's container entry looks like a virtual container (type `openrouter`, or
    `-OR-` in its name). Heartbeats stay trimmed: such an entry is never a capability, and nothing
    read from a heartbeat makes a cloud provider (the `containers` command discovers them)."""
    if (status.type or "").strip().lower() == OPENROUTER_SOURCE:
        return True
    if status.config is not None and (status.config.type or "").strip().lower() == OPENROUTER_SOURCE:
        return True
    return any(VIRTUAL_CONTAINER_MARK in name for name in (container_key, status.name or ""))


def capabilities(status: StatusData) -> dict[Role, RoleCapability]:
    """Which roles the host serves right now (peer `snapshotToCapabilities`): a role is available
    when any of its containers is running; models are the configured and the loaded ones. Entries
    that look like virtual containers are ignored (`is_virtual_entry`)."""
    found: dict[Role, RoleCapability] = {}
    for key, container in sorted(status.containers.items()):
        if is_virtual_entry(key, container):
            continue
        role = role_of(key, container)
        if role is None:
            continue
        models = [m for m in (container.config.model if container.config else None, container.model) if m]
        models += [m.name for m in container.loaded_models]
        port = container.config.port if container.config else None
        previous = found.get(role)
        merged_models = sorted(set(models) | set(previous.models if previous else []))
        available = container.status == RUNNING or bool(previous and previous.available)
        endpoint = container.endpoint if container.status == RUNNING else None
        found[role] = RoleCapability(
            role=role,
            available=available,
            models=merged_models,
            endpoint=endpoint or (previous.endpoint if previous else None),
            port=port if port is not None else (previous.port if previous else None),
        )
    return found
