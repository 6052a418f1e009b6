"""Small collections share their width's pool in the embedded engine (`cluster/index/store/edge_pool.py`):
one shard holds them, each keeps its own rows, and several are searched in one call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cluster.errors import CollectionNotFound, StoreError
from cluster.index.catalog import IndexCatalog, point_id, point_payload
from cluster.index.keywords import chunk_keywords, query_keywords
from cluster.index.query import SearchQuery
from cluster.index.store.edge import COLLECTIONS_DIR, SHARD_DIR, EdgeStore
from cluster.index.store.edge_pool import POOLS_DIR, TENANT_KEY, pool_name
from cluster.settings import VectorIndexSettings
from cluster.space import EncoderIdentity
from cluster.types import Chunk, FusionParams, PayloadFilter, SparseTerms, StoredPoint

WIDTH = 16
ROWS = 20
IDENTITY = EncoderIdentity(model="pool-test", weights_sha256="c" * 64, width=WIDTH, max_seq_length=256)


def _unit(rng: np.random.Generator, count: int) -> np.ndarray:
    raw = rng.normal(size=(count, WIDTH))
    return raw / np.linalg.norm(raw, axis=1, keepdims=True)


def _points(seed: int, marker: str) -> list[StoredPoint]:
    """ROWS points whose ids are the same for every marker (as a row of two builds of one index is)."""
    rng = np.random.default_rng(seed)
    code, name = _unit(rng, ROWS), _unit(rng, ROWS)
    return [
        StoredPoint(
            id=f"00000000-0000-4000-8000-{i:012d}",
            vector=code[i].tolist(),
            name_vector=name[i].tolist(),
            sparse=SparseTerms(indices=[i % 4, 10 + i % 3], values=[1.0, 0.5]),
            payload={"path": f"src/{marker}/f{i}.py", "marker": marker},
        )
        for i in range(ROWS)
    ]


@pytest.fixture
def store(tmp_path: Path) -> Any:
    opened = EdgeStore(tmp_path / "edge")
    yield opened
    opened.close()


def _search(vector: list[float] | None, keywords: SparseTerms | None, leg_limit: int) -> SearchQuery:
    return SearchQuery(vector=vector, keywords=keywords, limit=leg_limit, fusion=FusionParams(candidates=leg_limit))


def test_small_collections_share_one_shard_and_a_large_or_unknown_one_has_its_own(
    store: EdgeStore, tmp_path: Path
) -> None:
    store.create_collection("a", WIDTH, ["path"], rows=ROWS)
    store.create_collection("b", WIDTH, ["path"], rows=ROWS)
    store.create_collection("big", WIDTH, ["path"], rows=VectorIndexSettings().pool_below_rows)
    store.create_collection("unknown", WIDTH, ["path"])

    collections = tmp_path / "edge" / COLLECTIONS_DIR
    assert store.list_collections() == ["a", "b", "big", "unknown"]
    assert [name for name in store.list_collections() if (collections / name / SHARD_DIR).is_dir()] == [
        "big",
        "unknown",
    ]
    assert (tmp_path / "edge" / POOLS_DIR / pool_name(WIDTH) / SHARD_DIR).is_dir()
    assert store.collection_width("a") == WIDTH


def test_the_same_row_in_two_pooled_collections_is_two_rows_and_dropping_one_keeps_the_other(
    store: EdgeStore, tmp_path: Path
) -> None:
    for name in ("old", "new"):
        store.create_collection(name, WIDTH, ["path", "marker"], rows=ROWS)
        store.upsert(name, _points(1, name))  # the same ids and vectors in both
    assert store.count("old") == store.count("new") == ROWS
    first = _points(1, "new")[0]
    assert store.payloads("new", [first.id]) == {first.id: first.payload}  # its own id, no tenant key
    assert store.count("new", PayloadFilter(equals={"marker": "old"})) == 0

    store.drop_collection("old")
    store.close()
    reopened = EdgeStore(tmp_path / "edge")
    try:
        with pytest.raises(CollectionNotFound):
            reopened.count("old")
        assert reopened.count("new") == ROWS
        top = reopened.search("new", first.vector, 1)[0]
        assert (top.id, top.payload) == (first.id, first.payload)
        page, _ = reopened.scroll_points("new", None, ROWS, None)
        assert sorted(point.id for point in page) == sorted(point.id for point in _points(1, "new"))
    finally:
        reopened.close()


def test_a_filter_naming_another_pooled_collection_reads_nothing_of_it(store: EdgeStore) -> None:
    for name in ("mine", "theirs"):
        store.create_collection(name, WIDTH, ["path"], rows=ROWS)
        store.upsert(name, _points(2, name))
    other = PayloadFilter(equals={TENANT_KEY: "theirs"})

    assert store.search("mine", _points(2, "x")[0].vector, 5, other) == []
    assert store.count("mine", other) == 0
    assert store.count("mine", PayloadFilter(any_of={TENANT_KEY: ["mine", "theirs"]})) == ROWS


def test_a_payload_may_not_carry_the_stores_tenant_key(store: EdgeStore) -> None:
    store.create_collection("a", WIDTH, ["path"], rows=ROWS)
    point = _points(3, "a")[0]
    hostile = point.model_copy(update={"payload": {**point.payload, TENANT_KEY: "b"}})

    with pytest.raises(StoreError, match=TENANT_KEY):
        store.upsert("a", [hostile])
    assert store.count("a") == 0


def test_query_each_gives_each_collection_its_own_candidates_scored_as_its_own_query(store: EdgeStore) -> None:
    for seed, name in enumerate(("p1", "p2", "p3")):
        store.create_collection(name, WIDTH, ["path"], rows=ROWS)
        store.upsert(name, _points(seed, name))
    store.create_collection("own", WIDTH, ["path"])
    store.upsert("own", _points(9, "own"))
    store.set_alias("p3-alias", "p3")
    query = _search(_points(5, "q")[0].vector, SparseTerms(indices=[1, 11], values=[1.0, 1.0]), leg_limit=4 * ROWS)

    each = store.query_each(["p1", "p2", "p3-alias", "own"], query)

    assert sorted(each) == ["own", "p1", "p2", "p3-alias"]
    for name, found in each.items():
        alone = {c.id: c for c in store.query(name, query, payloads=False)}
        assert {c.id for c in found} == set(alone) and all(c.payload == {} for c in found)
        scores = [(c.dense, c.name, c.keyword) for c in found]
        assert scores == [pytest.approx((alone[c.id].dense, alone[c.id].name, alone[c.id].keyword)) for c in found]
        assert len(found) == ROWS


def test_several_pooled_collections_take_each_legs_top_together(store: EdgeStore) -> None:
    near, far = _points(4, "near"), _points(4, "far")
    far = [p.model_copy(update={"vector": (-np.asarray(p.vector)).tolist()}) for p in far]  # the opposite way
    for name, points in (("near", near), ("far", far)):
        store.create_collection(name, WIDTH, ["path"], rows=ROWS)
        store.upsert(name, points)
    query = _search(near[0].vector, None, leg_limit=3)

    each = store.query_each(["near", "far"], query)

    assert near[0].id in {c.id for c in each["near"]}
    assert max(c.dense or 0.0 for c in each["near"]) > max((c.dense or 0.0 for c in each["far"]), default=-1.0)
    assert len(each["near"]) + len(each["far"]) <= 2 * 3  # the code and name legs' top 3 of both together


def _index(catalog: IndexCatalog, repo: str, seed: int, *, pooled: bool) -> None:
    rng = np.random.default_rng(seed)
    texts = [f"def handler_{i}(request):\n    return route(request, {i})" for i in range(8)]
    build = catalog.begin_build(repo, IDENTITY, f"/{repo}", rows=len(texts) if pooled else None)
    rows = []
    for i, text in enumerate(texts):
        chunk = Chunk(path=f"src/h{i}.py", start_line=1, end_line=2, language="python", kind="function", text=text)
        code, name = _unit(rng, 2)
        rows.append(
            StoredPoint(
                id=point_id(repo, chunk),
                vector=code.tolist(),
                name_vector=name.tolist(),
                payload=point_payload(repo, chunk, IDENTITY, IDENTITY, "p0", build),
                sparse=chunk_keywords(chunk.text, chunk.path, chunk.symbol),
            )
        )
    catalog.write(build, rows)
    catalog.commit_build(build, files=len(texts), providers=["p0"])


def test_a_search_of_pooled_indexes_finds_what_it_finds_in_their_own_collections(tmp_path: Path) -> None:
    catalogs = {
        pooled: IndexCatalog(EdgeStore(tmp_path / str(pooled)), clock=lambda: 1.7e9) for pooled in (False, True)
    }
    for pooled, catalog in catalogs.items():
        for seed, repo in enumerate(("api", "web", "cli")):
            _index(catalog, repo, seed, pooled=pooled)
    vector = _unit(np.random.default_rng(7), 1)[0].tolist()
    search = SearchQuery(vector=vector, identity=IDENTITY, limit=10)

    found = {pooled: catalog.search_all(search)[0] for pooled, catalog in catalogs.items()}

    assert [(h.payload["repo"], h.payload["path"]) for h in found[True]] == [
        (h.payload["repo"], h.payload["path"]) for h in found[False]
    ]
    assert [h.score for h in found[True]] == pytest.approx([h.score for h in found[False]])
    keyworded = search.model_copy(update={"keywords": query_keywords("route request handler")})
    merged = {(h.payload["repo"], h.payload["path"]): h.score for h in catalogs[True].search_all(keyworded)[0]}
    alone = {
        (h.payload["repo"], h.payload["path"]): h.score
        for repo in ("api", "web", "cli")
        for h in catalogs[True].search(repo, keyworded)
    }
    assert merged == pytest.approx({place: alone[place] for place in merged})  # as in its own index


def test_a_search_of_some_pooled_collections_never_returns_rows_of_the_others(store: EdgeStore) -> None:
    for name in ("a", "b", "building"):
        store.create_collection(name, WIDTH, ["path"], rows=ROWS)
        store.upsert(name, _points(6, name))  # the same vectors in all three
    query = _search(_points(6, "q")[0].vector, SparseTerms(indices=[1], values=[1.0]), leg_limit=5 * ROWS)

    some = store.query_each(["a", "b"], query)  # the pool holds another: its rows are filtered out
    assert {name: len(found) for name, found in some.items()} == {"a": ROWS, "b": ROWS}
    store.drop_collection("building")
    every = store.query_each(["a", "b"], query)  # all the pool holds: searched without a filter

    for name in ("a", "b"):
        assert sorted((c.id, round(c.dense or 0, 5)) for c in every[name]) == sorted(
            (c.id, round(c.dense or 0, 5)) for c in some[name]
        )


def test_a_collection_pooled_after_a_reopen_gets_a_slot_of_its_own(tmp_path: Path) -> None:
    first = EdgeStore(tmp_path / "edge")
    first.create_collection("before", WIDTH, ["path"], rows=ROWS)
    first.upsert("before", _points(7, "before"))
    first.close()
    store = EdgeStore(tmp_path / "edge")
    try:
        store.create_collection("after", WIDTH, ["path"], rows=ROWS)
        store.upsert("after", _points(8, "after"))
        query = _search(_points(9, "q")[0].vector, None, leg_limit=4 * ROWS)

        each = store.query_each(["before", "after"], query)

        for name in ("before", "after"):
            read = store.payloads(name, [c.id for c in each[name]])
            assert len(read) == len(each[name]) > 0
            assert {payload["marker"] for payload in read.values()} == {name}
    finally:
        store.close()
