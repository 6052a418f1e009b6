"""The code graph as a lever of `bench.quality_levers` (issue 29): callers and callees in a chunk's
embedded text, and in ranking without re-embedding. Dev packages only, as every lever there.

One `CodeGraph` per package is built the product's way: each file's facts (`file_facts`) laid on
the same chunks the levers score (`attach_facts`), one `GraphRow` per chunk. Every call site is
resolved once; an edge counts when its confidence is at least `MIN_CONFIDENCE` (an ambiguous
receiver spreads its confidence over its candidates and drops out).

A chunk's own definitions are those named by its `symbol` whose lines overlap the chunk's (every
window of a long function owns it), else the outermost definitions starting on its lines. Its
callees are the definitions that the calls on its lines reach; its callers the enclosing symbols of
the calls that reach its own definitions (a call of a class reaches its `__init__`; a module-level
call has no caller name, but counts). Its neighbours, for ranking, are the chunks of its callees'
definitions and the chunks showing the calls that reach it.

On dev (607 queries; shipped fusion recall@1 0.461, recall@10 0.840, MRR@10 0.580) none helped:
the graph line alone in the code vector lowered recall@1 (0.371 -> 0.354) and MRR (0.490 -> 0.478);
in the fusion, `calls:` only was within noise (0.466 / 0.834 / 0.582) and both parts lost recall@10
(0.825); a ln(1 + call sites) boost and a share of the best caller's/callee's score lost on every
measure at every weight swept. The product's embedded text stays as it is.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from cluster.graph import CodeGraph, DefNode, GraphRow, attach_facts, file_facts
from cluster.space import embedding_text
from cluster.types import Chunk

MIN_CONFIDENCE = 0.5
MAX_NAMES = 5


@dataclass
class ChunkCalls:
    """What the graph says about one chunk."""

    calls: list[str] = field(default_factory=list)  # bare names of the callees, most called first
    called_by: list[str] = field(default_factory=list)  # bare names of the callers' enclosing symbols
    call_sites: int = 0  # call sites (anywhere, module level too) reaching its own definitions
    neighbours: set[int] = field(default_factory=set)  # chunk indices of its callees' and callers' chunks


def package_graph(name: str, files: Iterable[tuple[str, str, list[Chunk]]]) -> tuple[CodeGraph, list[Chunk]]:
    """The graph of one package from its files (path, text, chunks), and the chunks with their facts."""
    rows: list[GraphRow] = []
    attached: list[Chunk] = []
    for path, text, chunks in files:
        with_facts = attach_facts(chunks, file_facts(path, "python", text))
        attached.extend(with_facts)
        rows.extend(GraphRow(c.path, c.language, c.definitions, c.references, c.imports) for c in with_facts)
    return CodeGraph(name, None, rows), attached


def own_definitions(chunk: Chunk, defs: Sequence[DefNode]) -> list[DefNode]:
    """The definitions a chunk stands for, among `defs` (its file's)."""
    named = [
        d for d in defs if d.qualified == chunk.symbol and d.line <= chunk.end_line and d.end_line >= chunk.start_line
    ]
    if named:
        return named
    starting = [d for d in defs if chunk.start_line <= d.line <= chunk.end_line]
    outer = {d.qualified for d in starting}
    return [d for d in starting if d.container is None or d.container not in outer]


def chunk_calls(chunks: Sequence[Chunk], graph: CodeGraph) -> list[ChunkCalls]:
    """Callers and callees of each chunk (all of `graph`'s package), names capped at MAX_NAMES."""
    index = graph.index
    by_path: dict[str, list[DefNode]] = {}
    for d in index.defs:
        by_path.setdefault(d.path, []).append(d)
    own = [own_definitions(c, by_path.get(c.path, [])) for c in chunks]
    spans: dict[str, list[tuple[int, int, int]]] = {}  # path -> (start, end, chunk index)
    chunks_of: dict[int, list[int]] = {}
    for i, (chunk, defs) in enumerate(zip(chunks, own, strict=True)):
        spans.setdefault(chunk.path, []).append((chunk.start_line, chunk.end_line, i))
        for d in defs:
            chunks_of.setdefault(d.id, []).append(i)
    edges = [
        (site, index.defs[def_id])
        for site in index.refs
        if site.call
        for def_id, confidence in graph.resolver.resolve(site)
        if confidence >= MIN_CONFIDENCE
    ]
    out_of: dict[str, list[tuple[int, DefNode]]] = {}  # path -> (line, callee) of its call sites
    into: dict[int, list[tuple[str, int, str | None]]] = {}  # callee id -> (path, line, enclosing) of its calls
    for site, callee in edges:
        out_of.setdefault(site.path, []).append((site.line, callee))
        into.setdefault(callee.id, []).append((site.path, site.line, site.enclosing))
    result: list[ChunkCalls] = []
    for i, chunk in enumerate(chunks):
        mine = {d.id for d in own[i]}
        names = {d.qualified for d in own[i]}
        reached = mine | {c.id for d in own[i] if d.name == "__init__" for c in index.at(d.path, d.container)}
        found = ChunkCalls()
        callees: Counter[str] = Counter()
        for line, callee in out_of.get(chunk.path, ()):
            if chunk.start_line <= line <= chunk.end_line and callee.id not in mine:
                callees[callee.name] += 1
                found.neighbours.update(chunks_of.get(callee.id, ()))
        callers: Counter[str] = Counter()
        for def_id in reached:
            for path, line, enclosing in into.get(def_id, ()):
                if path == chunk.path and enclosing in names:
                    continue  # recursion
                found.call_sites += 1
                if enclosing is not None:
                    callers[enclosing.rpartition(".")[2]] += 1
                found.neighbours.update(j for start, end, j in spans[path] if start <= line <= end)
        found.calls = [n for n, _ in callees.most_common(MAX_NAMES)]
        found.called_by = [n for n, _ in callers.most_common(MAX_NAMES)]
        found.neighbours.discard(i)
        result.append(found)
    return result


def graph_line(calls: ChunkCalls, *, callees: bool = True, callers: bool = True) -> str | None:
    """`calls: a, b; called by: c, d` (the peer's context line, without its `in <Class>`), None when empty."""
    parts = []
    if callees and calls.calls:
        parts.append("calls: " + ", ".join(calls.calls[:MAX_NAMES]))
    if callers and calls.called_by:
        parts.append("called by: " + ", ".join(calls.called_by[:MAX_NAMES]))
    return "; ".join(parts) or None


def graph_text(chunk: Chunk, line: str | None) -> str:
    """embedding_text(chunk) with `line` as the header's last line (the header has no blank line)."""
    text = embedding_text(chunk)
    if not line:
        return text
    header, _, code = text.partition("\n\n")
    return f"{header}\n{line}\n\n{code}"


# --- ranking without re-embedding ----------------------------------------------------------------


def popularity(matrix: np.ndarray, calls: Sequence[ChunkCalls], weight: float) -> np.ndarray:
    """Each chunk's score + weight · ln(1 + the call sites reaching it); -inf (not a candidate) stays."""
    boost = weight * np.log1p(np.array([c.call_sites for c in calls], dtype=float))
    return matrix + boost[None, :]


def propagate(matrix: np.ndarray, calls: Sequence[ChunkCalls], weight: float) -> np.ndarray:
    """Each scored chunk + weight · the best score among its callers' and callees' chunks (scored ones)."""
    finite = np.where(np.isfinite(matrix), matrix, -np.inf)
    out = matrix.copy()
    for j, c in enumerate(calls):
        if not c.neighbours:
            continue
        best = finite[:, sorted(c.neighbours)].max(axis=1)
        gain = np.where(np.isfinite(best), np.maximum(best, 0.0), 0.0)
        out[:, j] = matrix[:, j] + weight * gain
    return out
