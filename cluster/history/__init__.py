"""History: the indexed ref's first-parent commits, mined at index time (messages, files, and the
symbols each commit added, modified, removed, renamed or moved), and the tools over them."""

from __future__ import annotations

from cluster.history.answers import ChangedSymbol, CommitSearchHit, CommitSearchResult, HistoryReach, WhatChanged
from cluster.history.compare import ComparedSymbol, Comparison, compare_commits
from cluster.history.mine import MinedBatch, mine_history, still_on_line
from cluster.history.models import Change, CommitRecord, FileChange, LineRange, Span, SymbolChange
from cluster.history.timeline import (
    History,
    HistoryItem,
    SpanLookup,
    SymbolCommit,
    SymbolHistory,
    WindowEnd,
    iso,
    parse_window_end,
)

__all__ = [
    "Change",
    "ChangedSymbol",
    "CommitRecord",
    "CommitSearchHit",
    "CommitSearchResult",
    "ComparedSymbol",
    "Comparison",
    "FileChange",
    "History",
    "HistoryItem",
    "HistoryReach",
    "LineRange",
    "MinedBatch",
    "Span",
    "SpanLookup",
    "SymbolChange",
    "SymbolCommit",
    "SymbolHistory",
    "WhatChanged",
    "WindowEnd",
    "compare_commits",
    "iso",
    "mine_history",
    "parse_window_end",
    "still_on_line",
]
