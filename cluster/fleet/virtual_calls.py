"""The calls of sidecar-hosted virtual containers, as commands: each embed and rerank carries the
permit the master took from its key-wide budget (DESIGN §7), and the answer's `usage` comes back
for the spend caps; the key's limits are read through `virtual-key-info`; the `containers` command
discovers them. Pure asyncio: the command transport is injected (`FleetHub._send`).

A failed command arrives as the error the in-cluster OpenRouter client would raise
(`cluster.fleet.commands.result_error`: 429 is RateLimited with its Retry-After, so the budget's
AIMD hears it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
from pydantic import ValidationError

from cluster.cloud.budget import KeyFacts
from cluster.cloud.container import requests_per_minute
from cluster.cloud.spend import CallUsage, Charge, charge_for
from cluster.errors import MalformedResponse, MissingPin, SamespaceError, UpstreamUnavailable, WidthMismatch
from cluster.fleet.frames import (
    Action,
    ContainersResult,
    VirtualContainerRow,
    VirtualEmbedCommand,
    VirtualRerankCommand,
    VirtualUsage,
)
from cluster.fleet.sidecar_providers import decode_embeddings
from cluster.fleet.virtual_providers import VirtualBook, VirtualRoute

__all__ = ["VirtualCalls", "charges_for", "key_facts_of", "usage_of"]

Send = Callable[[str, str, str, dict[str, Any]], Awaitable[dict[str, Any]]]  # agent id, provider, action, payload

# Characters per token when a sidecar reported no usage: a generous estimate (never free, DESIGN §7).
CHARS_PER_TOKEN = 3


def usage_of(result: dict[str, Any]) -> VirtualUsage | None:
    """The answer's `usage` ({promptTokens, totalTokens, cost}), or None when it has none or a bad one."""
    usage = result.get("usage")
    if not isinstance(usage, dict):
        return None
    try:
        return VirtualUsage.model_validate(usage)
    except ValidationError:
        return None


def charges_for(usage: VirtualUsage | None, model: str, texts: list[str]) -> list[Charge]:
    """What one permitted call cost, as the in-cluster container charges it: `usage.cost` when the
    sidecar reported it, else its tokens at the unpriced default (an estimate, never 0). No usage at
    all: the texts' length at `CHARS_PER_TOKEN` stands in for the prompt tokens."""
    if usage is None:
        tokens = sum(len(text) for text in texts) // CHARS_PER_TOKEN + len(texts)
        return [charge_for(CallUsage(model=model, prompt_tokens=tokens), None)]
    prompt = usage.prompt_tokens or max(0, usage.total_tokens - usage.completion_tokens)
    call = CallUsage(model=model, cost=usage.cost, prompt_tokens=prompt, completion_tokens=usage.completion_tokens)
    return [charge_for(call, None)]


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def key_facts_of(body: Any, provider: str) -> KeyFacts:
    """GET /key's body (`{data: {...}}` or its data) as the budget reads it (cluster/cloud/container.py:
    the key's rate, whether it is free-tier, its remaining limit)."""
    data = body.get("data", body) if isinstance(body, dict) else None
    if not isinstance(data, dict):
        raise MalformedResponse(provider, "virtual-key-info: no GET /key body")
    rate: dict[str, Any] = data["rate_limit"] if isinstance(data.get("rate_limit"), dict) else {}
    interval = rate.get("interval")
    rpm = requests_per_minute(
        _number(rate.get("requests")), interval if isinstance(interval, str | int | float) else None
    )
    return KeyFacts(
        rpm=rpm, is_free_tier=bool(data.get("is_free_tier")), credits_remaining=_number(data.get("limit_remaining"))
    )


