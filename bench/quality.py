"""Retrieval quality of search_code on a dev and a held-out test package set, against two scripts.

    python -m bench.quality [--sets dev test] [--queries N] [--seed 0] [--work DIR]
        [--rows default hybrid ...] [--tests include exclude] [--test-suites DIR]

Every run evaluates both sets, dev first: DEV_PACKAGES (httpx, click, jinja2, markdown_it) are the
tuning set; TEST_PACKAGES (requests, rich, packaging) are held out, and no tuning decision may look
at their numbers (bench/quality_corpus.py commits both lists). `--sets dev` runs the tuning set
alone; `--queries N` keeps a seeded sample of N queries per set for quick runs (default: all
eligible queries, about 600 per set). `--rows` runs only the rows named; `--tests include exclude`
runs each row once per value of search_code's `tests` argument; `--test-suites DIR` indexes each
package's own test suite (DIR/<package>/, e.g. the tests/ of its sdist) beside its sources, as
distractors that make no query (the truth is the same with or without them).

1. Corpus (bench/quality_corpus.py), one per set: the sources of its installed packages, copied
   with their function/method/class docstrings removed; each query is a removed docstring's first
   paragraph, its target the def it documented (path + line range in the copy).
2. Same-run baselines (bench/baselines.py), in this process, on the same copy and queries: every
   function and method as one unit, (a) embedded with the packaged MiniLM (raw text, no header),
   brute-force cosine, and (b) plain BM25 (bm25s). Their latency is the script's own: query encode
   (or tokenize) + scoring + top 10, no network.
3. One local Ray indexes each copy as its own repo ("quality-dev", "quality-test";
   actors.build_ports.run_reindex); the MCP app is deployed on Serve (one replica), and every query goes
   through the SDK client (one session) as `search_code(query, k=10, repo=<the set's repo>, ...)`:
   the path a user hits.
4. Rows: keyword (BM25) | dense | hybrid | default (no `mode` argument, rerank=False: what an agent
   gets unless it asks) | hybrid + rerank. The reranker is the OpenRouter fake (tests/support/fakes), whose
   /rerank scores by MiniLM cosine: NOT a cross-encoder; that row measures the plumbing, not a real
   reranker's quality. Rows without rerank pass rerank=False and run, for both sets, before the
   reranker gets its key; every answer's `reranked_by` is checked, and so is the `mode` it says ran.
   What search_code offers is read from its input schema (an argument the server does not declare is
   silently ignored by the MCP SDK, so "the call did not fail" proves nothing): a mode it does not
   offer is reported unavailable, never run under a false label.
5. Every call encodes its query (query-vector cache TTL ~0), so the modes' latencies are comparable.

A hit counts when its path is the target's and its lines overlap the target def's lines (the same
rule for the baselines). Results, per set: a markdown table (recall@1/5/10, MRR@10, p50 ms), then
every row's delta against "function dense (script)" in points and its p50 against the hybrid row;
all of it in bench/results/quality.json.

The rows and what search_code declares are in `bench.quality_rows`, the tables and deltas in
`bench.quality_report`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cluster.environment import set_local_env_defaults

set_local_env_defaults()

from bench.baselines import FUNCTION_DENSE, TextEncoder, run_baselines  # noqa: E402
from bench.quality_corpus import (  # noqa: E402
    DEFAULT_SEED,
    PACKAGE_SETS,
    Query,
    build_corpus,
    corpus_dir,
    first_match_rank,
    read_facts,
)
from bench.quality_report import code_version, delta_table, set_report, sets_line, table  # noqa: E402
from bench.quality_rows import (  # noqa: E402
    HYBRID,
    RERANK_NOTE,
    ROWS,
    STAND_IN,
    Interface,
    K,
    Row,
    SetRun,
    plan_row,
    read_interface,
    with_tests,
)
from bench.run import RESULTS  # noqa: E402
from samespace.head import free_port  # noqa: E402

NAMESPACE = "bench-quality"
KEY = "sk-or-v1-" + "9a11e" * 9  # accepted by the fake only
RERANK_MODEL = "qwen/qwen3-reranker-8b"
NO_QUERY_CACHE_TTL_S = 1e-9  # every call encodes its query: modes are timed alike


# --- the run ------------------------------------------------------------------------------------


async def run_row(client: Any, row: Row, queries: list[Query]) -> None:
    """Warm-up call (untimed), then every query once; a first-call failure makes the row unavailable."""
    from samespace.clients import result_text

    assert row.arguments is not None
    warm = await client.call_tool("search_code", {"query": "warm-up call", **row.arguments})
    if warm.is_error:
        row.notes.insert(0, f"unavailable: search_code refused {row.arguments}: {result_text(warm)[:300]}")
        row.arguments = None
        return
    for query in queries:
        t0 = time.perf_counter()
        result = await client.call_tool("search_code", {"query": query.query, **row.arguments})
        row.latencies_s.append(time.perf_counter() - t0)
        if result.is_error:
            row.errors += 1
            row.ranks.append(None)
            if row.errors == 1:
                row.notes.append(f"error (counted as a miss): {result_text(result)[:300]}")
            continue
        content = result.structured_content or {}
        row.reranked += content.get("reranked_by") is not None
        answered = content.get("mode", row.expected_mode)
        row.modes_answered[str(answered)] += 1
        if row.expected_mode is not None and answered != row.expected_mode:
            row.other_mode += 1
            if row.other_mode == 1:
                row.notes.append(f"answered as mode {answered!r}: {content.get('degraded')}")
        hits = content.get("hits", [])
        row.empty += not hits
        row.ranks.append(first_match_rank(hits, query))
    if row.spec.rerank and row.reranked < len(queries):
        row.notes.append(f"reranked {row.reranked} of {len(queries)} calls: the rest kept the search order")
    if row.empty == len(queries):
        row.notes.append("WARNING: no answer had any hit (does the index lack this leg, e.g. keyword terms?)")
    elif row.empty:
        row.notes.append(f"{row.empty} of {len(queries)} answers had no hit at all")
    if row.other_mode:
        row.notes.append(f"WARNING: {row.other_mode} of {len(queries)} calls ran other legs than expected")
    if row.spec.mode is None:
        row.notes.append(f"answered modes: {dict(row.modes_answered)}")
    if not row.spec.rerank and row.reranked:
        row.notes.append(f"WARNING: {row.reranked} calls were reranked although this row asks for no rerank")


async def run_rows(client: Any, runs: list[SetRun], rerank: bool) -> None:
    """The rows with (or without) rerank, set after set in the given order."""
    for run in runs:
        for row in [r for r in run.rows if r.spec.rerank == rerank]:
            name = f"{run.name}: {row.spec.label}"
            if row.arguments is None:
                print(f"{name}: {row.notes[0]}", flush=True)
                continue
            print(f"{name}: {len(run.queries)} queries, search_code(query, **{row.arguments})", flush=True)
            t0 = time.perf_counter()
            await run_row(client, row, run.queries)
            print(f"{name}: {'done' if row.available else row.notes[0]} ({time.perf_counter() - t0:.1f}s)", flush=True)


async def evaluate(
    url: str,
    runs: list[SetRun],
    push_key: Any,
    *,
    with_rerank: bool = True,
    rows: list[str] | None = None,
    tests: list[str] | None = None,
) -> Interface:
    """Every set's rows over one MCP session: all rows without rerank first, then the key, then rerank.
    `rows`: only the rows of these labels; `tests`: each row once per `tests` value (`with_tests`)."""
    from mcp import Client

    async with Client(url) as client:
        tools = await client.list_tools()
        tool = next((t for t in tools.tools if t.name == "search_code"), None)
        if tool is None:
            raise RuntimeError("the MCP server has no search_code tool")
        interface = read_interface(tool.input_schema)
        print(
            f"search_code offers mode={interface.modes} (default {interface.default_mode!r}), "
            f"rerank={'yes' if interface.rerank else 'no'}",
            flush=True,
        )
        specs = [spec for spec in ROWS if (with_rerank or not spec.rerank) and (rows is None or spec.label in rows)]
        if interface.modes is None or "hybrid" not in interface.modes:
            specs += [STAND_IN] if with_rerank else []
        specs = with_tests(specs, tests)
        for run in runs:
            run.rows = [plan_row(spec, interface, run.repo) for spec in specs]
        await run_rows(client, runs, rerank=False)
        # the reranker gets its key only now: no earlier row, of any set, can have been reranked
        if any(r.arguments is not None for run in runs for r in run.rows if r.spec.rerank):
            push_key()
        await run_rows(client, runs, rerank=True)
    return interface


# --- the sets and their baselines ---------------------------------------------------------------


def build_sets(
    names: list[str], work: Path, max_queries: int | None, seed: int, test_suites: Path | None = None
) -> list[SetRun]:
    """Each named set's corpus under work/<set>, in PACKAGE_SETS order (dev before test)."""
    runs = []
    for name in [n for n in PACKAGE_SETS if n in names]:
        t0 = time.perf_counter()
        packages = PACKAGE_SETS[name]
        queries = build_corpus(packages, work / name, max_queries, seed, test_suites)
        facts = read_facts(work / name)
        facts["build_s"] = round(time.perf_counter() - t0, 2)
        kept = "all" if max_queries is None else f"{len(queries)} sampled (seed {seed})"
        print(
            f"{name} corpus: {', '.join(f'{p} {v}' for p, v in facts['packages'].items())} — {facts['files']} files, "
            f"{facts['eligible']} eligible queries ({facts['dropped_ambiguous']} ambiguous dropped), {kept}; "
            f"{work / name}",
            flush=True,
        )
        runs.append(SetRun(name, packages, work / name, queries, facts))
    return runs


