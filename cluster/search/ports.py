"""What the search service needs from the cluster, as Protocols: the index, a query's vector, a reranker.

Every read of the index names its caller (`reader`, `cluster.auth.Reader`): the index actor answers
only with the indexes that reader may read (`cluster.search.IndexReads`).

Plain Python: a Serve replica hands `CodeSearchService` the Ray handles wrapped by
`actors/search_ports.py` (and `actors.query_path.QueryPath` for the vector); a test hands it fakes.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from cluster.auth import Reader
from cluster.graph import GraphAnswer, GraphQuery
from cluster.grep import GrepRequest, GrepResult
from cluster.history import CommitSearchResult, Comparison, SymbolHistory, WhatChanged
from cluster.index import SearchQuery
from cluster.ingest import SourceLines
from cluster.search.models import FileHit, Neighbors, RepoOverview
from cluster.search.pages import SearchAnswer, SymbolPage, SymbolQuery
from cluster.space import EncoderIdentity

__all__ = ["IndexStatusSource", "QueryEncoder", "QueryVector", "Reranker", "SearchIndex"]

QueryVector = tuple[np.ndarray, EncoderIdentity, str]  # a query's vector, the space it lives in, the provider


class IndexStatusSource(Protocol):
    """Every index's record and every build's state (`IndexActor.status`)."""

    async def status(self, *, reader: Reader) -> dict[str, Any]: ...


class SearchIndex(IndexStatusSource, Protocol):
    """The index actor's reads: the search, exact lines, and the code maps' look-ups."""

    async def search(self, query: SearchQuery, *, reader: Reader) -> SearchAnswer: ...

    async def read_lines(
        self, repo: str, path: str, start_line: int, end_line: int, *, reader: Reader
    ) -> SourceLines: ...

    async def read_file(self, repo: str, path: str, *, reader: Reader) -> SourceLines: ...

    async def search_symbols(self, request: SymbolQuery, *, reader: Reader) -> SymbolPage: ...

    async def search_files(self, repo: str | None, query: str, limit: int, *, reader: Reader) -> list[FileHit]: ...

    async def neighbors(self, repo: str | None, path: str, line: int, count: int, *, reader: Reader) -> Neighbors: ...

    async def overview(self, repo: str | None, *, reader: Reader) -> RepoOverview: ...

    async def navigate(self, query: GraphQuery, *, reader: Reader) -> GraphAnswer: ...

    async def what_changed(
        self, repo: str | None, since: str, until: str | None, path: str | None, limit: int, *, reader: Reader
    ) -> WhatChanged: ...

    async def symbol_history(
        self, repo: str | None, symbol: str, path: str | None, limit: int, *, reader: Reader
    ) -> SymbolHistory: ...

    async def search_commits(
        self, text: str, query: SearchQuery, since: str | None, *, reader: Reader
    ) -> CommitSearchResult: ...

    async def changed_paths(self, repo: str | None, since: str, *, reader: Reader) -> list[str]: ...

    async def compare(self, repo: str | None, base: str, head: str, limit: int, *, reader: Reader) -> Comparison: ...

    async def grep(self, request: GrepRequest, *, reader: Reader) -> GrepResult: ...


class QueryEncoder(Protocol):
    """A query's vector: `actors.query_path.QueryPath` (one hop to a local embedder, else the
    dispatcher), and whether any provider serves reranking."""

    async def encode_query(self, text: str, project: str) -> QueryVector: ...

    async def rerankers(self) -> bool: ...


class Reranker(Protocol):
    """The reranker role's dispatcher: scores of the documents for the query, and who gave them
    (NoProviderLeft when none serves)."""

    async def rerank(self, query: str, documents: list[str], project: str) -> tuple[list[float], str]: ...
