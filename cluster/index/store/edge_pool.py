"""Pooled collections of the embedded engine: many small collections in one Edge shard.

A collection created expecting fewer than `store.vector_index.pool_below_rows` rows keeps its
folder (its config and metadata) but no shard: its rows live in the pool of its width,
`pools/pool-<width>/shard`, each tagged with the collection's name under `TENANT_KEY` (a keyword
index flagged as Qdrant's tenant key). Every read of the collection adds `TENANT_KEY == name` to its
filter, and a search of several pooled collections is one engine call over the pool
(`TENANT_KEY in names`) instead of one per collection: a hundred small indexes cost one shard's memory
and one scan, not a hundred (bench.scale, `many_indexes`).

A row's id in the pool is its own id with the bytes of a digest of the collection's name xored in
(`Tenant.engine_id`): the same row in two builds of an index (the serving one and its successor) is
two rows, and the own id comes back by xoring again. The pool is never graph-indexed (its
collections are small; a full scan filtered by tenant reads only theirs), and a dropped collection's
rows are deleted by filter.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from cluster.errors import StoreError
from cluster.index.store.edge_files import COLLECTIONS_DIR, CONFIG_FILE, SHARD_DIR, read_json
from cluster.types import PayloadFilter

__all__ = ["POOLS_DIR", "TENANT_KEY", "PooledRow", "Tenant", "edge_shards", "pool_name", "tenants_filter"]

POOLS_DIR = "pools"
TENANT_KEY = "_collection"  # a pooled row's collection; reserved: no caller's payload may carry it


def pool_name(width: int) -> str:
    """The pool of the collections of `width` (one pool per vector width)."""
    return f"pool-{width}"


def tenants_filter(names: Iterable[str]) -> PayloadFilter:
    """The rows of these pooled collections."""
    return PayloadFilter(any_of={TENANT_KEY: sorted(set(names))})


@dataclass(frozen=True)
class PooledRow:
    """A row read from a pool as its collection has it: its own id, its vectors, its payload."""

    id: str
    vector: Any
    payload: dict[str, Any]


@dataclass(frozen=True)
class Tenant:
    """One pooled collection: how its ids, payloads and filters look in the pool."""

    name: str

    def engine_id(self, own_id: str) -> str:
        """The pool's id of a row (its own id with the collection's digest xored in)."""
        return _xor(own_id, self._mask)

    def own_id(self, engine_id: Any) -> str:
        """The collection's id of a pool row (the inverse of `engine_id`)."""
        return _xor(str(engine_id), self._mask)

    def stored(self, payload: dict[str, Any]) -> dict[str, Any]:
        """A row's payload as the pool keeps it; StoreError if the caller used the reserved key."""
        if TENANT_KEY in payload:
            raise StoreError("upsert", f"the payload key {TENANT_KEY!r} is reserved by the store")
        return {**payload, TENANT_KEY: self.name}

    def where(self, filter: PayloadFilter | None) -> PayloadFilter:
        """`filter` within this collection's rows."""
        return PayloadFilter(equals={TENANT_KEY: self.name}).both(filter)

    def row(self, record: Any) -> PooledRow:
        """A record the pool returned (id, vector, payload) as the collection has it."""
        return PooledRow(self.own_id(record.id), getattr(record, "vector", None), own_payload(record.payload))

    @property
    def _mask(self) -> bytes:
        return hashlib.sha256(self.name.encode()).digest()[:16]


def own_payload(payload: dict[str, Any] | None) -> dict[str, Any]:
    """A pooled row's payload without the store's tenant key."""
    return {key: value for key, value in (payload or {}).items() if key != TENANT_KEY}


def _xor(point_id: str, mask: bytes) -> str:
    raw = uuid.UUID(point_id).bytes
    return str(uuid.UUID(bytes=bytes(a ^ b for a, b in zip(raw, mask, strict=True))))


def edge_shards(data_dir: Path, collections: Sequence[str]) -> list[tuple[Path, qe.Filter | None]]:
    """Where the embedded store under `data_dir` keeps these collections: the folder of each shard that
    holds some, with the filter that keeps their rows only (None: the shard is a collection's own). To
    open a closed store's shards directly (bench.scale's engine alone)."""
    own = [name for name in collections if (data_dir / COLLECTIONS_DIR / name / SHARD_DIR).is_dir()]
    pooled: dict[str, list[str]] = {}
    for name in collections:
        config = read_json(data_dir / COLLECTIONS_DIR / name / CONFIG_FILE)
        if name not in own and isinstance(config, dict) and isinstance(config.get("pool"), str):
            pooled.setdefault(config["pool"], []).append(name)
    found: list[tuple[Path, qe.Filter | None]] = [(data_dir / COLLECTIONS_DIR / name / SHARD_DIR, None) for name in own]
    for pool, names in sorted(pooled.items()):
        tenants = qe.Filter(must=[qe.FieldCondition(key=TENANT_KEY, match=qe.MatchAny(names))])
        found.append((data_dir / POOLS_DIR / pool / SHARD_DIR, tenants))
    return found