def measure_baselines(runs: list[SetRun], encoder: TextEncoder) -> None:
    """Both same-run baselines of every set, in this process, set after set."""
    for run in runs:

        def emit(line: str, name: str = run.name) -> None:
            print(f"{name}: {line}", flush=True)

        emit("same-run baselines")
        run.baselines = run_baselines(corpus_dir(run.work), run.queries, encoder, emit=emit)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.quality")
    parser.add_argument(
        "--sets", nargs="+", choices=list(PACKAGE_SETS), default=list(PACKAGE_SETS), help="package sets (dev first)"
    )
    parser.add_argument("--queries", type=int, default=None, help="a seeded sample per set (default: all queries)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument(
        "--no-rerank", action="store_true", help="skip the rerank rows (the fake reranker's row: ~11 min per set)"
    )
    parser.add_argument("--work", type=Path, default=None, help="work folder (default: a new temporary one)")
    parser.add_argument("--rows", nargs="+", choices=[spec.label for spec in ROWS], help="only these rows")
    parser.add_argument(
        "--tests",
        nargs="+",
        choices=["include", "exclude", "only"],
        help="run each row once per value of search_code's `tests` argument (default: not sent)",
    )
    parser.add_argument(
        "--test-suites",
        type=Path,
        default=None,
        help="a folder of each package's own test suite as <package>/ (e.g. its sdist's tests/), indexed "
        "beside the sources as distractors; they make no query",
    )
    args = parser.parse_args(argv)
    if args.queries is not None and args.queries < 1:
        parser.error("--queries must be at least 1")

    import ray
    from pydantic import SecretStr
    from ray import serve

    from cluster.local import LocalEncoder
    from cluster.settings import EmbeddingSettings, SamespaceSettings
    from tests.support.fakes.openrouter_fake import FakeConfig, KeyConfig
    from tests.support.fakes.openrouter_server import FakeOpenRouterServer

    print(sets_line(), flush=True)
    work = (args.work or Path(tempfile.mkdtemp(prefix="samespace-bench-quality-"))).resolve()
    runs = build_sets(args.sets, work, args.queries, args.seed, args.test_suites)

    machine = {"cpus": os.cpu_count(), "load_avg_at_start": [round(x, 2) for x in os.getloadavg()]}
    # The baselines run here, before Ray starts: nothing else competes for the CPUs while they are timed.
    measure_baselines(runs, LocalEncoder(EmbeddingSettings()))

    with FakeOpenRouterServer(config=FakeConfig(keys={KEY: KeyConfig(label="quality")})) as fake:
        settings = SamespaceSettings(
            store={"data_dir": work / "data"},
            ray={"address": "local", "namespace": NAMESPACE},
            cloud={"enabled": True, "base_url": fake.base_url, "routes": {"reranker": {"model": RERANK_MODEL}}},
            rlm={"query_cache_ttl_s": NO_QUERY_CACHE_TTL_S},
        )
        # A private temp dir: /tmp/ray/ray_current_cluster keeps naming whatever cluster it named, so a
        # process elsewhere on this machine that connects with address="auto" does not land on this one
        # (one did, in testing, and took the CPUs the MCP replica needed).
        ray_tmp = tempfile.mkdtemp(prefix="rayq-", dir="/tmp")  # short: unix socket paths are capped
        ray.init(
            address="local",
            num_cpus=os.cpu_count() or 2,
            namespace=NAMESPACE,
            include_dashboard=False,
            log_to_driver=False,
            _temp_dir=ray_tmp,
            runtime_env={"env_vars": {"SAMESPACE_STORE__DATA_DIR": str(work / "data")}},
        )
        try:
            from actors import ensure_embedders, ensure_virtual_containers, get_index_actor
            from actors.build_ports import run_reindex
            from serve_apps.mcp import McpIngress

            t0 = time.perf_counter()
            ray.get([e.identity.remote() for e in ensure_embedders(settings)])  # model load, untimed below
            ray.get(get_index_actor(settings).names.remote())
            startup_s = time.perf_counter() - t0
            for run in runs:
                t0 = time.perf_counter()
                record = run_reindex(
                    settings, corpus_dir(run.work), run.repo, emit=lambda line: print(line, flush=True)
                )
                index_s = time.perf_counter() - t0
                run.facts.update(
                    repo=run.repo,
                    chunks=record.chunks,
                    index_s=round(index_s, 1),
                    actors_startup_s=round(startup_s, 1),
                    index_chunks_per_s=round(record.chunks / index_s, 1),
                    load_avg_after_index=[round(x, 2) for x in os.getloadavg()],
                )
                print(
                    f"{run.name}: indexed {record.chunks} chunks as {run.repo!r} in {index_s:.1f}s "
                    f"({record.chunks / index_s:.1f} chunks/s; actor start + model load before: {startup_s:.1f}s)",
                    flush=True,
                )

            if ray.available_resources().get("CPU", 0.0) < 0.1:  # serve.run would wait for it forever
                raise RuntimeError(f"no CPU left for the MCP replica: {ray.available_resources()}")
            port = free_port()
            serve.start(http_options={"host": "127.0.0.1", "port": port})
            app = McpIngress.options(num_replicas=1).bind(settings)  # type: ignore[attr-defined]
            serve.run(app, name="mcp", route_prefix="/")

            def push_key() -> None:
                containers = ensure_virtual_containers(settings)
                ray.get([c.set_key.remote(SecretStr(KEY)) for c in containers])
                print(f"reranker key pushed to {len(containers)} virtual container(s)", flush=True)

            interface = asyncio.run(
                evaluate(
                    f"http://127.0.0.1:{port}/mcp/",
                    runs,
                    push_key,
                    with_rerank=not args.no_rerank,
                    rows=args.rows,
                    tests=args.tests,
                )
            )
        finally:
            serve.shutdown()
            ray.shutdown()
        shutil.rmtree(ray_tmp, ignore_errors=True)  # kept (with Ray's logs) when the run failed

    results: dict[str, Any] = {
        "packages": {name: list(packages) for name, packages in PACKAGE_SETS.items()},
        "queries_per_set": "all" if args.queries is None else args.queries,
        "rows": args.rows or "all",
        "tests_argument": args.tests or "not sent",
        "test_suites": None if args.test_suites is None else str(args.test_suites),
        "seed": args.seed,
        "machine": machine,
        "code": code_version(),
        "search_code": {
            "modes": interface.modes,
            "default_mode": interface.default_mode,
            "rerank_argument": interface.rerank,
            "arguments_declared": sorted(interface.schema),
        },
        "settings": {
            "k": K,
            "rerank_candidates": settings.reranker.candidates,
            "query_cache": "off (TTL ~0): every call encodes its query",
            "rerank": RERANK_NOTE,
            "baselines": "same run, same corpus and queries, in the bench process (no network): "
            "whole functions, MiniLM cosine / bm25s",
        },
        "sets": {run.name: set_report(run) for run in runs},
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "quality.json").write_text(json.dumps(results, indent=2))

    print()
    print(sets_line())
    for run, report in zip(runs, results["sets"].values(), strict=True):
        facts = run.facts
        print()
        print(
            f"## {run.name}: {', '.join(run.packages)} — {facts['files']} files, {facts['chunks']} chunks, "
            f"{len(run.queries)} queries (docstring → function); indexed in {facts['index_s']}s "
            f"({facts['index_chunks_per_s']} chunks/s, load average {facts['load_avg_after_index'][0]})"
        )
        print()
        print(table(run.lines()))
        print()
        print(f"Against {FUNCTION_DENSE} (points) and p50 against the {HYBRID} row:")
        print()
        print(delta_table(report["deltas"]))
        print()
        for row in run.rows:
            for note in row.notes:
                if note != RERANK_NOTE:
                    print(f"- {row.spec.label}: {note}")
    print()
    print(f"¹ {RERANK_NOTE}; top {settings.reranker.candidates} candidates re-scored.")
    print(
        "² same-run baseline: whole functions of the same stripped copy, same queries and hit rule, "
        "in the bench process (latency without MCP or network)."
    )
    print(f"\nwritten: {RESULTS / 'quality.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
