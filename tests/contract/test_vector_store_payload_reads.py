"""Both engines alike: candidates with only the payload fields asked for, whole payloads by id, exact search, and a
small collection's vector index left alone (`VectorStore.query(payloads=False)`, `payloads`, `index_vectors`)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from cluster.errors import CollectionNotFound
from cluster.index.query import SearchQuery
from cluster.index.store.protocol import VectorStore
from cluster.types import FusionParams, SparseTerms, StoredPoint
from tests.support.store_engines import ENGINES, store_opener

WIDTH = 16
ROWS = 120
TOP_K = 10


@pytest.fixture(params=ENGINES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorStore]:
    opened = store_opener(request.param, tmp_path)()
    yield opened
    opened.close()


def _filled(store: VectorStore) -> list[StoredPoint]:
    raw = np.random.default_rng(5).normal(size=(ROWS, WIDTH))
    unit = raw / np.linalg.norm(raw, axis=1, keepdims=True)
    points = [
        StoredPoint(
            id=str(uuid.uuid4()),
            vector=unit[i].tolist(),
            name_vector=unit[(i + 1) % ROWS].tolist(),
            sparse=SparseTerms(indices=[i % 7, 100 + i % 3], values=[1.0, 0.5]),
            payload={"path": f"src/f{i}.py", "text": f"def f{i}(): return {i}", "build": "chunks", "start_line": i},
        )
        for i in range(ROWS)
    ]
    store.create_collection("chunks", WIDTH, ["path"])
    store.upsert("chunks", points)
    return points


def _search(vector: list[float]) -> SearchQuery:
    return SearchQuery(
        vector=vector,
        keywords=SparseTerms(indices=[3], values=[1.0]),
        limit=TOP_K,
        fusion=FusionParams(candidates=TOP_K),
    )


def test_candidates_without_payloads_are_the_same_candidates_scored_the_same(store: VectorStore) -> None:
    points = _filled(store)
    query = _search(points[0].vector)
    by_id = {point.id: point for point in points}

    whole = {c.id: c for c in store.query("chunks", query)}
    thin = {c.id: c for c in store.query("chunks", query, payloads=False)}

    assert thin.keys() == whole.keys() and len(thin) >= TOP_K
    for point_id, candidate in thin.items():
        assert candidate.payload == {}
        assert whole[point_id].payload == by_id[point_id].payload
        assert candidate.dense == pytest.approx(whole[point_id].dense, abs=1e-6)
        assert candidate.name == pytest.approx(whole[point_id].name, abs=1e-6)
        assert candidate.keyword == pytest.approx(whole[point_id].keyword, abs=1e-6)


def test_payloads_reads_whole_payloads_by_id_and_leaves_out_unknown_ids(store: VectorStore) -> None:
    points = _filled(store)
    wanted = [points[3].id, points[7].id.upper(), str(uuid.uuid4())]  # any spelling; one the store lacks

    found = store.payloads("chunks", wanted)

    assert found == {points[3].id: points[3].payload, points[7].id: points[7].payload}
    thin = store.payloads("chunks", [points[3].id], leave_out=["path", "absent"])
    assert thin == {points[3].id: {k: v for k, v in points[3].payload.items() if k != "path"}}
    assert "path" in points[3].payload
    assert store.payloads("chunks", []) == {}
    with pytest.raises(CollectionNotFound):
        store.payloads("missing", [points[3].id])


def test_indexing_a_small_collection_builds_nothing_and_search_is_unchanged(store: VectorStore) -> None:
    points = _filled(store)  # under store.vector_index.exact_below_rows: searched exactly
    before = store.search("chunks", points[1].vector, TOP_K)

    assert store.index_vectors("chunks") is False
    after = store.search("chunks", points[1].vector, TOP_K)
    assert [h.id for h in after] == [h.id for h in before]
    assert store.count("chunks") == ROWS
    with pytest.raises(CollectionNotFound):
        store.index_vectors("missing")


def test_an_exact_search_ranks_like_numpy_and_agrees_with_the_default_one(store: VectorStore) -> None:
    points = _filled(store)
    matrix = np.array([p.vector for p in points])
    query = np.random.default_rng(9).normal(size=WIDTH)
    expected = [points[i].id for i in np.argsort(-(matrix @ (query / np.linalg.norm(query))))[:TOP_K]]

    exact = store.search("chunks", query.tolist(), TOP_K, exact=True)

    assert [h.id for h in exact] == expected
    assert [h.id for h in store.search("chunks", query.tolist(), TOP_K)] == expected  # small: scanned exactly too
