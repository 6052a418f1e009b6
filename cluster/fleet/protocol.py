"""The sidecar wire protocol (peer `soundsuiteMaster.ts`): frames and parsing.

A workstation's sidecar dials the master and speaks small JSON frames with the peer's wire shapes
(`type` plus camelCase fields). Inbound frames are untrusted: `parse_frame` turns any input —
bad JSON, an unknown type, a missing field, a huge payload — into either a validated frame or a
`FrameRejected` carrying the `error` frame to send back, never an exception.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from cluster.roles import Role

MAX_FRAME_BYTES = 256 * 1024  # a heartbeat with dozens of containers is a few KB (peer: multi-KB)
MAX_RESULT_BYTES = 8 * 1024 * 1024  # a result carries a batch of vectors: 64 x 2560 float32 is ~0.9 MB in base64
MAX_CONTAINERS = 64
# The HTTP fallback's agent binding: every call after register names the agent and
# proves it with the credential issued at registration. The credential never appears in a body.
AGENT_ID_HEADER = "X-Sidecar-Agent"
CREDENTIAL_HEADER = "X-Sidecar-Credential"


class _Wire(BaseModel):
    """Wire models: camelCase as sent, unknown fields ignored (sidecars are newer than masters)."""

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True, hide_input_in_errors=True)


class LoadedModel(_Wire):
    name: str


class ContainerConfig(_Wire):
    model: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    type: str | None = None


class ContainerStatus(_Wire):
    """One container a sidecar runs, as its heartbeat reports it."""

    name: str | None = None
    status: str = "unknown"
    model: str | None = None
    type: str | None = Field(default=None, description="'vllm' | 'ollama' | 'tei' | 'utility' ...")
    endpoint: str | None = Field(default=None, description="OpenAI-compatible base URL the sidecar proxies to.")
    config: ContainerConfig | None = None
    loaded_models: list[LoadedModel] = Field(default_factory=list, alias="loadedModels")


class StatusData(_Wire):
    agent_url: str | None = Field(default=None, alias="agentUrl")
    hostname: str | None = None
    containers: dict[str, ContainerStatus] = Field(default_factory=dict, max_length=MAX_CONTAINERS)
    version: str | None = None


class RegisterFrame(_Wire):
    type: Literal["register"]
    agent_url: str = Field(alias="agentUrl", min_length=1, max_length=2048)
    hostname: str | None = Field(default=None, max_length=255)
    containers: list[str] = Field(default_factory=list, max_length=MAX_CONTAINERS)
    agent_id: str | None = Field(default=None, alias="agentId", max_length=64, description="To supersede: the id issued earlier.")
    credential: str | None = Field(default=None, max_length=256, repr=False, description="To supersede: its credential.")


class HeartbeatFrame(_Wire):
    type: Literal["heartbeat"]
    agent_url: str | None = Field(default=None, alias="agentUrl", max_length=2048)
    containers: list[str] = Field(default_factory=list, max_length=MAX_CONTAINERS)
    active_requests: int = Field(default=0, ge=0, alias="activeRequests")
    status_data: StatusData = Field(default_factory=StatusData, alias="statusData")

    @property
    def agent(self) -> str | None:
        """The agent URL, from the frame or its status blob (the peer accepts either)."""
        return self.agent_url or self.status_data.agent_url


class ResultFrame(_Wire):
    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True, hide_input_in_errors=True)

    type: Literal["result"]
    id: str = Field(min_length=1, max_length=200)
    error: str | None = None

    def payload(self) -> dict[str, Any]:
        """The result's own fields (everything but type, id, error)."""
        return dict(self.model_extra or {})


class PongFrame(_Wire):
    """The answer to our `ping` frame (ASGI cannot send protocol-level pings, so liveness is a frame)."""

    type: Literal["pong"]


class PollRequest(_Wire):
    """`POST /sidecar/poll`: the agent asking for its pending commands, held open up to `waitS`."""

    agent_url: str | None = Field(default=None, alias="agentUrl", max_length=2048)
    wait_s: float = Field(default=0.0, ge=0, le=600, alias="waitS")


Inbound = RegisterFrame | HeartbeatFrame | ResultFrame | PongFrame
InboundFrame = Annotated[Inbound, Field(discriminator="type")]
_INBOUND: TypeAdapter[Inbound] = TypeAdapter(InboundFrame)
INBOUND_TYPES = ("register", "heartbeat", "result", "pong")


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
    if kind != "result" and size > max_bytes:
        return FrameRejected(message=f"frame too large: {size} bytes (limit {max_bytes} for {kind})")
    try:
        return _INBOUND.validate_python(value)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(p) for p in first["loc"][1:]) or kind
        return FrameRejected(message=f"{kind}: {where}: {first['msg']}")


# --- outbound frames -----------------------------------------------------------------------------


def ping_frame() -> dict[str, Any]:
    return {"type": "ping"}


def registered_frame(agent_id: str, credential: str) -> dict[str, Any]:
    """The answer to an accepted register: the agent's id and its credential (sent this once)."""
    return {"type": "registered", "ok": True, "agentId": agent_id, "credential": credential}


def error_frame(message: str) -> dict[str, Any]:
    return {"type": "error", "message": message}


def command_frame(command_id: str, action: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The peer spreads a command's payload flat beside type, id and action."""
    reserved = {"type", "id", "action"} & payload.keys()
    if reserved:
        raise ValueError(f"payload may not set {sorted(reserved)}")
    return {"type": "command", "id": command_id, "action": action, **payload}


def config_frame(config_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"type": "config", "id": config_id, "payload": payload}


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


def capabilities(status: StatusData) -> dict[Role, RoleCapability]:
    """Which roles the host serves right now (peer `snapshotToCapabilities`): a role is available
    when any of its containers is running; models are the configured and the loaded ones."""
    found: dict[Role, RoleCapability] = {}
    for key, container in sorted(status.containers.items()):
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
