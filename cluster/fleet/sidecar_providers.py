"""Sidecar-hosted providers: a host's heartbeat capabilities as providers of the roles.

Each (agent, role) a fresh heartbeat reports becomes a `local` provider (`hosted="sidecar"`) that
joins the same lanes, single-call routing, policies and compatibility gate as the Ray actors.
Its calls are commands to the agent (`embed`, `rerank`, `chat`, `models`), answered by `result`
frames; `SidecarCalls` turns them into the provider calls the dispatcher makes. Pure asyncio:
the command transport is injected.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import ValidationError

from cluster.cloud.openai_wire import ChatResult, chat_request_body, parse_chat_result
from cluster.errors import MalformedResponse, SamespaceError
from cluster.fleet.agent_registry import HostView
from cluster.local.chat_client import context_window_of
from cluster.naming import sidecar_provider_name
from cluster.providers import ProviderInfo, ProviderKind
from cluster.roles import Role
from cluster.space import EncoderIdentity

# A sidecar reports no token cap; the gate, not the identity, proves its vectors interchangeable.
UNREPORTED_SEQ_LENGTH = 512

Send = Callable[[str, str, str, dict[str, Any]], Awaitable[dict[str, Any]]]  # agent id, provider, action, payload


@dataclass(frozen=True)
class SidecarRoute:
    """Where a sidecar provider's commands go: the agent (its id, issued at registration), the
    role's container, the model."""

    agent: str
    role: Role
    model: str


def sidecar_identity(agent_url: str, agent_id: str, model: str, width: int) -> EncoderIdentity:
    """The encoder space a sidecar claims: its model on its agent. Claims are not trusted: the gate
    verifies the vectors against the reference before a single row is written."""
    return EncoderIdentity(
        model=f"sidecar:{model}",
        weights_sha256=f"agent:{agent_id}@{agent_url}",
        width=width,
        max_seq_length=UNREPORTED_SEQ_LENGTH,
    )


def sidecar_providers(
    hosts: list[HostView], width: int, stats: dict[str, tuple[int, int, str | None]] | None = None
) -> tuple[list[ProviderInfo], dict[str, SidecarRoute]]:
    """Every (host, role) the registry knows, as providers; eligible only while the host's
    heartbeat is fresh and the role's container runs. `stats`: provider → (served, failures, last error)."""
    infos: list[ProviderInfo] = []
    routes: dict[str, SidecarRoute] = {}
    for host in hosts:
        for role, capability in sorted(host.capabilities.items()):
            name = sidecar_provider_name(host.agent_url, host.agent_id, role)
            model = capability.models[0] if capability.models else ""
            if not host.agent_id:
                reason: str | None = "registered before agent ids: waits for it to register again"
            elif not host.fresh:
                reason = "no recent heartbeat" if host.seen_s_ago is not None else "not connected since start"
            elif host.transport == "none":
                reason = "disconnected (its socket closed)"
            elif not capability.available:
                reason = f"the {role.value} container is not running"
            elif not model:
                reason = "no model reported"
            else:
                reason = None
            served, failures, last_error = (stats or {}).get(name, (0, 0, None))
            infos.append(
                ProviderInfo(
                    name=name,
                    kind=ProviderKind.LOCAL,
                    hosted="sidecar",
                    roles=[role],
                    node_id="",
                    host=host.hostname or host.agent_url,
                    model=model,
                    identity=sidecar_identity(host.agent_url, host.agent_id, model, width)
                    if role.writes_index and model
                    else None,
                    eligible=reason is None,
                    reason=reason,
                    served=served,
                    failures=failures,
                    last_error=last_error,
                )
            )
            if host.agent_id:
                routes[name] = SidecarRoute(agent=host.agent_id, role=role, model=model)
    return infos, routes


def decode_embeddings(result: dict[str, Any], count: int, provider: str) -> np.ndarray:
    """`embeddings`: base64 little-endian float32 rows (or plain float lists) → (count, dims)."""
    rows = result.get("embeddings")
    if not isinstance(rows, list) or len(rows) != count:
        got = len(rows) if isinstance(rows, list) else type(rows).__name__
        raise MalformedResponse(provider, f"embed: expected {count} rows, got {got}")
    try:
        decoded = [
            np.frombuffer(base64.b64decode(row, validate=True), dtype="<f4")
            if isinstance(row, str)
            else np.asarray(row, dtype=np.float32)
            for row in rows
        ]
        matrix = np.stack(decoded).astype(np.float32) if decoded else np.zeros((0, 0), dtype=np.float32)
    except (binascii.Error, ValueError, TypeError):
        raise MalformedResponse(provider, "embed: rows are not float32 vectors of one width") from None
    if matrix.ndim != 2 or not np.isfinite(matrix).all():
        raise MalformedResponse(provider, "embed: rows are not finite vectors of one width")
    return matrix


class SidecarCalls:
    """The provider calls of sidecar-hosted providers, as commands through `send`."""

    def __init__(self, send: Send, routes: Callable[[], dict[str, SidecarRoute]]) -> None:
        self._send = send
        self._routes = routes

    def _route(self, provider: str) -> SidecarRoute:
        route = self._routes().get(provider)
        if route is None:
            raise SamespaceError(f"no sidecar provider {provider!r}")
        return route

    async def embed(self, provider: str, texts: list[str]) -> np.ndarray:
        route = self._route(provider)
        result = await self._send(
            route.agent, provider, "embed", {"role": route.role.value, "model": route.model, "texts": texts}
        )
        return decode_embeddings(result, len(texts), provider)

    async def rerank(self, provider: str, query: str, documents: list[str]) -> list[float]:
        route = self._route(provider)
        payload = {"role": route.role.value, "model": route.model, "query": query, "documents": documents}
        result = await self._send(route.agent, provider, "rerank", payload)
        scores = [float("-inf")] * len(documents)
        rows = result.get("results")
        if not isinstance(rows, list):
            raise MalformedResponse(provider, "rerank: no results list")
        for row in rows:
            index = row.get("index") if isinstance(row, dict) else None
            score = row.get("relevance_score", row.get("score")) if isinstance(row, dict) else None
            if not isinstance(index, int) or not 0 <= index < len(documents) or not isinstance(score, int | float):
                raise MalformedResponse(provider, "rerank: a result without a valid index and score")
            scores[index] = float(score)
        return scores

    async def chat(
        self,
        provider: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatResult:
        route = self._route(provider)
        body = chat_request_body(route.model, messages, tools, tool_choice, max_tokens, temperature)
        result = await self._send(
            route.agent, provider, "chat", {"role": route.role.value, "model": route.model, "request": body}
        )
        try:
            return parse_chat_result(result.get("response"))
        except (ValidationError, IndexError):
            raise MalformedResponse(provider, "chat: not an OpenAI chat completion") from None

    async def context_window(self, provider: str) -> int | None:
        route = self._route(provider)
        result = await self._send(route.agent, provider, "models", {"role": route.role.value})
        return context_window_of(result.get("response"), route.model)
