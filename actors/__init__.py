"""Ray actors (thin shells over cluster/) and the one way to find or start each of them."""

from __future__ import annotations

from ray.actor import ActorHandle

from actors.embedder import EmbedderActor
from actors.index_actor import IndexActor
from actors.registry import (
    LiveProvider,
    discover_providers,
    ensure_chat_endpoints,
    ensure_embedders,
    ensure_providers,
    ensure_rerankers,
    ensure_virtual_containers,
)
from cluster.naming import INDEX_ACTOR_NAME
from cluster.settings import SamespaceSettings

__all__ = [
    "EmbedderActor",
    "IndexActor",
    "LiveProvider",
    "discover_providers",
    "ensure_chat_endpoints",
    "ensure_embedders",
    "ensure_providers",
    "ensure_rerankers",
    "ensure_virtual_containers",
    "get_index_actor",
]

HEAD_NODE_RESOURCE = "node:__internal_head__"


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
    actor = IndexActor.options(**options)  # type: ignore[attr-defined]  # .options comes from @ray.remote
    return actor.remote(settings)
