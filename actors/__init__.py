"""Ray actors (thin shells over cluster/) and the one way to find or start each of them
(`actors/handles.py`)."""

from __future__ import annotations

from actors.discovery import LiveProvider, discover_providers
from actors.embedder import EmbedderActor
from actors.index_actor import IndexActor, get_index_actor
from actors.registry import (
    ensure_chat_endpoints,
    ensure_embedders,
    ensure_providers,
    ensure_rerankers,
    ensure_virtual_containers,
)

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
