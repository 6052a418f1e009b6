"""What a build's rows say about who wrote them, read back from the index actor."""

from __future__ import annotations

from collections import Counter
from typing import Any


def rows_by_writer(settings: Any, build: str) -> Counter[str]:
    """Rows of a build by the provider that wrote them (every page of the index actor's scroll)."""
    import ray

    from actors import get_index_actor

    index = get_index_actor(settings)
    found: Counter[str] = Counter()
    offset = None
    while True:
        rows, offset = ray.get(index.reusable_vectors.remote(build, offset, 256))
        found.update(rows.writers[rows.writer_of[i]][0] for i in range(len(rows.embed_hashes)))
        if offset is None:
            return found
