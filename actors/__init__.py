"""Ray actors (thin shells over cluster/) and the one way to find or start each of them."""

from __future__ import annotations

import ray
from ray.actor import ActorHandle
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.embedder import EmbedderActor
from actors.index_actor import IndexActor
from cluster.naming import INDEX_ACTOR_NAME, embedder_actor_name
from cluster.settings import SamespaceSettings

__all__ = ["EmbedderActor", "IndexActor", "ensure_embedders", "get_index_actor"]

HEAD_NODE_RESOURCE = "node:__internal_head__"
CPU_EMBEDDER_CPUS = 1.0


def get_index_actor(settings: SamespaceSettings) -> ActorHandle:
    """The index actor, started on first use. An embedded store lives on the head node's disk."""
    options: dict[str, object] = {
        "name": INDEX_ACTOR_NAME,
        "namespace": settings.ray.namespace,
        "lifetime": "detached",
        "get_if_exists": True,
    }
    if settings.store.kind == "embedded":
        options["resources"] = {HEAD_NODE_RESOURCE: 0.001}
    return IndexActor.options(**options).remote(settings)  # type: ignore[attr-defined]


def ensure_embedders(settings: SamespaceSettings) -> list[ActorHandle]:
    """One embedder per GPU share on every alive node, or one CPU embedder when no GPU exists.

    Called at the start of every job and by the MCP app: a GPU node added since gets its
    actors then, without restarting anything else.
    """
    embedding = settings.embedding
    gpu_nodes = [
        (node["NodeID"], node["Resources"].get("GPU", 0.0))
        for node in ray.nodes()
        if node.get("Alive") and node["Resources"].get("GPU", 0.0) > 0
    ]
    handles: list[ActorHandle] = []
    common = {"namespace": settings.ray.namespace, "lifetime": "detached", "get_if_exists": True}
    if embedding.device != "cpu" and gpu_nodes:
        for node_id, gpus in gpu_nodes:
            for slot in range(int(gpus / embedding.gpus_per_actor)):
                name = embedder_actor_name(node_id, slot, "gpu")
                handles.append(
                    EmbedderActor.options(  # type: ignore[attr-defined]
                        name=name,
                        num_gpus=embedding.gpus_per_actor,
                        num_cpus=CPU_EMBEDDER_CPUS,
                        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
                        **common,
                    ).remote(embedding, name)
                )
    else:
        name = embedder_actor_name(None, 0, "cpu")
        handles.append(
            EmbedderActor.options(name=name, num_cpus=CPU_EMBEDDER_CPUS, **common).remote(  # type: ignore[attr-defined]
                embedding, name
            )
        )
    return handles
