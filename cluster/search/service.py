"""The code-search service behind the MCP tools: validated requests in, typed results out.

Plain async class over two actor handles (index actor, embedder actors); the MCP layer only
maps its errors to tool errors.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
from pydantic import Field

from actors.index_actor import SOURCE_COMMIT, SOURCE_REF
from cluster.cloud.request_tag import DEFAULT_PROJECT
from cluster.errors import NoProviderLeft, SamespaceError, UnknownLanguage
from cluster.index.catalog import definitions_filter, path_prefixes
from cluster.index.fusion import ALSO_IN
from cluster.index.globs import Glob, check_glob, compile_glob
from cluster.index.keywords import query_keywords
from cluster.index.records import IndexRecord
from cluster.ingest.git_state import SourceState, Staleness, staleness
from cluster.ingest.languages import KNOWN_LANGUAGES
from cluster.ingest.skips import SkipSummary
from cluster.ingest.source import SourceLines
from cluster.routing.dispatch import SINGLE_CALL_DISCOVERY_MAX_AGE_S
from cluster.search.models import FileHit, Neighbors, RepoOverview, SymbolHit
from cluster.search.query_cache import QueryVectorCache
from cluster.settings import DEFAULT_MAX_ENTRIES, DEFAULT_TTL_S, LimitsSettings
from cluster.types import Clock, FusionParams, PayloadFilter, ScoredHit, Strict

log = logging.getLogger("samespace.search")

SNIPPET_MAX_LINES = 30
SNIPPET_MAX_CHARS = 2000
STATUS_CHECKS_KEPT = 1024  # indexes whose last git check index_status remembers (least recent go first)


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


SearchMode = Literal["hybrid", "dense", "keyword"]


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


class SymbolSearchResult(Strict):
    query: str
    hits: list[SymbolHit]


class FileSearchResult(Strict):
    query: str
    files: list[FileHit]


class IndexInfo(Strict):
    repo: str
    space: str
    encoder: dict[str, Any]
    points: int
    files: int
    built_at: float | None
    build: str
    repo_root: str
    folder: str = Field(description="The folder the index follows (for a ref build, the repository it came from).")
    source: SourceState | None = Field(description="Commit, branch or ref, and dirtiness of the build's files.")
    staleness: Staleness | None = Field(
        description="Files changed and commits made in the folder since the build (None: the folder cannot be read)."
    )
    staleness_checked_at: float | None = Field(
        default=None,
        description="When git was last asked about the folder (Unix time): at most once per "
        "limits.status_git_period_s; None: never (no recorded source).",
    )
    embedded: int = Field(description="Rows the last build embedded.")
    reused: int = Field(description="Rows whose vectors the last build reused.")
    providers: list[str]
    skipped: SkipSummary = Field(description="What the last build left out, per reason: counts and paths.")


class BuildInfo(Strict):
    repo: str
    build: str
    state: str
    job_id: str | None
    started_at: float
    files_done: int
    files_total: int
    chunks_done: int
    chunks_total: int
    chunks_per_s: float
    eta_s: float | None
    error: str | None


class IndexStatus(Strict):
    indexes: list[IndexInfo]
    builds: list[BuildInfo]


def _staleness_of(record: IndexRecord) -> Staleness | None:
    """How far the folder moved on since the build (None: unknown, e.g. the folder is gone)."""
    if record.source is None or record.built_at is None:
        return None
    try:
        return staleness(Path(record.followed_folder), record.source, record.built_at)
    except (SamespaceError, OSError, subprocess.SubprocessError):
        return None


def snippet_of(text: str) -> str:
    lines = text.splitlines()[:SNIPPET_MAX_LINES]
    return "\n".join(lines)[:SNIPPET_MAX_CHARS]


def to_code_hit(hit: ScoredHit) -> CodeHit:
    p = hit.payload
    return CodeHit(
        repo=p["repo"],
        path=p["path"],
        start_line=p["start_line"],
        end_line=p["end_line"],
        symbol=p.get("symbol"),
        kind=p["kind"],
        language=p["language"],
        score=round(hit.score, 6),
        snippet=snippet_of(p.get("text", "")),
        build=p["build"],
        commit=p.get(SOURCE_COMMIT),
        ref=p.get(SOURCE_REF),
        also_in=list(p.get(ALSO_IN, [])),
    )


def build_filter(path_prefix: str | None, language: str | None) -> PayloadFilter | None:
    """Payload filter of a search; an unknown language is an error listing the known ones."""
    if language is not None and language not in KNOWN_LANGUAGES:
        raise UnknownLanguage(language, sorted(KNOWN_LANGUAGES))
    equals: dict[str, str] = {}
    if path_prefix:
        prefix = path_prefix.strip().strip("/")
        if prefix:
            equals["path_prefixes"] = path_prefixes(prefix)[-1]
    if language:
        equals["language"] = language
    return PayloadFilter(equals=equals) if equals else None


class QueryEncoder(Protocol):
    """A query's vector: `actors.query_path.QueryPath` (one hop to a local embedder, else the
    dispatcher), and whether any provider serves reranking."""

    async def encode_query(self, text: str, project: str) -> tuple[np.ndarray, Any, str]: ...

    async def rerankers(self) -> bool: ...


class CodeSearchService:
    """The code tools (search_code, search_symbols, search_files, neighbors, repo_overview, read_code,
    index_status) over the index actor and the role dispatchers: one implementation for the MCP
    tools and the RLM. A query's vector is cached (TTL, LRU, single-flight): rounds and
    sub-searches of an ask never re-encode the same text (DESIGN §9)."""

    def __init__(
        self,
        index: Any,
        query_encoder: QueryEncoder,
        reranker: Any,
        rerank_candidates: int,
        query_cache: QueryVectorCache[tuple[np.ndarray, Any, str]] | None = None,
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

    async def encode_query(self, query: str, project: str) -> tuple[np.ndarray, Any, str]:
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
    ) -> SearchResult:
        """The code-vector, name-vector and keyword candidates scored together (`cluster.index.fusion`,
        DESIGN §10), then the optional rerank of the top candidates, then the cut to k. Filters apply
        to every leg. With no query encoder left, a hybrid search degrades to its keyword leg and says so."""
        self.check_scope(repo)  # before the query is encoded under `repo` as its project
        project = repo or DEFAULT_PROJECT
        search_filter = build_filter(path_prefix, language)
        vector = identity = encoded_by = degraded = None
        if mode != "keyword":
            try:
                vector, identity, encoded_by = await self.encode_query(query, project)
            except NoProviderLeft as exc:
                if mode == "dense":
                    raise
                mode, degraded = "keyword", f"no query encoder: {exc}"
        keywords = query_keywords(query) if mode != "dense" else None
        if mode == "keyword" and not keywords.indices:  # type: ignore[union-attr]  # keyword mode: never None
            return SearchResult(query=query, hits=[], mode=mode, encoded_by=None, degraded=degraded)
        if rerank:  # nobody to rerank: fetch k, not the pool, and never ask (or start) the reranker's dispatcher
            rerank = self._clock() >= self._no_reranker_until and await self._query_encoder.rerankers()
        limit = max(k, self._candidates) if rerank else k
        definitions = definitions_filter(query) if mode == "hybrid" else None
        hits, refused = await self._index.search.remote(
            repo, vector, identity, limit, search_filter, keywords, self._fusion, definitions
        )
        if refused and not hits and vector is not None:
            self._vectors.invalidate(query)  # the space moved (reindex, policy): encode afresh next time
        reranked_by = None
        if rerank:
            hits, reranked_by = await self._rerank(query, hits, project)
        return SearchResult(
            query=query,
            hits=[to_code_hit(h) for h in hits[:k]],
            mode=mode,
            refused=refused,
            encoded_by=encoded_by,
            reranked_by=reranked_by,
            degraded=degraded,
        )

    async def _rerank(self, query: str, hits: list[ScoredHit], project: str) -> tuple[list[ScoredHit], str | None]:
        """Re-score the candidates; with no reranker serving, keep the search order (DESIGN §10)."""
        if len(hits) < 2:
            return hits, None
        try:
            documents = [h.payload.get("text", "") for h in hits]
            scores, reranked_by = await self._reranker.rerank.remote(query, documents, project)
        except NoProviderLeft as exc:
            log.info("rerank skipped: %s", exc)
            self._no_reranker_until = self._clock() + SINGLE_CALL_DISCOVERY_MAX_AGE_S
            return hits, None
        order = sorted(range(len(hits)), key=lambda i: scores[i], reverse=True)
        return [hits[i].model_copy(update={"score": scores[i]}) for i in order], reranked_by

    async def read_code(self, repo: str, path: str, start_line: int, end_line: int) -> SourceLines:
        result: SourceLines = await self._index.read_lines.remote(repo, path, start_line, end_line)
        return result

    async def search_symbols(self, query: str, repo: str | None, limit: int) -> SymbolSearchResult:
        self.check_scope(repo)
        hits = await self._index.search_symbols.remote(repo, query, limit)
        return SymbolSearchResult(query=query, hits=hits)

    async def search_files(self, query: str, repo: str | None, limit: int) -> FileSearchResult:
        self.check_scope(repo)
        files = await self._index.search_files.remote(repo, query, limit)
        return FileSearchResult(query=query, files=files)

    async def neighbors(self, repo: str | None, path: str, line: int, count: int) -> Neighbors:
        result: Neighbors = await self._index.neighbors.remote(repo, path, line, count)
        return result

    async def repo_overview(self, repo: str | None) -> RepoOverview:
        result: RepoOverview = await self._index.overview.remote(repo)
        return result

    async def index_status(self, repo: str | None = None) -> IndexStatus:
        """Every index (or those whose name matches `repo`, a name or a glob), how stale each is, and builds."""
        return await self._status.read(self._index, repo)


class IndexStatusReader:
    """`index_status` and `GET /admin/indexes`: every index of an index actor (or those whose
    name matches `repo`, a name or a glob, checked against the `limits` caps before any matching), its
    commit and how stale it is, and the builds. The answer comes from the recorded state; git is asked
    about an index's build at most once per `limits.status_git_period_s` (concurrent reads share one
    check; 0: every read asks), and each index says when it last was (`staleness_checked_at`)."""

    def __init__(
        self,
        limits: LimitsSettings,
        clock: Clock = time.time,
        staleness_of: Callable[[IndexRecord], Staleness | None] = _staleness_of,
    ) -> None:
        self._limits = limits
        self._clock = clock
        self._staleness_of = staleness_of
        period_s = limits.status_git_period_s
        self._checks: QueryVectorCache[tuple[Staleness | None, float]] | None = (
            QueryVectorCache(ttl_s=period_s, max_entries=STATUS_CHECKS_KEPT, clock=clock) if period_s > 0 else None
        )

    async def read(self, index: Any, repo: str | None = None) -> IndexStatus:
        """The status of the index actor `index`, filtered by `repo`."""
        wanted: Glob | None = None if repo is None else compile_glob(repo, self._limits)
        status = await index.status.remote()
        records: list[IndexRecord] = [
            entry["record"] for entry in status["indexes"] if wanted is None or wanted.matches(entry["record"].name)
        ]
        checked = await asyncio.gather(*(self._freshness(record) for record in records))
        indexes = [
            _index_info(record, staleness_now, checked_at)
            for record, (staleness_now, checked_at) in zip(records, checked, strict=True)
        ]
        builds = [
            BuildInfo(
                repo=state.index,
                build=state.build,
                state=state.state,
                job_id=state.job_id,
                started_at=state.started_at,
                error=state.error,
                **state.progress.model_dump(),
            )
            for state in status["builds"].values()
            if wanted is None or wanted.matches(state.index)
        ]
        return IndexStatus(indexes=indexes, builds=builds)

    async def _freshness(self, record: IndexRecord) -> tuple[Staleness | None, float | None]:
        """(staleness, when git was asked): from the cache while the build's last check is recent."""
        if record.source is None or record.built_at is None:
            return None, None  # nothing recorded to compare with: git is not asked

        async def check() -> tuple[Staleness | None, float]:
            asked_at = self._clock()
            return await asyncio.to_thread(self._staleness_of, record), asked_at

        if self._checks is None:
            return await check()
        return await self._checks.get_or_compute((record.name, record.build), check)


def _index_info(record: IndexRecord, staleness_now: Staleness | None, checked_at: float | None) -> IndexInfo:
    return IndexInfo(
        repo=record.name,
        space=record.identity.space_id,
        encoder=record.identity.model_dump(),
        points=record.chunks,
        files=record.files,
        built_at=record.built_at,
        build=record.build,
        repo_root=record.repo_root,
        folder=record.followed_folder,
        source=record.source,
        staleness=staleness_now,
        staleness_checked_at=checked_at,
        embedded=record.embedded,
        reused=record.reused,
        providers=record.providers,
        skipped=record.skipped,
    )
