"""Option B of `bench.graph_storage`: an embedded graph database (LadybugDB, the maintained fork of Kuzu).

A graph database stores resolved edges, so its load starts where option A's reads end: the facts
indexed in memory (`CodeGraph` over the chunks) and every call site resolved by the project's own
resolver; that resolution is part of the load. Schema:

    Def(id, name, qualified, path, line, kind)     one per definition, and one `<module>` per file
    CALLS(Def → Def, confidence, line, site)       one per resolved edge of a call site; a site at
                                                   module level (or in no known definition) starts
                                                   at its file's `<module>`
    File(path) -USES(line, enclosing, call)-> Name(name)
                                                   every reference as written, unresolved: "who
                                                   references X" by name, like option A's `refs`

Loaded by bulk `COPY ... FROM` CSV files. Callers and transitive callers run in the database, by
Cypher, from the definitions' primary keys.
"""

from __future__ import annotations

import csv
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import real_ladybug as lb

from bench.graph_storage_common import WALK_LIMIT, Target, disk_usage, latencies, mean, rss_bytes, summary_ms, timed
from cluster.graph import CodeGraph

MODULE = "<module>"
DEF_TABLE = "Def(id INT64, name STRING, qualified STRING, path STRING, line INT64, kind STRING, PRIMARY KEY(id))"
SCHEMA = (
    f"CREATE NODE TABLE {DEF_TABLE}",
    "CREATE REL TABLE CALLS(FROM Def TO Def, confidence DOUBLE, line INT64, site INT64)",
    "CREATE NODE TABLE File(path STRING, PRIMARY KEY(path))",
    "CREATE NODE TABLE Name(name STRING, PRIMARY KEY(name))",
    "CREATE REL TABLE USES(FROM File TO Name, line INT64, enclosing STRING, call BOOLEAN)",
)
CALLERS = (
    "MATCH (a:Def)-[e:CALLS]->(b:Def) WHERE b.id IN $ids RETURN DISTINCT e.site, a.path, e.line, a.qualified, a.kind"
)
CALLERS_DEPTH3 = f"MATCH (a:Def)-[:CALLS*1..3]->(b:Def) WHERE b.id IN $ids RETURN DISTINCT a.id LIMIT {WALK_LIMIT}"
QUERY_TIMEOUT_MS = 30_000  # a query running longer is stopped and counted
WHO_REFERENCES = "MATCH (f:File)-[u:USES]->(n:Name {name: $name}) RETURN f.path, u.line, u.enclosing, u.call"


@dataclass(frozen=True)
class Edge:
    source: int
    target: int
    confidence: float
    line: int
    site: int


def module_ids(graph: CodeGraph) -> dict[str, int]:
    """The id of each file's `<module>` node: after every definition's."""
    first = len(graph.index.defs)
    return {path: first + i for i, path in enumerate(sorted(graph.index.module_by_path))}


def resolve_edges(graph: CodeGraph) -> tuple[list[Edge], int]:
    """Every call site's resolved edges, from the definition enclosing it (its file's `<module>` when
    none), and how many sites in a named definition the index could not place (sent to `<module>`)."""
    modules = module_ids(graph)
    edges: list[Edge] = []
    unplaced = 0
    for site in graph.index.refs:
        if not site.call:
            continue
        resolved = graph.resolver.resolve(site)
        if not resolved:
            continue
        sources = [d.id for d in graph.index.at(site.path, site.enclosing)]
        if not sources:
            unplaced += site.enclosing is not None
            sources = [modules[site.path]]
        edges.extend(Edge(s, t, c, site.line, site.id) for s in sources for t, c in resolved)
    return edges, unplaced


