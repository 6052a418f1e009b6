"""The index actor's reads as the search service reaches them (`cluster.search.SearchIndex`), in
process: the same `IndexReads` the actor holds (per-index access included), over a real catalogue.
Each call records the reader it was made for."""

from __future__ import annotations

from typing import Any

from cluster.auth import Reader
from cluster.graph import GraphAnswer, GraphQuery
from cluster.grep import GrepRequest, GrepResult
from cluster.history import CommitSearchResult, Comparison, SymbolHistory, WhatChanged
from cluster.index import IndexCatalog, SearchQuery
from cluster.ingest import SourceLines
from cluster.search import FileHit, IndexReads, Neighbors, RepoOverview, SearchAnswer, SymbolPage, SymbolQuery
from cluster.settings import SamespaceSettings


class InProcessIndex:
    """`IndexActorPort` without Ray: each method awaits the actor's own read."""

    def __init__(self, catalog: IndexCatalog, settings: SamespaceSettings | None = None) -> None:
        self.reads = IndexReads(catalog, settings or SamespaceSettings())
        self.readers: list[tuple[str, Reader]] = []  # (method, reader) of every call, in order

    def _as(self, method: str, reader: Reader) -> IndexReads:
        self.readers.append((method, reader))
        return self.reads

    async def status(self, *, reader: Reader) -> dict[str, Any]:
        return self._as("status", reader).status(reader=reader)

    async def search(self, query: SearchQuery, *, reader: Reader) -> SearchAnswer:
        return self._as("search", reader).search(query, reader=reader)

    async def read_lines(self, repo: str, path: str, start_line: int, end_line: int, *, reader: Reader) -> SourceLines:
        return self._as("read_lines", reader).read_lines(repo, path, start_line, end_line, reader=reader)

    async def read_file(self, repo: str, path: str, *, reader: Reader) -> SourceLines:
        return self._as("read_file", reader).read_file(repo, path, reader=reader)

    async def search_symbols(self, request: SymbolQuery, *, reader: Reader) -> SymbolPage:
        return self._as("search_symbols", reader).search_symbols(request, reader=reader)

    async def search_files(self, repo: str | None, query: str, limit: int, *, reader: Reader) -> list[FileHit]:
        return self._as("search_files", reader).search_files(repo, query, limit, reader=reader)

    async def neighbors(self, repo: str | None, path: str, line: int, count: int, *, reader: Reader) -> Neighbors:
        return self._as("neighbors", reader).neighbors(repo, path, line, count, reader=reader)

    async def overview(self, repo: str | None, *, reader: Reader) -> RepoOverview:
        return self._as("overview", reader).overview(repo, reader=reader)

    async def navigate(self, query: GraphQuery, *, reader: Reader) -> GraphAnswer:
        return self._as("navigate", reader).navigate(query, reader=reader)

    async def what_changed(
        self, repo: str | None, since: str, until: str | None, path: str | None, limit: int, *, reader: Reader
    ) -> WhatChanged:
        return self._as("what_changed", reader).what_changed(repo, since, until, path, limit, reader=reader)

    async def symbol_history(
        self, repo: str | None, symbol: str, path: str | None, limit: int, *, reader: Reader
    ) -> SymbolHistory:
        return self._as("symbol_history", reader).symbol_history(repo, symbol, path, limit, reader=reader)

    async def search_commits(
        self, text: str, query: SearchQuery, since: str | None, *, reader: Reader
    ) -> CommitSearchResult:
        return self._as("search_commits", reader).search_commits(text, query, since, reader=reader)

    async def changed_paths(self, repo: str | None, since: str, *, reader: Reader) -> list[str]:
        return self._as("changed_paths", reader).changed_paths(repo, since, reader=reader)

    async def compare(self, repo: str | None, base: str, head: str, limit: int, *, reader: Reader) -> Comparison:
        return self._as("compare", reader).compare(repo, base, head, limit, reader=reader)

    async def grep(self, request: GrepRequest, *, reader: Reader) -> GrepResult:
        return self._as("grep", reader).grep(request, reader=reader)
