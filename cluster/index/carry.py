"""Reuse inside the index: rows of a new build that keep the vectors of an earlier build's rows.

An incremental reindex keeps the vectors of every chunk whose embedded text is unchanged
(`cluster.index.incremental`). Those vectors never leave the index: the job names, per row, the
chunk it writes and the earlier row whose vectors it keeps (`CarriedRow`); `carry_rows` reads the
earlier rows where the store lives and writes the new ones, each with the provider and encoder that
wrote its vectors (DESIGN §10). A row is carried only from a build in the new build's encoder space
(DESIGN §12) and only from a row that embedded exactly the chunk's text (its `embed_hash`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import Field

from cluster.errors import StoreError
from cluster.index.catalog import IndexCatalog, embed_hash, point_id, point_payload
from cluster.index.incremental import reusable_rows
from cluster.index.keywords import chunk_keywords
from cluster.index.records import index_of
from cluster.space import EncoderIdentity
from cluster.types import Chunk, StoredPoint, Strict


class CarriedRow(Strict):
    """A row of a new build whose vectors are those of a row of an earlier build."""

    source: str = Field(description="Id of the earlier build's row whose vectors the new row keeps.")
    chunk: Chunk = Field(description="The chunk the new row holds (its path and lines may have moved).")
    file_hash: str | None = Field(default=None, description="sha256 of the text of the chunk's file.")


class CarryResult(Strict):
    """What `carry_rows` wrote, and what it could not."""

    providers: dict[str, int] = Field(
        default_factory=dict, description="Rows written, per provider that wrote their vectors."
    )
    missing: list[int] = Field(
        default_factory=list,
        description="Positions of the rows not written: their source row is gone, lacks a vector, or "
        "embedded another text. Embed those.",
    )


def chunk_point(
    repo: str,
    build: str,
    space: EncoderIdentity,
    chunk: Chunk,
    vectors: tuple[np.ndarray, np.ndarray],
    written_by: tuple[str, EncoderIdentity | dict[str, Any]],
    *,
    file_hash: str | None,
    hashed: str,
) -> StoredPoint:
    """The row of `chunk` in `build` of index `repo`: its code and name vectors, written by `written_by`
    (the provider and its encoder), its provenance payload (`point_payload`) and its keyword terms."""
    provider, writer = written_by
    return StoredPoint.model_construct(  # built from validated parts: skip re-validating 384+ floats per row
        id=point_id(repo, chunk),
        vector=vectors[0].tolist(),
        name_vector=vectors[1].tolist(),
        payload=point_payload(repo, chunk, space, writer, provider, build, file_hash=file_hash, hashed=hashed),
        sparse=chunk_keywords(chunk.text, chunk.path, chunk.symbol),
    )


def carry_rows(catalog: IndexCatalog, base: str, build: str, rows: Sequence[CarriedRow]) -> CarryResult:
    """Write `rows` into the build in progress `build`, each with the vectors of its source row in
    `base`. StoreError when `base` lives in another encoder space than `build`."""
    space = catalog.build_record(build).identity
    base_space = catalog.build_record(base).identity
    if base_space != space:
        raise StoreError(
            "carry_rows",
            f"build {base!r} lives in encoder space {base_space.space_id} and build {build!r} in "
            f"{space.space_id}: vectors never cross spaces",
        )
    found = reusable_rows(catalog.points(base, sorted({row.source for row in rows})))
    position_of = {hashed: i for i, hashed in enumerate(found.embed_hashes)}
    repo = index_of(build)
    points: list[StoredPoint] = []
    providers: Counter[str] = Counter()
    missing: list[int] = []
    for at, row in enumerate(rows):
        hashed = embed_hash(row.chunk)
        i = position_of.get(hashed)
        if i is None:
            missing.append(at)
            continue
        provider, writer = found.writers[found.writer_of[i]]
        vectors = (found.vectors[i], found.name_vectors[i])
        points.append(
            chunk_point(
                repo,
                build,
                space,
                row.chunk,
                vectors,
                (provider, writer or space),
                file_hash=row.file_hash,
                hashed=hashed,
            )
        )
        providers[provider] += 1
    catalog.write(build, points)
    return CarryResult(providers=dict(providers), missing=missing)
