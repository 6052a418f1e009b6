"""The two simple competitors `bench.quality` measures in the same run: whole functions, no index.

Pure: no Ray. Given the stripped corpus folder and the queries, each baseline returns one rank per
query (first hit on the target, by `hit_matches`) and one latency per query, measured here.

- Units: every function and method of the corpus (`FunctionDef`/`AsyncFunctionDef` at any depth,
  nested and private ones included), each the whole source from its first decorator to its last
  line, as it stands in the copy. No classes: a class spans its methods and would be a hit for each.
- "function dense (script)": the units' raw text (no header) encoded by the injected encoder (the
  bench passes the packaged MiniLM), brute-force cosine with numpy; latency = query encode + matmul
  + top k.
- "function BM25 (script)": plain BM25 over the same units with `bm25s`, identifiers split into words
  first (snake_case, camelCase), then its default tokenizer and English stopwords (no stemmer);
  latency = tokenize + retrieve.
  A unit that shares no term with the query (score 0) is not returned.
"""

from __future__ import annotations

import ast
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from bench.quality_corpus import Query, first_match_rank
from cluster.index.tokens import identifier_tokens

FUNCTION_DENSE = "function dense (script)"
FUNCTION_BM25 = "function BM25 (script)"
K = 10
BM25_STOPWORDS = "en"


class TextEncoder(Protocol):
    """What the dense baseline needs: `cluster.local.LocalEncoder` is one."""

    def encode(self, texts: list[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class FunctionUnit:
    """One function or method of the corpus: its place (as a search hit would give it) and its text."""

    path: str
    symbol: str
    start_line: int
    end_line: int
    text: str

    def hit(self) -> dict[str, Any]:
        return {"path": self.path, "start_line": self.start_line, "end_line": self.end_line, "symbol": self.symbol}


@dataclass
class BaselineRun:
    """One baseline over one query set: ranks (None = not in the top k) and per-query latencies."""

    label: str
    units: int
    index_s: float  # encoding or indexing the units, once (not in the per-query latencies)
    ranks: list[int | None] = field(default_factory=list)
    latencies_s: list[float] = field(default_factory=list)


# --- units ----------------------------------------------------------------------------------------


def source_units(source: bytes | str, path: str) -> list[FunctionUnit]:
    """Every function and method of one file, in source order (outer before inner)."""
    data = source.encode("utf-8") if isinstance(source, str) else source
    tree = ast.parse(data)
    lines = data.splitlines(keepends=True)  # bytes split only on \n, \r\n, \r: ast's line numbering
    units: list[FunctionUnit] = []

    def walk(node: ast.AST, scope: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                end = child.end_lineno or child.lineno
                text = b"".join(lines[start - 1 : end]).decode("utf-8", errors="replace")
                units.append(FunctionUnit(path, ".".join([*scope, child.name]), start, end, text))
                walk(child, [*scope, child.name])
            elif isinstance(child, ast.ClassDef):
                walk(child, [*scope, child.name])
            else:
                walk(child, scope)

    walk(tree, [])
    return units


def function_units(corpus: Path) -> list[FunctionUnit]:
    """The units of every `.py` file under the corpus folder (paths relative to it, as in the queries)."""
    units: list[FunctionUnit] = []
    for file in sorted(corpus.rglob("*.py")):
        units.extend(source_units(file.read_bytes(), file.relative_to(corpus).as_posix()))
    if not units:
        raise ValueError(f"no function under {corpus}")
    return units


# --- ranking ----------------------------------------------------------------------------------------


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k highest scores, best first; ties go to the lower index (deterministic)."""
    return np.argsort(-scores, kind="stable")[:k]  # a full sort: ~0.1 ms for a few thousand units


def _rank(units: Sequence[FunctionUnit], picked: Sequence[int], query: Query) -> int | None:
    return first_match_rank([units[i].hit() for i in picked], query)


def dense_baseline(
    units: Sequence[FunctionUnit], queries: Sequence[Query], encoder: TextEncoder, k: int = K
) -> BaselineRun:
    """MiniLM (or any encoder) over whole functions, brute-force cosine (the encoder L2-normalises)."""
    t0 = time.perf_counter()
    matrix = np.asarray(encoder.encode([unit.text for unit in units]), dtype=np.float32)
    run = BaselineRun(FUNCTION_DENSE, len(units), round(time.perf_counter() - t0, 2))
    for query in queries:
        t0 = time.perf_counter()
        vector = np.asarray(encoder.encode([query.query]), dtype=np.float32)[0]
        picked = top_k(matrix @ vector, k)
        run.latencies_s.append(time.perf_counter() - t0)
        run.ranks.append(_rank(units, picked.tolist(), query))
    return run


def bm25_baseline(units: Sequence[FunctionUnit], queries: Sequence[Query], k: int = K) -> BaselineRun:
    """Plain BM25 (bm25s defaults: lucene scoring, k1 1.5, b 0.75) over whole functions."""
    import bm25s  # type: ignore[import-untyped]  # bm25s ships neither types nor py.typed

    def tokenize(texts: list[str]) -> list[list[str]]:
        # Identifiers split first (parse_config → parse config): bm25s alone keeps `parse_config` one
        # token, and that baseline (recall@10 0.453 on dev) would be a straw man.
        split = [" ".join(identifier_tokens(text)) for text in texts]
        tokens: list[list[str]] = bm25s.tokenize(split, stopwords=BM25_STOPWORDS, return_ids=False, show_progress=False)
        return tokens

    t0 = time.perf_counter()
    retriever = bm25s.BM25()
    retriever.index(tokenize([unit.text for unit in units]), show_progress=False)
    run = BaselineRun(FUNCTION_BM25, len(units), round(time.perf_counter() - t0, 2))
    depth = min(k, len(units))
    for query in queries:
        t0 = time.perf_counter()
        documents, scores = retriever.retrieve(tokenize([query.query]), k=depth, show_progress=False)
        picked = [int(doc) for doc, score in zip(documents[0], scores[0], strict=True) if score > 0]
        run.latencies_s.append(time.perf_counter() - t0)
        run.ranks.append(_rank(units, picked, query))
    return run


def run_baselines(
    corpus: Path, queries: Sequence[Query], encoder: TextEncoder, emit: Callable[[str], None] = print
) -> list[BaselineRun]:
    """Both baselines over one corpus folder and its queries: dense first, then BM25."""
    units = function_units(corpus)
    emit(f"baselines: {len(units)} function units; {len(queries)} queries")
    runs = []
    for baseline in (lambda: dense_baseline(units, queries, encoder), lambda: bm25_baseline(units, queries)):
        t0 = time.perf_counter()
        run = baseline()
        emit(f"{run.label}: done ({time.perf_counter() - t0:.1f}s, of which {run.index_s}s encoding/indexing)")
        runs.append(run)
    return runs
