"""A query's vector in one hop: the replica calls the embedder actor the dispatcher would pick.

Through the dispatcher, a query's vector costs two actor hops (replica → dispatcher → embedder)
and the dispatcher's share of CPU on every search. `QueryPath` asks the dispatcher *who* answers
(`DispatcherActor.direct_query_route`, reused for as long as the dispatcher reuses a discovery)
and calls that local actor's query group itself. The dispatcher still decides everything: the
policy, the reference space, which provider is first. Anything else takes the dispatcher's own
path: a cloud or sidecar provider first, no route, or a direct call that failed (its failover
and rediscovery apply).

A call through the dispatcher carries, beside its project, the replica's current subject and tool
call (`caller_kwargs`): a cloud provider counts it against that subject's daily credits.

The same answer says whether any provider of the cluster serves reranking: with none, a search
neither asks the reranker's dispatcher nor starts it (a process of its own).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from ray.actor import ActorHandle

from actors.transports import unwrap
from cluster.cloud.request_tag import caller_kwargs
from cluster.routing.dispatch import SINGLE_CALL_DISCOVERY_MAX_AGE_S
from cluster.space import EncoderIdentity

log = logging.getLogger("samespace.search")

__all__ = ["DirectRoute", "QueryPath"]


@dataclass(frozen=True)
class DirectRoute:
    """`DispatcherActor.direct_query_route`: the local actor a query's vector comes from (the space
    of its vectors, its name, its handle; None: the dispatcher encodes), and whether any provider
    discovered serves the reranker role."""

    encoder: tuple[EncoderIdentity, str, Any] | None
    rerankers: bool


class QueryPath:
    """`encode_query(text, project)` → (vector, space of the vector, provider name)."""

    def __init__(self, dispatcher: ActorHandle, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._dispatcher = dispatcher
        self._clock = clock
        self._route = DirectRoute(encoder=None, rerankers=True)
        self._route_until = float("-inf")

    async def rerankers(self) -> bool:
        """Whether any provider serves reranking (as of the dispatcher's last discovery)."""
        return (await self._current_route()).rerankers

    async def encode_query(self, text: str, project: str) -> tuple[np.ndarray, EncoderIdentity, str]:
        route = (await self._current_route()).encoder
        if route is not None:
            space, name, handle = route
            try:
                vector, _ = await unwrap(handle.encode_query.remote(text))
                return vector, space, name
            except Exception as exc:  # noqa: BLE001 - the dispatcher's path (failover, rediscovery) takes over
                log.info("direct query encode on %s failed, through the dispatcher: %s", name, exc)
                self._route_until = float("-inf")
        call: Any = self._dispatcher.encode_query.remote(text, project, **caller_kwargs())  # the caller's quotas
        result: tuple[np.ndarray, EncoderIdentity, str] = await call
        return result

    async def _current_route(self) -> DirectRoute:
        now = self._clock()
        if now >= self._route_until:
            self._route = await self._dispatcher.direct_query_route.remote()
            self._route_until = now + SINGLE_CALL_DISCOVERY_MAX_AGE_S
        return self._route
