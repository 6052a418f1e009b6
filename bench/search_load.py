"""MCP `search_code` under 1, 4 and 8 concurrent clients: samespace's embedded default against one process.

    python -m bench.search_load [--clients 1 4 8] [--seconds 20] [--package httpx]

Issue 17's comparison, measured back to back on one machine, one corpus and one query list:

1. Corpus: a stripped copy of one installed package (`bench.quality_corpus.build_corpus`, default
   httpx); the queries are its docstring queries (~250-300). Both sides index that folder.
2. samespace: the real embedded default, started as `make run` starts it: `python -m samespace run`
   (a local Ray head with token auth, `serve deploy`, the reindex job, a sample query) with the
   Makefile's environment, its own state folder, free ports and a short Ray temp dir; stopped with
   `samespace stop` at the end, after which no process of its Ray session may be left. The query-
   vector cache is set to live 1 µs (SAMESPACE_RLM__QUERY_CACHE_TTL_S): the competitor has none,
   so no answer on either side comes from a cache.
3. single process: `python -m bench.single_process` (FastAPI + the MCP SDK + MiniLM + numpy brute
   force over the same chunks), on a free port, stopped by PID at the end.
4. Load: for each client count N, N concurrent MCP clients (the SDK client, one session each, kept
   open), each looping over the queries from its own offset, calling search_code(query, k=10) for
   `--seconds` after a few uncounted warm-up calls. The sides alternate per client count
   (samespace N=1, single N=1, samespace N=4, ...), both servers up the whole time, one side loaded
   at a time. Any call that errors stops the bench.
5. Memory: RSS, PSS and USS (/proc/<pid>/smaps_rollup) of every process of the samespace Ray session
   and their children, and of the single process, sampled every 0.5 s through the load phase: the
   total at its peak and a per-process table (same-name processes summed) at the end. RSS counts
   shared pages once per process; PSS splits them among the processes that share them.

Prints the comparison table, the memory tables and issue 17's acceptance checks (PASS/FAIL: a
FAIL does not change the exit status; only a failure to measure does). Writes
bench/results/search_load.json.

The servers and the corpus are in `bench.load_servers`, the clients' sessions in `bench.load_clients`,
what is read from /proc in `bench.process_memory` (all three shared with `bench.soak`).
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
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.load_clients import bearer_headers, client_offsets, mcp_session
from bench.load_servers import (
    QUERY_CACHE_TTL_S,
    LoadFailed,
    SamespaceCluster,
    SingleProcess,
    package_corpus,
)
from bench.process_memory import GB, MemorySampler, cpu_per_call, memory_table, read_cpu
from bench.run import RESULTS, latency_summary
from samespace.head import free_port

__all__ = [
    "MAX_SAMESPACE_RSS_BYTES",
    "Check",
    "compare",
    "evaluate",
    "load_summary",
    "main",
    "markdown_table",
    "run_load",
]

RESULTS_FILE = "search_load.json"
DEFAULT_CLIENTS = (1, 4, 8)
DEFAULT_SECONDS = 20.0
DEFAULT_PACKAGE = "httpx"
K = 10
WARMUP_CALLS = 3  # per client, before the timed window
SIDES = ("samespace", "single")
CALL_TIMEOUT_S = 60.0
# Issue 17's acceptance (bench, not timed tests).
MAX_P50_RATIO_AT_1 = 2.0
MIN_QPS_RATIO = 0.7
QPS_RATIO_CLIENTS = (4, 8)
MAX_SAMESPACE_RSS_BYTES = 2_500_000_000  # 2.5 GB


# Pure parts: summaries, acceptance, the table.


@dataclass(frozen=True)
class Check:
    """One acceptance line; `passed` None when the run did not measure what it needs."""

    name: str
    passed: bool | None
    detail: str

    @property
    def verdict(self) -> str:
        return {True: "PASS", False: "FAIL", None: "SKIP"}[self.passed]


def load_summary(latencies_s: Sequence[float], elapsed_s: float, errors: int = 0) -> dict[str, Any]:
    """q/s over the timed window and the latency percentiles of the calls in it."""
    if not latencies_s or elapsed_s <= 0:
        raise ValueError("a load summary needs at least one call and a positive window")
    summary = latency_summary(list(latencies_s))
    return {
        "qps": round(len(latencies_s) / elapsed_s, 2),
        "p50_ms": summary["p50_ms"],
        "p95_ms": summary["p95_ms"],
        "p99_ms": summary["p99_ms"],
        "mean_ms": summary["mean_ms"],
        "calls": len(latencies_s),
        "errors": errors,
        "seconds": round(elapsed_s, 2),
    }


def compare(clients: int, samespace: Mapping[str, Any], single: Mapping[str, Any]) -> dict[str, Any]:
    """One row of the comparison: both sides' summaries and samespace's ratios to the single process."""
    return {
        "clients": clients,
        "samespace": dict(samespace),
        "single": dict(single),
        "qps_ratio": round(samespace["qps"] / single["qps"], 3),
        "p50_ratio": round(samespace["p50_ms"] / single["p50_ms"], 3),
    }


def evaluate(rows: Sequence[Mapping[str, Any]], samespace_peak_rss: int | None) -> list[Check]:
    """Issue 17's acceptance checks on the comparison rows and samespace's peak RSS."""
    by_clients = {row["clients"]: row for row in rows}
    checks = []
    one = by_clients.get(1)
    checks.append(
        Check(
            f"1 client: samespace p50 within {MAX_P50_RATIO_AT_1:g}x of the single process",
            None if one is None else one["p50_ratio"] <= MAX_P50_RATIO_AT_1,
            "not measured" if one is None else f"p50 ratio {one['p50_ratio']:.2f}",
        )
    )
    for n in QPS_RATIO_CLIENTS:
        row = by_clients.get(n)
        checks.append(
            Check(
                f"{n} clients: samespace q/s at least {MIN_QPS_RATIO:g}x the single process",
                None if row is None else row["qps_ratio"] >= MIN_QPS_RATIO,
                "not measured" if row is None else f"q/s ratio {row['qps_ratio']:.2f}",
            )
        )
    four, eight = by_clients.get(4), by_clients.get(8)
    if four is None or eight is None:
        checks.append(Check("samespace q/s at 8 clients at least its q/s at 4", None, "not measured"))
    else:
        at_4, at_8 = four["samespace"]["qps"], eight["samespace"]["qps"]
        checks.append(
            Check("samespace q/s at 8 clients at least its q/s at 4", at_8 >= at_4, f"{at_8} q/s at 8, {at_4} at 4")
        )
    checks.append(
        Check(
            f"samespace peak RSS at most {MAX_SAMESPACE_RSS_BYTES / GB:g} GB",
            None if samespace_peak_rss is None else samespace_peak_rss <= MAX_SAMESPACE_RSS_BYTES,
            "not measured" if samespace_peak_rss is None else f"peak RSS {samespace_peak_rss / GB:.2f} GB",
        )
    )
    return checks


def markdown_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The issue's table: both sides' q/s and p50 / p99, and samespace's ratios."""
    lines = [
        "| clients | samespace q/s | p50 / p99 ms | single q/s | p50 / p99 ms | q/s ratio | p50 ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        s, o = row["samespace"], row["single"]
        lines.append(
            f"| {row['clients']} | {s['qps']:.1f} | {s['p50_ms']:.1f} / {s['p99_ms']:.1f} | {o['qps']:.1f} | "
            f"{o['p50_ms']:.1f} / {o['p99_ms']:.1f} | {row['qps_ratio']:.2f} | {row['p50_ratio']:.2f} |"
        )
    return "\n".join(lines)


# The load.


@dataclass
class Window:
    start: float = 0.0
    deadline: float = 0.0
    ends: list[float] = field(default_factory=list)


async def run_load(
    url: str, headers: Mapping[str, str], queries: Sequence[str], clients: int, seconds: float
) -> tuple[dict[str, Any], dict[str, Any]]:
    """`clients` concurrent MCP sessions calling search_code for `seconds`: the summary, and the first
    result's fields other than its hits (which legs ran, who encoded)."""
    window = Window()
    latencies: list[float] = []
    first: dict[str, Any] = {}
    ready = asyncio.Barrier(clients + 1)
    go = asyncio.Event()

    async def client(offset: int) -> None:
        async with mcp_session(url, headers, CALL_TIMEOUT_S) as session:
            i = offset
            for _ in range(WARMUP_CALLS):
                first.update(await _search(session, queries[i % len(queries)]))
                i += 1
            await ready.wait()
            await go.wait()
            while time.perf_counter() < window.deadline:
                t0 = time.perf_counter()
                await _search(session, queries[i % len(queries)])
                latencies.append(time.perf_counter() - t0)
                i += 1
            window.ends.append(time.perf_counter())

    async def starter() -> None:
        await ready.wait()
        window.start = time.perf_counter()
        window.deadline = window.start + seconds
        go.set()

    async with asyncio.TaskGroup() as group:
        group.create_task(starter())
        for offset in client_offsets(len(queries), clients):
            group.create_task(client(offset))
    return load_summary(latencies, max(window.ends) - window.start), first


async def _search(session: Any, query: str) -> dict[str, Any]:
    result = await session.call_tool("search_code", {"query": query, "k": K})
    if result.is_error:
        text = "\n".join(getattr(block, "text", "") for block in result.content)
        raise LoadFailed(f"search_code failed for {query!r}: {text}")
    content = result.structured_content or {}
    hits = content.get("hits", [])
    if len(hits) != K:
        raise LoadFailed(f"search_code returned {len(hits)} hits for {query!r}, expected {K}")
    return {key: value for key, value in content.items() if key != "hits"}


# The run.


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.search_load")
    parser.add_argument("--clients", type=int, nargs="+", default=list(DEFAULT_CLIENTS), help="client counts")
    parser.add_argument("--seconds", type=float, default=DEFAULT_SECONDS, help="timed window per side and count")
    parser.add_argument("--package", default=DEFAULT_PACKAGE, help="installed package whose copy is the corpus")
    args = parser.parse_args(argv)
    if min(args.clients) < 1 or args.seconds <= 0:
        parser.error("client counts must be at least 1 and --seconds positive")

    work = Path(tempfile.mkdtemp(prefix="samespace-load-"))
    corpus, queries, facts = package_corpus(args.package, work)
    samespace = SamespaceCluster(
        state_dir=work / "state",
        temp_dir=Path(tempfile.mkdtemp(prefix="ssl-", dir="/tmp")),  # Ray's socket paths must stay short
        corpus=corpus,
        mcp_port=free_port(),
        log=work / "samespace-run.log",
    )
    single = SingleProcess(corpus=corpus, port=free_port(), log=work / "single-process.log")
    headers = bearer_headers()
    left: list[int] = []
    try:
        single.start()
        t0 = time.perf_counter()
        samespace.start()
        startup_s = {"samespace_run": round(time.perf_counter() - t0, 1)}
        print(f"samespace run: up and indexed in {startup_s['samespace_run']:.0f} s", flush=True)
        health = single.wait()
        startup_s["single_process"] = round(time.perf_counter() - t0, 1)  # started together; it waited its turn
        print(f"single process: up, {health['chunks']} chunks", flush=True)
        urls = {"samespace": samespace.url, "single": single.url}
        summaries: dict[str, dict[int, dict[str, Any]]] = {side: {} for side in SIDES}
        profiles: dict[str, dict[int, list[dict[str, Any]]]] = {side: {} for side in SIDES}
        pids = {"samespace": samespace.pids, "single": single.pids}
        first: dict[str, Any] = {}
        with MemorySampler(samespace.pids) as samespace_memory, MemorySampler(single.pids) as single_memory:
            for n in args.clients:
                for side in SIDES:
                    before = read_cpu(pids[side]())
                    summary, first[side] = asyncio.run(run_load(urls[side], headers, queries, n, args.seconds))
                    profiles[side][n] = cpu_per_call(before, read_cpu(pids[side]()), summary["calls"])
                    summaries[side][n] = summary
                    print(
                        f"{side:>9} x{n}: {summary['qps']:.1f} q/s, p50 {summary['p50_ms']:.1f} ms, "
                        f"p99 {summary['p99_ms']:.1f} ms ({summary['calls']} calls)",
                        flush=True,
                    )
    finally:
        try:
            single.stop()
        finally:
            left = samespace.stop()
    if left:
        raise LoadFailed(f"processes of the samespace session outlived `samespace stop` (killed): {left}")

    rows = [compare(n, summaries["samespace"][n], summaries["single"][n]) for n in args.clients]
    memory: dict[str, Any] = {"samespace": samespace_memory.report(), "single": single_memory.report()}
    memory["rss_ratio"] = round(samespace_memory.peak.rss / single_memory.peak.rss, 2)
    memory["pss_ratio"] = round(samespace_memory.peak.pss / single_memory.peak.pss, 2)
    checks = evaluate(rows, samespace_memory.peak.rss)
    results: dict[str, Any] = {
        "corpus": {
            "package": args.package,
            "version": facts["packages"][args.package],
            "files": facts["files"],
            "chunks": health["chunks"],
            "queries": len(queries),
        },
        "settings": {
            "clients": args.clients,
            "seconds": args.seconds,
            "k": K,
            "warmup_calls_per_client": WARMUP_CALLS,
            "samespace_query_cache_ttl_s": QUERY_CACHE_TTL_S,
        },
        "startup_s": startup_s,
        "samespace_search": first.get("samespace", {}),
        "load": rows,
        "memory": memory,
        "cpu_ms_per_call": {side: {str(n): profiles[side][n] for n in args.clients} for side in SIDES},
        "acceptance": [asdict(c) | {"verdict": c.verdict} for c in checks],
        "machine": {"cpus": os.cpu_count()},
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / RESULTS_FILE).write_text(json.dumps(results, indent=2))
    shutil.rmtree(work, ignore_errors=True)

    print()
    print(markdown_table(rows))
    print()
    for side in SIDES:
        m = memory[side]
        print(f"{side}: peak RSS {m['peak_rss_gb']:.2f} GB, peak PSS {m['peak_pss_gb']:.2f} GB")
    print(f"RSS ratio {memory['rss_ratio']:.2f}, PSS ratio {memory['pss_ratio']:.2f} (samespace / single)\n")
    for side in SIDES:
        print(f"{side} processes at the end of the load:")
        print(memory_table(memory[side]["processes"]))
        print()
    for n in args.clients:  # the profile: where a search's CPU goes (warm-up calls included, a few per client)
        spent = ", ".join(f"{r['process']} {r['cpu_ms_per_call']:.1f}" for r in profiles["samespace"][n][:8])
        print(f"samespace CPU ms per call, {n} clients: {spent}")
    print()
    for check in checks:
        print(f"{check.verdict}  {check.name} ({check.detail})")
    print(f"\nwritten: {RESULTS / RESULTS_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
