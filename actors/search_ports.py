"""The search service's Protocols (`cluster.search.ports`) over Ray handles: one actor call a method.

`CodeSearchService` is plain Python; a Serve replica (or a bench driver) wraps the index actor's
handle in `IndexActorPort` and the reranker role's dispatcher in `RerankerPort`. Every index read
passes the caller's `Reader` to the actor, which answers with the indexes that reader may read. A query's vector
comes through `actors.query_path.QueryPath`, which is a `QueryEncoder` itself.
"""

from __future__ import annotations

from typing import Any

from ray.actor import ActorHandle

from cluster.auth import Reader
from cluster.graph import GraphAnswer, GraphQuery
from cluster.grep import GrepRequest, GrepResult
from cluster.history import CommitSearchResult, Comparison, SymbolHistory, WhatChanged
from cluster.index import SearchQuery
from cluster.ingest import SourceLines
from cluster.search import FileHit, Neighbors, RepoOverview, SearchAnswer, SymbolPage, SymbolQuery

__all__ = ["IndexActorPort", "RerankerPort"]


class IndexActorPort:
    """`cluster.search.SearchIndex` over the index actor (`actors.index_actor.IndexActor`)."""

    def __init__(self, handle: ActorHandle) -> None:
        self._index = handle

    async def status(self, *, reader: Reader) -> dict[str, Any]:
        status: dict[str, Any] = await self._index.status.remote(reader=reader)
        return status

    async def search(self, query: SearchQuery, *, reader: Reader) -> SearchAnswer:
        found: SearchAnswer = await self._index.search.remote(query, reader=reader)
        return found

    async def read_lines(self, repo: str, path: str, start_line: int, end_line: int, *, reader: Reader) -> SourceLines:
        lines: SourceLines = await self._index.read_lines.remote(repo, path, start_line, end_line, reader=reader)
        return lines

    async def read_file(self, repo: str, path: str, *, reader: Reader) -> SourceLines:
        whole: SourceLines = await self._index.read_file.remote(repo, path, reader=reader)
        return whole

    async def search_symbols(self, request: SymbolQuery, *, reader: Reader) -> SymbolPage:
        page: SymbolPage = await self._index.search_symbols.remote(request, reader=reader)
        return page

    async def search_files(self, repo: str | None, query: str, limit: int, *, reader: Reader) -> list[FileHit]:
        files: list[FileHit] = await self._index.search_files.remote(repo, query, limit, reader=reader)
        return files

    async def neighbors(self, repo: str | None, path: str, line: int, count: int, *, reader: Reader) -> Neighbors:
        found: Neighbors = await self._index.neighbors.remote(repo, path, line, count, reader=reader)
        return found

    async def overview(self, repo: str | None, *, reader: Reader) -> RepoOverview:
        overview: RepoOverview = await self._index.overview.remote(repo, reader=reader)
        return overview

    async def navigate(self, query: GraphQuery, *, reader: Reader) -> GraphAnswer:
        answer: GraphAnswer = await self._index.navigate.remote(query, reader=reader)
        return answer

    async def what_changed(
        self, repo: str | None, since: str, until: str | None, path: str | None, limit: int, *, reader: Reader
    ) -> WhatChanged:
        answer: WhatChanged = await self._index.what_changed.remote(repo, since, until, path, limit, reader=reader)
        return answer

    async def symbol_history(
        self, repo: str | None, symbol: str, path: str | None, limit: int, *, reader: Reader
    ) -> SymbolHistory:
        answer: SymbolHistory = await self._index.symbol_history.remote(repo, symbol, path, limit, reader=reader)
        return answer

    async def search_commits(
        self, text: str, query: SearchQuery, since: str | None, *, reader: Reader
    ) -> CommitSearchResult:
        answer: CommitSearchResult = await self._index.search_commits.remote(text, query, since, reader=reader)
        return answer

    async def changed_paths(self, repo: str | None, since: str, *, reader: Reader) -> list[str]:
        paths: list[str] = await self._index.changed_paths.remote(repo, since, reader=reader)
        return paths

    async def compare(self, repo: str | None, base: str, head: str, limit: int, *, reader: Reader) -> Comparison:
        answer: Comparison = await self._index.compare.remote(repo, base, head, limit, reader=reader)
        return answer

    async def grep(self, request: GrepRequest, *, reader: Reader) -> GrepResult:
        answer: GrepResult = await self._index.grep.remote(request, reader=reader)
        return answer


class RerankerPort:
    """`cluster.search.Reranker` over the reranker role's dispatcher (a handle or a
    `actors.dispatcher.LazyDispatcher`, which starts it at the first call)."""

    def __init__(self, dispatcher: Any) -> None:
        self._dispatcher = dispatcher

    async def rerank(self, query: str, documents: list[str], project: str) -> tuple[list[float], str]:
        scored: tuple[list[float], str] = await self._dispatcher.rerank.remote(query, documents, project)
        return scored
