"""Exact and regex search over an index's files: RE2 (linear time) over their text held in one buffer,
line by line as ripgrep matches, bounded by a time budget and paged by a cursor."""

from __future__ import annotations

from cluster.grep.corpus import WINDOW, CorpusFile, GrepCorpus, LineHit, ScanPage, StopReason
from cluster.grep.models import MAX_GREP_LIMIT, GrepCursor, GrepMatch, GrepRequest, GrepResult
from cluster.grep.pattern import MAX_PATTERN_CHARS, GrepPattern

__all__ = [
    "MAX_GREP_LIMIT",
    "MAX_PATTERN_CHARS",
    "WINDOW",
    "CorpusFile",
    "GrepCorpus",
    "GrepCursor",
    "GrepMatch",
    "GrepPattern",
    "GrepRequest",
    "GrepResult",
    "LineHit",
    "ScanPage",
    "StopReason",
]
