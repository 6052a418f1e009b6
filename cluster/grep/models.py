"""grep_code's request, answer and page cursor."""

from __future__ import annotations

from pydantic import Field

from cluster.errors import CursorExpired
from cluster.grep.corpus import StopReason
from cluster.grep.pattern import MAX_PATTERN_CHARS
from cluster.ingest import MAX_GLOB_CHARS, SearchControls
from cluster.types import MAX_CURSOR_CHARS, PageCursor, Strict, fingerprint

__all__ = ["MAX_GREP_LIMIT", "GrepCursor", "GrepMatch", "GrepRequest", "GrepResult"]

MAX_GREP_LIMIT = 1000
MAX_CONTEXT_LINES = 10


class GrepRequest(Strict):
    pattern: str = Field(min_length=1, max_length=MAX_PATTERN_CHARS)
    repo: str | None = Field(default=None, description="A repo, a glob, a group ('@backend'); None: every index.")
    regex: bool = True
    case_sensitive: bool = True
    path_glob: str | None = Field(default=None, max_length=MAX_GLOB_CHARS)
    controls: SearchControls = Field(
        default_factory=SearchControls, description="Paths left out, kinds kept, test code (`SearchControls`)."
    )
    limit: int = Field(default=100, ge=1, le=MAX_GREP_LIMIT)
    context_lines: int = Field(default=0, ge=0, le=MAX_CONTEXT_LINES)
    cursor: str | None = Field(default=None, max_length=MAX_CURSOR_CHARS)

    def fingerprint(self) -> str:
        """What a cursor must have been made by: the same search (the page size and context may change)."""
        return fingerprint(
            self.model_dump(include={"pattern", "repo", "regex", "case_sensitive", "path_glob", "controls"})
        )


class GrepMatch(Strict):
    repo: str
    path: str
    line: int = Field(description="1-based.")
    column: int = Field(description="1-based, in characters: where the first match on the line starts.")
    text: str = Field(description="The line (a long one cut around the match; see text_cut).")
    text_cut: bool = False
    commit: str | None = Field(default=None, description="The commit the index was built from (None: not git).")
    symbol: str | None = Field(default=None, description="The innermost definition around the line, where known.")
    before: list[str] = Field(default_factory=list, description="context_lines lines above, within the file.")
    after: list[str] = Field(default_factory=list, description="context_lines lines below, within the file.")


class GrepResult(Strict):
    pattern: str
    matches: list[GrepMatch]
    files_searched: int
    truncated: bool = Field(description="True when more lines may match: ask again with `cursor`.")
    stopped: StopReason | None = Field(
        default=None, description="Why the answer stopped early: limit (matches) or time (limits.grep_budget_s)."
    )
    cursor: str | None = Field(default=None, description="Pass it back (same arguments) for the next page.")
    notes: list[str] = Field(default_factory=list, description="Indexes or files left out, and why.")


class GrepCursor(PageCursor):
    """Where a truncated answer goes on: the index being scanned, its build, and the offset in its text."""

    query: str
    index: str
    build: str | None  # None: the top of an index not yet read
    offset: int = Field(ge=0)

    @classmethod
    def resume(cls, text: str, request: GrepRequest) -> GrepCursor:
        """The cursor `text` of an earlier page of `request` (CursorExpired: another search's, or none)."""
        cursor = cls.decode(text, "grep_code")
        if cursor.query != request.fingerprint():
            raise CursorExpired("it continues another search (the pattern, scope, globs or kinds differ)")
        return cursor
