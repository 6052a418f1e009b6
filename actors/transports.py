"""How a dispatcher reaches a provider: one small class per transport, all with one signature.

A discovered provider is an actor handle and what it said about itself (`ProviderInfo`). Its
transport turns that into the calls the dispatcher makes (`cluster.routing.dispatch.Provider`):
`Transport(handle).provider(info)`. `TRANSPORTS` names the transport of each kind of provider,
by its `ProviderKind` and where it is hosted. A provider actor's error arrives as its own type
(RateLimited, ...), never wrapped by Ray.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import numpy as np
from ray.actor import ActorHandle
from ray.exceptions import RayTaskError

from cluster.cloud.request_tag import caller_kwargs, current_request_tag
from cluster.providers import ProviderInfo, ProviderKind
from cluster.roles import CHAT_ROLES, Role
from cluster.routing.dispatch import Provider

__all__ = [
    "TRANSPORTS",
    "CloudTransport",
    "RayActorTransport",
    "SidecarCloudTransport",
    "SidecarTransport",
    "Transport",
]


async def unwrap(ref: Any) -> Any:
    """Await an actor call; re-raise the provider's own exception, not Ray's wrapper."""
    try:
        return await ref
    except RayTaskError as exc:
        cause = exc.cause
        raise (cause if isinstance(cause, BaseException) else exc) from None


def _serves_chat(info: ProviderInfo) -> bool:
    return any(role in CHAT_ROLES for role in info.roles)


class Transport(Protocol):
    """Reaches a discovered provider actor through `handle`."""

    def __init__(self, handle: ActorHandle) -> None: ...

    def provider(self, info: ProviderInfo) -> Provider:
        """The calls the provider answers (None where it does not serve that call)."""
        ...


class RayActorTransport:
    """A local actor of this cluster (embedder, reranker, chat endpoint): its own methods.
    Local calls never touch the budget."""

    def __init__(self, handle: ActorHandle) -> None:
        self._handle = handle

    def provider(self, info: ProviderInfo) -> Provider:
        handle = self._handle
        chat = _serves_chat(info)
        embed = (lambda texts: unwrap(handle.encode_batch.remote(texts))) if info.identity is not None else None
        return Provider(
            info=info,
            embed=embed,
            rerank=(lambda q, docs: unwrap(handle.rerank.remote(q, docs))) if Role.RERANKER in info.roles else None,
            call=(lambda **request: unwrap(handle.chat.remote(**request))) if chat else None,
            context=(lambda: unwrap(handle.context_window.remote())) if chat else None,
            query_embed=self._query_embed if embed is not None else None,
        )

    async def _query_embed(self, texts: list[str]) -> np.ndarray:
        """Query texts and the gate's spot-check texts through the query group: never behind a bulk
        batch, and batched there with whatever other queries are waiting."""
        rows = await asyncio.gather(*(unwrap(self._handle.encode_query.remote(text)) for text in texts))
        return np.stack([vector for vector, _ in rows])


def _tag() -> tuple[str, str]:
    tag = current_request_tag()
    return tag.project, tag.priority.value


class CloudTransport:
    """A virtual container (OpenRouter), serving one role. Calls carry the request's project and
    priority, so that the budget serves them fairly, and its subject and tool call (their quotas and
    credits)."""

    def __init__(self, handle: ActorHandle) -> None:
        self._handle = handle

    def provider(self, info: ProviderInfo) -> Provider:
        handle = self._handle
        role = info.roles[0]
        chat = _serves_chat(info)
        return Provider(
            info=info,
            embed=(lambda texts: unwrap(handle.embed.remote(texts, *_tag(), **caller_kwargs())))
            if role.writes_index
            else None,
            rerank=self._rerank if role is Role.RERANKER else None,
            call=self._chat if chat else None,
            context=(lambda: unwrap(handle.context_window.remote())) if chat else None,
        )

    async def _rerank(self, query: str, docs: list[str]) -> list[float]:
        ranked = await unwrap(self._handle.rerank.remote(query, docs, None, *_tag(), **caller_kwargs()))
        return _scores(ranked, len(docs))

    async def _chat(self, **request: Any) -> Any:
        project, priority = _tag()
        return await unwrap(self._handle.chat.remote(**request, project=project, priority=priority, **caller_kwargs()))


def _scores(ranked: list[tuple[int, float]], count: int) -> list[float]:
    """(index, score) pairs as one score per document; a document the upstream did not rank comes last."""
    scores = [float("-inf")] * count
    for index, score in ranked:
        scores[index] = score
    return scores


class SidecarCloudTransport:
    """A virtual container a sidecar hosts: the handle is the fleet actor, every call names the
    provider, and carries the request's project, priority, subject and tool call as a Ray-hosted
    container's does (the fleet actor takes the budget permit). Embedding and rerank only: a
    sidecar's virtual containers serve no chat role."""

    def __init__(self, handle: ActorHandle) -> None:
        self._handle = handle

    def provider(self, info: ProviderInfo) -> Provider:
        handle, name = self._handle, info.name
        role = info.roles[0]
        return Provider(
            info=info,
            embed=(lambda texts: unwrap(handle.virtual_embed.remote(name, texts, *_tag(), **caller_kwargs())))
            if role.writes_index
            else None,
            rerank=self._rerank(name) if role is Role.RERANKER else None,
        )

    def _rerank(self, name: str) -> Callable[[str, list[str]], Awaitable[list[float]]]:
        async def rerank(query: str, docs: list[str]) -> list[float]:
            ranked = await unwrap(
                self._handle.virtual_rerank.remote(name, query, docs, None, *_tag(), **caller_kwargs())
            )
            return _scores(ranked, len(docs))

        return rerank


class SidecarTransport:
    """A sidecar's server: the handle is the fleet actor, and every call names the provider."""

    def __init__(self, handle: ActorHandle) -> None:
        self._handle = handle

    def provider(self, info: ProviderInfo) -> Provider:
        handle, name = self._handle, info.name
        chat = _serves_chat(info)
        return Provider(
            info=info,
            embed=(lambda texts: unwrap(handle.embed.remote(name, texts))) if info.identity is not None else None,
            rerank=(lambda q, d: unwrap(handle.rerank.remote(name, q, d))) if Role.RERANKER in info.roles else None,
            call=(lambda **request: unwrap(handle.chat.remote(name, **request))) if chat else None,
            context=(lambda: unwrap(handle.context_window.remote(name))) if chat else None,
        )


# (kind, hosted) → its transport. A sidecar's own servers are local: they join the local lanes and
# policies; the virtual containers a sidecar hosts are cloud, under the key-wide budget.
TRANSPORTS: Mapping[tuple[ProviderKind, str], Callable[[ActorHandle], Transport]] = {
    (ProviderKind.LOCAL, "ray"): RayActorTransport,
    (ProviderKind.CLOUD, "ray"): CloudTransport,
    (ProviderKind.LOCAL, "sidecar"): SidecarTransport,
    (ProviderKind.CLOUD, "sidecar"): SidecarCloudTransport,
}
