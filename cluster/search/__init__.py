"""Search over a serving build beyond vectors: the code map (symbols, files, neighbours) and the query cache."""

from __future__ import annotations

from cluster.search.maps import CodeMaps
from cluster.search.models import CodeEntry, FileHit, Neighbors, RepoOverview, SymbolHit, snippet
from cluster.search.query_cache import QueryVectorCache

__all__ = [
    "CodeEntry",
    "CodeMaps",
    "FileHit",
    "Neighbors",
    "QueryVectorCache",
    "RepoOverview",
    "SymbolHit",
    "snippet",
]
