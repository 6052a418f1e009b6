"""Option A of `bench.graph_storage`: the graph as payload fields on the index's own rows in Qdrant.

The project's own store (`open_vector_store("embedded", ...)`: Qdrant Edge in-process, what the
tests and the local default use), the project's own payload (`point_payload`), random unit vectors
of 384 dimensions (the graph does not read vectors; both collections get the same ones, so the
difference between them is the graph's). "Who references X" is one filtered scroll on the keyword
index of `refs`; callers and impact run in memory on a `CodeGraph` built from one scroll of every
payload, as the index actor does at its first read (`cluster.search.maps.CodeMaps`).
"""

from __future__ import annotations

import gc
import time
import tracemalloc
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.graph_storage_common import (
    NO_LIMIT,
    WALK_LIMIT,
    Target,
    disk_usage,
    latencies,
    mean,
    rss_bytes,
    summary_ms,
    timed,
)
from cluster.graph import CodeGraph, GraphAnswer, GraphRow
from cluster.index import KEYWORD_FIELDS, REFS_FIELD, RowPayload, VectorStore, open_vector_store, point_payload
from cluster.space import EncoderIdentity
from cluster.types import Chunk, PayloadFilter, StoredPoint

WIDTH = 384
BATCH = 256  # points per upsert, as a build lands its batches
PAGE = 256  # points per scroll page, as `IndexCatalog.scroll` reads them
REPO = "corpus"
WITH_GRAPH, WITHOUT_GRAPH = "with-graph", "without-graph"
GRAPH_FIELDS = ("definitions", "references", "imports", REFS_FIELD)
IDENTITY = EncoderIdentity(model="random-384", weights_sha256="0" * 64, width=WIDTH, max_seq_length=256)


