"""A pool past `exact_below_rows` rows gets HNSW graphs built on a copy while it serves
(`cluster/index/store/edge_pool_graph.py`): what changes meanwhile is replayed onto the copy, a
store closing mid-pass keeps its pool as it was, and a pass cut by a crash is undone at the next open."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import numpy as np
import pytest
import qdrant_edge as qe

import cluster.index.store.edge_pool_graph as graph_module
from cluster.errors import CollectionNotFound
from cluster.index.query import SearchQuery
from cluster.index.store.edge import SHARD_DIR, EdgeStore
from cluster.index.store.edge_files import POOL_FILE, read_json
from cluster.index.store.edge_indexing import index_shard_apart
from cluster.index.store.edge_pool import POOLS_DIR, pool_name
from cluster.index.store.edge_pool_graph import GRAPH_COPY_DIR, PoolGraphs, recover_pool_folders
from cluster.settings import VectorIndexSettings
from cluster.types import FusionParams, SparseTerms, StoredPoint

WIDTH = 16
ROWS = 100
TOP_K = 10
TUNING = VectorIndexSettings(exact_below_rows=2 * ROWS, pool_below_rows=10 * ROWS, hnsw_ef=64)
POOL = pool_name(WIDTH)


def _vectors(seed: int, count: int) -> np.ndarray:
    raw = np.random.default_rng(seed).normal(size=(count, WIDTH))
    return raw / np.linalg.norm(raw, axis=1, keepdims=True)


def _id(seed: int, i: int) -> str:
    return str(uuid.UUID(int=seed * 1_000_000 + i + 1))


def _points(seed: int, rows: int = ROWS, marker: str = "v1") -> list[StoredPoint]:
    code, name = _vectors(seed, rows), _vectors(seed + 100, rows)
    return [
        StoredPoint(
            id=_id(seed, i),
            vector=code[i].tolist(),
            name_vector=name[i].tolist(),
            sparse=SparseTerms(indices=[i % 5], values=[1.0]),
            payload={"path": f"src/{seed}/f{i}.py", "marker": marker},
        )
        for i in range(rows)
    ]


def _fill(store: EdgeStore, name: str, seed: int, rows: int = ROWS, fields: tuple[str, ...] = ("path",)) -> None:
    store.create_collection(name, WIDTH, list(fields), rows=rows)
    store.upsert(name, _points(seed, rows))


def _top(store: EdgeStore, name: str, vector: np.ndarray) -> list[str]:
    query = SearchQuery(vector=vector.tolist(), limit=TOP_K, fusion=FusionParams(candidates=TOP_K))
    return [c.id for c in sorted(store.query(name, query, payloads=False), key=lambda c: -(c.dense or 0.0))[:TOP_K]]


def _pool_folder(root: Path) -> Path:
    return root / POOLS_DIR / POOL


def _graphs(root: Path) -> int:
    """HNSW graph files in the pool's shard (one per dense vector of each indexed segment)."""
    return len(list((_pool_folder(root) / SHARD_DIR).rglob("graph.bin")))


def _pool_points(root: Path) -> int:
    shard = qe.EdgeShard.load(str(_pool_folder(root) / SHARD_DIR))
    try:
        return int(shard.count(qe.CountRequest(exact=True)))
    finally:
        shard.close()


def test_a_pool_past_the_threshold_gets_graphs_and_searches_as_exact(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path, TUNING)
    _fill(store, "a", seed=1)
    assert store.index_vectors("a") is False  # 100 rows: no pass
    assert store.index_pools() == []
    _fill(store, "b", seed=2)
    _fill(store, "c", seed=3)

    assert store.index_pools() == [POOL]
    assert store.index_pools() == []  # nothing changed since
    queries = _vectors(50, 10)
    found = [_top(store, "b", q) for q in queries]
    store.close()

    assert _graphs(tmp_path) >= 2  # both dense vectors
    assert read_json(_pool_folder(tmp_path) / POOL_FILE)["graphed_rows"] == 3 * ROWS
    code = _vectors(2, ROWS)
    exact = [[_id(2, int(i)) for i in np.argsort(-(code @ q))[:TOP_K]] for q in queries]
    recall = np.mean([len(set(f) & set(e)) / TOP_K for f, e in zip(found, exact, strict=True)])
    assert recall >= 0.95


