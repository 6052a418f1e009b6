"""What the history tools answer (the MCP contract): every item names its index, its commit (the full
sha), the commit's date and author; symbol items add the path, the symbol and the change."""

from __future__ import annotations

from pydantic import Field

from cluster.history.models import Change
from cluster.history.timeline import HistoryItem
from cluster.types import Strict

__all__ = ["ChangedSymbol", "CommitSearchHit", "CommitSearchResult", "HistoryReach", "WhatChanged"]


class HistoryReach(Strict):
    """How far one index's mined history goes."""

    repo: str
    commits: int
    newest: str | None = None
    oldest_date: str | None = Field(default=None, description="The date of the oldest commit mined.")
    more: bool = Field(default=False, description="Older commits exist that were not mined (index.history_commits).")


class WhatChanged(Strict):
    since: str
    until: str | None = None
    items: list[HistoryItem] = Field(default_factory=list, description="Newest commit first.")
    truncated: bool = False
    reach: list[HistoryReach] = Field(default_factory=list, description="The history each index holds.")
    note: str | None = None


class ChangedSymbol(Strict):
    path: str
    symbol: str
    change: Change


class CommitSearchHit(Strict):
    repo: str
    commit: str
    date: str
    author: str
    message: str
    score: float
    changed: list[ChangedSymbol] = Field(default_factory=list, description="The symbols it changed (at most 20).")
    files: list[str] = Field(default_factory=list, description="The files it touched (at most 20).")


class CommitSearchResult(Strict):
    query: str
    hits: list[CommitSearchHit] = Field(default_factory=list)
    refused: list[str] = Field(default_factory=list, description="Indexes skipped (another encoder space).")
    note: str | None = None