@dataclass
class Rows:
    """The rows of the corpus: ids and the project's payloads; vectors are made per batch (seeded),
    the same for every write of a row, so that 100k rows never hold 100k vectors as Python lists."""

    ids: list[str]
    payloads: list[dict[str, Any]]
    seed: int = 0

    @classmethod
    def of(cls, chunks: Sequence[Chunk], seed: int = 0) -> Rows:
        payloads = [point_payload(REPO, chunk, IDENTITY, IDENTITY, "random", WITH_GRAPH) for chunk in chunks]
        return cls([str(uuid.UUID(int=i + 1)) for i in range(len(chunks))], payloads, seed)

    def batch(self, rows: Sequence[int], graph: bool = True) -> list[StoredPoint]:
        """The points of `rows` (indexes), with the graph's fields or with them empty."""
        rng = np.random.default_rng([self.seed, rows[0] if rows else 0])
        vectors = rng.normal(size=(len(rows), WIDTH)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        return [
            StoredPoint(
                id=self.ids[i],
                vector=vector.tolist(),
                payload=self.payloads[i] if graph else without_graph(self.payloads[i]),
            )
            for i, vector in zip(rows, vectors, strict=True)
        ]


def without_graph(payload: dict[str, Any]) -> dict[str, Any]:
    """The same payload with the graph's fields empty (what a row held before the graph)."""
    return {**payload, **{name: [] for name in GRAPH_FIELDS}, "build": WITHOUT_GRAPH}


def write(store: VectorStore, collection: str, rows: Rows, graph: bool) -> float:
    """Seconds to create `collection` with the project's keyword indexes, upsert every row and flush
    (making the random vectors is inside: the same work for both collections)."""
    start = time.perf_counter()
    store.create_collection(collection, WIDTH, KEYWORD_FIELDS)
    for i in range(0, len(rows.ids), BATCH):
        store.upsert(collection, rows.batch(range(i, min(i + BATCH, len(rows.ids))), graph))
    store.flush()
    return time.perf_counter() - start


def scroll_all(store: VectorStore, collection: str, filter: PayloadFilter | None = None) -> list[dict[str, Any]]:
    """Every payload matching `filter`, page by page (the catalogue's scroll)."""
    payloads: list[dict[str, Any]] = []
    offset: str | None = None
    while True:
        page, offset = store.scroll(collection, filter, PAGE, offset)
        payloads.extend(hit.payload for hit in page)
        if offset is None:
            return payloads


def who_references(store: VectorStore, collection: str, name: str) -> list[tuple[str, int | None]]:
    """The rows whose references name `name`: one filtered query on the keyword index of `refs`."""
    rows = scroll_all(store, collection, PayloadFilter(equals={REFS_FIELD: name}))
    return [(row["path"], row.get("start_line")) for row in rows]


def graph_row(payload: dict[str, Any]) -> GraphRow:
    """A row's graph facts, read as `cluster.search.maps` reads them."""
    row = RowPayload.model_validate(payload)
    return GraphRow(row.path, row.language, row.definitions, row.references, row.imports)


def build_graph(store: VectorStore, collection: str) -> CodeGraph:
    """What the index actor does at the first read: scroll every payload, build the graph."""
    payloads = scroll_all(store, collection)
    return CodeGraph(REPO, None, (graph_row(p) for p in payloads))


def graph_memory(store: VectorStore, collection: str) -> dict[str, float]:
    """tracemalloc while scrolling and building the graph: the peak, and what the graph keeps after."""
    gc.collect()
    tracemalloc.start()
    payloads = scroll_all(store, collection)
    graph = CodeGraph(REPO, None, (graph_row(p) for p in payloads))
    _, peak = tracemalloc.get_traced_memory()
    del payloads
    gc.collect()
    kept, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del graph
    return {"peak_mib": round(peak / 2**20, 1), "kept_mib": round(kept / 2**20, 1)}


def call_sites(answer: GraphAnswer) -> set[tuple[str, int, str | None]]:
    """The call sites of an answer: (path, line, enclosing definition)."""
    return {(item.path, item.line, item.symbol) for item in answer.items}


@dataclass
class PayloadRun:
    """Option A's numbers, and the objects the comparison reads after."""

    numbers: dict[str, Any]
    graph: CodeGraph
    depth1: list[GraphAnswer]


def measure(
    data_dir: Path,
    chunks: Sequence[Chunk],
    targets: Sequence[Target],
    edit_path: str | None = None,
) -> PayloadRun:
    """Write both collections, then time the reads over `targets` (and one file's rewrite)."""
    rows, prepare_s = timed(lambda: Rows.of(chunks))
    store = open_vector_store("embedded", data_dir=data_dir, url=None)
    try:
        write(store, "warm-up", Rows(rows.ids[:BATCH], rows.payloads[:BATCH]), graph=True)  # first-write costs
        store.drop_collection("warm-up")
        write_with = write(store, WITH_GRAPH, rows, graph=True)
        write_without = write(store, WITHOUT_GRAPH, rows, graph=False)
        rss = rss_bytes()
        graph, build_s = timed(lambda: build_graph(store, WITH_GRAPH))
        rss_build = rss_bytes() - rss
        names = [t.name for t in targets]
        refs_s, refs_answers = latencies(names, lambda name: who_references(store, WITH_GRAPH, name))
        d1_s, depth1 = latencies(targets, lambda t: graph.callers(t.qualified, t.path, 1, NO_LIMIT))
        d3_s, depth3 = latencies(targets, lambda t: graph.callers(t.qualified, t.path, 3, WALK_LIMIT))
        impact_s, impacts = latencies(targets, lambda t: graph.impact(t.qualified, t.path, 3, WALK_LIMIT))
        rewrite = _rewrite_one_file(store, rows, edit_path) if edit_path else None
        memory = graph_memory(store, WITH_GRAPH)
    finally:
        store.close()
    sizes = {name: disk_usage(data_dir / "collections" / name) for name in (WITH_GRAPH, WITHOUT_GRAPH)}
    numbers = {
        "rows": len(rows.ids),
        "prepare_payloads_s": round(prepare_s, 2),
        "write_s": {WITH_GRAPH: round(write_with, 2), WITHOUT_GRAPH: round(write_without, 2)},
        "graph_write_s": round(write_with - write_without, 2),
        "size": sizes,
        "graph_disk_bytes": sizes[WITH_GRAPH]["disk_bytes"] - sizes[WITHOUT_GRAPH]["disk_bytes"],
        "scroll_and_build_graph_s": round(build_s, 2),
        "graph": repr(graph),
        "rss_growth_build_mib": round(rss_build / 2**20, 1),
        "memory": memory,
        "who_references": {**summary_ms(refs_s), "rows_found_mean": mean(len(a) for a in refs_answers)},
        "callers_depth1": {**summary_ms(d1_s), "sites_mean": mean(len(a.items) for a in depth1)},
        "callers_depth3": {**summary_ms(d3_s), "sites_mean": mean(len(a.items) for a in depth3)},
        "impact_depth3": {**summary_ms(impact_s), "files_mean": mean(len(a.files) for a in impacts)},
        "truncated_answers": {
            "callers_depth1": sum(a.truncated for a in depth1),
            "callers_depth3": sum(a.truncated for a in depth3),
            "impact_depth3": sum(a.truncated for a in impacts),
        },
        "rewrite_one_file": rewrite,
    }
    return PayloadRun(numbers, graph, depth1)


def _rewrite_one_file(store: VectorStore, rows: Rows, path: str) -> dict[str, Any]:
    """An incremental reindex of one file as this option pays it: its rows upserted again (the graph
    is rebuilt from the scroll at the next read: `scroll_and_build_graph_s`)."""
    points = rows.batch([i for i, p in enumerate(rows.payloads) if p["path"] == path])
    start = time.perf_counter()
    store.upsert(WITH_GRAPH, points)
    store.flush()
    return {"path": path, "rows": len(points), "upsert_s": round(time.perf_counter() - start, 4)}
