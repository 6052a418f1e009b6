"""Provider discovery: start the actors the cluster should have, then ask each what it serves.

Discovery is an explicit query of the actors themselves (`describe()`), never a cached
snapshot: an actor that does not answer is reported, not silently missing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import ray
from pydantic import SecretStr
from ray import ObjectRef
from ray.actor import ActorHandle
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.chat_endpoint import ChatEndpointActor
from actors.embedder import EmbedderActor
from actors.fleet import find_fleet_actor
from actors.reranker import RerankerActor
from actors.virtual_container import VirtualContainerActor
from cluster.admin.push_plan import PushPlan
from cluster.naming import (
    CHAT_ENDPOINT_PREFIX,
    EMBEDDER_PREFIX,
    RERANKER_PREFIX,
    chat_endpoint_name,
    embedder_actor_name,
    virtual_container_name,
)
from cluster.providers import NOT_ANSWERING, ProviderInfo, ProviderKind, ProviderView
from cluster.roles import Policy, Role
from cluster.settings import RoleRoute, SamespaceSettings

DESCRIBE_TIMEOUT_S = 10.0
CPU_ACTOR_CPUS = 1.0
ACCELERATOR_ACTOR_CPUS = 0.5
VIRTUAL_CONTAINER_MARK = "-OR-"

log = logging.getLogger("samespace.registry")


@dataclass(frozen=True)
class LiveProvider:
    info: ProviderInfo
    handle: ActorHandle | None  # None when the actor did not answer


@dataclass(frozen=True)
class CloudContainer:
    """A virtual container as started: its name, the role it serves, its handle."""

    name: str
    role: Role
    handle: ActorHandle


@dataclass(frozen=True)
class _Node:
    node_id: str
    host: str
    accelerators: float


def alive_nodes(settings: SamespaceSettings) -> list[_Node]:
    resource = settings.embedding.accelerator_resource
    return [
        _Node(node["NodeID"], node["NodeManagerHostname"], float(node["Resources"].get(resource, 0.0)))
        for node in ray.nodes()
        if node.get("Alive")
    ]


def _detached(settings: SamespaceSettings) -> dict[str, Any]:
    return {"namespace": settings.ray.namespace, "lifetime": "detached", "get_if_exists": True}


def _per_accelerator(
    settings: SamespaceSettings, actor_cls: Any, prefix: str, init_args: tuple[Any, ...]
) -> list[ActorHandle]:
    """One actor per accelerator share on every node that has one, plus the CPU actor when wanted."""
    embedding = settings.embedding
    nodes = alive_nodes(settings)
    handles: list[ActorHandle] = []
    has_accelerators = any(n.accelerators > 0 for n in nodes)
    if embedding.device != "cpu":
        for node in nodes:
            for slot in range(int(node.accelerators / embedding.gpus_per_actor)):
                name = embedder_actor_name(node.node_id, slot, "gpu", prefix=prefix)
                resources = (
                    {}
                    if embedding.accelerator_resource == "GPU"
                    else {embedding.accelerator_resource: embedding.gpus_per_actor}
                )
                handles.append(
                    actor_cls.options(
                        name=name,
                        num_gpus=embedding.gpus_per_actor if embedding.accelerator_resource == "GPU" else 0,
                        resources=resources,
                        num_cpus=ACCELERATOR_ACTOR_CPUS,
                        scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False),
                        **_detached(settings),
                    ).remote(*init_args, name)
                )
    wants_cpu = embedding.cpu_embedder == "always" or (embedding.cpu_embedder == "auto" and not has_accelerators)
    if wants_cpu or embedding.device == "cpu":
        name = embedder_actor_name(None, 0, "cpu", prefix=prefix)
        handles.append(
            actor_cls.options(name=name, num_cpus=CPU_ACTOR_CPUS, **_detached(settings)).remote(*init_args, name)
        )
    return handles


def ensure_embedders(settings: SamespaceSettings) -> list[ActorHandle]:
    """Embedder actors for the current cluster: a node added since gets its actors now."""
    return _per_accelerator(settings, EmbedderActor, EMBEDDER_PREFIX, (settings.embedding,))


def ensure_rerankers(settings: SamespaceSettings) -> list[ActorHandle]:
    """Local reranker actors, only when a local reranker model is configured."""
    if settings.reranker.model is None:
        return []
    return _per_accelerator(settings, RerankerActor, RERANKER_PREFIX, (settings.reranker,))


def ensure_virtual_containers(settings: SamespaceSettings) -> list[ActorHandle]:
    """One virtual container per (PC, routed role) when the cloud is enabled (opt-in)."""
    return [container.handle for container in ensure_cloud_containers(settings)]


def ensure_cloud_containers(settings: SamespaceSettings) -> list[CloudContainer]:
    """`ensure_virtual_containers` with each container's name and role (no call to the actors).

    The durable config over the settings says which roles get containers (pushed routes too). A
    container is started from the configured settings alone and lays the store over them itself,
    at each (re)start: a push in force when it was created never outlives the store's copy of it.
    """
    from cluster.config.store import effective_settings

    effective = effective_settings(settings)
    cloud = effective.cloud
    if not cloud.enabled:
        return []
    containers: list[CloudContainer] = []
    seen_hosts: set[str] = set()
    for node in alive_nodes(effective):
        if node.host in seen_hosts:  # one PC, one container per role, however many Ray nodes it runs
            continue
        seen_hosts.add(node.host)
        for role, route in sorted(cloud.routes.items()):
            name = virtual_container_name(node.host, role)
            handle = VirtualContainerActor.options(  # type: ignore[attr-defined]  # .options comes from @ray.remote
                name=name,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=True),
                **_detached(effective),
            ).remote(name, role, settings.cloud.routes.get(role, route), settings, settings.policy(role))
            containers.append(CloudContainer(name=name, role=role, handle=handle))
    return containers


def apply_to_containers(
    containers: list[CloudContainer],
    *,
    routes: Mapping[Role, RoleRoute] | None = None,
    policies: Mapping[Role, Policy] | None = None,
    base_url: str | None = None,
) -> list[ObjectRef]:
    """Send each container what changed for its role (it merges the rest, DESIGN §8): its route,
    its policy, the base URL. Returns the calls' refs (ray.get or await them); a container with
    nothing to change is not called."""
    routes, policies = routes or {}, policies or {}
    refs: list[ObjectRef] = []
    for container in containers:
        route, policy = routes.get(container.role), policies.get(container.role)
        if route is not None or policy is not None or base_url is not None:
            refs.append(container.handle.apply.remote(route, policy, base_url))
    return refs


async def put_in_force(
    settings: SamespaceSettings, plan: PushPlan, key: SecretStr | None
) -> tuple[list[CloudContainer], list[str]]:
    """Send a push plan to the actors (DESIGN §8): each role's dispatcher its policy, each virtual
    container what changed for its role, then the dispatchers of re-routed roles forget their
    discovery, then every container takes `key` (last: no request goes out on the old route with
    it). Nothing is persisted here. Returns the containers and each send that did not land."""
    from actors.dispatcher import forget_discoveries, push_cloud_config

    refs = await asyncio.to_thread(
        lambda: push_cloud_config(settings, routes=plan.routes, policies=plan.policies, base_url=plan.base_url)
    )
    issues = [
        f"a push did not land: {type(r).__name__}"
        for r in await asyncio.gather(*refs, return_exceptions=True)
        if isinstance(r, BaseException)
    ]
    if plan.routes:  # only once the routes landed: a discovery now sees the new model and pin
        await asyncio.gather(*await asyncio.to_thread(forget_discoveries, settings, list(plan.routes)))
    containers = await asyncio.to_thread(ensure_cloud_containers, settings)
    if key is not None:
        answers = await asyncio.gather(*(c.handle.set_key.remote(key) for c in containers), return_exceptions=True)
        issues += [
            f"{c.name}: the key did not land ({type(a).__name__})"
            for c, a in zip(containers, answers, strict=True)
            if isinstance(a, BaseException)
        ]
    return containers, issues


def actor_state(handle: ActorHandle) -> str | None:
    """The actor's lifecycle state as this process last heard it from Ray ("ALIVE", "RESTARTING",
    "DEAD", ...), or None when unknown. Ray tracks it per caller once a call was made; reading it
    needs no dashboard."""
    from ray.core.generated.gcs_pb2 import ActorTableData  # type: ignore[attr-defined]  # made at import, no stubs

    state = handle._get_local_state()  # noqa: SLF001 - Ray's one read of an actor's state that needs no dashboard
    return None if state is None else str(ActorTableData.ActorState.Name(state))


def ensure_chat_endpoints(settings: SamespaceSettings) -> list[ActorHandle]:
    """One actor per configured local chat server (`llm.endpoints`), on any node (num_cpus=0)."""
    handles: list[ActorHandle] = []
    for role, endpoints in sorted(settings.llm.endpoints.items()):
        for slot, endpoint in enumerate(endpoints):
            name = chat_endpoint_name(role, slot)
            actor = ChatEndpointActor.options(  # type: ignore[attr-defined]  # .options comes from @ray.remote
                name=name, **_detached(settings)
            )
            handles.append(actor.remote(name, role, endpoint))
    return handles


def ensure_providers(settings: SamespaceSettings) -> None:
    ensure_embedders(settings)
    ensure_rerankers(settings)
    ensure_chat_endpoints(settings)
    ensure_virtual_containers(settings)


def key_problem(settings: SamespaceSettings, roles: Iterable[Role] = (Role.CODE_EMBEDDING,)) -> str | None:
    """From a driver (the reindex job; never from async code): the one paragraph saying that
    `roles` need the OpenRouter key and no virtual container holds one, or None.

    Starts the providers the cluster should have first (after a restart the containers may not
    exist yet), then asks each role's dispatcher who serves it (`DispatcherActor.providers`).
    """
    from actors.dispatcher import get_dispatcher
    from cluster.cloud.key_readiness import local_only_roles, missing_key_message
    from cluster.config.store import ConfigStore

    ensure_providers(settings)
    views: dict[Role, list[ProviderView]] = {
        role: ray.get(get_dispatcher(settings, role).providers.remote()) for role in roles
    }
    stored = ConfigStore(settings.admin.config_path).read()
    return missing_key_message(views, key_pushed_before=stored.key_pushed, local_only=local_only_roles(settings))


def _is_provider_name(name: str) -> bool:
    prefixes = (EMBEDDER_PREFIX, RERANKER_PREFIX, CHAT_ENDPOINT_PREFIX)
    return name.startswith(prefixes) or VIRTUAL_CONTAINER_MARK in name


async def discover_providers(settings: SamespaceSettings) -> list[LiveProvider]:
    """Ask every provider actor in the namespace to describe itself, concurrently."""
    names = sorted(
        entry["name"]
        for entry in ray.util.list_named_actors(all_namespaces=True)
        if entry["namespace"] == settings.ray.namespace and _is_provider_name(entry["name"])
    )

    async def ask(name: str) -> LiveProvider:
        try:
            handle = ray.get_actor(name, namespace=settings.ray.namespace)
            info: ProviderInfo = await asyncio.wait_for(handle.describe.remote(), DESCRIBE_TIMEOUT_S)
            return LiveProvider(info=info, handle=handle)
        except Exception as exc:  # noqa: BLE001 - reported as an ineligible provider, not hidden
            kind = ProviderKind.CLOUD if VIRTUAL_CONTAINER_MARK in name else ProviderKind.LOCAL
            return LiveProvider(
                info=ProviderInfo(
                    name=name,
                    kind=kind,
                    roles=list(Role),
                    node_id="",
                    host="",
                    model="",
                    eligible=False,
                    reason=f"{NOT_ANSWERING}: {type(exc).__name__}",
                ),
                handle=None,
            )

    described, sidecars = await asyncio.gather(
        asyncio.gather(*(ask(name) for name in names)), _sidecar_providers(settings)
    )
    return list(described) + sidecars


async def _sidecar_providers(settings: SamespaceSettings) -> list[LiveProvider]:
    """Sidecar-hosted providers, as the fleet actor sees them; none when no sidecar ever
    reached this cluster. Their calls go through the fleet actor, which holds the sockets."""
    fleet = find_fleet_actor(settings)
    if fleet is None:
        return []
    try:
        infos: list[ProviderInfo] = await asyncio.wait_for(fleet.providers.remote(), DESCRIBE_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - reported, and the Ray-hosted providers still serve
        log.warning("the fleet actor did not answer discovery: %s", type(exc).__name__)
        return []
    return [LiveProvider(info=info, handle=fleet) for info in infos]
