"""An index's history in the real embedded store: written, read back in first-parent order, searched,
refused across spaces, dropped with the index."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cluster.errors import EncoderMismatch, SamespaceError
from cluster.history import mine_history
from cluster.index import IndexCatalog, SearchQuery, open_vector_store
from cluster.index.history_store import HistoryState, HistoryStore, commit_text
from cluster.index.keywords import query_keywords
from cluster.index.records import history_collection, validate_index_name
from cluster.space import EncoderIdentity
from cluster.types import StoredPoint
from tests.support.scripted_history import ScriptedRepo, build_shop_history

WIDTH = 8
IDENTITY = EncoderIdentity(model="m", weights_sha256="a" * 64, width=WIDTH, max_seq_length=256)
OTHER = EncoderIdentity(model="other", weights_sha256="b" * 64, width=WIDTH, max_seq_length=256)


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> ScriptedRepo:
    return build_shop_history(tmp_path_factory.mktemp("store-history") / "shop")


def vectors(count: int, seed: int = 0) -> list[list[float]]:
    rows = np.random.default_rng(seed).normal(size=(count, WIDTH))
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).tolist()


def write_all(history: HistoryStore, shop: ScriptedRepo, identity: EncoderIdentity = IDENTITY) -> HistoryState:
    mined = mine_history(shop.root, "HEAD")
    state = HistoryState(index="shop", folder=str(shop.root), newest=mined.commits[0].commit, identity=identity)
    count = len(mined.commits)
    return history.write(state, mined.commits, vectors(count), [identity.model_dump()] * count)


def test_the_history_reads_back_in_first_parent_order(tmp_path: Path, shop: ScriptedRepo) -> None:
    history = HistoryStore(open_vector_store("embedded", data_dir=tmp_path, url=None))
    state = write_all(history, shop)
    assert state.commits == len(shop.first_parents()) == 12
    loaded = history.load("shop")
    assert [c.commit for c in loaded.commits] == shop.first_parents()
    assert history.state("shop") == state


def test_a_commit_is_found_by_its_subject_and_the_symbols_it_changed(tmp_path: Path, shop: ScriptedRepo) -> None:
    history = HistoryStore(open_vector_store("embedded", data_dir=tmp_path, url=None))
    write_all(history, shop)
    by_subject = history.search("shop", SearchQuery(keywords=query_keywords("rename h to h2"), limit=3))
    assert by_subject[0].commit == shop.shas["h2"]
    by_symbol = history.search("shop", SearchQuery(keywords=query_keywords("Cart.m returns count"), limit=3))
    assert by_symbol[0].commit == shop.shas["m1"]
    assert "pkg/core.py:Cart.m" in commit_text(by_symbol[0].record)


def test_a_query_from_another_space_is_refused_and_a_history_in_a_new_space_replaces_the_old(
    tmp_path: Path, shop: ScriptedRepo
) -> None:
    history = HistoryStore(open_vector_store("embedded", data_dir=tmp_path, url=None))
    write_all(history, shop)
    query = SearchQuery(vector=vectors(1, seed=5)[0], identity=OTHER, limit=3)
    with pytest.raises(EncoderMismatch):
        history.search("shop", query)
    state = write_all(history, shop, OTHER)
    assert state.identity == OTHER and history.search("shop", query)


def test_it_is_dropped_with_its_index_and_never_taken_for_a_build(tmp_path: Path, shop: ScriptedRepo) -> None:
    store = open_vector_store("embedded", data_dir=tmp_path, url=None)
    catalog = IndexCatalog(store, clock=lambda: 1.7e9)
    build = catalog.begin_build("shop", IDENTITY, str(shop.root))
    point = StoredPoint(id="00000000-0000-0000-0000-000000000001", vector=vectors(1)[0], payload={"path": "a.py"})
    catalog.write(build, [point])
    catalog.commit_build(build, files=1, providers=["p"])
    write_all(catalog.history, shop)
    assert catalog.cleanup_partial("shop") == []  # the history is not a leftover build
    assert history_collection("shop") in store.list_collections()
    catalog.remove("shop")
    assert history_collection("shop") not in store.list_collections()
    assert catalog.history.load("shop").commits == []


def test_no_index_can_take_a_history_collections_name() -> None:
    with pytest.raises(SamespaceError, match="__h"):
        validate_index_name("shop__history")
    with pytest.raises(SamespaceError, match="one vector and one writer per commit"):
        HistoryStore.write(
            HistoryStore(None),  # type: ignore[arg-type]
            HistoryState(index="x", folder="/", newest="a" * 40, identity=IDENTITY),
            [],
            [[0.0]],
            [],
        )
