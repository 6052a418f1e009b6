"""Staged builds, atomic switch, cleanup of partial builds, and the query-time space guard."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from cluster.errors import EncoderMismatch, IndexNotFound, SamespaceError, StoreError
from cluster.index.catalog import IndexCatalog, point_id, point_payload
from cluster.index.query import SearchQuery
from cluster.index.store.engines import open_vector_store
from cluster.index.store.protocol import VectorStore
from cluster.space import EncoderIdentity
from cluster.types import Chunk, PayloadFilter, StoredPoint

WIDTH = 8
IDENTITY = EncoderIdentity(model="m", weights_sha256="a" * 64, width=WIDTH, max_seq_length=256)


def query(
    vector: list[float], identity: EncoderIdentity, limit: int, filter: PayloadFilter | None = None
) -> SearchQuery:
    return SearchQuery(vector=vector, identity=identity, limit=limit, filter=filter)


def catalog_on(store: VectorStore) -> IndexCatalog:
    return IndexCatalog(store, clock=lambda: 1_700_000_000.0)


def make_catalog(path: Path) -> IndexCatalog:
    return catalog_on(open_vector_store("embedded", data_dir=path, url=None))


def points(repo: str, build: str, n: int, marker: str) -> list[StoredPoint]:
    rng = np.random.default_rng(len(marker) + n)
    out = []
    for i in range(n):
        chunk = Chunk(
            path=f"src/f{i}.py",
            start_line=1,
            end_line=3,
            language="python",
            kind="function",
            symbol=f"{marker}_{i}",
            text=f"def {marker}_{i}(): pass",
        )
        vector = rng.normal(size=WIDTH)
        out.append(
            StoredPoint(
                id=point_id(repo, chunk),
                vector=(vector / np.linalg.norm(vector)).tolist(),
                payload=point_payload(repo, chunk, IDENTITY, IDENTITY, "p0", build),
            )
        )
    return out


def build_index(catalog: IndexCatalog, name: str, marker: str, n: int = 5) -> str:
    build = catalog.begin_build(name, IDENTITY, "/repo")
    catalog.write(build, points(name, build, n, marker))
    catalog.commit_build(build, files=n, providers=["p0"])
    return build


def test_an_uncommitted_build_is_invisible_and_the_old_one_keeps_serving(tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    old = build_index(catalog, "repo", "old")
    new = catalog.begin_build("repo", IDENTITY, "/repo")
    catalog.write(new, points("repo", new, 5, "new"))
    hits = catalog.search("repo", query([1.0] + [0.0] * (WIDTH - 1), IDENTITY, 10))
    assert {h.payload["build"] for h in hits} == {old}
    catalog.commit_build(new, files=5, providers=["p0"])
    hits = catalog.search("repo", query([1.0] + [0.0] * (WIDTH - 1), IDENTITY, 10))
    assert {h.payload["build"] for h in hits} == {new}
    assert old not in catalog.collections()  # the superseded build is dropped at commit


def test_a_killed_build_is_cleaned_up_by_the_next_run_even_after_a_restart(tmp_path: Path) -> None:
    store = open_vector_store("embedded", data_dir=tmp_path, url=None)
    catalog = catalog_on(store)
    serving = build_index(catalog, "repo", "v1")
    killed = catalog.begin_build("repo", IDENTITY, "/repo")
    catalog.write(killed, points("repo", killed, 3, "partial"))
    store.close()  # the owner dies without committing

    restarted = make_catalog(tmp_path)
    assert restarted.record("repo").build == serving
    assert killed in restarted.collections()
    fresh = restarted.begin_build("repo", IDENTITY, "/repo")
    assert killed not in restarted.collections()
    assert set(restarted.collections()) == {serving, fresh}


def test_a_failed_build_is_dropped_and_recorded(tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    serving = build_index(catalog, "repo", "v1")
    failing = catalog.begin_build("repo", IDENTITY, "/repo")
    catalog.fail_build(failing, "RuntimeError: boom")
    assert catalog.collections() == [serving]
    assert catalog.builds()["repo"].state == "failed" and catalog.builds()["repo"].error == "RuntimeError: boom"
    with pytest.raises(StoreError):
        catalog.write(failing, [])


def test_a_query_from_another_encoder_space_is_refused(tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    build_index(catalog, "repo", "v1")
    other = IDENTITY.model_copy(update={"max_seq_length": 128})
    with pytest.raises(EncoderMismatch) as caught:
        catalog.search("repo", query([1.0] * WIDTH, other, 3))
    assert caught.value.index_space == IDENTITY.space_id and caught.value.query_space == other.space_id
    assert "reindex 'repo' with the current one" in str(caught.value)  # says what to do
    assert str(pickle.loads(pickle.dumps(caught.value))) == str(caught.value)
    hits, refused = catalog.search_all(query([1.0] * WIDTH, other, 3))
    assert hits == [] and [r.index for r in refused] == ["repo"]


def test_unknown_index_names_the_ones_that_exist(tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    build_index(catalog, "alpha", "a")
    build_index(catalog, "beta", "b")
    with pytest.raises(IndexNotFound, match="unknown repo 'gamma'; indexed repos: alpha, beta"):
        catalog.search("gamma", query([1.0] * WIDTH, IDENTITY, 3))


def test_search_all_merges_indexes_best_first_and_filters_apply(tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    build_index(catalog, "alpha", "a", n=4)
    build_index(catalog, "beta", "b", n=4)
    hits, refused = catalog.search_all(query([1.0] * WIDTH, IDENTITY, 8))
    assert refused == [] and len(hits) == 8 and {h.payload["repo"] for h in hits} == {"alpha", "beta"}
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    only = catalog.search("alpha", query([1.0] * WIDTH, IDENTITY, 8, PayloadFilter(equals={"path": "src/f1.py"})))
    assert [h.payload["symbol"] for h in only] == ["a_1"]
    assert catalog.has_path("alpha", "src/f1.py") and not catalog.has_path("alpha", "src/nope.py")


def test_index_names_that_could_collide_with_build_names_are_refused(tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    for bad in ["", "a__bxyz", "../x", "a b", "-x"]:
        with pytest.raises(SamespaceError):
            catalog.begin_build(bad, IDENTITY, "/repo")


def test_point_ids_are_stable_and_depend_on_content(tmp_path: Path) -> None:
    chunk = Chunk(path="a.py", start_line=1, end_line=2, language="python", kind="function", text="x")
    assert point_id("r", chunk) == point_id("r", chunk)
    assert point_id("r", chunk) != point_id("r", chunk.model_copy(update={"text": "y"}))
    assert point_id("r", chunk) != point_id("s", chunk)


def test_a_build_named_by_its_caller_records_where_its_files_came_from(tmp_path: Path) -> None:
    from cluster.index.records import new_build_id
    from cluster.ingest.git_state import SourceState

    catalog = make_catalog(tmp_path)
    source = SourceState(vcs="git", commit="c" * 40, branch="main", ref="main")
    build = new_build_id("repo", 1_700_000_000.0)
    assert catalog.begin_build("repo", IDENTITY, "/exports/x", build=build, origin="/repo", source=source) == build
    catalog.write(build, points("repo", build, 3, "m"))
    record = catalog.commit_build(build, files=3, providers=["p0"], embedded=1, reused=2)
    assert (record.origin, record.followed_folder, record.source) == ("/repo", "/repo", source)
    assert (record.embedded, record.reused) == (1, 2)
    assert catalog.source_of(build) == source and catalog.source_of("nope__b1") is None
    with pytest.raises(SamespaceError, match="not one of index 'other'"):
        catalog.begin_build("other", IDENTITY, "/repo", build=build)

    newer = source.model_copy(update={"commit": "d" * 40})
    catalog.update_source("repo", newer)
    reopened = make_catalog(tmp_path)  # stored with the build, not only cached
    assert reopened.record("repo").source == newer and reopened.record("repo").build == build


def test_removing_an_index_drops_its_name_its_builds_and_nothing_else(tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    kept = build_index(catalog, "kept", "k")
    gone = build_index(catalog, "gone", "g")
    partial = catalog.begin_build("gone", IDENTITY, "/repo")  # a build still running
    assert catalog.remove("gone") == [gone, partial]
    assert catalog.names() == ["kept"] and catalog.collections() == [kept]
    with pytest.raises(IndexNotFound):
        catalog.record("gone")
    with pytest.raises(IndexNotFound):
        catalog.remove("gone")


def test_a_scoped_search_sources_its_hits_and_refuses_or_skips_another_space_as_its_scope_says(
    tmp_path: Path,
) -> None:
    from cluster.ingest.git_state import SourceState

    catalog = make_catalog(tmp_path)
    source = SourceState(vcs="git", commit="c" * 40, branch="main")
    build = catalog.begin_build("alpha", IDENTITY, "/repo", source=source)
    catalog.write(build, points("alpha", build, 3, "a"))
    catalog.commit_build(build, files=3, providers=["p0"])
    build_index(catalog, "beta", "b", n=3)  # no source recorded: its hits carry none
    hits, refused = catalog.search_scope(
        SearchQuery(scope="*", vector=[1.0] * WIDTH, identity=IDENTITY, limit=6), ["alpha", "beta"]
    )
    assert refused == [] and len(hits) == 6
    assert {(h.payload["repo"], h.payload.get("commit"), h.payload.get("ref")) for h in hits} == {
        ("alpha", "c" * 40, "main"),
        ("beta", None, None),
    }
    other = IDENTITY.model_copy(update={"max_seq_length": 128})
    with pytest.raises(EncoderMismatch):  # the one index a scope names: refused
        catalog.search_scope(SearchQuery(scope="alpha", vector=[1.0] * WIDTH, identity=other, limit=3), ["alpha"])
    hits, refused = catalog.search_scope(
        SearchQuery(scope="a*", vector=[1.0] * WIDTH, identity=other, limit=3), ["alpha"]
    )
    assert hits == [] and len(refused) == 1 and "'alpha'" in refused[0]  # one of a glob's: skipped, named


def test_a_rows_payload_keeps_the_keys_rows_have_always_had_and_a_first_version_row_still_loads() -> None:
    from cluster.index.payload import PAYLOAD_FIELDS, RowPayload, with_source
    from cluster.ingest.git_state import SourceState

    chunk = Chunk(path="src/a.py", start_line=3, end_line=9, language="python", kind="function", text="def f(): 1")
    payload = point_payload("r", chunk, IDENTITY, IDENTITY, "p0", "r__b1", file_hash="f" * 64)
    first = {"repo", "path", "path_prefixes", "start_line", "end_line", "language", "symbol", "kind"}
    first |= {"content_hash", "text", "space", "encoder", "provider", "build"}
    graph = {"definitions", "references", "imports", "refs"}
    assert set(payload) == PAYLOAD_FIELDS == first | {"embed_hash", "file_hash", "defines", "categories"} | graph
    assert payload["categories"] == ["function"]
    assert payload["path_prefixes"] == ["src", "src/a.py"] and payload["encoder"] == IDENTITY.model_dump()
    assert RowPayload.model_validate(payload).stored() == payload
    old = RowPayload.model_validate({key: payload[key] for key in first})  # written before the later keys
    assert (old.embed_hash, old.file_hash, old.defines, old.categories) == (None, None, [], [])
    assert old.lacks(PAYLOAD_FIELDS)
    hit = RowPayload.model_validate(with_source(payload, SourceState(vcs="git", commit="c" * 40, branch="main")))
    assert (hit.commit, hit.ref) == ("c" * 40, "main") and hit.stored() == payload  # a hit's keys are never stored
