"""The code-search service behind the MCP tools: validated requests in, typed results out.

Plain async class over two actor handles (index actor, embedder actors); the MCP layer only
maps its errors to tool errors.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from pydantic import Field

from cluster.chunking import KNOWN_LANGUAGES
from cluster.errors import UnknownLanguage
from cluster.index import IndexRecord, path_prefixes
from cluster.source import SourceLines
from cluster.types import PayloadFilter, ScoredHit, Strict

SNIPPET_MAX_LINES = 30
SNIPPET_MAX_CHARS = 2000


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


class SearchResult(Strict):
    query: str
    hits: list[CodeHit]
    refused: list[str] = Field(default_factory=list, description="Indexes skipped: another encoder space.")


class IndexInfo(Strict):
    repo: str
    space: str
    encoder: dict[str, Any]
    points: int
    files: int
    built_at: float | None
    build: str
    repo_root: str
    providers: list[str]


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


class CodeSearchService:
    def __init__(self, index: Any, embedders: Sequence[Any]) -> None:
        self._index = index
        self._embedders = itertools.cycle(list(embedders))

    async def search_code(
        self, query: str, k: int, repo: str | None, path_prefix: str | None, language: str | None
    ) -> SearchResult:
        vector, identity = await next(self._embedders).encode_query.remote(query)
        hits, refused = await self._index.search.remote(
            repo, vector.tolist(), identity, k, build_filter(path_prefix, language)
        )
        return SearchResult(query=query, hits=[to_code_hit(h) for h in hits], refused=refused)

    async def read_code(self, repo: str, path: str, start_line: int, end_line: int) -> SourceLines:
        result: SourceLines = await self._index.read_lines.remote(repo, path, start_line, end_line)
        return result

    async def index_status(self) -> IndexStatus:
        status = await self._index.status.remote()
        indexes = []
        for entry in status["indexes"]:
            record: IndexRecord = entry["record"]
            indexes.append(
                IndexInfo(
                    repo=record.name,
                    space=entry["space"],
                    encoder=record.identity.model_dump(),
                    points=record.chunks,
                    files=record.files,
                    built_at=record.built_at,
                    build=record.build,
                    repo_root=record.repo_root,
                    providers=record.providers,
                )
            )
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
        ]
        return IndexStatus(indexes=indexes, builds=builds)
