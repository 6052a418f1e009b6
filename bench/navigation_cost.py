"""bench.navigation's cost part: how fast `callers` answers on a big graph, and what the graph adds
to a reindex (the facts' seconds against collect and embedding, the facts' bytes in the stored rows)."""

from __future__ import annotations

import json
import random
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.navigation_eval import eligible
from cluster.build.collect import RepoChunks
from cluster.graph import CodeGraph, attach_facts, file_facts
from cluster.index import RowPayload
from cluster.types import Chunk

__all__ = ["callers_latency", "facts_seconds", "percentile_ms", "store_bytes"]

GRAPH_FIELDS = ("definitions", "references", "imports", "refs")


def percentile_ms(samples_s: list[float], q: float) -> float:
    ordered = sorted(samples_s)
    return round(1000 * ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))], 3)


def _latency(samples_s: list[float]) -> dict[str, float]:
    return {
        "p50_ms": percentile_ms(samples_s, 50),
        "p90_ms": percentile_ms(samples_s, 90),
        "mean_ms": round(1000 * statistics.fmean(samples_s), 3),
        "max_ms": round(1000 * max(samples_s), 3),
        "n": len(samples_s),
    }


def callers_latency(graph: CodeGraph, n: int, seed: int) -> dict[str, Any]:
    """Milliseconds per `callers(qualified, path, depth=1)` over a seeded sample of the graph's
    functions: a first pass on a fresh graph (its resolver cache cold) and a second pass."""
    defs = eligible(graph)
    picked = random.Random(seed).sample(defs, min(n, len(defs)))
    passes = {}
    for name in ("cold", "warm"):
        samples = []
        for d in picked:
            t0 = time.perf_counter()
            graph.callers(d.qualified, path=d.path, depth=1, limit=100)
            samples.append(time.perf_counter() - t0)
        passes[name] = _latency(samples)
    return {"functions": len(defs), "sampled": len(picked), **passes}


def facts_seconds(root: Path, found: RepoChunks) -> float:
    """Seconds of the graph's part of collect over the same files: `file_facts` on each file's
    text, and `attach_facts` onto its chunks."""
    by_file: dict[int, list[Chunk]] = defaultdict(list)
    for chunk, owner in zip(found.chunks, found.owners, strict=True):
        by_file[owner].append(chunk)
    total = 0.0
    for owner, chunks in by_file.items():
        text = (root / found.paths[owner]).read_text(encoding="utf-8", errors="replace")
        t0 = time.perf_counter()
        facts = file_facts(found.paths[owner], chunks[0].language, text)
        attach_facts(chunks, facts)
        total += time.perf_counter() - t0
    return total


def _payload(chunk: Chunk, with_graph: bool) -> dict[str, Any]:
    payload = RowPayload(
        **chunk.model_dump(), content_hash=chunk.content_hash, refs=sorted({r.name for r in chunk.references})
    ).stored()
    if not with_graph:
        payload.update({name: [] for name in GRAPH_FIELDS})
    return payload


def store_bytes(found: RepoChunks) -> dict[str, Any]:
    """Bytes of every row's stored payload as compact JSON, with the graph's fields and with them emptied."""
    with_graph = sum(len(json.dumps(_payload(c, True), separators=(",", ":"))) for c in found.chunks)
    without = sum(len(json.dumps(_payload(c, False), separators=(",", ":"))) for c in found.chunks)
    return {
        "rows": len(found.chunks),
        "with_graph_bytes": with_graph,
        "without_graph_bytes": without,
        "graph_bytes": with_graph - without,
        "graph_share_of_payload": round((with_graph - without) / with_graph, 4) if with_graph else None,
        "ratio": round(with_graph / without, 3) if without else None,
    }


def embed_seconds(found: RepoChunks, encode: Callable[[list[str]], Any]) -> dict[str, Any]:
    """Seconds to embed what a reindex embeds for these chunks (code text and name text of each)."""
    from cluster.index.representations import name_text
    from cluster.space import embedding_text

    texts = [embedding_text(c) for c in found.chunks] + [name_text(c) for c in found.chunks]
    encode(texts[:8])  # warm-up, untimed
    t0 = time.perf_counter()
    encode(texts)
    return {"texts": len(texts), "seconds": round(time.perf_counter() - t0, 2)}
