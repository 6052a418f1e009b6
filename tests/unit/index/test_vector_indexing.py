"""`store.vector_index` on the real Qdrant Edge engine: a collection at or over `exact_below_rows` gets
its HNSW graphs built in a child process before it serves, int8 copies when asked, and searches the
same as exact; a smaller one is left for exact search."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import numpy as np
import pytest
import qdrant_edge as qe

from cluster.errors import StoreError
from cluster.index.payload import CATEGORIES_FIELD
from cluster.index.query import SearchQuery
from cluster.index.store import edge as edge_module
from cluster.index.store.edge import COLLECTIONS_DIR, SHARD_DIR, EdgeStore
from cluster.index.store.edge_indexing import index_shard_apart
from cluster.index.store.protocol import threshold_kb
from cluster.ingest import TEST
from cluster.settings import StoreSettings, VectorIndexSettings
from cluster.types import FusionParams, PayloadFilter, StoredPoint

WIDTH = 32
CATEGORIES = ("function", "class", TEST)  # a row's one category, by its number
ROWS = 600
TOP_K = 10


def _unit(rows: int, seed: int) -> np.ndarray:
    raw = np.random.default_rng(seed).normal(size=(rows, WIDTH))
    normed: np.ndarray = raw / np.linalg.norm(raw, axis=1, keepdims=True)
    return normed


def _filled(store: EdgeStore, name: str, rows: int = ROWS) -> None:
    store.create_collection(name, WIDTH, ["path", CATEGORIES_FIELD])
    code, names = _unit(rows, 1), _unit(rows, 2)
    store.upsert(
        name,
        [
            StoredPoint(
                id=str(uuid.UUID(int=i + 1)),
                vector=code[i].tolist(),
                name_vector=names[i].tolist(),
                payload={
                    "path": f"src/f{i % 7}.py",
                    "text": f"def f{i}(): pass",
                    CATEGORIES_FIELD: [CATEGORIES[i % 3]],
                },
            )
            for i in range(rows)
        ],
    )


def _shard_info(data_dir: Path, name: str) -> qe.ShardInfo:
    shard = qe.EdgeShard.load(str(data_dir / COLLECTIONS_DIR / name / SHARD_DIR))
    try:
        return shard.info()
    finally:
        shard.close()


def _top_ids(store: EdgeStore, name: str, vector: list[float]) -> list[str]:
    query = SearchQuery(vector=vector, limit=TOP_K, fusion=FusionParams(candidates=TOP_K))
    ranked = sorted(store.query(name, query), key=lambda c: -c.dense)
    return [c.id for c in ranked[:TOP_K]]


@pytest.mark.parametrize("quantization", ["none", "int8"])
def test_a_large_collection_gets_its_graph_before_it_serves_and_searches_as_exact(
    tmp_path: Path, quantization: str
) -> None:
    tuning = VectorIndexSettings(exact_below_rows=ROWS // 2, quantization=quantization, hnsw_ef=64)
    store = EdgeStore(tmp_path, tuning)
    _filled(store, "big")
    queries = _unit(20, 3)
    exact = [[f"{uuid.UUID(int=int(i) + 1)}" for i in np.argsort(-(_unit(ROWS, 1) @ q))[:TOP_K]] for q in queries]

    assert store.index_vectors("big") is True
    found = [_top_ids(store, "big", q.tolist()) for q in queries]  # reopened on first use
    store.close()

    recall = np.mean([len(set(a) & set(e)) / TOP_K for a, e in zip(found, exact, strict=True)])
    assert recall >= 0.95
    info = _shard_info(tmp_path, "big")
    assert info.points_count == ROWS
    assert info.indexed_vectors_count >= 2 * ROWS  # both dense vectors have a graph


def _keyword_index_placements(data_dir: Path, name: str, field: str) -> set[bool]:
    """Whether each indexed (immutable) segment keeps `field`'s keyword index on disk, as the engine
    recorded it (segments/<id>/payload_index/config.json)."""
    segments = data_dir / COLLECTIONS_DIR / name / SHARD_DIR / "segments"
    found: set[bool] = set()
    for config in segments.glob("*/payload_index/config.json"):
        for index in json.loads(config.read_text())["indexed_types"][field]:
            if index["index_type"] == "keyword_index" and index["mutability"] == "immutable":
                found.add(bool(index["storage_type"]["mmap"]["is_on_disk"]))
    return found


@pytest.mark.parametrize("on_disk", [True, False])
def test_keyword_indexes_are_memory_mapped_or_on_the_heap_as_set(tmp_path: Path, on_disk: bool) -> None:
    """The categories index stays on the heap either way: every default search filters on it."""
    tuning = VectorIndexSettings(exact_below_rows=ROWS // 2, payload_indexes_on_disk=on_disk)
    store = EdgeStore(tmp_path, tuning)
    _filled(store, "big")
    assert store.index_vectors("big") is True
    assert store.count("big", PayloadFilter(equals={"path": "src/f3.py"})) == len(range(3, ROWS, 7))
    assert store.count("big", PayloadFilter(none_of={CATEGORIES_FIELD: [TEST]})) == ROWS - len(range(2, ROWS, 3))
    store.close()
    assert _keyword_index_placements(tmp_path, "big", "path") == {on_disk}
    assert _keyword_index_placements(tmp_path, "big", CATEGORIES_FIELD) == {False}


def test_a_small_collection_is_left_for_exact_search(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path, VectorIndexSettings(exact_below_rows=ROWS + 1))
    _filled(store, "small")
    assert store.index_vectors("small") is False
    assert store.count("small") == ROWS  # still open, untouched
    store.close()
    assert _shard_info(tmp_path, "small").indexed_vectors_count == 0


def test_a_collection_being_indexed_is_not_opened_beside_the_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = EdgeStore(tmp_path, VectorIndexSettings(exact_below_rows=1))
    _filled(store, "busy", rows=20)
    _filled(store, "other", rows=20)
    seen: dict[str, int] = {}

    def child_while_reading(shard_dir: Path) -> None:
        """The child's run, with the store read meanwhile (another thread of the index actor)."""
        with pytest.raises(StoreError, match="being indexed"):
            store.count("busy")
        seen["other"] = store.count("other")  # the others serve on
        index_shard_apart(shard_dir)

    monkeypatch.setattr(edge_module, "index_shard_apart", child_while_reading)
    assert store.index_vectors("busy") is True
    assert seen == {"other": 20}
    assert store.count("busy") == 20  # reopened once the child is done
    store.close()


def test_a_failed_child_is_a_store_error_naming_the_collection(tmp_path: Path) -> None:
    missing = tmp_path / "collections" / "gone" / "shard"
    with pytest.raises(StoreError, match="indexing 'gone' failed"):
        index_shard_apart(missing)


def test_the_setting_is_in_rows_and_the_engine_threshold_in_kilobytes() -> None:
    assert threshold_kb(20_000, 384) == 30_000  # 20k float32 vectors of 384
    assert threshold_kb(0, 384) == 1  # 0 would mean "never index" to Qdrant
    assert StoreSettings().vector_index.exact_below_rows == 20_000
    assert StoreSettings().vector_index.pool_below_rows == 20_000  # every build too small for its own graph
    with pytest.raises(ValueError, match="quantization"):
        VectorIndexSettings(quantization="binary")  # type: ignore[arg-type]
