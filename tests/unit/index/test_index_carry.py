"""Reused vectors stay in the index: `carry_rows` writes a new build's rows with the vectors of an
earlier build's rows, keeping who wrote them, and only from the same encoder space and text."""

from __future__ import annotations

import numpy as np
import pytest

from cluster.errors import StoreError
from cluster.index import CarriedRow, IndexCatalog, carry_rows, chunk_point, embed_hash, point_id
from cluster.types import Chunk
from tests.support.fakes.build_ports import IDENTITY, CatalogIndex, text_vector

CLOUD = IDENTITY.model_copy(update={"model": "cloud-m"})  # a writer of the same space (a verified cloud lane)


def chunk(symbol: str, path: str = "a.py", start: int = 1) -> Chunk:
    text = f"def {symbol}():\n    return 1\n"
    return Chunk(
        path=path, start_line=start, end_line=start + 1, language="python", symbol=symbol, kind="function", text=text
    )


def serving_build(catalog: IndexCatalog, chunks: list[Chunk]) -> str:
    """A committed build of `old` whose rows alternate writers: p0 (the reference) and p1 (cloud)."""
    build = catalog.begin_build("old", IDENTITY, "/r")
    points = [
        chunk_point(
            "old",
            build,
            IDENTITY,
            c,
            (text_vector(c.text), text_vector(c.text, "name")),
            (f"p{i % 2}", CLOUD if i % 2 else IDENTITY),
            file_hash="f",
            hashed=embed_hash(c),
        )
        for i, c in enumerate(chunks)
    ]
    catalog.write(build, points)
    catalog.commit_build(build, files=1, providers=["p0", "p1"])
    return build


def test_carried_rows_keep_their_vectors_and_writers_under_the_new_rows_place() -> None:
    catalog = CatalogIndex().catalog
    old = [chunk("alpha"), chunk("beta", start=5)]
    base = serving_build(catalog, old)
    build = catalog.begin_build("new", IDENTITY, "/r2")
    moved = old[1].model_copy(update={"start_line": 9, "end_line": 10})  # the same embedded text, moved down
    rows = [CarriedRow(source=point_id("old", old[i]), chunk=c, file_hash="g") for i, c in ((0, old[0]), (1, moved))]

    result = carry_rows(catalog, base, build, rows)

    assert result.providers == {"p0": 1, "p1": 1} and result.missing == []
    catalog.commit_build(build, files=2, providers=["p0", "p1"])
    (read,) = catalog.points(build, [point_id("new", moved)])
    assert np.allclose(read.vector, text_vector(moved.text)) and np.allclose(
        read.name_vector, text_vector(moved.text, "name")
    )  # type: ignore[arg-type]
    assert read.payload["start_line"] == 9 and read.payload["repo"] == "new"
    assert read.payload["provider"] == "p1" and read.payload["encoder"] == CLOUD.model_dump()
    assert read.payload["build"] == build and read.payload["file_hash"] == "g"
    assert read.sparse is not None


def test_a_row_whose_source_is_gone_or_embedded_another_text_is_not_written_and_named() -> None:
    catalog = CatalogIndex().catalog
    old = [chunk("alpha"), chunk("beta", start=5)]
    base = serving_build(catalog, old)
    build = catalog.begin_build("new", IDENTITY, "/r2")
    edited = old[1].model_copy(update={"text": old[1].text + "# changed\n"})
    rows = [
        CarriedRow(source=point_id("old", old[0]), chunk=old[0]),
        CarriedRow(source=point_id("old", chunk("gone")), chunk=chunk("gone")),  # never in the base
        CarriedRow(source=point_id("old", old[1]), chunk=edited),  # the source embedded the old text
    ]
    result = carry_rows(catalog, base, build, rows)
    assert result.missing == [1, 2] and result.providers == {"p0": 1}
    assert [p.payload["symbol"] for p in catalog.points(build, [point_id("new", c.chunk) for c in rows])] == ["alpha"]


def test_vectors_never_cross_encoder_spaces_and_only_a_build_in_progress_takes_rows() -> None:
    catalog = CatalogIndex().catalog
    old = [chunk("alpha")]
    base = serving_build(catalog, old)
    other = catalog.begin_build("new", IDENTITY.model_copy(update={"weights_sha256": "b" * 64}), "/r2")
    row = CarriedRow(source=point_id("old", old[0]), chunk=old[0])
    with pytest.raises(StoreError, match="never cross spaces"):
        carry_rows(catalog, base, other, [row])
    assert catalog.points(other, [point_id("new", old[0])]) == []
    same = catalog.begin_build("new", IDENTITY, "/r2")  # supersedes `other`
    catalog.commit_build(same, files=0, providers=[])
    with pytest.raises(StoreError, match="not in progress"):
        carry_rows(catalog, base, same, [row])