def test_what_changes_during_a_pass_is_replayed_onto_the_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = EdgeStore(tmp_path, TUNING)
    for name, seed in (("a", 1), ("b", 2), ("c", 3)):
        _fill(store, name, seed)
    seen: dict[str, bool] = {}

    def writes_meanwhile(shard_dir: Path, cancel: threading.Event) -> None:
        """The child's run, with the pool written to and dropped from meanwhile (other builds)."""
        seen["copy"] = shard_dir == _pool_folder(tmp_path) / GRAPH_COPY_DIR and shard_dir.is_dir()
        _fill(store, "d", seed=4, rows=50, fields=("path", "language"))  # a new build, a new keyword field
        store.drop_collection("a")
        store.upsert("b", _points(2, rows=1, marker="v2"))  # a row rewritten
        index_shard_apart(shard_dir, cancel)

    monkeypatch.setattr(graph_module, "index_shard_apart", writes_meanwhile)
    assert store.index_pools() == [POOL]

    assert seen == {"copy": True}
    assert not (_pool_folder(tmp_path) / GRAPH_COPY_DIR).exists()
    assert (store.count("b"), store.count("c"), store.count("d")) == (ROWS, ROWS, 50)
    with pytest.raises(CollectionNotFound):
        store.count("a")
    rewritten = store.payloads("b", [_id(2, 0)])
    assert rewritten[_id(2, 0)]["marker"] == "v2"
    assert _top(store, "d", _vectors(4, 1)[0])[0] == _id(4, 0)  # the rows written meanwhile are searched
    store.close()
    assert _pool_points(tmp_path) == 2 * ROWS + 50  # a's rows are gone from the copy too
    assert _graphs(tmp_path) >= 2


def test_a_store_closing_mid_pass_keeps_its_pool_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = EdgeStore(tmp_path, TUNING)
    for name, seed in (("a", 1), ("b", 2), ("c", 3)):
        _fill(store, name, seed)
    started, finished = threading.Event(), threading.Event()

    def until_cancelled(shard_dir: Path, cancel: threading.Event) -> None:
        started.set()
        cancel.wait(30)
        try:
            index_shard_apart(shard_dir, cancel)  # cancelled: raises before any child starts
        finally:
            finished.set()

    monkeypatch.setattr(graph_module, "index_shard_apart", until_cancelled)
    assert store.index_vectors("c") is False  # the pass runs in the background; the build commits now
    assert started.wait(30)
    store.close()

    assert finished.is_set()
    assert not (_pool_folder(tmp_path) / GRAPH_COPY_DIR).exists()
    assert _graphs(tmp_path) == 0 and "graphed_rows" not in read_json(_pool_folder(tmp_path) / POOL_FILE)
    reopened = EdgeStore(tmp_path, TUNING)
    assert [reopened.count(name) for name in ("a", "b", "c")] == [ROWS, ROWS, ROWS]
    reopened.close()


def test_a_pass_cut_by_a_crash_is_undone_at_the_next_open(tmp_path: Path) -> None:
    pools = tmp_path / POOLS_DIR
    torn_copy, mid_swap, swapped = pools / "pool-1", pools / "pool-2", pools / "pool-3"
    for folder, parts in (
        (torn_copy, (SHARD_DIR, GRAPH_COPY_DIR)),
        (mid_swap, ("shard.old", GRAPH_COPY_DIR)),
        (swapped, (SHARD_DIR, "shard.old")),
    ):
        for part in parts:
            (folder / part).mkdir(parents=True)
            (folder / part / "marker").write_text(part)

    recover_pool_folders(pools)

    for folder in (torn_copy, mid_swap, swapped):
        assert sorted(p.name for p in folder.iterdir()) == [SHARD_DIR]
    assert (mid_swap / SHARD_DIR / "marker").read_text() == "shard.old"  # the shard the swap had moved aside
    assert (swapped / SHARD_DIR / "marker").read_text() == SHARD_DIR
    assert (torn_copy / SHARD_DIR / "marker").read_text() == SHARD_DIR


def test_while_a_pool_is_copied_its_reads_go_on_and_its_writes_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = EdgeStore(tmp_path, TUNING)
    for name, seed in (("a", 1), ("b", 2), ("c", 3)):
        _fill(store, name, seed)
    copy_file = PoolGraphs._copy_file  # noqa: SLF001 - the copy of each file, wrapped to act meanwhile
    seen: dict[str, object] = {}

    def act_meanwhile(graphs: PoolGraphs, source: str, target: str) -> object:
        if not seen:
            read = threading.Thread(target=lambda: seen.setdefault("read", store.count("b")))
            read.start()
            read.join(10)
            writer = threading.Thread(target=lambda: store.upsert("a", _points(1, rows=1, marker="v2")))
            writer.start()
            writer.join(0.5)
            seen["write waited"] = writer.is_alive()
            seen["writer"] = writer
        return copy_file(graphs, source, target)

    monkeypatch.setattr(PoolGraphs, "_copy_file", act_meanwhile)
    assert store.index_pools() == [POOL]
    writer = seen.pop("writer")
    assert isinstance(writer, threading.Thread)
    writer.join(10)

    assert seen == {"read": ROWS, "write waited": True}
    assert store.payloads("a", [_id(1, 0)])[_id(1, 0)]["marker"] == "v2"  # written once the copy was made
    store.close()
