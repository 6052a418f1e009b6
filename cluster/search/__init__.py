"""Search over the indexes: the code-search service behind the MCP tools and the RLM (over Protocols:
the index, a query's vector, the reranker), index status, the code map (symbols, files, neighbours)
grep_code over the indexed files, search_code's store side and its pages, and the query cache; the MCP
resources (their URIs, the index list and status, the watch that tells subscribers of a change) and the
MCP prompts built from the tools; every read of the index actor for one caller, the indexes it may not
read left out (`IndexReads`)."""

from __future__ import annotations

from cluster.search.greps import CodeGreps, load_corpus
from cluster.search.histories import CommitHistories
from cluster.search.index_reads import IndexReads
from cluster.search.index_resources import IndexList, IndexSummary, ResourceChanges, status_of_index
from cluster.search.maps import CodeMaps
from cluster.search.models import CodeEntry, FileHit, Neighbors, RepoOverview, SymbolHit, snippet
from cluster.search.pages import SearchAnswer, SearchCursor, SymbolPage, SymbolQuery
from cluster.search.ports import IndexStatusSource, QueryEncoder, Reranker, SearchIndex
from cluster.search.prompt_text import PromptText
from cluster.search.prompts import ChangesArgs, CodePrompts, ExplainArgs, LocateArgs, ReviewArgs, prompt_arguments
from cluster.search.query_cache import QueryVectorCache
from cluster.search.resource_uris import (
    FILE_TEMPLATE,
    INDEXES_URI,
    JSON_MIME,
    STATUS_TEMPLATE,
    FileRef,
    StatusRef,
    check_file_path,
    check_index_name,
    file_uri,
    mime_type_of,
    parse_resource_uri,
    status_uri,
)
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
from cluster.search.status_watch import STATUS_POLL_S, StatusWatch
from cluster.search.store_search import StoreSearch

__all__ = [
    "DEFAULT_SEARCH_TESTS",
    "FILE_TEMPLATE",
    "INDEXES_URI",
    "JSON_MIME",
    "STATUS_POLL_S",
    "STATUS_TEMPLATE",
    "BuildInfo",
    "ChangesArgs",
    "CodeEntry",
    "CodeGreps",
    "CodeHit",
    "CodeMaps",
    "CodePrompts",
    "CodeSearchService",
    "CommitHistories",
    "ExplainArgs",
    "FileHit",
    "FileRef",
    "FileSearchResult",
    "IndexInfo",
    "IndexList",
    "IndexReads",
    "IndexStatus",
    "IndexStatusReader",
    "IndexStatusSource",
    "IndexSummary",
    "LocateArgs",
    "Neighbors",
    "PromptText",
    "QueryEncoder",
    "QueryVectorCache",
    "RepoOverview",
    "Reranker",
    "ResourceChanges",
    "ReviewArgs",
    "SearchAnswer",
    "SearchCursor",
    "SearchIndex",
    "SearchResult",
    "StatusRef",
    "StatusWatch",
    "StoreSearch",
    "SymbolHit",
    "SymbolPage",
    "SymbolQuery",
    "SymbolSearchResult",
    "check_file_path",
    "check_index_name",
    "file_uri",
    "load_corpus",
    "mime_type_of",
    "parse_resource_uri",
    "prompt_arguments",
    "snippet",
    "snippet_of",
    "status_of_index",
    "status_uri",
]
