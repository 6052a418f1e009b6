"""The levers behind the hybrid score, measured on the DEV packages only (issue 16's tuning record).

    python -m bench.quality_levers            # ~4 min on 2 free cores (more with the graph's three texts)

No Ray, no store: the dev corpus of `bench.quality` is chunked by the project's chunker, each chunk
embedded three ways with the packaged MiniLM (code under the header = the code vector, name text =
the name vector, bare code), and the keyword leg is the project's BM25 terms with the IDF Qdrant's
`idf` modifier applies (ln((N - n + 0.5) / (n + 0.5) + 1)). Every query is scored against every
chunk, so each lever is measured exactly, without candidate cut-offs unless the row says so. The
hit rule and metrics are `bench.quality`'s. The test packages are refused: no tuning decision may
look at them. The `graph:` rows are issue 29's code-graph levers (`bench.quality_graph_lever`).
"""

from __future__ import annotations

import argparse
import functools
import itertools
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from bench.quality_corpus import (
    DEV_PACKAGES,
    TEST_PACKAGES,
    Query,
    build_corpus,
    corpus_dir,
    first_match_rank,
    hit_matches,
    mrr_at,
    recall_at,
)
from bench.quality_graph_lever import (
    ChunkCalls,
    chunk_calls,
    graph_line,
    graph_text,
    package_graph,
    popularity,
    propagate,
)
from cluster.environment import set_local_env_defaults
from cluster.index.keywords import chunk_keywords, query_keywords
from cluster.index.representations import name_text
from cluster.ingest.chunking import chunk_file
from cluster.settings import ChunkingSettings, EmbeddingSettings
from cluster.space import embedding_text
from cluster.types import Chunk, FusionParams

K = 10
WEIGHTS_NAME = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7)
WEIGHTS_KEYWORD = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4)


@dataclass
class Scores:
    """Query × chunk score matrices of one corpus."""

    chunks: list[Chunk]
    queries: list[Query]
    code: np.ndarray  # cosine with the code vector (header + code)
    name: np.ndarray  # cosine with the name vector
    bare: np.ndarray  # cosine with the bare code (no header)
    bm25: np.ndarray  # the store's BM25 score
    calls: list[ChunkCalls] = field(default_factory=list)  # the code graph's word on each chunk
    graph: dict[str, np.ndarray] = field(default_factory=dict)  # cosine with the code vector + a graph line


def bm25_scores(chunks: Sequence[Chunk], queries: Sequence[Query]) -> np.ndarray:
    """Query × chunk BM25 as the store computes it: the chunk's term weights × IDF × query weights."""
    from scipy.sparse import csr_matrix  # type: ignore[import-untyped]  # scipy ships no stubs here

    columns: dict[int, int] = {}
    rows, cols, values = [], [], []
    for i, chunk in enumerate(chunks):
        terms = chunk_keywords(chunk.text, chunk.path, chunk.symbol)
        for term, value in zip(terms.indices, terms.values, strict=True):
            rows.append(i)
            cols.append(columns.setdefault(term, len(columns)))
            values.append(value)
    documents = csr_matrix((values, (rows, cols)), shape=(len(chunks), len(columns)))
    frequency = np.bincount(cols, minlength=len(columns))
    idf = np.log((len(chunks) - frequency + 0.5) / (frequency + 0.5) + 1)
    q_rows, q_cols, q_values = [], [], []
    for i, query in enumerate(queries):
        terms = query_keywords(query.query)
        for term, value in zip(terms.indices, terms.values, strict=True):
            if term in columns:
                q_rows.append(i)
                q_cols.append(columns[term])
                q_values.append(value * idf[columns[term]])
    asked = csr_matrix((q_values, (q_rows, q_cols)), shape=(len(queries), len(columns)))
    return np.asarray((asked @ documents.T).todense())


def score_corpus(packages: Sequence[str], work: Path) -> Scores:
    from cluster.local.encoder import LocalEncoder

    queries = build_corpus(packages, work)
    root = corpus_dir(work)
    files = []
    for path in sorted(root.rglob("*.py")):
        rel, text = path.relative_to(root).as_posix(), path.read_text()
        files.append((rel, text, chunk_file(rel, text, ChunkingSettings())))
    chunks: list[Chunk] = []
    calls: list[ChunkCalls] = []
    for package, group in itertools.groupby(files, key=lambda f: f[0].split("/", 1)[0]):
        mine = list(group)
        graph, _ = package_graph(package, mine)
        plain = [c for _, _, cs in mine for c in cs]
        chunks.extend(plain)
        calls.extend(chunk_calls(plain, graph))
        print(f"  {package}: {graph!r}", flush=True)
    print(f"{len(queries)} queries, {len(chunks)} chunks; embedding each chunk three ways, then with the graph")
    encoder = LocalEncoder(EmbeddingSettings())
    asked = encoder.encode([q.query for q in queries])
    code = encoder.encode([embedding_text(c) for c in chunks])
    name = encoder.encode([name_text(c) for c in chunks])
    bare = encoder.encode([c.text for c in chunks])
    graph_scores = {}
    for variant, callees, callers in (("both", True, True), ("calls", True, False), ("called_by", False, True)):
        lines = [graph_line(c, callees=callees, callers=callers) for c in calls]
        changed = [i for i, line in enumerate(lines) if line]
        print(f"  graph line '{variant}' on {len(changed)} of {len(chunks)} chunks", flush=True)
        vectors = code.copy()
        vectors[changed] = encoder.encode([graph_text(chunks[i], lines[i]) for i in changed])
        graph_scores[variant] = asked @ vectors.T
    scores = Scores(chunks, queries, asked @ code.T, asked @ name.T, asked @ bare.T, bm25_scores(chunks, queries))
    scores.calls, scores.graph = calls, graph_scores
    return scores


