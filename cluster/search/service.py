"""The code-search service behind the MCP tools and the RLM: validated requests in, typed results out.

Plain async class over Protocols (`cluster.search.ports`): the index, a query's vector, the reranker.
A Serve replica hands it the Ray handles through `actors/search_ports.py`; the MCP layer only maps
its errors to tool errors. Each call reads its caller once (`cluster.auth.current_reader`: the
request's, set by the HTTP guard; the anonymous reader outside any request) and passes it to every
index read it makes, so an ask's rounds and a prompt's tool calls read as the request's caller.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import numpy as np
from pydantic import Field

from cluster.auth import Reader, current_reader
from cluster.cloud.request_tag import DEFAULT_PROJECT
from cluster.errors import CursorExpired, NoProviderLeft
from cluster.graph import GraphAnswer, GraphQuery
from cluster.grep import GrepRequest, GrepResult
from cluster.history import CommitSearchResult, Comparison, SymbolHistory, WhatChanged
from cluster.index import RowPayload, SearchMode, SearchQuery, check_glob, query_filter
from cluster.ingest import SearchControls, TestsMode
from cluster.ingest.source import SourceLines
from cluster.routing.dispatch import SINGLE_CALL_DISCOVERY_MAX_AGE_S
from cluster.search.index_resources import IndexSummary, summarize_status
from cluster.search.models import FileHit, Neighbors, RepoOverview, SymbolHit
from cluster.search.pages import SearchCursor, SymbolQuery
from cluster.search.ports import QueryEncoder, QueryVector, Reranker, SearchIndex
from cluster.search.query_cache import QueryVectorCache
from cluster.search.status import IndexStatus, IndexStatusReader
from cluster.settings import DEFAULT_MAX_ENTRIES, DEFAULT_TTL_S, LimitsSettings
from cluster.space import EncoderIdentity
from cluster.types import FusionParams, PayloadFilter, ScoredHit, Strict, fingerprint

__all__ = [
    "DEFAULT_SEARCH_TESTS",
    "CodeHit",
    "CodeSearchService",
    "FileSearchResult",
    "SearchResult",
    "SymbolSearchResult",
    "snippet_of",
]

log = logging.getLogger("samespace.search")

SNIPPET_MAX_LINES = 30
SNIPPET_MAX_CHARS = 2000
# search_code's `tests` when the caller says nothing, chosen on bench.quality's dev packages with each
# package's own test suite indexed beside it (`--test-suites`): the default row's MRR@10 and recall@10
# are higher with tests=exclude than with tests=include (docs/search.md gives the figures and the
# command). Its truth never targets test code: the figures measure what test code costs a search for
# the code, and a caller who wants tests says tests="include" or "only".
DEFAULT_SEARCH_TESTS: TestsMode = "exclude"
_CURSOR = "Pass it back with the same arguments for the next page (None: no more hits)."


class CodeHit(Strict):
    repo: str
    path: str
    start_line: int
    end_line: int
    symbol: str | None
    kind: str
    language: str
    score: float
    snippet: str
    build: str = Field(description="The index build this row belongs to (provenance).")
    commit: str | None = Field(default=None, description="The git commit the build's files were at (None: no git).")
    ref: str | None = Field(default=None, description="The ref the build indexed, or the branch checked out then.")
    also_in: list[str] = Field(
        default_factory=list, description="Other indexes holding the same place (path, lines, text), shown once."
    )


_ROW_FIELDS_OF_A_HIT = frozenset(CodeHit.model_fields) & frozenset(RowPayload.model_fields)


class SearchResult(Strict):
    query: str
    hits: list[CodeHit]
    mode: SearchMode = Field(
        description="The legs that ran: hybrid (code and name vectors + keyword), dense (the two vectors) or keyword."
    )
    encoded_by: str | None = Field(description="The provider that embedded the query (None: keyword only).")
    degraded: str | None = Field(default=None, description="Why fewer legs ran than asked (e.g. no encoder).")
    reranked_by: str | None = Field(default=None, description="The reranker that re-scored the candidates, if any.")
    refused: list[str] = Field(default_factory=list, description="Indexes skipped: another encoder space.")
    changed_files: int | None = Field(
        default=None, description="With changed_since: the files changed since then that were searched."
    )
    cursor: str | None = Field(default=None, description=_CURSOR)


class SymbolSearchResult(Strict):
    query: str
    hits: list[SymbolHit]
    cursor: str | None = Field(default=None, description=_CURSOR)


class FileSearchResult(Strict):
    query: str
    files: list[FileHit]


def snippet_of(text: str) -> str:
    lines = text.splitlines()[:SNIPPET_MAX_LINES]
    return "\n".join(lines)[:SNIPPET_MAX_CHARS]


def to_code_hit(hit: ScoredHit) -> CodeHit:
    """A hit as the tools answer it: its row's place and provenance, its score, the head of its text."""
    row = RowPayload.model_validate(hit.payload)
    fields = row.model_dump(include=set(_ROW_FIELDS_OF_A_HIT))
    return CodeHit.model_validate({**fields, "score": round(hit.score, 6), "snippet": snippet_of(row.text or "")})


