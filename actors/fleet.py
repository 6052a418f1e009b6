"""The fleet actor: one per namespace, the master's shared state for every sidecar.

A Ray shell around `cluster.fleet.hub.FleetHub` (registry, commands, sidecar providers, and the
answers to the sidecar endpoints); no logic of its own. Serve replicas hold the sockets and forward
frames here; whichever replica a sidecar reached, its commands flow through this one actor.
Discovery asks `providers()`; the dispatchers' calls to sidecar providers land in
`embed`/`rerank`/`chat`/`context_window`, and those to the virtual containers sidecars host in
`virtual_embed`/`virtual_rerank`, each under a permit of the key-wide budget (`actors.budget.with_permit`,
as an in-cluster virtual container's), its cost booked from the usage the sidecar reports.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Collection
from typing import Any, TypeVar

import numpy as np
import ray
from pydantic import SecretStr
from ray.actor import ActorHandle

from actors.budget import request_tag_of, with_permit
from actors.handles import find_actor, get_or_start
from cluster.cloud import ChatResult, KeyFacts, RequestTag, set_request_tag
from cluster.cloud.spend import Charge
from cluster.config.store import ConfigStore
from cluster.errors import MissingPin
from cluster.fleet import HostView, VirtualHost, VirtualUsage, charges_for
from cluster.fleet.hub import Answer, FleetHub
from cluster.naming import FLEET_ACTOR_NAME
from cluster.providers import ProviderInfo
from cluster.settings import SamespaceSettings

T = TypeVar("T")


@ray.remote(  # type: ignore[call-overload]  # Ray's stubs list task options only, not actor ones
    num_cpus=0, max_restarts=-1, max_concurrency=1000
)
class FleetActor:
    def __init__(self, settings: SamespaceSettings) -> None:
        self._settings = settings
        store = ConfigStore(settings.admin.config_path)
        self._hub = FleetHub(settings, store, clock=time.monotonic, sleep=asyncio.sleep)

    def __repr__(self) -> str:
        return "FleetActor()"

    # --- WebSocket (called by the Serve replica that holds the socket) -----------------------
    def ws_opened(self) -> str:
        return self._hub.ws_opened()

    def ws_frame(self, connection: str, raw: str | bytes) -> tuple[list[dict[str, Any]], bool]:
        return self._hub.ws_frame(connection, raw)

    async def ws_next(self, connection: str, wait_s: float) -> list[dict[str, Any]]:
        return await self._hub.ws_next(connection, wait_s)

    def ws_closed(self, connection: str) -> None:
        self._hub.ws_closed(connection)

    # --- HTTP fallback (the replica checked the fleet token and the body size) -----------------
    def http_register(self, raw: bytes) -> Answer:
        return self._hub.http_register(raw)

    async def http_heartbeat(self, raw: bytes, agent_id: str | None, digest: str | None) -> Answer:
        return await self._hub.http_heartbeat(raw, agent_id, digest)

    async def http_poll(self, raw: bytes, agent_id: str | None, digest: str | None) -> Answer:
        return await self._hub.http_poll(raw, agent_id, digest)

    def http_result(self, raw: bytes, agent_id: str | None, digest: str | None) -> Answer:
        return self._hub.http_result(raw, agent_id, digest)

    # --- reads -------------------------------------------------------------------------------
    def hosts(self) -> list[HostView]:
        return self._hub.hosts()

    def providers(self, reserved: Collection[str] = ()) -> list[ProviderInfo]:
        return self._hub.providers(reserved)

    def virtual_hosts(self) -> list[VirtualHost]:
        return self._hub.virtual_hosts()

    # --- provider calls (the dispatchers') ---------------------------------------------------
    async def embed(self, provider: str, texts: list[str]) -> np.ndarray:
        return await self._hub.embed(provider, texts)

    async def rerank(self, provider: str, query: str, documents: list[str]) -> list[float]:
        return await self._hub.rerank(provider, query, documents)

    async def chat(self, provider: str, **request: Any) -> ChatResult:
        return await self._hub.chat(provider, **request)

    async def context_window(self, provider: str) -> int | None:
        return await self._hub.context_window(provider)

    async def push_config(self, agent_url: str, payload: dict[str, Any]) -> dict[str, Any]:
        return await self._hub.push_config(agent_url, payload)

    async def push_key(self, key: SecretStr, containers: dict[str, list[str] | None]) -> tuple[list[str], list[str]]:
        """The key to sidecars, one `config` frame each (`FleetHub.push_key`); kept nowhere here."""
        return await self._hub.push_key(key, containers)

    # --- sidecar virtual containers (the dispatchers' cloud calls, and the budget's key read) ----
    async def virtual_embed(
        self,
        provider: str,
        texts: list[str],
        project: str | None = None,
        priority: str | None = None,
        subject: str | None = None,
        call_id: str | None = None,
    ) -> np.ndarray:
        route = self._hub.virtual_route(provider)
        if route.upstream is None:  # as an in-cluster container: refused before a permit is taken
            raise MissingPin(provider, "embedding route without a pinned upstream; refused before sending")
        heard: list[VirtualUsage | None] = []

        async def call(ticket: int) -> np.ndarray:
            vectors, usage = await self._hub.virtual_embed(provider, texts, str(ticket))
            heard.append(usage)
            return vectors

        tag = request_tag_of(project, priority, subject, call_id)
        return await asyncio.create_task(self._permitted(provider, call, heard, texts, tag))

    async def virtual_rerank(
        self,
        provider: str,
        query: str,
        documents: list[str],
        top_n: int | None = None,
        project: str | None = None,
        priority: str | None = None,
        subject: str | None = None,
        call_id: str | None = None,
    ) -> list[tuple[int, float]]:
        self._hub.virtual_route(provider)
        if not documents:
            return []
        heard: list[VirtualUsage | None] = []

        async def call(ticket: int) -> list[tuple[int, float]]:
            ranked, usage = await self._hub.virtual_rerank(provider, query, documents, top_n, str(ticket))
            heard.append(usage)
            return ranked

        tag = request_tag_of(project, priority, subject, call_id)
        return await asyncio.create_task(self._permitted(provider, call, heard, [query, *documents], tag))

    async def key_facts(self, provider: str) -> KeyFacts:
        """The key's limits through a sidecar's virtual container (the BudgetActor holds no key)."""
        return await self._hub.key_facts(provider)

    async def _permitted(
        self,
        provider: str,
        call: Callable[[int], Awaitable[T]],
        heard: list[VirtualUsage | None],
        texts: list[str],
        tag: RequestTag,
    ) -> T:
        """One call under a key-wide permit (DESIGN §7), like an in-cluster container's `_count`: the
        permit's ticket travels in the command, and what the sidecar says the answer cost is booked
        to the role (and the tag's subject and tool call) before the permit is freed. Run as a task
        of its own, so that the tag it sets is this call's alone."""
        set_request_tag(tag)
        route = self._hub.virtual_route(provider)

        async def settle() -> list[Charge]:
            return [charge for usage in heard for charge in charges_for(usage, route.model, texts)]

        return await with_permit(self._settings, provider, call, role=route.role, settle=settle)


def get_fleet_actor(settings: SamespaceSettings) -> ActorHandle:
    return get_or_start(FleetActor, settings, FLEET_ACTOR_NAME, settings)


def find_fleet_actor(settings: SamespaceSettings) -> ActorHandle | None:
    """The fleet actor if a sidecar ever reached this cluster; discovery never starts one."""
    return find_actor(settings, FLEET_ACTOR_NAME)