def ranks(s: Scores, matrix: np.ndarray) -> list[int | None]:
    out: list[int | None] = []
    for i, query in enumerate(s.queries):
        top = np.argsort(-matrix[i], kind="stable")[:K]
        out.append(first_match_rank([s.chunks[j].model_dump() for j in top if np.isfinite(matrix[i, j])], query))
    return out


def metrics(found: Sequence[int | None]) -> tuple[float, float, float, float]:
    """recall@1, recall@5, recall@10, MRR@10: bench.quality's measures."""
    return (recall_at(found, 1), recall_at(found, 5), recall_at(found, K), mrr_at(found, K))


def rrf(s: Scores, dense_weight: float, keyword_weight: float, k: int = 60, candidates: int = 50) -> np.ndarray:
    """Weighted reciprocal-rank fusion of the code leg and the keyword leg (the search until issue 16)."""
    fused = np.full_like(s.code, -np.inf)
    for i in range(len(s.queries)):
        row = np.zeros(s.code.shape[1])
        seen = np.zeros(s.code.shape[1], dtype=bool)
        for matrix, weight in ((s.code, dense_weight), (s.bm25, keyword_weight)):
            order = np.argsort(-matrix[i], kind="stable")[:candidates]
            order = order[matrix[i, order] > 0] if matrix is s.bm25 else order
            row[order] += weight / (k + 1 + np.arange(len(order)))
            seen[order] = True
        fused[i, seen] = row[seen]
    return fused


def weighted(s: Scores, name_weight: float, keyword_weight: float, norm: str = "max") -> np.ndarray:
    best = s.bm25.max(axis=1, keepdims=True)
    keyword = s.bm25 / np.maximum(best, 1e-9) if norm == "max" else s.bm25 / (s.bm25 + float(norm))
    return s.code + name_weight * s.name + keyword_weight * keyword


def capped(s: Scores, params: FusionParams) -> np.ndarray:
    """The shipped scoring with its candidate cut: only chunks in some leg's top `candidates` score."""
    full = weighted(s, params.name_weight, params.keyword_weight)
    out = np.full_like(full, -np.inf)
    for i in range(len(s.queries)):
        pool: set[int] = set()
        for matrix in (s.code, s.name, s.bm25):
            order = np.argsort(-matrix[i], kind="stable")[: params.candidates]
            pool.update(int(j) for j in order if matrix is not s.bm25 or matrix[i, j] > 0)
        keep = sorted(pool)
        out[i, keep] = full[i, keep]
    return out


def _objective(m: tuple[float, float, float, float]) -> float:
    return m[0] + m[2] + m[3]  # recall@1 + recall@10 + MRR@10


def learned(s: Scores, candidates: int = 50) -> np.ndarray:
    """A logistic regression on (code, name, bm25/max) over each query's candidates, trained per dev
    package on the other dev packages (pointwise: hit or not), scoring the held-out package."""
    from sklearn.linear_model import LogisticRegression  # type: ignore[import-untyped]  # no stubs either

    keyword = s.bm25 / np.maximum(s.bm25.max(axis=1, keepdims=True), 1e-9)
    packages = [q.package for q in s.queries]
    pools = []
    for i, query in enumerate(s.queries):
        pool = sorted({int(j) for m in (s.code, s.name, s.bm25) for j in np.argsort(-m[i], kind="stable")[:candidates]})
        features = np.column_stack([s.code[i, pool], s.name[i, pool], keyword[i, pool]])
        labels = np.array([hit_matches(s.chunks[j].model_dump(), query) for j in pool])
        pools.append((pool, features, labels))
    out = np.full_like(s.code, -np.inf)
    for package in sorted(set(packages)):
        train = [pools[i] for i, p in enumerate(packages) if p != package]
        model = LogisticRegression(max_iter=1000).fit(
            np.vstack([f for _, f, _ in train]), np.concatenate([y for _, _, y in train])
        )
        for i, p in enumerate(packages):
            if p == package:
                pool, features, _ = pools[i]
                out[i, pool] = model.decision_function(features)
    return out


def held_out_choice(s: Scores, grid: dict[tuple[float, float], list[int | None]]) -> list[int | None]:
    """Per dev package, the grid point best on the OTHER dev packages, applied to this one."""
    packages = [q.package for q in s.queries]
    chosen: list[int | None] = [None] * len(s.queries)
    for package in sorted(set(packages)):
        others = [i for i, p in enumerate(packages) if p != package]
        best = max(grid, key=lambda w: _objective(metrics([grid[w][i] for i in others])))
        print(f"  without {package}: chose name {best[0]}, keyword {best[1]}", flush=True)
        for i, p in enumerate(packages):
            if p == package:
                chosen[i] = grid[best][i]
    return chosen


