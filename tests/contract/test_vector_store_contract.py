"""One contract, two engines: every VectorStore behaves the same on Qdrant Edge (a collection's own shard,
or its width's pool) and qdrant-client."""

from __future__ import annotations

import pickle
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from cluster.errors import CollectionNotFound, ConfigError, StoreError, WidthMismatch
from cluster.index.query import SearchQuery
from cluster.index.store.engines import open_vector_store
from cluster.index.store.protocol import VectorStore
from cluster.types import FusionParams, PayloadFilter, SparseTerms, StoredPoint
from tests.support.store_engines import ENGINES, REOPENABLE, Opener, store_opener

WIDTH = 16
POINT_COUNT = 200
TOP_K = 10
KEYWORDS = ("path", "language", "path_prefixes")


def legs(
    vector: list[float] | None = None,
    keywords: SparseTerms | None = None,
    *,
    limit: int,
    definitions: PayloadFilter | None = None,
    filter: PayloadFilter | None = None,
) -> SearchQuery:
    """A search whose every leg returns `limit` points."""
    return SearchQuery(
        vector=vector,
        keywords=keywords,
        definitions=definitions,
        filter=filter,
        limit=limit,
        fusion=FusionParams(candidates=limit),
    )


@pytest.fixture(params=ENGINES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorStore]:
    opened = store_opener(request.param, tmp_path)()
    yield opened
    opened.close()


