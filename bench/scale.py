"""A million chunks and a hundred indexes: the store at scale, against the engine alone, same run.

    python -m bench.scale [--sizes 100000,300000,1000000] [--indexes 1,100] [--quantization none,int8]
                          [--pool-below-rows 0,20000] [--keep]
    python -m bench.scale --reuse <a folder --keep left> [--reuse ...]

No model writes the rows: synthetic ones (`bench/scale_rows.py`: clustered unit vectors of the packaged
model's width, payloads and keyword terms of this repository's real chunks) go in through the project's
own catalog and store, as a reindex writes them (begin, batches, the vector index, commit). For each
case (rows x indexes x quantisation x `store.vector_index.pool_below_rows`: 0 gives every index its own
collection, the default pools the small ones), on a fresh data folder:

1. write: rows/s, the vector index's build time, the store's size on disk;
2. the engine alone (the 100-line alternative): the Qdrant Edge shards holding the indexes opened
   directly (an index's own, or the pool the small ones share), one nearest-neighbour query per shard
   with the store's own search parameters (in a pool, filtered to its indexes), merged, top 10; the
   same with `exact=True`, the truth recall@10 is scored against;
3. the index actor on a local Ray: the search a `search_code` sends it (every leg: code, name, keyword,
   definitions; the default scope, every index), p50/p99, and the RSS of its process against the
   vectors' raw float32 size (both dense vectors of every row);
4. MCP `search_code` over streamable HTTP on Serve (the SDK client; the query encoded by the packaged
   model in `embedding.precision`), p50/p99.

The rows are labelled with the encoder space of `embedding.precision` (fp32 unless
`SAMESPACE_EMBEDDING__PRECISION=bf16` says otherwise: a bf16 deployment, whose query encodes are
faster on a CPU with native bf16); a kept case is measured in the precision it was written in.

Before 2-4 the store's files are read once (the page cache holds them, as a store serving for a while
has them), and the index actor answers 20 untimed queries of its own.

Steps 2-4 run in a process of their own (`--reuse` of the case just written): the process that wrote
a store measured it 25-30% slower, for a cause not found (`measure_apart`). `--keep` leaves each
case's folder (its store, and `case.json`: how it was written); `--reuse` measures such a folder again
with the code as it is now (steps 2-4), without the hour and a half a million rows take to write and
index on two cores.

Results: printed, and written to bench/results/scale.json (`cases`, and `one_index` / `many_indexes`:
the largest case of each layout).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.run import QUERIES, ROOT, _mcp_latency, latency_summary, serve_as_run
from bench.scale_rows import VectorDraw, Written, row_templates, write_index
from cluster.environment import set_local_env_defaults
from cluster.index import EdgeStore

set_local_env_defaults()

RESULTS = ROOT / "bench" / "results"
NAMESPACE = "bench-scale"
TOP_K = 10
FLOAT32 = 4
WARM_QUERIES = 20  # untimed searches through the index actor first (others than the timed ones)
CASE_FILE = "case.json"  # what a kept case's folder says of how it was written (`--keep`, `--reuse`)


def _settings(data_dir: Path, quantization: str, pool_below_rows: int) -> Any:
    from cluster.settings import SamespaceSettings

    tuning = {"quantization": quantization, "write_ahead_log": False, "pool_below_rows": pool_below_rows}
    return SamespaceSettings(
        store={"data_dir": data_dir, "vector_index": tuning},
        ray={"address": "local", "namespace": NAMESPACE},
    )


def _pooled_rows_at_last_pass(data_dir: Path) -> int:
    """The rows the pools held at their last graph pass (`pool.json`: `graphed_rows`); rows written since
    are searched by a plain scan until the next pass (`cluster/index/store/edge_pool_graph.py`)."""
    return sum(
        int(json.loads(marker.read_text()).get("graphed_rows", 0)) for marker in data_dir.glob("pools/*/pool.json")
    )


def _disk_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def _read_through(folder: Path) -> int:
    """Every file under `folder` read once, so its pages are in the page cache, as a store serving for a
    while has them (the payloads the top hits are read from are spread over the whole file); the bytes."""
    total = 0
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            with path.open("rb") as file:
                while block := file.read(1 << 23):
                    total += len(block)
    return total


def _engine_direct(data_dir: Path, builds: list[str], queries: np.ndarray, tuning: Any) -> dict[str, Any]:
    """The engine alone: each shard holding the builds (a build's own, or a pool of small ones) opened
    directly, one nearest-neighbour query per shard (the store's search parameters; in a pool, filtered
    to the builds) merged to the top 10, beside the same with `exact`: the truth recall@10 is scored on."""
    import qdrant_edge as qe

    from cluster.index import edge_search_params, edge_shards

    placed = edge_shards(data_dir, builds)
    shards = [(qe.EdgeShard.load(str(folder)), where) for folder, where in placed]
    params = edge_search_params(tuning)
    try:

        def top(vector: list[float], exact: bool) -> list[Any]:
            found = [
                point
                for shard, where in shards
                for point in shard.query(
                    qe.QueryRequest(
                        limit=TOP_K,
                        query=qe.Query.Nearest(vector),
                        filter=where,
                        with_payload=False,
                        params=qe.SearchParams(exact=True) if exact else params,
                    )
                )
            ]
            return sorted(found, key=lambda point: -point.score)[:TOP_K]

        timed: dict[str, list[float]] = {"ann": [], "exact": []}
        answers: dict[str, list[set[str]]] = {"ann": [], "exact": []}
        for vector in queries.tolist():
            for kind, exact in (("ann", False), ("exact", True)):
                started = time.perf_counter()
                answers[kind].append({str(point.id) for point in top(vector, exact)})
                timed[kind].append(time.perf_counter() - started)
    finally:
        for shard, _ in shards:
            shard.close()
    recall = float(np.mean([len(a & e) / TOP_K for a, e in zip(answers["ann"], answers["exact"], strict=True)]))
    return {
        "ann": latency_summary(timed["ann"]),
        "exact": latency_summary(timed["exact"]),
        "recall_at_10": recall,
        "shards": len(shards),
        "pooled_indexes": len(builds) - sum(where is None for _, where in placed),
    }


def _index_actor_pid() -> int | None:
    """The index actor's process (Ray names its workers `ray::<Class>`)."""
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if (proc / "cmdline").read_bytes().startswith(b"ray::IndexActor"):
                    return int(proc.name)
            except OSError:
                continue
    return None


def _through_ray(
    settings: Any, identity: Any, queries: np.ndarray, warm: np.ndarray, mcp_queries: int
) -> dict[str, Any]:
    """The index actor's search (what search_code sends it: hybrid, its default controls, test code left
    out) and MCP search_code; the actor's RSS. The `warm` queries (others than the timed ones) go
    first, untimed: a serving store is warm."""
    import ray

    from bench.process_memory import read_process

    env = {
        "SAMESPACE_STORE__DATA_DIR": str(settings.store.data_dir),
        "SAMESPACE_STORE__VECTOR_INDEX__QUANTIZATION": settings.store.vector_index.quantization,
        "SAMESPACE_STORE__VECTOR_INDEX__WRITE_AHEAD_LOG": "false",
    }
    mcp_port = serve_as_run()
    ray.init(
        address="local",
        num_cpus=os.cpu_count() or 2,
        namespace=NAMESPACE,
        log_to_driver=False,
        include_dashboard=False,
        runtime_env={"env_vars": env},
    )
    try:
        from actors import ensure_embedders, get_index_actor
        from cluster.index.query import SearchQuery
        from cluster.ingest import SearchControls
        from cluster.search import DEFAULT_SEARCH_TESTS

        index = get_index_actor(settings)
        ray.get(index.names.remote())

        def searches(vectors: np.ndarray) -> list[SearchQuery]:
            return [
                SearchQuery.of_text(
                    QUERIES[i % len(QUERIES)],
                    "hybrid",
                    vector=vector,
                    identity=identity,
                    scope=None,
                    filter=None,
                    limit=TOP_K,
                    fusion=settings.search,
                ).model_copy(update={"controls": SearchControls(tests=DEFAULT_SEARCH_TESTS)})
                for i, vector in enumerate(vectors)
            ]

        for search in searches(warm):  # the shards open on first use; their pages come in
            ray.get(index.search.remote(search))
        timed = []
        for search in searches(queries):
            started = time.perf_counter()
            answer = ray.get(index.search.remote(search))
            timed.append(time.perf_counter() - started)
            if len(answer.hits) != TOP_K:
                raise RuntimeError(f"the index actor answered {len(answer.hits)} hits, not {TOP_K}")
        ray.get([embedder.identity.remote() for embedder in ensure_embedders(settings)])
        mcp = asyncio.run(_mcp_latency(settings, mcp_queries, mcp_port))
        pid = _index_actor_pid()
        memory = read_process(pid) if pid is not None else None
    finally:
        from ray import serve

        serve.shutdown()
        ray.shutdown()
    return {
        "store": latency_summary(timed),
        "mcp": latency_summary(mcp),
        "rss_bytes": memory.memory.rss if memory is not None else None,
    }


def run_case(
    rows: int, indexes: int, quantization: str, pool_below_rows: int, args: argparse.Namespace, shared: dict[str, Any]
) -> dict[str, Any]:
    """One case on a fresh data folder: write, then measure in a process of its own (`measure_apart`).
    With `--keep` the folder stays, with the write's figures in its `case.json`, for `--reuse`."""
    from cluster.index.catalog import IndexCatalog
    from cluster.index.store.engines import open_vector_store

    identity, templates = shared["identity"], shared["templates"]
    work = Path(tempfile.mkdtemp(prefix="samespace-scale-"))
    data_dir = work / "data"
    settings = _settings(data_dir, quantization, pool_below_rows)
    label = f"{rows} rows in {indexes} index{'es' if indexes > 1 else ''}, quantization {quantization}"
    label += f", pool below {pool_below_rows} rows"
    print(f"--- {label}", flush=True)
    try:
        store = open_vector_store("embedded", data_dir=data_dir, url=None, vector_index=settings.store.vector_index)
        catalog, draw = IndexCatalog(store), VectorDraw(identity.width, seed=args.seed)
        per_index = [rows // indexes + (1 if k < rows % indexes else 0) for k in range(indexes)]
        written: list[Written] = [
            write_index(catalog, f"scale{k:03d}", identity, templates, draw, count, progress=print)
            for k, count in enumerate(per_index)
        ]
        started = time.perf_counter()
        if isinstance(store, EdgeStore):
            store.index_pools()  # waits for the graph pass a pool's builds started, runs one more if due
        pools_s = time.perf_counter() - started
        store.close()
        write_s = sum(w.write_s for w in written)
        index_s = sum(w.index_s for w in written) + pools_s
        print(f"written: {rows / write_s:.0f} rows/s; vector indexes built in {index_s:.1f}s", flush=True)
        case = {
            "rows": rows,
            "indexes": indexes,
            "quantized": quantization != "none",
            "quantization": quantization,
            "write_ahead_log": False,
            "payload_on_disk": settings.store.vector_index.payload_on_disk,
            "pool_below_rows": pool_below_rows,
            "write_rows_per_s": round(rows / write_s, 1),
            "vector_index_build_s": round(index_s, 1),
            "indexes_with_graph": sum(w.indexed for w in written),
            "pooled_rows_at_last_pass": _pooled_rows_at_last_pass(data_dir),
            "disk_bytes": _disk_bytes(data_dir),
            "precision": identity.precision,
            "seed": args.seed,
        }
        (work / CASE_FILE).write_text(json.dumps(case, indent=2))
        if args.keep:
            print(f"kept: {work}", flush=True)
        return measure_apart(work, args)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def reuse_case(work: Path, args: argparse.Namespace, shared: dict[str, Any]) -> dict[str, Any]:
    """Measure again a case a `--keep` run left in `work` (its rows as written then, the code as it is
    now): a million rows take an hour and a half to write and index on two cores, a measurement minutes."""
    written = work / CASE_FILE
    if not written.is_file():
        raise SystemExit(f"{work} holds no {CASE_FILE}: not a folder `python -m bench.scale --keep` left")
    case = json.loads(written.read_text())
    precision = case.get("precision", "fp32")  # cases kept before the field was written were fp32
    if precision != shared["identity"].precision:
        setting = f"SAMESPACE_EMBEDDING__PRECISION={precision}"
        raise SystemExit(f"{work} was written in {precision}: measure it with {setting}")
    print(f"--- reusing {work}: {case['rows']} rows in {case['indexes']} indexes, written then", flush=True)
    return {**measure_case({**case, "precision": precision}, work / "data", args, shared), "reused": str(work)}


def measure_apart(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """`--reuse` of a case just written, in a process of its own: a store is measured as a serving
    cluster meets it, opened by processes that did not write it. Measured in the writing process, the
    same store read 25-30% slower (store leg and MCP, 100k rows in 100 indexes, twice), though its
    files were read into the page cache first and nothing was left to flush; the cause was not found."""
    out = work / "measured.json"
    command = [sys.executable, "-m", "bench.scale", "--reuse", str(work), "--out", str(out)]
    command += ["--queries", str(args.queries), "--mcp-queries", str(args.mcp_queries), "--seed", str(args.seed)]
    subprocess.run(command, check=True, cwd=ROOT)
    measured: dict[str, Any] = json.loads(out.read_text())["cases"][0]
    measured.pop("reused", None)
    return measured


def serving_builds(data_dir: Path, tuning: Any) -> list[str]:
    """The serving build of every index a closed store holds."""
    from cluster.index.catalog import IndexCatalog
    from cluster.index.store.engines import open_vector_store

    store = open_vector_store("embedded", data_dir=data_dir, url=None, vector_index=tuning)
    try:
        catalog = IndexCatalog(store)
        return [catalog.record(name).build for name in catalog.names()]
    finally:
        store.close()


def measure_case(
    case: dict[str, Any], data_dir: Path, args: argparse.Namespace, shared: dict[str, Any]
) -> dict[str, Any]:
    """The engine alone, the index actor and MCP over the indexes of a written case's store."""
    identity = shared["identity"]
    settings = _settings(data_dir, case["quantization"], case["pool_below_rows"])
    builds = serving_builds(data_dir, settings.store.vector_index)
    if len(builds) != case["indexes"]:
        raise RuntimeError(f"the store serves {len(builds)} indexes, the case wrote {case['indexes']}")
    queries = VectorDraw(identity.width, seed=case.get("seed", args.seed), stream=2).draw(args.queries)
    warm = VectorDraw(identity.width, seed=case.get("seed", args.seed), stream=3).draw(WARM_QUERIES)
    started = time.perf_counter()
    cached = _read_through(data_dir)
    print(f"page cache: {cached / 1e9:.2f} GB read in {time.perf_counter() - started:.1f}s", flush=True)
    engine = _engine_direct(data_dir, builds, queries, settings.store.vector_index)
    print(f"engine alone: {engine}", flush=True)
    ray_side = _through_ray(settings, identity, queries, warm, args.mcp_queries)
    print(f"through Ray: {ray_side}", flush=True)
    raw = case["rows"] * 2 * identity.width * FLOAT32
    rss = ray_side["rss_bytes"]
    return {
        **{key: value for key, value in case.items() if key != "seed"},
        "pooled_indexes": engine["pooled_indexes"],
        "engine_shards": engine["shards"],
        "raw_vectors_bytes": raw,
        "rss_bytes": rss,
        "rss_ratio": round(rss / raw, 3) if rss is not None else None,
        "recall_at_10": round(engine["recall_at_10"], 4),
        "engine_p50_ms": engine["ann"]["p50_ms"],
        "engine_p99_ms": engine["ann"]["p99_ms"],
        "engine_exact_p50_ms": engine["exact"]["p50_ms"],
        "store_p50_ms": ray_side["store"]["p50_ms"],
        "store_p99_ms": ray_side["store"]["p99_ms"],
        "store_over_engine_p50": round(ray_side["store"]["p50_ms"] / engine["ann"]["p50_ms"], 2),
        "mcp_p50_ms": ray_side["mcp"]["p50_ms"],
        "mcp_p99_ms": ray_side["mcp"]["p99_ms"],
    }


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def main(argv: list[str] | None = None) -> int:
    from cluster.settings import SamespaceSettings, VectorIndexSettings

    parser = argparse.ArgumentParser(prog="python -m bench.scale")
    parser.add_argument("--sizes", type=_ints, default=[100_000, 300_000, 1_000_000], help="rows per case")
    parser.add_argument("--indexes", type=_ints, default=[1, 100], help="indexes the rows are spread over")
    parser.add_argument("--quantization", default="none,int8", help="store.vector_index.quantization values")
    parser.add_argument("--queries", type=int, default=200, help="store and engine queries per case")
    parser.add_argument("--mcp-queries", type=int, default=150, help="MCP search_code calls per case")
    parser.add_argument(
        "--pool-below-rows",
        type=_ints,
        default=[VectorIndexSettings().pool_below_rows],
        help="store.vector_index.pool_below_rows values (0: every index in its own collection)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep each case's folder (its data and case.json)")
    parser.add_argument(
        "--reuse", type=Path, action="append", default=[], help="measure a kept case's folder again (repeatable)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "scale.json")
    args = parser.parse_args(argv)

    from cluster.build import collect_chunks
    from cluster.local.encoder import LocalEncoder

    settings = SamespaceSettings()
    identity = LocalEncoder(settings.embedding).identity
    shared: dict[str, Any] = {"identity": identity}
    cases = []
    for work in args.reuse:  # measure kept cases again; nothing is written
        cases.append(reuse_case(work, args, shared))
        _write(args.out, cases)
    if not args.reuse:
        chunks, _, _ = collect_chunks(ROOT, settings)
        shared["templates"] = row_templates(chunks, identity)
        print(f"payload templates: {len(chunks)} chunks of {ROOT}; width {identity.width}", flush=True)
        layouts = itertools.product(args.sizes, args.indexes, args.quantization.split(","), args.pool_below_rows)
        for rows, indexes, quantization, pool_below_rows in layouts:
            cases.append(run_case(rows, indexes, quantization, pool_below_rows, args, shared))
            _write(args.out, cases)
    print(json.dumps(_summary(cases), indent=2))
    return 0


def _summary(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Every case, and the largest of each layout (quantised, then pooled, first when both ran) under its own key."""

    def largest(many: bool) -> dict[str, Any] | None:
        layout = [case for case in cases if (case["indexes"] > 1) == many]
        return max(layout, key=lambda case: (case["rows"], case["quantized"], case["pool_below_rows"]), default=None)

    return {
        "one_index": largest(False),
        "many_indexes": largest(True),
        "cases": cases,
        "machine": {"cpus": os.cpu_count()},
    }


def _write(out: Path, cases: list[dict[str, Any]]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(_summary(cases), indent=2))


if __name__ == "__main__":
    sys.exit(main())