class CodeSearchService:
    """The code tools (search_code, search_symbols, search_files, neighbors, repo_overview, read_code,
    index_status) over the index actor and the role dispatchers: one implementation for the MCP
    tools and the RLM. A query's vector is cached (TTL, LRU, single-flight): rounds and
    sub-searches of an ask never re-encode the same text (DESIGN §9)."""

    def __init__(
        self,
        index: SearchIndex,
        query_encoder: QueryEncoder,
        reranker: Reranker,
        rerank_candidates: int,
        query_cache: QueryVectorCache[QueryVector] | None = None,
        fusion: FusionParams | None = None,
        clock: Callable[[], float] = time.monotonic,
        limits: LimitsSettings | None = None,
    ) -> None:
        self._index = index
        self._limits = limits or LimitsSettings()
        self._status = IndexStatusReader(self._limits)
        self._query_encoder = query_encoder
        self._reranker = reranker
        self._candidates = rerank_candidates
        self._vectors = (
            query_cache
            if query_cache is not None
            else QueryVectorCache(ttl_s=DEFAULT_TTL_S, max_entries=DEFAULT_MAX_ENTRIES, clock=time.monotonic)
        )
        self._fusion = fusion or FusionParams()
        self._clock = clock
        # Nobody served the reranker role at this time: until then a search skips the call that
        # would say so again (the dispatcher's own discovery is reused as long).
        self._no_reranker_until = float("-inf")

    def check_scope(self, repo: str | None) -> None:
        """LimitExceeded, naming the setting, for a `repo` scope over the `limits` caps: checked where a
        request enters, before it costs anything (the index actor checks again as it resolves it)."""
        if repo is not None:
            check_glob(repo, self._limits)

    def check_globs(self, controls: SearchControls | None) -> None:
        """LimitExceeded, naming the setting, for an `exclude` glob over the `limits` caps (before any
        work; the index actor compiles them under the same caps)."""
        for glob in controls.exclude if controls is not None else ():
            check_glob(glob, self._limits, "path")

    async def encode_query(self, query: str, project: str) -> QueryVector:
        """(vector, encoder identity, provider) of a query, encoded once per cache lifetime."""
        return await self._vectors.get_or_compute(query, lambda: self._query_encoder.encode_query(query, project))

    async def search_code(
        self,
        query: str,
        k: int,
        repo: str | None,
        path_prefix: str | None,
        language: str | None,
        rerank: bool = True,
        mode: SearchMode = "hybrid",
        changed_since: str | None = None,
        *,
        controls: SearchControls | None = None,
        cursor: str | None = None,
    ) -> SearchResult:
        """The code-vector, name-vector and keyword candidates scored together (`cluster.index.fusion`,
        DESIGN §10), then the optional rerank of the top candidates, then the cut to k. Filters and
        `controls` apply to every leg. With no query encoder left, a hybrid search degrades to its
        keyword leg and says so. `cursor` (a `SearchResult.cursor`) asks for the next k of the same
        ranking: the first page's legs, pool and rerank (`cluster.search.pages`)."""
        self.check_scope(repo)  # before the query is encoded under `repo` as its project
        self.check_globs(controls)
        reader = current_reader()
        asked = fingerprint(
            [query, k, repo, path_prefix, language, rerank, mode, changed_since, controls and controls.model_dump()]
        )
        page = None if cursor is None else SearchCursor.resume(cursor, "search_code", asked)
        project = repo or DEFAULT_PROJECT
        search_filter = query_filter(path_prefix, language)
        changed = None if changed_since is None else await self._changed(repo, changed_since, page, reader)
        if changed is not None:  # review mode: only the files the history says changed since then
            if not changed:
                return SearchResult(query=query, hits=[], mode=mode, encoded_by=None, changed_files=0)
            search_filter = (search_filter or PayloadFilter()).model_copy(update={"any_of": {"path": changed}})
        ran, vector, identity, encoded_by, degraded = await self._legs(query, project, mode, page)
        search = SearchQuery.of_text(
            query,
            ran,
            vector=vector,
            identity=identity,
            scope=repo,
            filter=search_filter,
            limit=k,
            fusion=self._fusion,
        )
        if not search.has_terms:  # a keyword search with no keyword term
            return SearchResult(query=query, hits=[], mode=ran, encoded_by=None, degraded=degraded)
        rerank = page.reranked if page is not None else rerank and await self._rerankers_serve()
        search = self._paged(search, k, rerank, page).model_copy(update={"controls": controls})
        answer = await self._index.search(search, reader=reader)
        hits = answer.hits
        if answer.refused and not hits and vector is not None:
            self._vectors.invalidate(query)  # the space moved (reindex, policy): encode afresh next time
        reranked_by = None
        if rerank:
            hits, reranked_by = await self._rerank(query, hits, project)
            if page is not None and reranked_by is None:
                raise CursorExpired("no reranker serves now, and the first page was reranked")
        offset = page.offset if page is not None else 0
        end = offset + k
        following = SearchCursor(
            tool="search_code",
            query=asked,
            builds=answer.builds,
            offset=end,
            mode=ran,
            reranked=reranked_by is not None,
            depth=search.leg_limit,
            changed=None if changed is None else fingerprint(changed),
        )
        return SearchResult(
            query=query,
            hits=[to_code_hit(h) for h in hits[offset:end]],
            mode=ran,
            refused=answer.refused,
            encoded_by=encoded_by,
            reranked_by=reranked_by,
            degraded=degraded,
            changed_files=None if changed is None else len(changed),
            cursor=following.encode() if len(hits) > end else None,
        )

    async def _changed(self, repo: str | None, since: str, page: SearchCursor | None, reader: Reader) -> list[str]:
        """The files changed since `since`; CursorExpired when a next page's first page saw others."""
        changed = await self._index.changed_paths(repo, since, reader=reader)
        if page is not None and page.changed != fingerprint(changed):
            raise CursorExpired("the files changed since then are others now")
        return changed

    async def _legs(
        self, query: str, project: str, mode: SearchMode, page: SearchCursor | None
    ) -> tuple[SearchMode, np.ndarray | None, EncoderIdentity | None, str | None, str | None]:
        """(the legs that run, the query's vector, its space, who encoded it, why fewer legs run than
        asked). A next page runs its first page's legs, or none (CursorExpired)."""
        if page is not None and page.mode is not None:
            mode = page.mode
        if mode == "keyword":
            return mode, None, None, None, None
        try:
            vector, identity, encoded_by = await self.encode_query(query, project)
        except NoProviderLeft as exc:
            if page is not None:
                raise CursorExpired(f"no query encoder serves now ({exc}), and the first page used one") from exc
            if mode == "dense":
                raise
            return "keyword", None, None, None, f"no query encoder: {exc}"
        return mode, vector, identity, encoded_by, None

    async def _rerankers_serve(self) -> bool:
        """Whether to rerank: nobody to rerank means fetch k, not the pool, and never ask (or start) the
        reranker's dispatcher."""
        return self._clock() >= self._no_reranker_until and await self._query_encoder.rerankers()

    def _paged(self, search: SearchQuery, k: int, rerank: bool, page: SearchCursor | None) -> SearchQuery:
        """The query of one page: the reranker's pool when reranking (pages run through that pool),
        else the hits up to this page's end and one more (is there a next page?); each leg as deep as
        the first page's legs were, so every page ranks the same candidates."""
        offset = page.offset if page is not None else 0
        limit = max(k, self._candidates) if rerank else offset + k + 1
        first_depth = max(k, self._candidates) if rerank else k
        depth = page.depth if page is not None and page.depth else max(first_depth, self._fusion.candidates)
        return search.model_copy(
            update={"limit": limit, "depth": depth, "builds": page.builds if page is not None else None}
        )

    async def _rerank(self, query: str, hits: list[ScoredHit], project: str) -> tuple[list[ScoredHit], str | None]:
        """Re-score the candidates; with no reranker serving, keep the search order (DESIGN §10)."""
        if len(hits) < 2:
            return hits, None
        try:
            documents = [RowPayload.model_validate(h.payload).text or "" for h in hits]
            scores, reranked_by = await self._reranker.rerank(query, documents, project)
        except NoProviderLeft as exc:
            log.info("rerank skipped: %s", exc)
            self._no_reranker_until = self._clock() + SINGLE_CALL_DISCOVERY_MAX_AGE_S
            return hits, None
        order = sorted(range(len(hits)), key=lambda i: scores[i], reverse=True)
        return [hits[i].model_copy(update={"score": scores[i]}) for i in order], reranked_by

    async def read_code(self, repo: str, path: str, start_line: int, end_line: int) -> SourceLines:
        return await self._index.read_lines(repo, path, start_line, end_line, reader=current_reader())

    async def read_file(self, repo: str, path: str) -> SourceLines:
        """The whole of an indexed file, confined as read_code is (the resource samespace://index/.../file/...)."""
        return await self._index.read_file(repo, path, reader=current_reader())

    async def search_symbols(
        self,
        query: str,
        repo: str | None,
        limit: int,
        *,
        controls: SearchControls | None = None,
        cursor: str | None = None,
    ) -> SymbolSearchResult:
        """Definitions by name (`cluster.search.code_map`), those `controls` keeps; `cursor` asks for
        the next `limit` of the same ranking."""
        self.check_scope(repo)
        self.check_globs(controls)
        wanted = controls or SearchControls()
        asked = fingerprint([query, repo, limit, wanted.model_dump()])
        page = None if cursor is None else SearchCursor.resume(cursor, "search_symbols", asked)
        request = SymbolQuery(
            query=query,
            repo=repo,
            limit=limit,
            offset=page.offset if page is not None else 0,
            controls=wanted,
            builds=page.builds if page is not None else None,
        )
        found = await self._index.search_symbols(request, reader=current_reader())
        following = SearchCursor(tool="search_symbols", query=asked, builds=found.builds, offset=request.offset + limit)
        return SymbolSearchResult(query=query, hits=found.hits, cursor=following.encode() if found.more else None)

    async def search_files(self, query: str, repo: str | None, limit: int) -> FileSearchResult:
        self.check_scope(repo)
        files = await self._index.search_files(repo, query, limit, reader=current_reader())
        return FileSearchResult(query=query, files=files)

    async def navigate(self, query: GraphQuery) -> GraphAnswer:
        """find_definition, find_references, callers, callees, impact: the code graph of the indexes in scope."""
        self.check_scope(query.repo)
        return await self._index.navigate(query, reader=current_reader())

    async def what_changed(
        self, repo: str | None, since: str, until: str | None, path: str | None, limit: int
    ) -> WhatChanged:
        """The symbols changed by the commits of a window (a date, a duration or a ref each end)."""
        self.check_scope(repo)
        return await self._index.what_changed(repo, since, until, path, limit, reader=current_reader())

    async def symbol_history(self, repo: str | None, symbol: str, path: str | None, limit: int) -> SymbolHistory:
        """The commits that touched a symbol, newest first, through renames and moves."""
        self.check_scope(repo)
        return await self._index.symbol_history(repo, symbol, path, limit, reader=current_reader())

    async def search_commits(self, query: str, repo: str | None, since: str | None, k: int) -> CommitSearchResult:
        """Commits by meaning and by words (their messages, the symbols they changed), fused. With no
        query encoder left, the keyword leg alone, said in the note."""
        self.check_scope(repo)
        reader = current_reader()
        vector: np.ndarray | None = None
        identity: EncoderIdentity | None = None
        degraded = None
        try:
            vector, identity, _ = await self.encode_query(query, repo or DEFAULT_PROJECT)
        except NoProviderLeft as exc:
            degraded = f"no query encoder ({exc}): keywords only"
        search = SearchQuery.of_text(
            query,
            "hybrid" if vector is not None else "keyword",
            vector=vector,
            identity=identity,
            scope=repo,
            filter=None,
            limit=k,
            fusion=self._fusion,
        )
        if not search.has_terms:  # only words the keyword leg drops, and no vector
            return CommitSearchResult(query=query, note=degraded or "nothing to search for")
        found = await self._index.search_commits(query, search, since, reader=reader)
        return found if degraded is None else found.model_copy(update={"note": degraded})

    async def compare(self, repo: str | None, base: str, head: str, limit: int) -> Comparison:
        """The symbols that differ between two refs of one index's folder, each with a short diff."""
        self.check_scope(repo)
        return await self._index.compare(repo, base, head, limit, reader=current_reader())

    async def grep_code(self, request: GrepRequest) -> GrepResult:
        """The lines of the indexed files a regex or literal matches (RE2, line by line, as ripgrep)."""
        self.check_scope(request.repo)
        self.check_globs(request.controls)
        return await self._index.grep(request, reader=current_reader())

    async def neighbors(self, repo: str | None, path: str, line: int, count: int) -> Neighbors:
        return await self._index.neighbors(repo, path, line, count, reader=current_reader())

    async def repo_overview(self, repo: str | None) -> RepoOverview:
        return await self._index.overview(repo, reader=current_reader())

    async def index_status(self, repo: str | None = None) -> IndexStatus:
        """Every index the caller may read (or those whose name matches `repo`, a name or a glob), how
        stale each is, and builds."""
        return await self._status.read(self._index, repo, reader=current_reader())

    async def index_summaries(self, *, reader: Reader | None = None) -> list[IndexSummary]:
        """Every index the caller may read (`reader`; None: the request's caller) from the recorded state
        alone (no git): samespace://indexes, and what a status subscription compares."""
        return summarize_status(await self._index.status(reader=reader if reader is not None else current_reader()))
