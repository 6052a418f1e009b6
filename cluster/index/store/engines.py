"""Opening a vector store by kind. Each engine's client library is imported only when that engine opens."""

from __future__ import annotations

from pathlib import Path

from cluster.errors import ConfigError
from cluster.index.store.protocol import EMBEDDED, SERVER, STORE_KINDS, VectorStore
from cluster.settings import VectorIndexSettings

__all__ = ["open_vector_store"]


def open_vector_store(
    kind: str,
    *,
    data_dir: Path | None,
    url: str | None,
    api_key: str | None = None,
    vector_index: VectorIndexSettings | None = None,
) -> VectorStore:
    """Open the engine named by `kind`: "embedded" at `data_dir`, or "server" at `url`.

    For "server", `url` may be ":memory:" or "path:/some/dir" to run qdrant-client's local
    mode as a stand-in for a real server. `vector_index` (`store.vector_index`) says how collections
    created from now on index their vectors; the defaults when None.
    """
    if kind == EMBEDDED:
        if data_dir is None:
            raise ConfigError("data_dir", "required for the embedded vector store")
        from cluster.index.store.edge import EdgeStore

        return EdgeStore(Path(data_dir), vector_index)
    if kind == SERVER:
        if not url:
            raise ConfigError("url", "required for the server vector store")
        from cluster.index.store.qdrant import QdrantServerStore

        return QdrantServerStore(url, api_key=api_key, vector_index=vector_index)
    raise ConfigError("kind", f"unknown vector store kind {kind!r}; expected one of {STORE_KINDS}")
