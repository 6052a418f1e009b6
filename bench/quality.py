"""Retrieval quality of search_code: docstring → function, four search modes, one run, through MCP.

    python -m bench.quality [--packages httpx click jinja2 markdown_it] [--queries 300] [--seed 0]

1. Corpus (bench/quality_corpus.py): the sources of a few installed packages this project does not
   contain, copied with their function/method/class docstrings removed; each query is a removed
   docstring's first paragraph, its target the def it documented (path + line range in the copy).
2. A local Ray indexes the copy (jobs.reindex.run_reindex, repo "quality"); the MCP app is
   deployed on Serve (one replica), and every query goes through the SDK client (one session) as
   `search_code(query, k=10, repo="quality", mode=..., rerank=...)`: the path a user hits.
3. Rows: keyword (BM25) | dense | hybrid | hybrid + rerank. The reranker is the OpenRouter fake
   (tests/fakes), whose /rerank scores by MiniLM cosine: NOT a cross-encoder; that row measures the
   plumbing, not a real reranker's quality. Rows without rerank pass rerank=False and run before the
   reranker gets its key, and every answer's `reranked_by` is checked.
   What search_code offers is read from its input schema (an argument the server does not declare is
   silently ignored by the MCP SDK, so "the call did not fail" proves nothing): a mode it does not
   offer is reported unavailable, never run under a false label.
4. Every call encodes its query (query-vector cache TTL ~0), so the modes' latencies are comparable.

A hit counts when its path is the target's and its lines overlap the target def's lines.
Results: a printed markdown table and bench/results/quality.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster.environment import set_local_env_defaults

set_local_env_defaults()

from bench.quality_corpus import (  # noqa: E402
    DEFAULT_PACKAGES,
    DEFAULT_QUERIES,
    DEFAULT_SEED,
    Query,
    build_corpus,
    corpus_dir,
    first_match_rank,
    mrr_at,
    read_facts,
    recall_at,
)
from bench.run import RESULTS, latency_summary  # noqa: E402

NAMESPACE = "bench-quality"
REPO = "quality"
K = 10
KEY = "sk-or-v1-" + "9a11e" * 9  # accepted by the fake only
RERANK_MODEL = "qwen/qwen3-reranker-8b"
RERANK_NOTE = "rerank = fake (MiniLM cosine), not a cross-encoder"
NO_QUERY_CACHE_TTL_S = 1e-9  # every call encodes its query: modes are timed alike


@dataclass(frozen=True)
class RowSpec:
    label: str
    mode: str
    rerank: bool


ROWS = (
    RowSpec("BM25 / keyword", "keyword", False),
    RowSpec("dense", "dense", False),
    RowSpec("hybrid", "hybrid", False),
    RowSpec("hybrid + rerank", "hybrid", True),
)
STAND_IN = RowSpec("dense + rerank", "dense", True)  # only while hybrid is not offered


@dataclass
class Interface:
    """What search_code declares: its `mode` values (None: no `mode` argument) and `rerank`."""

    modes: list[str] | None
    rerank: bool
    schema: dict[str, Any]


@dataclass
class Row:
    spec: RowSpec
    arguments: dict[str, Any] | None  # None: unavailable
    notes: list[str] = field(default_factory=list)
    ranks: list[int | None] = field(default_factory=list)
    latencies_s: list[float] = field(default_factory=list)
    errors: int = 0
    reranked: int = 0
    other_mode: int = 0  # answers whose `mode` says other legs ran than asked (e.g. degraded to keyword)
    empty: int = 0  # answers with no hit at all

    @property
    def available(self) -> bool:
        return self.arguments is not None and bool(self.ranks)

    def metrics(self) -> dict[str, Any]:
        if not self.available:
            return {}
        return {
            "recall@1": round(recall_at(self.ranks, 1), 4),
            "recall@5": round(recall_at(self.ranks, 5), 4),
            "recall@10": round(recall_at(self.ranks, 10), 4),
            "mrr@10": round(mrr_at(self.ranks, K), 4),
            "latency": latency_summary(self.latencies_s),
        }

    def report(self) -> dict[str, Any]:
        return {
            "row": self.spec.label,
            "mode": self.spec.mode,
            "rerank": self.spec.rerank,
            "available": self.available,
            "arguments": self.arguments,
            "notes": self.notes,
            "errors": self.errors,
            "reranked_calls": self.reranked,
            "other_mode_calls": self.other_mode,
            "empty_answers": self.empty,
            **self.metrics(),
            "ranks": self.ranks,
        }


# --- search_code's interface ------------------------------------------------------------------


def _enum_values(prop: Any) -> list[str]:
    """Enum values anywhere in a JSON-schema property (enum, anyOf/oneOf, const)."""
    if isinstance(prop, dict):
        values = [str(v) for v in prop.get("enum", [])] + ([str(prop["const"])] if "const" in prop else [])
        for key in ("anyOf", "oneOf", "allOf"):
            for sub in prop.get(key, []):
                values += _enum_values(sub)
        return values
    return []


def read_interface(schema: dict[str, Any]) -> Interface:
    props = schema.get("properties", {})
    modes = None
    if "mode" in props:
        modes = _enum_values(props["mode"]) or [spec.mode for spec in ROWS]  # no enum: ask and see
    return Interface(modes=modes, rerank="rerank" in props, schema=props)


def plan_row(spec: RowSpec, interface: Interface) -> Row:
    """The arguments a row sends besides the query, or why it cannot run (its notes say either way)."""
    args: dict[str, Any] = {"k": K, "repo": REPO}
    notes: list[str] = []
    if interface.modes is None:
        if spec.mode != "dense":
            return Row(spec, None, [f"unavailable: search_code has no `mode` argument ({spec.mode} not offered)"])
        notes.append(
            "search_code has no `mode` argument: this row is its default path (dense, on servers without `mode`)"
        )
    elif spec.mode not in interface.modes:
        return Row(spec, None, [f"unavailable: mode {spec.mode!r} not among {interface.modes}"])
    else:
        args["mode"] = spec.mode
    if interface.rerank:
        args["rerank"] = spec.rerank
    elif spec.rerank:
        notes.append(
            "search_code has no `rerank` argument: called without it once a reranker serves "
            "(the service reranks by default)"
        )
    else:
        notes.append("search_code has no `rerank` argument: called without it before any reranker serves")
    if spec.rerank:
        notes.append(RERANK_NOTE)
    return Row(spec, args, notes)


# --- the run ------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def run_row(client: Any, row: Row, queries: list[Query]) -> None:
    """Warm-up call (untimed), then every query once; a first-call failure makes the row unavailable."""
    from serve_apps.mcp_client import result_text

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
        if "mode" in row.arguments and content.get("mode", row.arguments["mode"]) != row.arguments["mode"]:
            row.other_mode += 1
            if row.other_mode == 1:
                row.notes.append(f"answered as mode {content.get('mode')!r}: {content.get('degraded')}")
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
        row.notes.append(f"WARNING: {row.other_mode} of {len(queries)} calls ran other legs than asked")
    if not row.spec.rerank and row.reranked:
        row.notes.append(f"WARNING: {row.reranked} calls were reranked although this row asks for no rerank")


async def evaluate(url: str, queries: list[Query], push_key: Any) -> tuple[Interface, list[Row]]:
    from mcp import Client

    async with Client(url) as client:
        tools = await client.list_tools()
        tool = next((t for t in tools.tools if t.name == "search_code"), None)
        if tool is None:
            raise RuntimeError("the MCP server has no search_code tool")
        interface = read_interface(tool.input_schema)
        print(f"search_code offers mode={interface.modes}, rerank={'yes' if interface.rerank else 'no'}", flush=True)
        specs = list(ROWS)
        if interface.modes is None or "hybrid" not in interface.modes:
            specs.append(STAND_IN)
        rows = [plan_row(spec, interface) for spec in specs]
        for row in [r for r in rows if not r.spec.rerank] + [None] + [r for r in rows if r.spec.rerank]:
            if row is None:  # the reranker gets its key only now: earlier rows cannot have been reranked
                if any(r.arguments is not None for r in rows if r.spec.rerank):
                    push_key()
                continue
            if row.arguments is None:
                print(f"{row.spec.label}: {row.notes[0]}", flush=True)
                continue
            print(f"{row.spec.label}: {len(queries)} queries, search_code(query, **{row.arguments})", flush=True)
            t0 = time.perf_counter()
            await run_row(client, row, queries)
            print(
                f"{row.spec.label}: {'done' if row.available else row.notes[0]} ({time.perf_counter() - t0:.1f}s)",
                flush=True,
            )
    return interface, rows


def table(rows: list[Row]) -> str:
    lines = ["| mode | recall@1 | recall@5 | recall@10 | MRR@10 | p50 ms |", "|---|---|---|---|---|---|"]
    for row in rows:
        label = row.spec.label + (" ¹" if row.spec.rerank else "") + (" (stand-in)" if row.spec is STAND_IN else "")
        m = row.metrics()
        if not m:
            lines.append(f"| {label} | n/a | n/a | n/a | n/a | n/a |")
        else:
            lines.append(
                f"| {label} | {m['recall@1']:.3f} | {m['recall@5']:.3f} | {m['recall@10']:.3f} | "
                f"{m['mrr@10']:.3f} | {m['latency']['p50_ms']:.1f} |"
            )
    return "\n".join(lines)


def code_version() -> dict[str, Any]:
    """The commit and uncommitted paths the numbers were measured on (search code changes often)."""
    import subprocess

    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    return {"commit": git("rev-parse", "--short", "HEAD"), "uncommitted": git("status", "--short").splitlines()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.quality")
    parser.add_argument("--packages", nargs="+", default=list(DEFAULT_PACKAGES), help="installed packages to use")
    parser.add_argument("--queries", type=int, default=DEFAULT_QUERIES, help="queries sampled (seeded)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--work", type=Path, default=None, help="work folder (default: a new temporary one)")
    args = parser.parse_args(argv)

    import ray
    from pydantic import SecretStr
    from ray import serve

    from cluster.settings import SamespaceSettings
    from tests.fakes.openrouter_fake import FakeConfig, KeyConfig
    from tests.fakes.openrouter_server import FakeOpenRouterServer

    work = (args.work or Path(tempfile.mkdtemp(prefix="samespace-bench-quality-"))).resolve()
    t0 = time.perf_counter()
    queries = build_corpus(args.packages, work, args.queries, args.seed)
    facts = read_facts(work)
    facts["build_s"] = round(time.perf_counter() - t0, 2)
    print(
        f"corpus: {', '.join(f'{p} {v}' for p, v in facts['packages'].items())} — {facts['files']} files, "
        f"{facts['eligible']} eligible queries ({facts['dropped_ambiguous']} ambiguous dropped), "
        f"{len(queries)} sampled (seed {args.seed}); {work}",
        flush=True,
    )

    machine = {"cpus": os.cpu_count(), "load_avg_at_start": [round(x, 2) for x in os.getloadavg()]}
    results: dict[str, Any] = {"corpus": facts, "machine": machine, "code": code_version()}
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
            from jobs.reindex import run_reindex
            from serve_apps.mcp_app import McpIngress

            t0 = time.perf_counter()
            ray.get([e.identity.remote() for e in ensure_embedders(settings)])  # model load, untimed below
            ray.get(get_index_actor(settings).names.remote())
            startup_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            record = run_reindex(settings, corpus_dir(work), REPO, emit=lambda line: print(line, flush=True))
            index_s = time.perf_counter() - t0
            facts.update(
                chunks=record.chunks,
                index_s=round(index_s, 1),
                actors_startup_s=round(startup_s, 1),
                index_chunks_per_s=round(record.chunks / index_s, 1),
                load_avg_after_index=[round(x, 2) for x in os.getloadavg()],
            )
            print(
                f"indexed {record.chunks} chunks in {index_s:.1f}s ({record.chunks / index_s:.1f} chunks/s; "
                f"actor start + model load before it: {startup_s:.1f}s)",
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

            interface, rows = asyncio.run(evaluate(f"http://127.0.0.1:{port}/mcp/", queries, push_key))
        finally:
            serve.shutdown()
            ray.shutdown()
        shutil.rmtree(ray_tmp, ignore_errors=True)  # kept (with Ray's logs) when the run failed

    results["search_code"] = {
        "modes": interface.modes,
        "rerank_argument": interface.rerank,
        "arguments_declared": sorted(interface.schema),
    }
    results["settings"] = {
        "k": K,
        "rerank_candidates": settings.reranker.candidates,
        "query_cache": "off (TTL ~0): every call encodes its query",
        "rerank": RERANK_NOTE,
    }
    results["rows"] = [row.report() for row in rows]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "quality.json").write_text(json.dumps(results, indent=2))

    print()
    print(
        f"corpus: {', '.join(facts['packages'])} — {facts['files']} files, {facts['chunks']} chunks, "
        f"{len(queries)} queries (docstring → function, seed {args.seed}); indexed in {facts['index_s']}s "
        f"({facts['index_chunks_per_s']} chunks/s, load average {facts['load_avg_after_index'][0]})"
    )
    print()
    print(table(rows))
    print()
    print(f"¹ {RERANK_NOTE}; top {settings.reranker.candidates} candidates re-scored.")
    for row in rows:
        for note in row.notes:
            if note != RERANK_NOTE:
                print(f"- {row.spec.label}: {note}")
    print(f"\nwritten: {RESULTS / 'quality.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