POPULARITY_WEIGHTS = (0.005, 0.01, 0.02)
PROPAGATION_WEIGHTS = (0.05, 0.1, 0.2)


def _boosted(
    lever: Callable[[np.ndarray, list[ChunkCalls], float], np.ndarray],
    base: Callable[[], np.ndarray],
    s: Scores,
    weight: float,
) -> np.ndarray:
    return lever(base(), s.calls, weight)


def graph_rows(s: Scores, shipped: FusionParams) -> list[tuple[str, Callable[[], np.ndarray]]]:
    """Issue 29's graph levers: callers/callees in the code vector's text, and in ranking."""
    with_graph = {variant: replace(s, code=matrix) for variant, matrix in s.graph.items()}
    rows: list[tuple[str, Callable[[], np.ndarray]]] = [
        ("graph: code + `calls; called by` line, vector alone", lambda: s.graph["both"]),
        ("graph: code + `calls` only, vector alone", lambda: s.graph["calls"]),
        ("graph: code + `called by` only, vector alone", lambda: s.graph["called_by"]),
        ("graph: shipped fusion, code leg = code + calls; called by", lambda: capped(with_graph["both"], shipped)),
        ("graph: shipped fusion, code leg = code + calls", lambda: capped(with_graph["calls"], shipped)),
        ("graph: shipped fusion, code leg = code + called by", lambda: capped(with_graph["called_by"], shipped)),
    ]
    base = functools.partial(capped, s, shipped)
    boosts = [(f"{w} ln(1 + call sites)", popularity, w) for w in POPULARITY_WEIGHTS]
    boosts += [(f"{w} best caller/callee score", propagate, w) for w in PROPAGATION_WEIGHTS]
    rows.extend(
        (f"graph: shipped + {label}", functools.partial(_boosted, lever, base, s, w)) for label, lever, w in boosts
    )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.quality_levers")
    parser.add_argument("--packages", nargs="+", default=list(DEV_PACKAGES), help="dev packages only")
    args = parser.parse_args(argv)
    if set(args.packages) & set(TEST_PACKAGES):
        parser.error(f"the test packages {TEST_PACKAGES} are held out: no lever is tuned on them")
    set_local_env_defaults()
    s = score_corpus(args.packages, Path(tempfile.mkdtemp(prefix="samespace-levers-")))
    shipped = FusionParams()
    rows: list[tuple[str, Callable[[], np.ndarray]]] = [
        ("code vector (header + code)", lambda: s.code),
        ("bare code vector (no header)", lambda: s.bare),
        ("name vector alone", lambda: s.name),
        ("BM25 (keyword leg)", lambda: s.bm25),
        ("RRF k60 code 1 : keyword 1 (before issue 16)", lambda: rrf(s, 1, 1)),
        ("RRF k60 code 1 : keyword 0.3", lambda: rrf(s, 1, 0.3)),
        ("code + 0.15 bm25/max (no name vector)", lambda: weighted(s, 0.0, 0.15)),
        ("code + 0.3 name (no keyword)", lambda: weighted(s, 0.3, 0.0)),
        ("code + 0.4 name + 0.4 bm25/(bm25+5)", lambda: weighted(s, 0.4, 0.4, "5")),
        ("code + 0.3 name + 0.4 bm25/(bm25+20)", lambda: weighted(s, 0.3, 0.4, "20")),
        ("code + 0.4 name + 0.2 bm25/max, all chunks", lambda: weighted(s, 0.4, 0.2)),
        ("  + 0.2 bare code vector (a third vector)", lambda: weighted(s, 0.4, 0.2) + 0.2 * s.bare),
        (f"shipped: {shipped.candidates} candidates per leg", lambda: capped(s, shipped)),
        ("  20 candidates per leg", lambda: capped(s, shipped.model_copy(update={"candidates": 20}))),
        ("  100 candidates per leg", lambda: capped(s, shipped.model_copy(update={"candidates": 100}))),
        ("learned: logistic regression, leave-one-package-out", lambda: learned(s)),
        *graph_rows(s, shipped),
    ]
    print("| lever (dev) | recall@1 | recall@5 | recall@10 | MRR@10 |\n|---|---|---|---|---|")
    for label, make in rows:
        r1, r5, r10, mrr = metrics(ranks(s, make()))
        print(f"| {label} | {r1:.3f} | {r5:.3f} | {r10:.3f} | {mrr:.3f} |", flush=True)
    print("\nweights chosen with each dev package held out (grid name × keyword, bm25/max):")
    grid = {(b, a): ranks(s, weighted(s, b, a)) for b, a in itertools.product(WEIGHTS_NAME, WEIGHTS_KEYWORD)}
    r1, r5, r10, mrr = metrics(held_out_choice(s, grid))
    print(f"| leave-one-package-out choice | {r1:.3f} | {r5:.3f} | {r10:.3f} | {mrr:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
