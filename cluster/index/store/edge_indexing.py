"""How an Edge shard's vectors are indexed: its configuration, its search parameters, and the graph
built in a child process.

`store.vector_index` (cluster/settings/store.py) says what a collection is created with. Qdrant's
thresholds are in kilobytes of one dense vector per segment; the setting is in rows, converted here
with the collection's width. `index_shard_apart` runs the shard's optimizer in a child Python: Qdrant
Edge has no background optimizer, its `optimize()` holds the interpreter until it returns (a graph
over a million rows takes minutes), and the memory the build grew goes back to the OS when the
child exits, not into the store's process.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import qdrant_edge as qe

from cluster.errors import StoreError
from cluster.index.store.edge_pool import TENANT_KEY, TENANT_VECTOR
from cluster.index.store.protocol import CODE_VECTOR, KEYWORD_VECTOR, NAME_VECTOR, index_on_disk, threshold_kb
from cluster.settings import VectorIndexSettings

__all__ = ["edge_collection_config", "edge_search_params", "index_shard_apart", "keyword_index", "new_shard"]

# The child: open the shard, build what its configuration asks for, flush, close. qdrant_edge only:
# it runs wherever the store does, whatever the working directory or the import path.
_INDEXER = (
    "import sys, qdrant_edge as qe\n"
    "shard = qe.EdgeShard.load(sys.argv[1])\n"
    "shard.optimize()\n"
    "shard.flush()\n"
    "shard.close()\n"
)
_STDERR_TAIL = 400
_CANCEL_POLL_S = 0.2  # how soon a cancelled build's child is killed


def edge_collection_config(width: int, tuning: VectorIndexSettings, pool_vector: str | None = None) -> qe.EdgeConfig:
    """The code and name vectors (cosine, `width`), the keyword vector (IDF), how they are indexed, and
    whether a write-ahead log keeps each write; a pool's shard has the sparse vector `pool_vector` too
    (each row's collection: `edge_pool`)."""
    quantized = tuning.quantization == "int8"
    dense = qe.EdgeVectorParams(size=width, distance=qe.Distance.Cosine, on_disk=True if quantized else None)
    threshold = threshold_kb(tuning.exact_below_rows, width)
    return qe.EdgeConfig(
        vectors={CODE_VECTOR: dense, NAME_VECTOR: dense},
        sparse_vectors={
            KEYWORD_VECTOR: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf),
            **({pool_vector: qe.EdgeSparseVectorParams()} if pool_vector is not None else {}),
        },
        hnsw_config=qe.HnswIndexConfig(
            m=tuning.hnsw_m, ef_construct=tuning.hnsw_ef_construct, full_scan_threshold=threshold
        ),
        quantization_config=(
            qe.ScalarQuantizationConfig(type=qe.ScalarType.Int8, quantile=0.99, always_ram=True) if quantized else None
        ),
        optimizers=qe.EdgeOptimizersConfig(indexing_threshold=threshold),
        on_disk_payload=tuning.payload_on_disk,
        # Every writer flushes at its durability point (a build at its commit, a history at each write),
        # so a crash without a WAL loses only a build the next run drops; a WAL costs each open shard
        # ~160 MB of RAM as it loads.
        wal_enabled=tuning.write_ahead_log,
    )


def new_shard(
    shard_dir: Path, width: int, fields: Sequence[str], *, tuning: VectorIndexSettings, pool: bool = False
) -> qe.EdgeShard:
    """A new shard with keyword indexes on `fields` (a pool's: and its tenant key, on the heap, and its
    tenant vector), flushed."""
    shard = qe.EdgeShard.create(str(shard_dir), edge_collection_config(width, tuning, TENANT_VECTOR if pool else None))
    try:
        if pool:
            shard.update(qe.UpdateOperation.create_field_index(TENANT_KEY, qe.KeywordIndexParams(is_tenant=True)))
        for field in fields:
            shard.update(qe.UpdateOperation.create_field_index(field, keyword_index(tuning, field)))
        shard.flush()
    except BaseException:
        shard.close()
        raise
    return shard


def keyword_index(tuning: VectorIndexSettings, field: str) -> qe.KeywordIndexParams:
    """A keyword field's index: memory-mapped from disk (cold: its pages read as filters use them) or on
    the heap, as `index_on_disk` says."""
    return qe.KeywordIndexParams(memory=qe.Memory.Cold if index_on_disk(tuning, field) else qe.Memory.Pinned)


def edge_search_params(tuning: VectorIndexSettings) -> qe.SearchParams:
    """A dense leg's parameters: the graph's ef; with int8, oversampled and rescored on the originals."""
    quantization = (
        qe.QuantizationSearchParams(rescore=True, oversampling=tuning.oversampling)
        if tuning.quantization == "int8"
        else None
    )
    return qe.SearchParams(hnsw_ef=tuning.hnsw_ef, quantization=quantization)


def index_shard_apart(shard_dir: Path, cancel: threading.Event | None = None) -> None:
    """Build a closed shard's vector indexes in a child process; StoreError when the child fails, or
    when `cancel` is set meanwhile (the child is killed: the store is closing).

    The child inherits the caller's umask (the index actor's 077): the files it writes stay private."""
    if cancel is not None and cancel.is_set():
        raise StoreError("index_vectors", f"indexing {shard_dir.parent.name!r} cancelled")
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", _INDEXER, str(shard_dir)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
    except OSError as exc:
        raise StoreError("index_vectors", f"cannot start the indexer: {exc}") from exc
    with child:
        while True:
            try:
                _, stderr = child.communicate(timeout=_CANCEL_POLL_S)
                break
            except subprocess.TimeoutExpired:
                if cancel is not None and cancel.is_set():
                    child.kill()
                    child.communicate()
                    raise StoreError("index_vectors", f"indexing {shard_dir.parent.name!r} cancelled") from None
    if child.returncode != 0:
        tail = stderr.strip().splitlines()[-1:] or [f"exit status {child.returncode}"]
        raise StoreError("index_vectors", f"indexing {shard_dir.parent.name!r} failed: {tail[0][-_STDERR_TAIL:]}")
