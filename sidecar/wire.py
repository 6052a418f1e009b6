"""The sidecar wire protocol, the one copy both ends share: frame types, size caps, headers, the frames
a sidecar sends (as the master validates them), the frames the master sends, and the command payloads.

Small JSON frames with the peer's shapes (`type` plus camelCase fields), over a WebSocket or the HTTP
fallback. Pydantic and the standard library only: the reference sidecar owns this module, and the
master (`cluster.fleet.frames`) imports it, so neither side keeps a copy that could drift.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

__all__ = [
    "AGENT_ID_HEADER",
    "CREDENTIAL_HEADER",
    "ERROR_METADATA_KEYS",
    "INBOUND_TYPES",
    "MAX_CONTAINERS",
    "MAX_FRAME_BYTES",
    "MAX_METADATA_CHARS",
    "MAX_RESULT_BYTES",
    "OPENROUTER_SOURCE",
    "VIRTUAL_CONTAINER_MARK",
    "VIRTUAL_ROLE_LABELS",
    "Action",
    "ChatCommand",
    "ConfigPayload",
    "ContainerConfig",
    "ContainerStatus",
    "ContainersCommand",
    "ContainersResult",
    "EmbedCommand",
    "FrameType",
    "HeartbeatFrame",
    "Inbound",
    "InboundFrame",
    "KeyInfoCommand",
    "LoadedModel",
    "ModelsCommand",
    "OpenRouterConfig",
    "PollRequest",
    "PongFrame",
    "RegisterFrame",
    "RerankCommand",
    "ResultFrame",
    "StatusData",
    "VirtualContainerRow",
    "VirtualEmbedCommand",
    "VirtualRerankCommand",
    "VirtualUsage",
    "command_frame",
    "config_frame",
    "describe_invalid",
    "error_frame",
    "error_metadata",
    "error_result",
    "key_config_frame",
    "ok_result",
    "ping_frame",
    "pong_frame",
    "registered_frame",
    "result_frame",
    "virtual_container_name",
]

# The caps the master enforces, before it parses anything. Every frame but a result is small (a
# heartbeat with dozens of containers is a few KB); a result carries a batch of vectors (64 x 2560
# float32 is ~0.9 MB in base64). MAX_RESULT_BYTES is also the one cap on a WebSocket message, in
# either direction: the master refuses a larger one from a sidecar, and the sidecar takes no larger
# one from the master (whose commands carry a batch of texts, far below it).
MAX_FRAME_BYTES = 256 * 1024
MAX_RESULT_BYTES = 8 * 1024 * 1024
MAX_CONTAINERS = 64
# The HTTP fallback's agent binding: every call after register names the agent and proves it with
# the credential issued at registration. The credential never appears in a body.
AGENT_ID_HEADER = "X-Sidecar-Agent"
CREDENTIAL_HEADER = "X-Sidecar-Credential"
# What an error result may carry of OpenRouter's error `metadata`: the keys the master's error
# mapping reads, under OpenRouter's own names, each a short string or a number. Nothing else of the
# upstream body crosses the wire (it might echo a secret back).
ERROR_METADATA_KEYS = ("reason", "limit_source", "retry_after_seconds")
MAX_METADATA_CHARS = 100


class FrameType(StrEnum):
    """A frame's `type`. A sidecar sends register, heartbeat, result and pong; the master sends
    registered, command, config, ping and error."""

    REGISTER = "register"
    HEARTBEAT = "heartbeat"
    RESULT = "result"
    PONG = "pong"
    REGISTERED = "registered"
    COMMAND = "command"
    CONFIG = "config"
    PING = "ping"
    ERROR = "error"


# --- the frames a sidecar sends, as the master validates them --------------------------------------


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
    agent_id: str | None = Field(
        default=None, alias="agentId", max_length=64, description="To supersede: the id issued earlier."
    )
    credential: str | None = Field(
        default=None, max_length=256, repr=False, description="To supersede: its credential."
    )


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
    """The answer to the master's `ping` frame (ASGI cannot send protocol-level pings, so liveness is a frame)."""

    type: Literal["pong"]


class PollRequest(_Wire):
    """`POST /sidecar/poll`: the agent asking for its pending commands, held open up to `waitS`."""

    agent_url: str | None = Field(default=None, alias="agentUrl", max_length=2048)
    wait_s: float = Field(default=0.0, ge=0, le=600, alias="waitS")


