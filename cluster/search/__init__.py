"""Search over the indexes: the code-search service behind the MCP tools and the RLM (over Protocols:
the index, a query's vector, the reranker), index status, the code map (symbols, files, neighbours)
grep_code over the indexed files, and the query cache."""

from __future__ import annotations

from cluster.search.greps import CodeGreps, load_corpus, path_selector
from cluster.search.histories import CommitHistories
from cluster.search.maps import CodeMaps
from cluster.search.models import CodeEntry, FileHit, Neighbors, RepoOverview, SymbolHit, snippet
from cluster.search.ports import IndexStatusSource, QueryEncoder, Reranker, SearchIndex
from cluster.search.query_cache import QueryVectorCache
from cluster.search.service import (
    CodeHit,
    CodeSearchService,
    FileSearchResult,
    SearchResult,
    SymbolSearchResult,
    snippet_of,
)
from cluster.search.status import BuildInfo, IndexInfo, IndexStatus, IndexStatusReader

__all__ = [
    "BuildInfo",
    "CodeEntry",
    "CodeGreps",
    "CodeHit",
    "CodeMaps",
    "CodeSearchService",
    "CommitHistories",
    "FileHit",
    "FileSearchResult",
    "IndexInfo",
    "IndexStatus",
    "IndexStatusReader",
    "IndexStatusSource",
    "Neighbors",
    "QueryEncoder",
    "QueryVectorCache",
    "RepoOverview",
    "Reranker",
    "SearchIndex",
    "SearchResult",
    "SymbolHit",
    "SymbolSearchResult",
    "load_corpus",
    "path_selector",
    "snippet",
    "snippet_of",
]
