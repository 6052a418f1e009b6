"""The one place each named actor's name is spelled (a typo would start a second actor)."""

from __future__ import annotations

INDEX_ACTOR_NAME = "samespace-index"
EMBEDDER_PREFIX = "samespace-embedder"


def embedder_actor_name(node_id: str | None, slot: int, device: str) -> str:
    """`samespace-embedder-<node8>-gpu<i>` for GPU actors, `samespace-embedder-cpu<i>` otherwise."""
    if device == "cpu" or node_id is None:
        return f"{EMBEDDER_PREFIX}-cpu{slot}"
    return f"{EMBEDDER_PREFIX}-{node_id[:8]}-{device}{slot}"
