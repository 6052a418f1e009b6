"""History: the indexed ref's first-parent commits, mined at index time (messages, files, and the
symbols each commit added, modified, removed, renamed or moved), and the tools over them."""

from __future__ import annotations

from cluster.history.mine import MinedBatch, mine_history
from cluster.history.models import Change, CommitRecord, FileChange, LineRange, SymbolChange
from cluster.history.timeline import (
    History,
    HistoryItem,
    SymbolCommit,
    SymbolHistory,
    WindowEnd,
    parse_window_end,
)

__all__ = [
    "Change",
    "CommitRecord",
    "FileChange",
    "History",
    "HistoryItem",
    "LineRange",
    "MinedBatch",
    "SymbolChange",
    "SymbolCommit",
    "SymbolHistory",
    "WindowEnd",
    "mine_history",
    "parse_window_end",
]
