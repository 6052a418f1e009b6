"""bench.scale's parts without Ray: synthetic rows written as a reindex writes them, and the engine-alone
leg's recall against exact search."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

from bench.run import QUERIES, query_text, serve_as_run
from bench.scale import CASE_FILE, _engine_direct, _pooled_rows_at_last_pass, reuse_case, serving_builds
from bench.scale_rows import VectorDraw, row_templates, write_index
from cluster.index.catalog import IndexCatalog
from cluster.index.payload import RowPayload
from cluster.index.store.edge import EdgeStore
from cluster.index.store.engines import open_vector_store
from cluster.settings import VectorIndexSettings
from cluster.space import EncoderIdentity
from cluster.types import Chunk, PayloadFilter

WIDTH = 24
IDENTITY = EncoderIdentity(model="bench/scale", weights_sha256="0" * 64, width=WIDTH, max_seq_length=256)
CHUNKS = [
    Chunk(path=f"pkg/m{i}.py", start_line=1, end_line=3, language="python", symbol=f"f{i}", kind="function",
          text=f"def f{i}(value):\n    return value * {i}\n")
    for i in range(5)
]  # fmt: skip


def test_draws_are_unit_vectors_around_shared_centres_and_streams_differ() -> None:
    rows, queries = VectorDraw(WIDTH, seed=1).draw(50), VectorDraw(WIDTH, seed=1, stream=2).draw(50)
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    assert not np.allclose(rows, queries)
    assert np.allclose(VectorDraw(WIDTH, seed=1).draw(50), rows)  # one seed, one draw


@pytest.mark.parametrize(("threshold", "indexed"), [(40, True), (1_000, False)])
def test_rows_go_in_as_a_reindex_writes_them_and_the_engine_alone_finds_the_exact_top(
    tmp_path: Path, threshold: int, indexed: bool
) -> None:
    tuning = VectorIndexSettings(exact_below_rows=threshold, pool_below_rows=0)  # each index its own collection
    store = open_vector_store("embedded", data_dir=tmp_path, url=None, vector_index=tuning)
    catalog = IndexCatalog(store)
    written = write_index(catalog, "scale000", IDENTITY, row_templates(CHUNKS, IDENTITY), VectorDraw(WIDTH), 120)
    assert (written.rows, written.indexed) == (120, indexed)
    record = catalog.record("scale000")
    assert record.chunks == 120 and record.build == written.build
    rows = [RowPayload.model_validate(hit.payload) for hit in catalog.scroll("scale000", PayloadFilter(), 500)]
    assert len({row.path for row in rows}) == 120 and {row.build for row in rows} == {written.build}
    assert {row.symbol for row in rows} == {f"f{i}" for i in range(5)}  # payloads of the real chunks
    store.close()

    engine = _engine_direct(tmp_path, [written.build], VectorDraw(WIDTH, stream=2).draw(20), tuning)
    assert engine["recall_at_10"] >= 0.9 and engine["ann"]["n"] == engine["exact"]["n"] == 20


def test_small_indexes_go_into_one_pool_and_the_engine_alone_searches_it_in_one_query(tmp_path: Path) -> None:
    tuning = VectorIndexSettings()  # pool_below_rows well above these indexes
    store = open_vector_store("embedded", data_dir=tmp_path, url=None, vector_index=tuning)
    catalog, draw = IndexCatalog(store), VectorDraw(WIDTH)
    templates = row_templates(CHUNKS, IDENTITY)
    written = [write_index(catalog, f"scale{k:03d}", IDENTITY, templates, draw, 40) for k in range(3)]
    assert [catalog.record(w.name).chunks for w in written] == [40, 40, 40]
    store.close()

    engine = _engine_direct(tmp_path, [w.build for w in written], VectorDraw(WIDTH, stream=2).draw(20), tuning)

    assert (engine["shards"], engine["pooled_indexes"]) == (1, 3)
    assert sorted(serving_builds(tmp_path, tuning)) == sorted(w.build for w in written)  # what --reuse measures
    assert engine["recall_at_10"] == 1.0  # a pool is searched exactly


def test_reuse_refuses_a_folder_no_kept_case_left(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    with pytest.raises(SystemExit, match=CASE_FILE):
        reuse_case(tmp_path, argparse.Namespace(seed=0, queries=1, mcp_queries=1), {})


@pytest.mark.parametrize(("written", "serving"), [("bf16", "fp32"), (None, "bf16")])
def test_reuse_refuses_a_case_written_in_another_precision(tmp_path: Path, written: str | None, serving: str) -> None:
    """Its rows are labelled with the space they were written in: queries of another precision would be
    refused by every index, so the bench names the setting instead (a case kept before the field: fp32)."""
    case = {"rows": 1, "indexes": 1} | ({"precision": written} if written else {})
    (tmp_path / CASE_FILE).write_text(json.dumps(case))
    shared = {"identity": IDENTITY.model_copy(update={"precision": serving})}
    with pytest.raises(SystemExit, match=f"SAMESPACE_EMBEDDING__PRECISION={written or 'fp32'}"):
        reuse_case(tmp_path, argparse.Namespace(seed=0, queries=1, mcp_queries=1), shared)


def test_mcp_is_measured_as_samespace_run_serves_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Ray the bench starts next serves MCP from the replica on the returned port (direct ingress,
    as `samespace run`), with no task events; the environment is the bench process's own."""
    environment = {"PATH": "/usr/bin"}
    monkeypatch.setattr("os.environ", environment)
    port = serve_as_run()
    assert environment["RAY_SERVE_ENABLE_DIRECT_INGRESS"] == "1"
    assert environment["RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT"] == str(port)
    assert environment["RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT"] == str(port + 1)
    assert environment["RAY_task_events_report_interval_ms"] == "0"
    assert environment["PATH"] == "/usr/bin"


def test_latency_runs_ask_each_query_text_once() -> None:
    texts = [query_text(i) for i in range(200)]
    assert len(set(texts)) == 200  # a repeated text would time the replica's vector cache, not an encode
    assert all(text.startswith(QUERIES[i % len(QUERIES)]) for i, text in enumerate(texts))


def test_a_pool_past_the_threshold_is_graph_indexed_before_it_is_measured(tmp_path: Path) -> None:
    tuning = VectorIndexSettings(exact_below_rows=60)  # the second index takes the pool past it
    store = EdgeStore(tmp_path, tuning)
    catalog, draw = IndexCatalog(store), VectorDraw(WIDTH)
    templates = row_templates(CHUNKS, IDENTITY)
    written = [write_index(catalog, f"scale{k:03d}", IDENTITY, templates, draw, 40) for k in range(3)]
    store.index_pools()  # the pass the second index started, waited for
    store.close()

    assert _pooled_rows_at_last_pass(tmp_path) in (80, 120)  # the third index's rows: replayed, or next pass
    engine = _engine_direct(tmp_path, [w.build for w in written], VectorDraw(WIDTH, stream=2).draw(20), tuning)
    assert engine["recall_at_10"] >= 0.9