Inbound = RegisterFrame | HeartbeatFrame | ResultFrame | PongFrame
InboundFrame = Annotated[Inbound, Field(discriminator="type")]
INBOUND_TYPES = (FrameType.REGISTER, FrameType.HEARTBEAT, FrameType.RESULT, FrameType.PONG)


def pong_frame() -> dict[str, Any]:
    return {"type": FrameType.PONG.value}


def result_frame(command_id: Any, fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": FrameType.RESULT.value, "id": command_id, **fields}


def error_metadata(raw: object) -> dict[str, str | int | float]:
    """The part of an upstream error's `metadata` that may cross the wire: each of ERROR_METADATA_KEYS
    whose value is a string (cut to MAX_METADATA_CHARS) or a finite number; every other key and value
    dropped, and nothing at all when `raw` is not a mapping. Both ends apply it: the sidecar before it
    sends, the master on what it receives."""
    if not isinstance(raw, Mapping):
        return {}
    kept: dict[str, str | int | float] = {}
    for key in ERROR_METADATA_KEYS:
        value = raw.get(key)
        if isinstance(value, str):
            kept[key] = value[:MAX_METADATA_CHARS]
        elif isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            kept[key] = value
    return kept


def error_result(
    command_id: Any,
    message: str,
    *,
    status: int | None = None,
    retry_after_s: float | None = None,
    metadata: Mapping[str, object] | None = None,
) -> dict[str, Any]:
    """A failed command. A virtual container's upstream failure carries OpenRouter's HTTP `status`
    (429: rate limited), its `Retry-After` in seconds and the whitelisted keys of its error `metadata`
    (`error_metadata`: why a 402 was refused), so that the master's budget hears them."""
    frame: dict[str, Any] = {"type": FrameType.RESULT.value, "id": command_id, "error": message}
    if status is not None:
        frame["status"] = status
    if retry_after_s is not None:
        frame["retryAfterS"] = retry_after_s
    kept = error_metadata(metadata)
    if kept:
        frame["metadata"] = kept
    return frame


def ok_result(command_id: Any) -> dict[str, Any]:
    return {"type": FrameType.RESULT.value, "id": command_id, "ok": True}


# --- the frames the master sends -------------------------------------------------------------------


def ping_frame() -> dict[str, Any]:
    return {"type": FrameType.PING.value}


def registered_frame(agent_id: str, credential: str) -> dict[str, Any]:
    """The answer to an accepted register: the agent's id and its credential (sent this once)."""
    return {"type": FrameType.REGISTERED.value, "ok": True, "agentId": agent_id, "credential": credential}


def error_frame(message: str) -> dict[str, Any]:
    return {"type": FrameType.ERROR.value, "message": message}


def command_frame(command_id: str, action: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The peer spreads a command's payload flat beside type, id and action."""
    reserved = {"type", "id", "action"} & payload.keys()
    if reserved:
        raise ValueError(f"payload may not set {sorted(reserved)}")
    return {"type": FrameType.COMMAND.value, "id": command_id, "action": action, **payload}


def config_frame(config_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"type": FrameType.CONFIG.value, "id": config_id, "payload": payload}


# --- command payloads (flat beside type, id and action), as the sidecar accepts them ---------------


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


# --- virtual containers: a role a sidecar serves through OpenRouter (`<PCName>-OR-<Role>`) ---------
#
# A sidecar started with `--serve code-embedding=openrouter:<model>@<upstream>` hosts a virtual
# container: a cloud provider of the master, named `<PCName>-OR-<Role>`. The master discovers it with
# a `containers` command (request/response over the sidecar's link, never from heartbeats: the
# heartbeat stays trimmed and carries no data on virtual containers). Every `virtual-embed` and
# `virtual-rerank` command carries the `permit` the master took from its key-wide budget before
# sending it; the sidecar calls OpenRouter only for a command that carries one, and reports each
# answer's `usage` back for the spend caps. The key reaches the sidecar in a `config` frame
# (`ConfigPayload.openrouter.apiKey`), per master: a key pushed by one master serves only its commands.


class Action(StrEnum):
    """A command's `action`."""

    EMBED = "embed"
    RERANK = "rerank"
    CHAT = "chat"
    MODELS = "models"
    CONTAINERS = "containers"
    VIRTUAL_EMBED = "virtual-embed"
    VIRTUAL_RERANK = "virtual-rerank"
    VIRTUAL_KEY_INFO = "virtual-key-info"


VIRTUAL_CONTAINER_MARK = "-OR-"
# The roles a virtual container may serve, and the label its name carries (the peer's ROLE_LABEL).
VIRTUAL_ROLE_LABELS = {"embedding": "Embedding", "code-embedding": "CodeEmbedding", "reranker": "Reranker"}
OPENROUTER_SOURCE = "openrouter"


def virtual_container_name(hostname: str, role: str) -> str:
    """`<PCName>-OR-<Role>`: the host name without a trailing `.local` (any case), e.g. 'ws17-OR-CodeEmbedding'."""
    pc = hostname[: -len(".local")] if hostname.lower().endswith(".local") else hostname
    return f"{pc}{VIRTUAL_CONTAINER_MARK}{VIRTUAL_ROLE_LABELS[role]}"


class _PermittedCommand(_Command):
    model: str | None = None
    permit: str = Field(min_length=1, max_length=200, description="The master's budget permit for this call.")


class VirtualEmbedCommand(_PermittedCommand):
    """`virtual-embed` → {source, embeddings (base64 float32 LE rows), dims, model, provider, usage}."""

    texts: list[str] = Field(min_length=1)


class VirtualRerankCommand(_PermittedCommand):
    """`virtual-rerank` → {source, results: [{index, relevance_score}], model, usage}."""

    query: str
    documents: list[str] = Field(min_length=1)
    top_n: int | None = Field(default=None, ge=1, alias="topN")


class KeyInfoCommand(BaseModel):
    """`virtual-key-info` → {response: GET /key's body} (the key's limits, never the key)."""

    model_config = ConfigDict(extra="ignore", frozen=True, hide_input_in_errors=True)


class ContainersCommand(BaseModel):
    """`containers` → ContainersResult: this master's virtual containers on the sidecar (discovery)."""

    model_config = ConfigDict(extra="ignore", frozen=True, hide_input_in_errors=True)


class VirtualUsage(_Wire):
    """What one OpenRouter answer cost, as the sidecar read it from the response's `usage`."""

    prompt_tokens: int = Field(default=0, ge=0, alias="promptTokens")
    completion_tokens: int = Field(default=0, ge=0, alias="completionTokens")
    total_tokens: int = Field(default=0, ge=0, alias="totalTokens")
    cost: float | None = Field(default=None, ge=0, description="Credits, when OpenRouter reported them.")


class VirtualContainerRow(_Wire):
    """One virtual container as the `containers` command reports it, for the master that asked."""

    name: str = Field(min_length=1, max_length=255)
    role: str = Field(min_length=1, max_length=64)
    model: str = Field(min_length=1, max_length=255)
    provider: str | None = Field(default=None, max_length=255, description="The pinned upstream, if any.")
    dims: int | None = Field(default=None, ge=1)
    state: str = Field(default="ready", max_length=64, description="'ready' | 'no-key' | 'failing'.")
    key_held: bool = Field(default=False, alias="keyHeld")
    served: int = Field(default=0, ge=0)
    failures: int = Field(default=0, ge=0)
    last_error: str | None = Field(default=None, max_length=500, alias="lastError")
    upstream_calls: int = Field(
        default=0, ge=0, alias="upstreamCalls", description="Requests sent to OpenRouter for this master."
    )
    permits_used: int = Field(default=0, ge=0, alias="permitsUsed", description="Commands served under a permit.")


class ContainersResult(_Wire):
    virtual_containers: list[VirtualContainerRow] = Field(
        default_factory=list, alias="virtualContainers", max_length=MAX_CONTAINERS
    )


class OpenRouterConfig(_Wire):
    """`config` payload `openrouter`: the key (held in memory, for this master only) and which of the
    sidecar's virtual containers take it (None: all of them)."""

    api_key: SecretStr | None = Field(default=None, alias="apiKey", repr=False)
    containers: list[str] | None = Field(default=None, max_length=MAX_CONTAINERS)


class ConfigPayload(_Wire):
    openrouter: OpenRouterConfig | None = None


def key_config_frame(config_id: str, key: SecretStr, containers: list[str] | None = None) -> dict[str, Any]:
    """The one frame that carries the key to a sidecar. Built at the moment of sending; never logged."""
    openrouter: dict[str, Any] = {"apiKey": key.get_secret_value()}
    if containers is not None:
        openrouter["containers"] = list(containers)
    return config_frame(config_id, {"openrouter": openrouter})


def describe_invalid(exc: ValidationError) -> str:
    """'bad command: texts: Field required' (the first problem, never the input)."""
    first = exc.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(p) for p in first["loc"]) or "payload"
    return f"bad command: {where}: {first['msg']}"