@pytest.fixture(params=REOPENABLE)
def reopenable(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    return store_opener(request.param, tmp_path)


def _vectors(count: int, seed: int = 7) -> np.ndarray:
    raw = np.random.default_rng(seed).normal(size=(count, WIDTH))
    return raw / np.linalg.norm(raw, axis=1, keepdims=True)


def _points(vectors: np.ndarray) -> list[StoredPoint]:
    points = []
    for i, vector in enumerate(vectors):
        prefixes = ["src", "src/a"] if i % 2 == 0 else ["lib"]
        payload = {"path": f"src/f{i % 5}.py", "language": "python" if i % 3 else "go", "path_prefixes": prefixes}
        points.append(StoredPoint(id=str(uuid.uuid4()), vector=vector.tolist(), payload=payload))
    return points


def _filled(store: VectorStore, name: str = "chunks", count: int = POINT_COUNT) -> list[StoredPoint]:
    store.create_collection(name, WIDTH, KEYWORDS)
    points = _points(_vectors(count))
    store.upsert(name, points)
    return points


def _unit(seed: int) -> list[float]:
    return _vectors(1, seed)[0].tolist()


def test_created_collections_are_listed_sorted_and_dropping_removes_them(store: VectorStore) -> None:
    store.create_collection("b-coll", WIDTH, KEYWORDS)
    store.create_collection("a.coll_2", 8, [])
    assert store.list_collections() == ["a.coll_2", "b-coll"]
    assert store.collection_width("a.coll_2") == 8
    with pytest.raises(StoreError):
        store.create_collection("b-coll", WIDTH, KEYWORDS)
    store.drop_collection("b-coll")
    store.drop_collection("b-coll")
    store.drop_collection("never-existed")
    assert store.list_collections() == ["a.coll_2"]


@pytest.mark.parametrize("bad_name", ["", "..", "../escape", "a/b", ".hidden", "sp ace"])
def test_a_collection_name_with_path_tricks_is_refused(store: VectorStore, bad_name: str) -> None:
    with pytest.raises(StoreError):
        store.create_collection(bad_name, WIDTH, [])


def test_search_ranks_like_numpy_cosine_top_k(store: VectorStore) -> None:
    points = _filled(store)
    matrix = np.array([p.vector for p in points])
    query = np.array(_unit(99)) * 3.0  # an unnormalised query: cosine must not care
    expected = np.argsort(-(matrix @ (query / np.linalg.norm(query))))[:TOP_K]

    hits = store.search("chunks", query.tolist(), TOP_K)

    assert [h.id for h in hits] == [points[i].id for i in expected]
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    want = matrix[expected] @ (query / np.linalg.norm(query))
    assert np.allclose(scores, want, atol=1e-4)
    assert hits[0].payload == points[expected[0]].payload


def test_a_keyword_filter_keeps_only_points_matching_every_field(store: VectorStore) -> None:
    _filled(store)
    wanted = PayloadFilter(equals={"path": "src/f1.py", "language": "go"})
    hits = store.search("chunks", _unit(1), POINT_COUNT, wanted)
    assert hits
    assert all(h.payload["path"] == "src/f1.py" and h.payload["language"] == "go" for h in hits)
    assert len(hits) == store.count("chunks", wanted)


def test_a_list_field_matches_when_any_element_equals(store: VectorStore) -> None:
    _filled(store)
    hits = store.search("chunks", _unit(2), POINT_COUNT, PayloadFilter(equals={"path_prefixes": "src/a"}))
    assert len(hits) == POINT_COUNT // 2
    assert all("src/a" in h.payload["path_prefixes"] for h in hits)
    assert store.search("chunks", _unit(2), 5, PayloadFilter(equals={"path_prefixes": "nowhere"})) == []


def test_an_any_of_filter_keeps_points_whose_field_equals_one_of_the_values(store: VectorStore) -> None:
    _filled(store)
    wanted = PayloadFilter(any_of={"path": ["src/f1.py", "src/f2.py", "src/nowhere.py"]})
    hits = store.search("chunks", _unit(1), POINT_COUNT, wanted)
    assert hits and {h.payload["path"] for h in hits} <= {"src/f1.py", "src/f2.py"}
    assert (
        len(hits)
        == store.count("chunks", wanted)
        == store.count("chunks", PayloadFilter(equals={"path": "src/f1.py"}))
        + store.count("chunks", PayloadFilter(equals={"path": "src/f2.py"}))
    )
    assert store.count("chunks", PayloadFilter(any_of={"path": []})) == 0
    both = PayloadFilter(equals={"language": "go"}, any_of={"path": ["src/f1.py", "src/f2.py"]})
    assert all(h.payload["language"] == "go" for h in store.search("chunks", _unit(1), POINT_COUNT, both))


def _kept(store: VectorStore, wanted: PayloadFilter) -> set[str]:
    """The ids a filter keeps, the same by search, count and scroll (or the test fails)."""
    found = {h.id for h in store.search("chunks", _unit(4), POINT_COUNT, wanted)}
    assert found == {h.id for h in store.scroll("chunks", wanted, POINT_COUNT, None)[0]}
    assert store.count("chunks", wanted) == len(found)
    return found


def test_none_of_and_either_groups_leave_out_and_pick_points(store: VectorStore) -> None:
    by_id = {p.id: p.payload for p in _filled(store)}
    left_out = PayloadFilter(none_of={"path": ["src/f1.py", "src/f2.py"], "path_prefixes": ["src/a"]})
    out = {i for i, p in by_id.items() if p["path"] in {"src/f1.py", "src/f2.py"} or "src/a" in p["path_prefixes"]}
    assert _kept(store, left_out) == set(by_id) - out and out
    assert len(_kept(store, PayloadFilter(none_of={"path": [], "missing_field": ["x"]}))) == POINT_COUNT
    one_of_each = [[PayloadFilter(equals={"language": "go"}), PayloadFilter(equals={"path": "src/f1.py"})]]
    one_of_each.append([PayloadFilter(equals={"path_prefixes": "lib"})])  # every group holds, by one of its filters
    go_or_f1 = {i for i, p in by_id.items() if (p["language"] == "go" or p["path"] == "src/f1.py")}
    expected = {i for i in go_or_f1 if "lib" in by_id[i]["path_prefixes"] and by_id[i]["path"] != "src/f3.py"}
    assert expected and _kept(store, PayloadFilter(none_of={"path": ["src/f3.py"]}, either=one_of_each)) == expected
    assert len(_kept(store, PayloadFilter(either=[[PayloadFilter(), PayloadFilter(equals={"a": "x"})]]))) == POINT_COUNT


def test_count_honours_the_filter(store: VectorStore) -> None:
    _filled(store)
    assert store.count("chunks") == POINT_COUNT
    assert store.count("chunks", PayloadFilter(equals={"path": "src/f0.py"})) == POINT_COUNT // 5
    assert store.count("chunks", PayloadFilter()) == POINT_COUNT


def test_scroll_pages_through_every_matching_point_exactly_once(store: VectorStore) -> None:
    points = _filled(store)
    seen: list[str] = []
    offset: str | None = None
    for _ in range(POINT_COUNT):
        page, offset = store.scroll("chunks", None, 33, offset)
        assert all(h.score == 0.0 and isinstance(h.id, str) for h in page)
        seen.extend(h.id for h in page)
        if offset is None:
            break
    assert sorted(seen) == sorted(p.id for p in points)

    only_f2 = PayloadFilter(equals={"path": "src/f2.py"})
    page, offset = store.scroll("chunks", only_f2, POINT_COUNT, None)
    assert offset is None
    assert {h.id for h in page} == {p.id for p in points if p.payload["path"] == "src/f2.py"}


def test_upserting_an_id_again_replaces_the_point(store: VectorStore) -> None:
    points = _filled(store, count=3)
    moved = StoredPoint(id=points[0].id.upper(), vector=_unit(5), payload={"path": "moved.py"})
    store.upsert("chunks", [moved])
    assert store.count("chunks") == 3
    assert store.search("chunks", _unit(5), 1)[0].id == points[0].id
    assert store.search("chunks", _unit(5), 1)[0].payload == {"path": "moved.py"}


def test_a_wrong_width_vector_raises_width_mismatch_and_writes_nothing(store: VectorStore) -> None:
    store.create_collection("chunks", WIDTH, KEYWORDS)
    batch = _points(_vectors(4))
    batch[2] = StoredPoint(id=str(uuid.uuid4()), vector=[1.0] * (WIDTH + 1), payload={})
    with pytest.raises(WidthMismatch) as raised:
        store.upsert("chunks", batch)
    assert (raised.value.expected, raised.value.got) == (WIDTH, WIDTH + 1)
    assert store.count("chunks") == 0

    store.upsert("chunks", batch[:2])
    with pytest.raises(WidthMismatch):
        store.search("chunks", [1.0] * (WIDTH - 1), 3)


def test_a_non_uuid_point_id_is_refused(store: VectorStore) -> None:
    store.create_collection("chunks", WIDTH, [])
    with pytest.raises(StoreError):
        store.upsert("chunks", [StoredPoint(id="not-a-uuid", vector=_unit(1), payload={})])


def test_set_alias_switches_searches_to_the_new_collection_and_keeps_the_old_queryable(store: VectorStore) -> None:
    old = _filled(store, "repo-v1", count=5)
    new = _filled(store, "repo-v2", count=7)

    store.set_alias("repo", "repo-v1")
    assert {h.id for h in store.search("repo", _unit(3), 50)} == {p.id for p in old}
    store.set_alias("repo", "repo-v2")
    assert {h.id for h in store.search("repo", _unit(3), 50)} == {p.id for p in new}
    assert store.count("repo") == 7
    assert {h.id for h in store.search("repo-v1", _unit(3), 50)} == {p.id for p in old}

    assert store.resolve_alias("repo") == "repo-v2"
    assert store.aliases() == {"repo": "repo-v2"}
    assert store.collection_width("repo") == WIDTH
    assert store.list_collections() == ["repo-v1", "repo-v2"]
    store.delete_alias("repo")
    store.delete_alias("repo")
    assert store.resolve_alias("repo") is None
    with pytest.raises(CollectionNotFound):
        store.search("repo", _unit(3), 5)


def test_an_alias_needs_an_existing_target_and_cannot_shadow_a_collection(store: VectorStore) -> None:
    store.create_collection("real", WIDTH, [])
    with pytest.raises(CollectionNotFound):
        store.set_alias("name", "missing")
    with pytest.raises(StoreError):
        store.set_alias("real", "real")
    store.set_alias("name", "real")
    with pytest.raises(StoreError):
        store.create_collection("name", WIDTH, [])


def test_dropping_a_collection_drops_the_aliases_pointing_at_it(store: VectorStore) -> None:
    store.create_collection("one", WIDTH, [])
    store.create_collection("two", WIDTH, [])
    store.set_alias("to-one", "one")
    store.set_alias("to-two", "two")
    store.drop_collection("one")
    assert store.aliases() == {"to-two": "two"}


def test_metadata_round_trips_is_replaced_whole_and_is_dropped_with_its_collection(store: VectorStore) -> None:
    store.create_collection("chunks", WIDTH, [])
    assert store.get_metadata("chunks") is None
    meta = {"encoder": "minilm", "space": "abc123", "files": 3, "nested": {"k": [1, 2]}}
    store.put_metadata("chunks", meta)
    assert store.get_metadata("chunks") == meta
    store.put_metadata("chunks", {"encoder": "other"})
    assert store.get_metadata("chunks") == {"encoder": "other"}

    store.drop_collection("chunks")
    store.create_collection("chunks", WIDTH, [])
    assert store.get_metadata("chunks") is None


def test_an_unknown_collection_or_alias_raises_collection_not_found(store: VectorStore) -> None:
    calls: list[Callable[[], object]] = [
        lambda: store.search("ghost", _unit(1), 3),
        lambda: store.count("ghost"),
        lambda: store.scroll("ghost", None, 10, None),
        lambda: store.upsert("ghost", _points(_vectors(1))),
        lambda: store.collection_width("ghost"),
        lambda: store.get_metadata("ghost"),
        lambda: store.put_metadata("ghost", {}),
    ]
    for call in calls:
        with pytest.raises(CollectionNotFound, match="ghost"):
            call()


def test_data_persists_across_close_and_reopen(reopenable: Opener) -> None:
    first = reopenable()
    points = _filled(first, "repo-v1", count=20)
    first.set_alias("repo", "repo-v1")
    first.put_metadata("repo-v1", {"encoder": "minilm"})
    first.flush()
    first.close()

    second = reopenable()
    try:
        assert second.list_collections() == ["repo-v1"]
        assert second.aliases() == {"repo": "repo-v1"}
        assert second.get_metadata("repo-v1") == {"encoder": "minilm"}
        assert second.collection_width("repo") == WIDTH
        assert second.count("repo", PayloadFilter(equals={"path_prefixes": "lib"})) == 10
        assert second.search("repo", points[4].vector, 1)[0].id == points[4].id
    finally:
        second.close()


def test_errors_raised_by_a_store_pickle_with_type_and_message(store: VectorStore) -> None:
    store.create_collection("chunks", WIDTH, [])
    attempts: list[Callable[[], object]] = [
        lambda: store.search("ghost", _unit(1), 3),
        lambda: store.upsert("chunks", [StoredPoint(id=str(uuid.uuid4()), vector=[1.0], payload={})]),
        lambda: store.create_collection("chunks", WIDTH, []),
    ]
    for attempt in attempts:
        with pytest.raises((StoreError, WidthMismatch)) as raised:
            attempt()
        copy = pickle.loads(pickle.dumps(raised.value))
        assert type(copy) is type(raised.value)
        assert str(copy) == str(raised.value)


def test_a_torn_embedded_create_is_treated_as_absent_and_cleaned(tmp_path: Path) -> None:
    torn = tmp_path / "edge" / "collections" / "torn" / "shard"
    torn.mkdir(parents=True)
    store = open_vector_store("embedded", data_dir=tmp_path / "edge", url=None)
    try:
        assert store.list_collections() == []
        with pytest.raises(CollectionNotFound):
            store.count("torn")
        store.create_collection("torn", WIDTH, [])
        assert store.count("torn") == 0
        store.drop_collection("torn")
        assert not (tmp_path / "edge" / "collections" / "torn").exists()
    finally:
        store.close()


def test_open_vector_store_refuses_an_unknown_kind_or_a_missing_location(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        open_vector_store("cloud", data_dir=tmp_path, url=None)
    with pytest.raises(ConfigError):
        open_vector_store("embedded", data_dir=None, url=None)
    with pytest.raises(ConfigError):
        open_vector_store("server", data_dir=None, url=None)


def test_both_engines_satisfy_the_protocol(store: VectorStore) -> None:
    assert isinstance(store, VectorStore)


# --- the keyword leg and hybrid queries ---------------------------------------------------------

KEYWORD_DOCS = [
    ("src/config.py", "parse_config", "def parse_config(path):\n    return load_yaml(path)"),
    ("src/app.py", "main", "def main():\n    settings = parse_config('app.yaml')\n    run(settings)"),
    ("src/users.ts", "getUserById", "export function getUserById(id) { return db.users.find(id) }"),
    ("src/http.py", "fetch", "def fetch(url):\n    return client.get(url, timeout=5)"),
    ("lib/retry.py", "retry", "def retry(call, attempts):\n    for _ in range(attempts): call()"),
]


def _keyword_points() -> list[StoredPoint]:
    from cluster.index.keywords import chunk_keywords

    vectors = _vectors(len(KEYWORD_DOCS), seed=3)
    names = _vectors(len(KEYWORD_DOCS), seed=4)
    return [
        StoredPoint(
            id=str(uuid.uuid4()),
            vector=vector.tolist(),
            name_vector=name.tolist(),
            sparse=chunk_keywords(text, path, symbol),
            payload={
                "path": path,
                "language": "typescript" if path.endswith(".ts") else "python",
                "path_prefixes": [path.split("/")[0]],
            },
        )
        for (path, symbol, text), vector, name in zip(KEYWORD_DOCS, vectors, names, strict=True)
    ]


@pytest.mark.parametrize(
    ("query", "first"),
    [
        ("parse_config", "src/config.py"),
        ("getUserById", "src/users.ts"),
        ("get user by id", "src/users.ts"),
        ("retry attempts", "lib/retry.py"),
    ],
)
def test_the_keyword_leg_ranks_the_defining_chunk_first(store: VectorStore, query: str, first: str) -> None:
    from cluster.index.keywords import query_keywords

    store.create_collection("kw", WIDTH, KEYWORDS)
    store.upsert("kw", _keyword_points())
    hits = store.query("kw", legs(keywords=query_keywords(query), limit=3))
    best = max(hits, key=lambda h: h.keyword)
    assert best.payload["path"] == first
    assert all(h.dense is None and h.name is None for h in hits)  # no query vector: no cosines


def _cos(a: list[float], b: list[float] | None) -> float:
    assert b is not None
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_query_returns_every_legs_candidates_with_exact_scores_under_one_filter(store: VectorStore) -> None:
    from cluster.index.keywords import query_keywords

    store.create_collection("kw", WIDTH, KEYWORDS)
    points = _keyword_points()
    store.upsert("kw", points)
    by_id = {p.id: p for p in points}
    query = points[3].vector  # the code leg's best: fetch's own vector
    name_best = max(points, key=lambda p: _cos(query, p.name_vector))
    keywords = query_keywords("parse_config")
    found = store.query("kw", legs(query, keywords, limit=1))
    ids = {h.id for h in found}
    assert points[3].id in ids and name_best.id in ids  # each vector leg's top 1
    assert max(found, key=lambda h: h.keyword).payload["path"] == "src/config.py"  # the keyword leg's top 1
    for candidate in found:  # exact cosines of both vectors, whichever leg returned the point
        point = by_id[candidate.id]
        assert candidate.dense == pytest.approx(_cos(query, point.vector), abs=1e-4)
        assert candidate.name == pytest.approx(_cos(query, point.name_vector), abs=1e-4)
        assert candidate.payload["path"] == point.payload["path"]
        assert not candidate.definition
    wider = store.query("kw", legs(query, keywords, limit=5))
    assert len(wider) == len(points)
    assert sum(h.keyword > 0 for h in wider) == 2  # parse_config is in config.py (defined) and app.py (called)
    defining = PayloadFilter(equals={"path": "src/config.py"})
    marked = store.query("kw", legs(query, limit=1, definitions=defining))
    assert [h.payload["path"] for h in marked if h.definition] == ["src/config.py"]
    only_lib, app = PayloadFilter(equals={"path_prefixes": "lib"}), {"path": ["src/app.py"]}
    filtered = store.query("kw", legs(query, keywords, limit=5, filter=only_lib))
    assert [h.payload["path"] for h in filtered] == ["lib/retry.py"]
    kept = store.query("kw", legs(query, keywords, limit=5, definitions=defining, filter=PayloadFilter(any_of=app)))
    assert {h.payload["path"] for h in kept} == {"src/app.py"} and not any(h.definition for h in kept)
    with pytest.raises(StoreError):
        store.query("kw", legs(limit=5))


def test_scroll_points_returns_vectors_and_keyword_terms_for_copying(store: VectorStore) -> None:
    store.create_collection("kw", WIDTH, KEYWORDS)
    points = _keyword_points()
    store.upsert("kw", points)
    read: list[StoredPoint] = []
    offset = None
    while True:
        page, offset = store.scroll_points("kw", None, 2, offset)
        read.extend(page)
        if offset is None:
            break
    assert_same_points(read, points)


def assert_same_points(got: list[StoredPoint], points: list[StoredPoint]) -> None:
    """`got` holds exactly `points`: ids, payloads, both vectors and the keyword terms."""
    by_id = {p.id: p for p in got}
    assert set(by_id) == {p.id for p in points}
    for point in points:
        read = by_id[point.id]
        assert np.allclose(read.vector, point.vector, atol=1e-6) and read.payload == point.payload
        assert read.name_vector is not None and np.allclose(read.name_vector, point.name_vector, atol=1e-6)  # type: ignore[arg-type]
        assert read.sparse is not None and read.sparse.indices == point.sparse.indices  # type: ignore[union-attr]
        assert np.allclose(read.sparse.values, point.sparse.values, atol=1e-5)  # type: ignore[union-attr]


def test_retrieve_points_reads_the_named_points_whole_through_an_alias_and_skips_unknown_ids(
    store: VectorStore,
) -> None:
    store.create_collection("kw", WIDTH, KEYWORDS)
    points = _keyword_points()
    store.upsert("kw", points)
    store.set_alias("kw-alias", "kw")
    wanted = [points[2], points[0]]
    got = store.retrieve_points("kw-alias", [p.id.upper() for p in wanted] + [str(uuid.uuid4())])
    assert_same_points(got, wanted)
    assert store.retrieve_points("kw", []) == []
    with pytest.raises(CollectionNotFound):
        store.retrieve_points("no-such", [points[0].id])
