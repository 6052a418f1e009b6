"""Provider discovery: ask every provider actor of the namespace what it serves, now.

Discovery is an explicit query of the actors themselves (`describe()`), never a cached snapshot:
an actor that does not answer is reported, not silently missing. It starts nothing (the registry
does), so the budget actor may discover the containers that call it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import ray
from ray.actor import ActorHandle

from actors.handles import find_actor, named_actor
from cluster.naming import FLEET_ACTOR_NAME, is_provider_name, is_virtual_container_name
from cluster.providers import ProviderInfo, ProviderKind, not_answering
from cluster.settings import SamespaceSettings

__all__ = ["DESCRIBE_TIMEOUT_S", "LiveProvider", "discover_providers"]

DESCRIBE_TIMEOUT_S = 10.0

log = logging.getLogger("samespace.registry")


@dataclass(frozen=True)
class LiveProvider:
    info: ProviderInfo
    handle: ActorHandle | None  # None when the actor did not answer


async def discover_providers(settings: SamespaceSettings) -> list[LiveProvider]:
    """Ask every provider actor in the namespace to describe itself, concurrently."""
    names = sorted(
        entry["name"]
        for entry in ray.util.list_named_actors(all_namespaces=True)
        if entry["namespace"] == settings.ray.namespace and is_provider_name(entry["name"])
    )

    async def ask(name: str) -> LiveProvider:
        try:
            handle = named_actor(settings, name)
            info: ProviderInfo = await asyncio.wait_for(handle.describe.remote(), DESCRIBE_TIMEOUT_S)
            return LiveProvider(info=info, handle=handle)
        except Exception as exc:  # noqa: BLE001 - reported as an ineligible provider, not hidden
            kind = ProviderKind.CLOUD if is_virtual_container_name(name) else ProviderKind.LOCAL
            return LiveProvider(info=not_answering(name, kind, type(exc).__name__), handle=None)

    described, sidecars = await asyncio.gather(
        asyncio.gather(*(ask(name) for name in names)), _sidecar_providers(settings, names)
    )
    return list(described) + sidecars


async def _sidecar_providers(settings: SamespaceSettings, reserved: list[str]) -> list[LiveProvider]:
    """Sidecar-hosted providers, as the fleet actor sees them; none when no sidecar ever
    reached this cluster. Their calls go through the fleet actor, which holds the sockets.
    `reserved`: the names of the provider actors, which a sidecar's virtual container may not
    take (one that would is listed ineligible under another name: `cluster/fleet/virtual_providers.py`)."""
    fleet = find_actor(settings, FLEET_ACTOR_NAME)  # never started here (actors/fleet.py sits above)
    if fleet is None:
        return []
    try:
        infos: list[ProviderInfo] = await asyncio.wait_for(fleet.providers.remote(reserved), DESCRIBE_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - reported, and the Ray-hosted providers still serve
        log.warning("the fleet actor did not answer discovery: %s", type(exc).__name__)
        return []
    return [LiveProvider(info=info, handle=fleet) for info in infos]
