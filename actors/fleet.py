"""The fleet actor: one per namespace, the master's shared state for every sidecar.

A Ray shell around `cluster.fleet.hub.FleetHub` (registry, commands, sidecar providers, and the
answers to the sidecar endpoints); no logic of its own. Serve replicas hold the sockets and forward
frames here; whichever replica a sidecar reached, its commands flow through this one actor.
Discovery asks `providers()`; the dispatchers' calls to sidecar providers land in
`embed`/`rerank`/`chat`/`context_window`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np
import ray
from ray.actor import ActorHandle

from actors.handles import find_actor, get_or_start
from cluster.cloud import ChatResult
from cluster.config.store import ConfigStore
from cluster.fleet import HostView
from cluster.fleet.hub import Answer, FleetHub
from cluster.naming import FLEET_ACTOR_NAME
from cluster.providers import ProviderInfo
from cluster.settings import SamespaceSettings


@ray.remote(  # type: ignore[call-overload]  # Ray's stubs list task options only, not actor ones
    num_cpus=0, max_restarts=-1, max_concurrency=1000
)
class FleetActor:
    def __init__(self, settings: SamespaceSettings) -> None:
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

    def providers(self) -> list[ProviderInfo]:
        return self._hub.providers()

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


def get_fleet_actor(settings: SamespaceSettings) -> ActorHandle:
    return get_or_start(FleetActor, settings, FLEET_ACTOR_NAME, settings)


def find_fleet_actor(settings: SamespaceSettings) -> ActorHandle | None:
    """The fleet actor if a sidecar ever reached this cluster; discovery never starts one."""
    return find_actor(settings, FLEET_ACTOR_NAME)
