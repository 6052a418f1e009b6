"""The engines every `VectorStore` contract test runs on: Qdrant Edge with each collection in its own
shard, Qdrant Edge with each in its width's pool (as a small build's is), and qdrant-client in memory or
on a path (the server engine's client, no server)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from cluster.index.store.edge import EdgeStore
from cluster.index.store.engines import open_vector_store
from cluster.index.store.protocol import VectorStore

Opener = Callable[[], VectorStore]

ENGINES = ("embedded", "pooled", "memory")  # opened afresh each time
REOPENABLE = ("embedded", "pooled", "path")  # keep what they hold across a close and an open


class AllPooled(EdgeStore):
    """Qdrant Edge with every collection created as a small build's is: in its width's pool."""

    def create_collection(
        self, name: str, width: int, keyword_fields: Sequence[str], *, rows: int | None = None
    ) -> None:
        super().create_collection(name, width, keyword_fields, rows=0 if rows is None else rows)


def store_opener(engine: str, tmp_path: Path) -> Opener:
    """How to open (and reopen) one engine's store under `tmp_path`."""
    if engine == "embedded":
        return lambda: open_vector_store("embedded", data_dir=tmp_path / "edge", url=None)
    if engine == "pooled":
        return lambda: AllPooled(tmp_path / "edge")
    if engine == "memory":
        return lambda: open_vector_store("server", data_dir=None, url=":memory:")
    return lambda: open_vector_store("server", data_dir=None, url=f"path:{tmp_path / 'local'}")
