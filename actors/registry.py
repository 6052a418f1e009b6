"""The actors the cluster should have: start each provider that is missing (one per accelerator
on every node, a chat endpoint per configured server, a virtual container per PC and routed role
when the cloud is enabled). Starting only: discovery (`actors/discovery.py`) asks them what they
serve, and config pushes (`actors/config_push.py`) change what they hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ray
from ray.actor import ActorHandle
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.chat_endpoint import ChatEndpointActor
from actors.embedder import EmbedderActor
from actors.handles import get_or_start
from actors.reranker import RerankerActor
from actors.virtual_container import VirtualContainerActor
from cluster.config import effective_settings
from cluster.naming import (
    EMBEDDER_PREFIX,
    RERANKER_PREFIX,
    chat_endpoint_name,
    embedder_actor_name,
    virtual_container_name,
)
from cluster.roles import Role
from cluster.settings import SamespaceSettings

__all__ = [
    "CloudContainer",
    "alive_nodes",
    "ensure_chat_endpoints",
    "ensure_cloud_containers",
    "ensure_embedders",
    "ensure_providers",
    "ensure_rerankers",
    "ensure_virtual_containers",
]

CPU_ACTOR_CPUS = 1.0
ACCELERATOR_ACTOR_CPUS = 0.5


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


def _per_accelerator(
    settings: SamespaceSettings, actor_cls: Any, prefix: str, init_args: tuple[Any, ...], cpu_actors: int = 1
) -> list[ActorHandle]:
    """One actor per accelerator share on every node that has one, plus `cpu_actors` CPU actors when
    wanted (sharing the CPU slot's reservation: what one reserved before)."""
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
                    get_or_start(
                        actor_cls,
                        settings,
                        name,
                        *init_args,
                        name,
                        num_gpus=embedding.gpus_per_actor if embedding.accelerator_resource == "GPU" else 0,
                        resources=resources,
                        num_cpus=ACCELERATOR_ACTOR_CPUS,
                        scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False),
                    )
                )
    wants_cpu = embedding.cpu_embedder == "always" or (embedding.cpu_embedder == "auto" and not has_accelerators)
    if wants_cpu or embedding.device == "cpu":
        cpus = CPU_ACTOR_CPUS / cpu_actors
        for slot in range(cpu_actors):
            name = embedder_actor_name(None, slot, "cpu", prefix=prefix)
            handles.append(get_or_start(actor_cls, settings, name, *init_args, name, num_cpus=cpus))
    return handles


def ensure_embedders(settings: SamespaceSettings) -> list[ActorHandle]:
    """Embedder actors for the current cluster: a node added since gets its actors now."""
    embedding = settings.embedding
    return _per_accelerator(settings, EmbedderActor, EMBEDDER_PREFIX, (embedding,), embedding.cpu_actors)


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
            handle = get_or_start(
                VirtualContainerActor,
                effective,
                name,
                name,
                role,
                settings.cloud.routes.get(role, route),
                settings,
                settings.policy(role),
                scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=True),
            )
            containers.append(CloudContainer(name=name, role=role, handle=handle))
    return containers


def ensure_chat_endpoints(settings: SamespaceSettings) -> list[ActorHandle]:
    """One actor per configured local chat server (`llm.endpoints`), on any node (num_cpus=0)."""
    handles: list[ActorHandle] = []
    for role, endpoints in sorted(settings.llm.endpoints.items()):
        for slot, endpoint in enumerate(endpoints):
            name = chat_endpoint_name(role, slot)
            handles.append(get_or_start(ChatEndpointActor, settings, name, name, role, endpoint))
    return handles


def ensure_providers(settings: SamespaceSettings) -> None:
    ensure_embedders(settings)
    ensure_rerankers(settings)
    ensure_chat_endpoints(settings)
    ensure_virtual_containers(settings)
