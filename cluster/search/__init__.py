"""Search over the indexes: the code-search service behind the MCP tools and the RLM (over Protocols:
the index, a query's vector, the reranker), index status, the code map (symbols, files, neighbours)
grep_code over the indexed files, search_code's store side and its pages, and the query cache."""

from __future__ import annotations

from cluster.search.greps import CodeGreps, load_corpus
from cluster.search.histories import CommitHistories
from cluster.search.maps import CodeMaps
from cluster.search.models import CodeEntry, FileHit, Neighbors, RepoOverview, SymbolHit, snippet
from cluster.search.pages import SearchAnswer, SearchCursor, SymbolPage, SymbolQuery
from cluster.search.ports import IndexStatusSource, QueryEncoder, Reranker, SearchIndex
from cluster.search.query_cache import QueryVectorCache
from cluster.search.service import (
    DEFAULT_SEARCH_TESTS,
    CodeHit,
    CodeSearchService,
    FileSearchResult,
    SearchResult,
    SymbolSearchResult,
    snippet_of,
)
from cluster.search.status import BuildInfo, IndexInfo, IndexStatus, IndexStatusReader
from cluster.search.store_search import StoreSearch

__all__ = [
    "DEFAULT_SEARCH_TESTS",
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
    "SearchAnswer",
    "SearchCursor",
    "SearchIndex",
    "SearchResult",
    "StoreSearch",
    "SymbolHit",
    "SymbolPage",
    "SymbolQuery",
    "SymbolSearchResult",
    "load_corpus",
    "snippet",
    "snippet_of",
]
