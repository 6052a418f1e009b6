"""bench.graph_storage on a tiny corpus: both options load it and agree on callers; the arithmetic is right."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
import real_ladybug as lb

from bench import graph_storage, graph_storage_ladybug, graph_storage_payload
from bench.graph_storage_common import (
    Corpus,
    Target,
    collect_corpus,
    disk_usage,
    graph_rows,
    mib,
    percentile,
    sample_targets,
    summary_ms,
    target_of,
)
from cluster.graph import CodeGraph
from cluster.index.store.engines import open_vector_store
from cluster.index.store.protocol import VectorStore

A_PY = """\
def helper(x):
    return x + 1


class Thing:
    def __init__(self):
        self.v = helper(1)

    def run(self):
        return helper(self.v)
"""
B_PY = """\
from pkg.a import Thing, helper


def use():
    t = Thing()
    return helper(2) + t.run()


helper(3)
"""
C_PY = """\
from pkg import b


def top():
    return b.use()


def helper(y):
    return y
"""
HELPER_CALLERS = {
    ("pkg/a.py", 7, "Thing.__init__"),
    ("pkg/a.py", 10, "Thing.run"),
    ("pkg/b.py", 6, "use"),
    ("pkg/b.py", 9, None),  # module level
}


def write_package(site: Path) -> None:
    package = site / "pkg"
    package.mkdir(parents=True)
    for name, text in {"__init__.py": "", "a.py": A_PY, "b.py": B_PY, "c.py": C_PY}.items():
        (package / name).write_text(text)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    root = tmp_path_factory.mktemp("corpus")
    write_package(root)
    return collect_corpus(root, {"pkg": "0"})


@pytest.fixture(scope="module")  # the read-only tests below share one graph, store and database
def graph(corpus: Corpus) -> CodeGraph:
    return CodeGraph("corpus", None, graph_rows(corpus.chunks))


def the(graph: CodeGraph, qualified: str, path: str) -> Target:
    [definition] = [d for d in graph.index.defs if d.qualified == qualified and d.path == path]
    target = target_of(graph, definition)
    assert target is not None
    return target


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, corpus: Corpus) -> Iterator[VectorStore]:
    opened = open_vector_store("embedded", data_dir=tmp_path_factory.mktemp("qdrant"), url=None)
    rows = graph_storage_payload.Rows.of(corpus.chunks)
    graph_storage_payload.write(opened, graph_storage_payload.WITH_GRAPH, rows, graph=True)
    graph_storage_payload.write(opened, graph_storage_payload.WITHOUT_GRAPH, rows, graph=False)
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory, graph: CodeGraph) -> Iterator[lb.Connection]:
    edges, unplaced = graph_storage_ladybug.resolve_edges(graph)
    assert unplaced == 0
    work = tmp_path_factory.mktemp("ladybug")
    csvs = graph_storage_ladybug.write_csvs(graph, edges, work / "csv")
    db, conn = graph_storage_ladybug.load(work / "graph.lbdb", csvs)
    yield conn
    conn.close()
    db.close()


def test_the_corpus_has_the_facts_of_its_files(corpus: Corpus) -> None:
    facts = corpus.facts()
    assert facts["files"] == 3  # an empty __init__.py has no chunk
    assert facts["definitions"] == 7  # helper, Thing, __init__, run, use, top, c.helper
    assert facts["calls"] == 7  # helper x4, Thing(), t.run(), b.use()
    assert corpus.collect_s > 0 and corpus.facts_s > 0


def test_both_options_give_the_same_callers_of_a_known_function(
    store: VectorStore, database: lb.Connection, graph: CodeGraph
) -> None:
    in_memory = graph_storage_payload.build_graph(store, graph_storage_payload.WITH_GRAPH)
    target = the(graph, "helper", "pkg/a.py")

    via_payloads = graph_storage_payload.call_sites(in_memory.callers(target.qualified, target.path, 1, 100))
    via_database = graph_storage_ladybug.callers(database, target)

    assert via_payloads == HELPER_CALLERS
    assert via_database == HELPER_CALLERS


def test_a_call_of_a_class_reaches_its_constructor_in_both(
    store: VectorStore, database: lb.Connection, graph: CodeGraph
) -> None:
    in_memory = graph_storage_payload.build_graph(store, graph_storage_payload.WITH_GRAPH)
    target = the(graph, "Thing.__init__", "pkg/a.py")
    assert len(target.reached) == 2  # the constructor and its class

    via_payloads = graph_storage_payload.call_sites(in_memory.callers(target.qualified, target.path, 1, 100))
    assert via_payloads == {("pkg/b.py", 5, "use")}
    assert graph_storage_ladybug.callers(database, target) == via_payloads


def test_depth_three_reaches_the_callers_of_callers(database: lb.Connection, graph: CodeGraph) -> None:
    target = the(graph, "helper", "pkg/a.py")
    found = graph_storage_ladybug.callers_depth3(database, target)
    assert found is not None  # not stopped by the timeout
    reached = {graph.index.defs[i].qualified if i < len(graph.index.defs) else "<module>" for i in found}
    assert reached == {"Thing.__init__", "Thing.run", "use", "top", "<module>"}
    in_memory = graph.callers(target.qualified, target.path, 3, 100)
    assert {item.symbol for item in in_memory.items} == {"Thing.__init__", "Thing.run", "use", "top", None}


def test_who_references_a_name_is_the_same_files_in_both(store: VectorStore, database: lb.Connection) -> None:
    rows = graph_storage_payload.who_references(store, graph_storage_payload.WITH_GRAPH, "helper")
    sites = graph_storage_ladybug.who_references(database, "helper")
    assert {path for path, _ in rows} == {"pkg/a.py", "pkg/b.py"}  # c.py defines a helper but never uses one
    assert {row[0] for row in sites} == {"pkg/a.py", "pkg/b.py"}
    assert graph_storage_payload.who_references(store, graph_storage_payload.WITHOUT_GRAPH, "helper") == []


def test_the_rows_without_the_graph_keep_everything_else(corpus: Corpus) -> None:
    rows = graph_storage_payload.Rows.of(corpus.chunks)
    [with_graph] = rows.batch([0])
    [bare] = rows.batch([0], graph=False)
    assert with_graph.vector == bare.vector and with_graph.id == bare.id
    assert all(bare.payload[field] == [] for field in graph_storage_payload.GRAPH_FIELDS)
    assert {k: v for k, v in bare.payload.items() if k not in graph_storage_payload.GRAPH_FIELDS} == {
        **{k: v for k, v in with_graph.payload.items() if k not in graph_storage_payload.GRAPH_FIELDS},
        "build": graph_storage_payload.WITHOUT_GRAPH,
    }


def test_targets_are_seeded_and_name_one_place_each(graph: CodeGraph) -> None:
    edges, _ = graph_storage_ladybug.resolve_edges(graph)
    called = {e.target for e in edges}
    first = sample_targets(graph, called, 3, seed=1)
    assert first == sample_targets(graph, called, 3, seed=1)
    assert len(first) == 3
    assert all(set(t.ids) <= called or set(t.reached) & called for t in first)
    assert "helper" not in {t.qualified for t in sample_targets(graph, called, 10, seed=1) if t.path == "pkg/c.py"}


def test_percentiles_interpolate_between_ranks() -> None:
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 90) == pytest.approx(4.6)
    assert percentile([7.0], 90) == 7.0
    assert math.isnan(percentile([], 50))
    assert summary_ms([0.001, 0.002, 0.003]) == {"p50_ms": 2.0, "p90_ms": 2.8, "max_ms": 3.0, "n": 3}


def test_disk_usage_counts_allocated_blocks_and_apparent_bytes(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a").write_bytes(b"x" * 10)
    (tmp_path / "sub" / "b").write_bytes(b"y" * 5000)
    with (tmp_path / "sparse").open("wb") as sparse:
        sparse.truncate(8 * 2**20)
    usage = disk_usage(tmp_path)
    assert usage["apparent_bytes"] == 10 + 5000 + 8 * 2**20
    assert usage["disk_bytes"] % 512 == 0
    assert 5010 <= usage["disk_bytes"] < 2**20  # the sparse file's hole takes no blocks
    assert disk_usage(tmp_path / "a")["apparent_bytes"] == 10
    assert mib(1.5 * 2**20) == 1.5


def test_the_whole_bench_runs_and_both_options_agree(tmp_path: Path) -> None:
    site = tmp_path / "site"
    write_package(site)
    out = tmp_path / "result.json"
    argv = [
        "--site",
        str(site),
        "--packages",
        "pkg",
        "--targets",
        "3",
        "--work",
        str(tmp_path / "w"),
        "--out",
        str(out),
    ]

    assert graph_storage.main(argv) == 0

    result = json.loads(out.read_text())
    assert result["corpus"]["definitions"] == 7
    assert result["targets"] == 3 and result["same_depth1_call_sites"] == 3
    a, b = result["payload_fields"], result["ladybug"]
    sizes = a["size"]
    assert a["graph_disk_bytes"] == sizes["with-graph"]["disk_bytes"] - sizes["without-graph"]["disk_bytes"]
    assert b["load_total_s"] == pytest.approx(
        b["index_facts_s"] + b["resolve_s"] + b["write_csv_s"] + b["copy_s"], abs=0.02
    )
    rewrite = b["rewrite_one_file"]
    assert rewrite["call_edges_after"] == rewrite["call_edges_before"]
    assert rewrite["uses_edges_after"] == rewrite["uses_edges_before"]
    assert a["callers_depth1"]["n"] == b["callers_depth1"]["n"] == 3
    assert "| callers depth 1 p50 / p90 (ms) |" in graph_storage.table(result)
