"""Where the code graph lives: payload fields on the index's rows in Qdrant (A) or an embedded graph database (B).

    python -m bench.graph_storage [--packages ray sympy] [--targets 200] [--seed 0] [--work DIR]

The issue asked to measure both on a repository of 50k symbols before choosing; the choice made is A.
Both options get the same data in the same run:

1. Corpus: installed packages' sources (default ray and sympy: ~3,900 files, ~70k definitions, ~1M
   references) copied to a temp folder and walked with the project's `collect_repository` (the
   chunks carry the facts); `file_facts` alone is timed again over the same files.
2. A (bench/graph_storage_payload.py): the project's embedded store (Qdrant Edge), its payload and its
   keyword indexes, random 384-d vectors (the graph does not read vectors), written twice: with the
   graph's fields and with them empty; the graph costs the difference. "Who references X" is one
   filtered scroll on `refs`; callers and impact run IN MEMORY on the `CodeGraph` built from one scroll
   of every payload (timed, with tracemalloc's peak).
3. B (bench/graph_storage_ladybug.py): LadybugDB (Kuzu's fork), embedded. Its load is: index the facts,
   resolve every call site with the project's resolver (a graph database stores resolved edges), write
   CSV, bulk COPY. Callers and 1..3-hop callers run IN THE DATABASE (Cypher from primary keys).
4. The same targets for both: seeded definitions some call resolves to, each naming one place; "who
   references X" asks for their bare names. Depth-1 callers are checked to give the same call sites.
   One file is rewritten in both (incremental reindex): A upserts its rows; B re-resolves the sites
   that may reach or leave it and deletes and inserts its nodes and edges.

Results: a table printed, and bench/results/graph_storage.json (gitignored) with the versions and the
corpus facts.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import platform
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from bench import graph_storage_ladybug as option_b
from bench import graph_storage_payload as option_a
from bench.graph_storage_common import (
    DEFAULT_PACKAGES,
    SITE_PACKAGES,
    WALK_LIMIT,
    Corpus,
    Target,
    collect_corpus,
    copy_packages,
    graph_rows,
    mib,
    sample_targets,
    timed,
)
from cluster.graph import CodeGraph

RESULTS = Path(__file__).resolve().parent / "results" / "graph_storage.json"
VERSIONS = ("qdrant-client", "qdrant-edge-py", "real_ladybug", "tree-sitter")


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in VERSIONS:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def edit_file(graph: CodeGraph) -> str | None:
    """A file for the incremental reindex: the one at the 90th percentile of definitions per file."""
    counts = Counter(d.path for d in graph.index.defs)
    ordered = sorted(counts, key=lambda path: (counts[path], path))
    return ordered[int(len(ordered) * 0.9)] if ordered else None


def same_sites(a: list[set[tuple[str, int, str | None]]], b: list[set[tuple[str, int, str | None]]]) -> int:
    """How many targets got the same depth-1 call sites from both options."""
    return sum(x == y for x, y in zip(a, b, strict=True))


def run(corpus: Corpus, work: Path, count: int, seed: int, option_a_numbers: Path | None = None) -> dict[str, Any]:
    """Both options over `corpus`, their numbers and the comparison. `option_a_numbers`: A's numbers
    from an earlier run on the same corpus and seed (a JSON file), A not measured again (then the
    depth-1 answers are not compared)."""
    graph, index_s = timed(lambda: CodeGraph(option_a.REPO, None, graph_rows(corpus.chunks)))
    (edges, unplaced), resolve_s = timed(lambda: option_b.resolve_edges(graph))
    targets: list[Target] = sample_targets(graph, {e.target for e in edges}, count, seed)
    edited = edit_file(graph)
    print(f"graph {graph!r}; {len(edges)} call edges resolved in {resolve_s:.1f}s; {len(targets)} targets", flush=True)
    a = None if option_a_numbers else option_a.measure(work / "qdrant", corpus.chunks, targets, edited)
    if a is not None:
        print(f"A measured: {json.dumps(a.numbers)}", flush=True)
    b = option_b.measure(work / "ladybug", graph, index_s, targets, edited, resolved=(edges, unplaced, resolve_s))
    print(f"B measured: {json.dumps(b.numbers)}", flush=True)
    a_numbers = a.numbers if a is not None else json.loads(option_a_numbers.read_text()) if option_a_numbers else {}
    same = same_sites([option_a.call_sites(answer) for answer in a.depth1], b.depth1) if a is not None else None
    return {
        "versions": versions(),
        "corpus": {"packages": corpus.packages, **corpus.facts(), "skipped": corpus.repo.skipped.counts},
        "collect_s": round(corpus.collect_s, 1),
        "file_facts_alone_s": round(corpus.facts_s, 1),
        "targets": len(targets),
        "seed": seed,
        "payload_fields": a_numbers,
        "payload_fields_from": str(option_a_numbers) if option_a_numbers else "this run",
        "ladybug": b.numbers,
        "same_depth1_call_sites": same,
        "notes": NOTES,
    }


NOTES = [
    (
        "Vectors are random unit 384-d vectors, the code vector only (no name vector, no sparse keyword vector): "
        "the graph reads none; both A collections hold the same ones, so the graph's cost is their difference."
    ),
    (
        "A answers callers and impact in memory on a CodeGraph built from one scroll of every payload (resolution "
        "at read time, cached per site); its 'who references' is a filtered scroll returning whole rows (text "
        "included). B answers in the database from primary keys; its 'who references' returns sites (path, line)."
    ),
    (
        "A's depth-3 callers list call sites level by level (each definition walked once); B's depth-3 query "
        "returns the distinct definitions reaching the target in 1..3 calls (walk semantics, DISTINCT). Both stop at "
        "1000 (the tools' maximum limit); B's queries stop after 30 s."
    ),
    (
        "B's load includes indexing the facts in memory and resolving every call site: a graph database stores "
        "resolved edges, and resolving needs the whole repository's facts (which A keeps on its rows)."
    ),
    (
        "Memory: A's is tracemalloc (Python heap) while scrolling and building; B's is the process RSS growth "
        "(the database's buffer pool is native memory, not seen by tracemalloc)."
    ),
]


def _row(label: str, a: Any, b: Any) -> str:
    return f"| {label} | {a} | {b} |"


def table(result: dict[str, Any]) -> str:
    a, b = result["payload_fields"], result["ladybug"]
    ms = lambda part: f"{part['p50_ms']} / {part['p90_ms']}"  # noqa: E731
    a_size = a["size"][option_a.WITH_GRAPH]["disk_bytes"]
    b_size = b["size"]["disk_bytes"] + b["wal_size"]["disk_bytes"]
    lines = [
        "| | A: payload fields (Qdrant Edge) | B: LadybugDB (embedded) |",
        "|---|---|---|",
        _row(
            "load / write (s)",
            f"{a['write_s'][option_a.WITH_GRAPH]} (rows with graph; {a['graph_write_s']} more than without)",
            f"{b['load_total_s']} (index {b['index_facts_s']} + resolve {b['resolve_s']} + csv {b['write_csv_s']}"
            f" + COPY {b['copy_s']})",
        ),
        _row(
            "size on disk (MiB)",
            f"{mib(a_size)} (rows; the graph's fields: {mib(a['graph_disk_bytes'])})",
            f"{mib(b_size)} (the graph only)",
        ),
        _row("who references X p50 / p90 (ms)", ms(a["who_references"]), ms(b["who_references"])),
        _row("callers depth 1 p50 / p90 (ms)", ms(a["callers_depth1"]), ms(b["callers_depth1"])),
        _row(
            f"callers depth 3, at most {WALK_LIMIT}, p50 / p90 (ms)",
            f"{ms(a['callers_depth3'])} ({a['truncated_answers']['callers_depth3']} hit the limit)",
            f"{ms(b['callers_depth3'])} ({b['callers_depth3']['at_limit']} hit the limit,"
            f" {b['callers_depth3']['timed_out']} past {option_b.QUERY_TIMEOUT_MS // 1000} s)",
        ),
        _row(f"impact depth 3, at most {WALK_LIMIT}, p50 / p90 (ms)", ms(a["impact_depth3"]), "-"),
        _row(
            "build / open (s)",
            f"{a['scroll_and_build_graph_s']} (scroll every payload + build CodeGraph)",
            f"{b['open_and_first_query_s']} (open + first query)",
        ),
        _row(
            "memory (MiB)",
            f"peak {a['memory']['peak_mib']}, kept {a['memory']['kept_mib']} (tracemalloc)",
            f"RSS +{b['rss_growth_load_mib']} load, +{b['rss_growth_open_and_queries_mib']} open+queries",
        ),
        _row("one file rewritten (s)", _rewrite_a(a["rewrite_one_file"]), _rewrite_b(b["rewrite_one_file"])),
    ]
    return "\n".join(lines)


def _rewrite_a(part: dict[str, Any] | None) -> str:
    return "-" if part is None else f"upsert {part['rows']} rows {part['upsert_s']} (+ rebuild at next read)"


def _rewrite_b(part: dict[str, Any] | None) -> str:
    if part is None:
        return "-"
    return (
        f"re-resolve {part['sites_re_resolved']} sites {part['re_resolve_s']} + delete {part['db_delete_s']}"
        f" + insert {part['db_insert_s']} ({part['edges_rewritten']} edges)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--packages", nargs="+", default=list(DEFAULT_PACKAGES))
    parser.add_argument("--targets", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=None, help="a folder kept after the run (default: a temp one)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--site", type=Path, default=SITE_PACKAGES, help="where the packages are installed")
    parser.add_argument("--option-a-numbers", type=Path, default=None, help="A's numbers from an earlier run (JSON)")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="graph-storage-"))
    try:
        for stale in ("qdrant", "ladybug"):
            shutil.rmtree(work / stale, ignore_errors=True)
        root = work / "corpus"
        packages = copy_packages(args.packages, root, args.site)
        print(f"corpus {packages} at {root}", flush=True)
        corpus = collect_corpus(root, packages)
        print(f"collected {corpus.facts()} in {corpus.collect_s:.1f}s", flush=True)
        result = run(corpus, work, args.targets, args.seed, args.option_a_numbers)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({"corpus": result["corpus"], "collect_s": result["collect_s"]}, indent=2))
    print(table(result))
    print(f"same depth-1 call sites: {result['same_depth1_call_sites']} of {result['targets']} targets")
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
