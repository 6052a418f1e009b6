"""Synthetic rows for `bench.scale`: vectors drawn like real ones, payloads cut from real chunks.

Vectors: clustered (a few thousand centres, each row a centre plus noise), normalised, the index's
width: a code base's chunks crowd around topics, and an approximate index finds uniform noise easier
or harder than it finds real embeddings. Each row's name vector is drawn apart from its code vector,
as the two texts differ. Payloads and keyword terms are those the project writes (`point_payload`,
`chunk_keywords`) for this repository's own chunks, cycled with a distinct path per row, so their
size and the keyword leg's postings are real. Queries are drawn from the same centres.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cluster.index.catalog import IndexCatalog, path_prefixes, point_payload
from cluster.index.keywords import chunk_keywords
from cluster.space import EncoderIdentity
from cluster.types import Chunk, SparseTerms, StoredPoint

__all__ = ["RowTemplate", "VectorDraw", "Written", "row_templates", "write_index"]

CENTRES = 4096
NOISE = 0.6  # per coordinate, against unit-variance centres: neighbours share a centre, not a copy
WRITE_BATCH = 1000
PROVIDER = "bench-synthetic"


@dataclass(frozen=True)
class RowTemplate:
    """A real chunk's payload and keyword terms, reused under a new path by many rows."""

    payload: dict[str, Any]
    sparse: SparseTerms


@dataclass(frozen=True)
class Written:
    """One index written: its build, rows, seconds writing, seconds building its vector index, and
    whether it got one."""

    name: str
    build: str
    rows: int
    write_s: float
    index_s: float
    indexed: bool


class VectorDraw:
    """Unit vectors around fixed centres; one seed, the same centres for rows and queries."""

    def __init__(self, width: int, seed: int = 0, stream: int = 1) -> None:
        """`seed` fixes the centres; `stream` the noise (rows and queries: the same centres, apart draws)."""
        self._width = width
        self._centres = np.random.default_rng(seed).normal(size=(CENTRES, width)).astype(np.float32)
        self._rng = np.random.default_rng([seed, stream])

    def draw(self, count: int) -> np.ndarray:
        picked = self._centres[self._rng.integers(0, CENTRES, count)]
        noisy = picked + self._rng.normal(scale=NOISE, size=(count, self._width)).astype(np.float32)
        unit: np.ndarray = noisy / np.linalg.norm(noisy, axis=1, keepdims=True)
        return unit


def row_templates(chunks: list[Chunk], identity: EncoderIdentity) -> list[RowTemplate]:
    """Each chunk's stored payload and keyword terms, as a reindex writes them."""
    return [
        RowTemplate(
            payload=point_payload("template", chunk, identity, identity, PROVIDER, "template"),
            sparse=chunk_keywords(chunk.text, chunk.path, chunk.symbol),
        )
        for chunk in chunks
    ]


def _rows(
    name: str, build: str, templates: list[RowTemplate], vectors: VectorDraw, count: int, start: int
) -> Iterator[list[StoredPoint]]:
    """`count` rows in batches; row i takes template i mod len(templates) under the path `r<i>/<path>`."""
    for first in range(0, count, WRITE_BATCH):
        size = min(WRITE_BATCH, count - first)
        code, names = vectors.draw(size), vectors.draw(size)
        batch = []
        for j in range(size):
            i = start + first + j
            template = templates[i % len(templates)]
            path = f"r{i // len(templates)}/{template.payload['path']}"
            payload = {
                **template.payload,
                "repo": name,
                "build": build,
                "path": path,
                "path_prefixes": path_prefixes(path),
            }
            batch.append(
                StoredPoint(
                    id=str(uuid.UUID(int=i + 1)),
                    vector=code[j].tolist(),
                    name_vector=names[j].tolist(),
                    sparse=template.sparse,
                    payload=payload,
                )
            )
        yield batch


def write_index(
    catalog: IndexCatalog,
    name: str,
    identity: EncoderIdentity,
    templates: list[RowTemplate],
    vectors: VectorDraw,
    rows: int,
    *,
    clock: Callable[[], float] = time.perf_counter,
    progress: Callable[[str], None] = lambda line: None,
) -> Written:
    """One index of `rows` synthetic rows through the catalog, as a reindex writes one: begin, write in
    batches, build the vector index, commit."""
    build = catalog.begin_build(name, identity, str(Path("/bench") / name), rows=rows)
    started, done = clock(), 0
    for batch in _rows(name, build, templates, vectors, rows, 0):
        catalog.write(build, batch)
        done += len(batch)
        if done % (50 * WRITE_BATCH) == 0:
            rate = done / max(clock() - started, 1e-9)
            progress(f"{name}: {done}/{rows} rows written, {rate:.0f} rows/s")
    written = clock()
    indexed = catalog.index_vectors(build)
    built = clock()
    catalog.commit_build(build, files=rows, providers=[PROVIDER], embedded=rows)
    return Written(name, build, rows, written - started, built - written, indexed)
