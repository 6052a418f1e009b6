"""The `store` section: which engine holds the indexes, where, and how its vector index is built.

`vector_index` tunes what a collection is created with (DESIGN §14): below `exact_below_rows` rows a
collection is searched exactly and no graph is built (a full scan of a few thousand rows takes a
few milliseconds, a graph costs its build); above, an HNSW graph per dense vector, built before the
build serves, optionally over int8 copies of the vectors kept in RAM while the float32 originals stay
on disk for rescoring. Stored vectors never change with these settings, so the gate is unaffected.
A build expected under `pool_below_rows` rows shares one collection with the other small builds of
its width (a pool, its rows keyed by the build: Qdrant's multitenancy), so a search of every index is
one engine call and a hundred small indexes cost one collection's memory, not a hundred; a pool that
grows past `exact_below_rows` gets graphs as a large collection does.
A setting applies to collections created after it changes: the next reindex of an index.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

DEFAULT_DATA_DIR = Path("~/.samespace/data").expanduser()
DEFAULT_EXACT_BELOW_ROWS = 20_000
# A build too small for a graph of its own shares its width's pool, which gets graphs once it is large.
# Pooling only below 10 000 (as before) left builds of 10-20k rows a shard each (~130 MB of RAM), searched
# by a full scan in an engine call of their own.
DEFAULT_POOL_BELOW_ROWS = DEFAULT_EXACT_BELOW_ROWS
DEFAULT_HNSW_M = 16
DEFAULT_HNSW_EF_CONSTRUCT = 100
DEFAULT_HNSW_EF = 128
DEFAULT_OVERSAMPLING = 2.0


class VectorIndexSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    exact_below_rows: int = Field(
        default=DEFAULT_EXACT_BELOW_ROWS,
        ge=0,
        description="A collection (a segment of one) with fewer rows is searched exactly and gets no HNSW graph.",
    )
    pool_below_rows: int = Field(
        default=DEFAULT_POOL_BELOW_ROWS,
        ge=0,
        description="Embedded engine: a build expected to hold fewer rows is written into its width's shared pool "
        "(searched with the other small builds in one engine call; a pool past exact_below_rows gets HNSW graphs, "
        "built on a copy while it serves); 0 gives every build its own.",
    )
    hnsw_m: int = Field(default=DEFAULT_HNSW_M, ge=4, le=128, description="Edges per node of the HNSW graph.")
    hnsw_ef_construct: int = Field(
        default=DEFAULT_HNSW_EF_CONSTRUCT, ge=8, le=1024, description="Candidates while the graph is built."
    )
    hnsw_ef: int = Field(
        default=DEFAULT_HNSW_EF, ge=8, le=4096, description="Candidates a search of the graph keeps (recall/latency)."
    )
    quantization: Literal["none", "int8"] = Field(
        default="none",
        description="int8: scalar-quantised copies of the vectors in RAM, the float32 originals on disk, every "
        "search rescored on the originals.",
    )
    oversampling: float = Field(
        default=DEFAULT_OVERSAMPLING,
        ge=1.0,
        le=16.0,
        description="With int8: how many more candidates than asked the quantised search returns for rescoring.",
    )
    write_ahead_log: bool = Field(
        default=True,
        description="Edge: a write-ahead log per collection. Off, each loaded collection saves ~160 MB of RAM "
        "(measured) and a write is durable at the store's flush: a build's at its commit, a history's at "
        "each write.",
    )
    payload_on_disk: bool = Field(
        default=True,
        description="Row payloads (source text) memory-mapped from disk; the filtered fields have indexes.",
    )
    payload_indexes_on_disk: bool = Field(
        default=True,
        description="The keyword fields' indexes memory-mapped from disk (their pages read as filters use "
        "them, and evictable), not held on the heap: about 1.1 KB of RSS less per row once a collection has "
        "its graph (measured at 100k rows), searches as fast. A pool's tenant key stays on the heap, and so "
        "does `categories`, which every default search filters on (mapped, that filter doubled the dense "
        "leg at 300k rows).",
    )


class StoreSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    kind: Literal["embedded", "server"] = Field(
        default="embedded", description="embedded = Qdrant Edge in the index actor; server = a Qdrant URL."
    )
    data_dir: Path = Field(default=DEFAULT_DATA_DIR, description="Folder of the embedded store (absolute).")
    url: str | None = Field(default=None, description="Qdrant server URL (kind=server).")
    vector_index: VectorIndexSettings = Field(
        default_factory=VectorIndexSettings, description="How collections' vector indexes are built and searched."
    )

    @model_validator(mode="after")
    def _server_needs_url(self) -> StoreSettings:
        if self.kind == "server" and not self.url:
            raise ValueError("store.url is required when store.kind is 'server'")
        if not self.data_dir.is_absolute():
            object.__setattr__(self, "data_dir", self.data_dir.expanduser().resolve())
        return self