def _write_csv(path: Path, rows: Iterable[Sequence[Any]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as out:
        csv.writer(out).writerows(rows)


def write_csvs(
    graph: CodeGraph, edges: Sequence[Edge], folder: Path, modules: dict[str, int] | None = None
) -> dict[str, Path]:
    """The tables as CSV files, in the order the schema needs them loaded (`modules`: the `<module>`
    nodes to write, all of the graph's by default)."""
    folder.mkdir(parents=True, exist_ok=True)
    index = graph.index
    files = {name: folder / f"{name}.csv" for name in ("Def", "CALLS", "File", "Name", "USES")}
    defs = ((d.id, d.name, d.qualified, d.path, d.line, d.kind) for d in index.defs)
    module_rows = ((i, MODULE, MODULE, path, 0, "module") for path, i in (modules or module_ids(graph)).items())
    _write_csv(files["Def"], (*defs, *module_rows))
    _write_csv(files["CALLS"], ((e.source, e.target, e.confidence, e.line, e.site) for e in edges))
    _write_csv(files["File"], ((path,) for path in sorted(index.module_by_path)))
    _write_csv(files["Name"], ((name,) for name in sorted(index.refs_by_name)))
    uses = ((r.path, r.name, r.line, r.enclosing or "", r.call) for r in index.refs)
    _write_csv(files["USES"], uses)
    return files


def load(database: Path, csvs: dict[str, Path]) -> tuple[lb.Database, lb.Connection]:
    db = lb.Database(str(database))
    conn = lb.Connection(db)
    for statement in SCHEMA:
        conn.execute(statement)
    for table, path in csvs.items():
        conn.execute(f"COPY {table} FROM '{path}' (HEADER=false)")
    return db, conn


def rows(conn: lb.Connection, query: str, parameters: dict[str, Any]) -> list[list[Any]]:
    result = conn.execute(query, parameters)
    assert not isinstance(result, list)  # one statement, one result
    return [list(row) for row in result.get_all()]


def callers(conn: lb.Connection, target: Target) -> set[tuple[str, int, str | None]]:
    """The call sites reaching `target` (what option A's `callers` depth 1 lists): path, line, enclosing."""
    found = rows(conn, CALLERS, {"ids": list(target.reached)})
    return {(path, line, None if kind == "module" else qualified) for _, path, line, qualified, kind in found}


def callers_depth3(conn: lb.Connection, target: Target) -> list[int] | None:
    """The definitions (or `<module>`s) reaching `target` through one to three calls, at most
    `WALK_LIMIT`; None when the query ran past `QUERY_TIMEOUT_MS`."""
    try:
        return [row[0] for row in rows(conn, CALLERS_DEPTH3, {"ids": list(target.reached)})]
    except RuntimeError as error:  # the binding says "Interrupted." when the timeout stops a query
        if "interrupt" in str(error).lower():
            return None
        raise


def who_references(conn: lb.Connection, name: str) -> list[list[Any]]:
    return rows(conn, WHO_REFERENCES, {"name": name})


@dataclass
class LadybugRun:
    numbers: dict[str, Any]
    depth1: list[set[tuple[str, int, str | None]]]


def measure(
    folder: Path,
    graph: CodeGraph,
    index_s: float,
    targets: Sequence[Target],
    edit_path: str | None = None,
    resolved: tuple[list[Edge], int, float] | None = None,
) -> LadybugRun:
    """Resolve, load and query. `graph` is the graph of the chunks, which took `index_s` to build;
    `resolved` is what `resolve_edges` gave on it, fresh, and how long it took (None: resolve here)."""
    if resolved is None:
        (edges, unplaced), resolve_s = timed(lambda: resolve_edges(graph))
    else:
        edges, unplaced, resolve_s = resolved
    csvs, csv_s = timed(lambda: write_csvs(graph, edges, folder / "csv"))
    database = folder / "graph.lbdb"
    rss = rss_bytes()
    (db, conn), copy_s = timed(lambda: load(database, csvs))
    rss_load = rss_bytes() - rss
    conn.close()
    db.close()
    size = disk_usage(database)
    wal = database.with_name(database.name + ".wal")
    wal_size = disk_usage(wal) if wal.exists() else {"disk_bytes": 0, "apparent_bytes": 0}

    rss = rss_bytes()
    start = time.perf_counter()
    db = lb.Database(str(database))
    conn = lb.Connection(db)
    conn.set_query_timeout(QUERY_TIMEOUT_MS)
    first = callers(conn, targets[0]) if targets else set()
    open_s = time.perf_counter() - start
    refs_s, refs_answers = latencies([t.name for t in targets], lambda name: who_references(conn, name))
    d1_s, depth1 = latencies(targets, lambda t: callers(conn, t))
    d3_s, depth3 = latencies(targets, lambda t: callers_depth3(conn, t))
    rss_queries = rss_bytes() - rss
    del first
    numbers = {
        "definitions": len(graph.index.defs),
        "module_nodes": len(graph.index.module_by_path),
        "call_edges": len(edges),
        "call_sites_resolved": len({e.site for e in edges}),
        "sites_in_unplaced_definitions": unplaced,
        "uses_edges": len(graph.index.refs),
        "index_facts_s": round(index_s, 2),
        "resolve_s": round(resolve_s, 2),
        "write_csv_s": round(csv_s, 2),
        "copy_s": round(copy_s, 2),
        "load_total_s": round(index_s + resolve_s + csv_s + copy_s, 2),
        "size": size,
        "wal_size": wal_size,
        "csv_bytes": sum(disk_usage(p)["apparent_bytes"] for p in csvs.values()),
        "rss_growth_load_mib": round(rss_load / 2**20, 1),
        "open_and_first_query_s": round(open_s, 3),
        "rss_growth_open_and_queries_mib": round(rss_queries / 2**20, 1),
        "who_references": {**summary_ms(refs_s), "sites_found_mean": mean(len(a) for a in refs_answers)},
        "callers_depth1": {**summary_ms(d1_s), "sites_mean": mean(len(a) for a in depth1)},
        "callers_depth3": {
            **summary_ms(d3_s),
            "callers_mean": mean(len(a) for a in depth3 if a is not None),
            "timed_out": sum(a is None for a in depth3),
            "at_limit": sum(a is not None and len(a) == WALK_LIMIT for a in depth3),
        },
    }
    print(f"B queried: {numbers}", flush=True)
    conn.set_query_timeout(0)  # the rewrite runs to its end, however long
    try:
        numbers["rewrite_one_file"] = (
            _rewrite_one_file(conn, graph, edges, edit_path, folder / "rewrite") if edit_path else None
        )
    except RuntimeError as error:  # a failed rewrite is a finding, not a lost run
        numbers["rewrite_one_file"] = {"path": edit_path, "error": str(error)}
    conn.close()
    db.close()
    return LadybugRun(numbers, depth1)


def _rewrite_one_file(
    conn: lb.Connection, graph: CodeGraph, edges: Sequence[Edge], path: str, folder: Path
) -> dict[str, Any]:
    """An incremental reindex of `path` as this option pays it, its content unchanged (the same graph
    after): re-resolve the sites that may reach or leave the file (its own, and every site named like
    one of its definitions or their import aliases) on the in-memory index with an empty cache; then,
    in the database, delete the file's definitions with their edges (DETACH DELETE) and its USES,
    delete the other edges of the re-resolved sites (by caller and site), and bulk-copy it all in again."""
    index = graph.index
    file_defs = [d for d in index.defs if d.path == path]
    names = {d.name for d in file_defs}
    names |= {alias for name in list(names) for alias, _ in graph._aliases(name)}  # noqa: SLF001
    start = time.perf_counter()
    sites = {r.id for r in index.refs if r.call and (r.path == path or r.name in names)}
    graph.resolver._cache.clear()  # noqa: SLF001 - re-resolve as a changed file would need
    for site_id in sites:
        graph.resolver.resolve(index.refs[site_id])
    resolve_s = time.perf_counter() - start

    module = module_ids(graph)[path]
    def_ids = {d.id for d in file_defs} | {module}
    changed = [e for e in edges if e.site in sites or e.source in def_ids or e.target in def_ids]
    elsewhere = sorted({(e.source, e.site) for e in changed if e.source not in def_ids})
    print(f"rewrite {path}: {len(sites)} sites, {len(changed)} edges, {len(elsewhere)} outside it", flush=True)
    start = time.perf_counter()
    conn.execute("MATCH (d:Def) WHERE d.id IN $ids DETACH DELETE d", {"ids": sorted(def_ids)})
    conn.execute("MATCH (f:File {path: $p})-[u:USES]->() DELETE u", {"p": path})
    conn.execute(
        "UNWIND $pairs AS p MATCH (a:Def {id: p[1]})-[e:CALLS]->() WHERE e.site = p[2] DELETE e",
        {"pairs": [list(pair) for pair in elsewhere]},
    )
    delete_s = time.perf_counter() - start
    start = time.perf_counter()
    one_file = CodeGraph(graph.repo, None, ())  # the file's part of each table, as CSV, bulk-copied in
    one_file.index.defs = file_defs
    one_file.index.refs = [r for r in index.refs if r.path == path]
    csvs = write_csvs(one_file, changed, folder, modules={path: module})
    for table in ("Def", "CALLS", "USES"):
        conn.execute(f"COPY {table} FROM '{csvs[table]}' (HEADER=false)")
    insert_s = time.perf_counter() - start
    count = rows(conn, "MATCH ()-[e:CALLS]->() RETURN count(e)", {})[0][0]
    uses_count = rows(conn, "MATCH ()-[u:USES]->() RETURN count(u)", {})[0][0]
    return {
        "path": path,
        "definitions": len(file_defs),
        "sites_re_resolved": len(sites),
        "edges_rewritten": len(changed),
        "re_resolve_s": round(resolve_s, 4),
        "db_delete_s": round(delete_s, 4),
        "db_insert_s": round(insert_s, 4),
        "call_edges_after": count,
        "call_edges_before": len(edges),
        "uses_edges_after": uses_count,
        "uses_edges_before": len(index.refs),
    }