def _ranked(result: dict[str, Any], count: int, top_n: int | None, provider: str) -> list[tuple[int, float]]:
    rows = result.get("results")
    if not isinstance(rows, list):
        raise MalformedResponse(provider, "virtual-rerank: no results list")
    ranked = []
    for row in rows:
        index = row.get("index") if isinstance(row, dict) else None
        score = row.get("relevance_score", row.get("score")) if isinstance(row, dict) else None
        valid_index = isinstance(index, int) and not isinstance(index, bool) and 0 <= index < count
        if not valid_index or not isinstance(score, int | float) or isinstance(score, bool):
            raise MalformedResponse(provider, "virtual-rerank: a result without a valid index and score")
        ranked.append((int(index), float(score)))  # type: ignore[arg-type]  # checked just above
    ranked.sort(key=lambda pair: -pair[1])
    return ranked[:top_n] if top_n is not None else ranked


class VirtualCalls:
    """The provider calls of sidecar virtual containers, as commands through `send`; each permit
    sent is counted in `book` before the command goes."""

    def __init__(
        self, send: Send, routes: Callable[[], dict[str, VirtualRoute]], book: VirtualBook, width: int
    ) -> None:
        self._send = send
        self._routes = routes
        self._book = book
        self._width = width

    def route(self, provider: str) -> VirtualRoute:
        """The provider's route; refused when unknown or its agent called OpenRouter without a permit."""
        route = self._routes().get(provider)
        if route is None:
            raise SamespaceError(f"no sidecar virtual container {provider!r}")
        refused = self._book.unpermitted(route.agent)
        if refused is not None:
            raise UpstreamUnavailable(provider, refused)
        return route

    async def embed(self, provider: str, texts: list[str], permit: str) -> tuple[np.ndarray, VirtualUsage | None]:
        route = self.route(provider)
        if route.upstream is None:
            raise MissingPin(provider, "embedding route without a pinned upstream; refused before sending")
        command = VirtualEmbedCommand.model_validate(
            {"role": route.role.value, "model": route.model, "permit": permit, "texts": texts}
        )
        result = await self._permitted(route, provider, Action.VIRTUAL_EMBED, command.model_dump(mode="json"))
        vectors = decode_embeddings(result, len(texts), provider)
        if vectors.shape[1] != self._width:
            raise WidthMismatch(f"{provider} {route.model}@{route.upstream}", self._width, vectors.shape[1])
        return vectors, usage_of(result)

    async def rerank(
        self, provider: str, query: str, documents: list[str], top_n: int | None, permit: str
    ) -> tuple[list[tuple[int, float]], VirtualUsage | None]:
        route = self.route(provider)
        if not documents:
            return [], None
        command = VirtualRerankCommand.model_validate(
            {
                "role": route.role.value,
                "model": route.model,
                "permit": permit,
                "query": query,
                "documents": documents,
                "topN": top_n,
            }
        )
        payload = command.model_dump(mode="json", by_alias=True, exclude_none=True)
        result = await self._permitted(route, provider, Action.VIRTUAL_RERANK, payload)
        return _ranked(result, len(documents), top_n, provider), usage_of(result)

    async def key_facts(self, provider: str) -> KeyFacts:
        """The key's limits as the sidecar's container reads GET /key (never the key)."""
        route = self.route(provider)
        result = await self._send(route.agent, provider, Action.VIRTUAL_KEY_INFO.value, {"role": route.role.value})
        return key_facts_of(result.get("response"), provider)

    async def containers(self, agent: str) -> list[VirtualContainerRow]:
        """Ask the agent which virtual containers it hosts for this master."""
        result = await self._send(agent, f"sidecar agent {agent}", Action.CONTAINERS.value, {})
        try:
            return list(ContainersResult.model_validate(result).virtual_containers)
        except ValidationError as exc:
            first = exc.errors(include_url=False, include_input=False)[0]
            where = ".".join(str(p) for p in first["loc"]) or "result"
            raise MalformedResponse(agent, f"containers: {where}: {first['msg']}") from None

    async def _permitted(
        self, route: VirtualRoute, provider: str, action: Action, payload: dict[str, Any]
    ) -> dict[str, Any]:
        self._book.permit_sent(route.agent, route.role)  # counted before it goes: the sidecar may call at once
        return await self._send(route.agent, provider, action.value, payload)
