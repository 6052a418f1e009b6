"""Pages of search_code and search_symbols: the cursor a page hands back, and the index actor's
answers that carry what a cursor is bound to.

A cursor is bound to the arguments of its search (`SearchCursor.query`, a fingerprint of them: the
page size included) and to the serving builds of every index in scope (`builds`): a next page of
another search, or after any of those indexes was rebuilt, added or removed, is refused
(CursorExpired). Within that, a next page ranks the same pool the same way as the first page did,
and returns the hits after the ones already returned: none repeated, none skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import Field

from cluster.errors import CursorExpired
from cluster.index import SearchMode
from cluster.ingest import SearchControls
from cluster.search.models import SymbolHit
from cluster.types import PageCursor, ScoredHit, Strict, fingerprint

__all__ = ["SearchAnswer", "SearchCursor", "SymbolPage", "SymbolQuery", "builds_fingerprint"]

PagedTool = Literal["search_code", "search_symbols"]


def builds_fingerprint(builds: Mapping[str, str]) -> str:
    """What a cursor holds of the indexes in scope: each one's name and serving build."""
    return fingerprint(sorted(builds.items()))


def check_builds(expected: str | None, builds: Mapping[str, str]) -> str:
    """The fingerprint of `builds`; CursorExpired when a next page expected other builds."""
    current = builds_fingerprint(builds)
    if expected is not None and expected != current:
        raise CursorExpired("an index in scope was rebuilt, added or removed since the first page")
    return current


class SearchCursor(PageCursor):
    """Where the next page of a search_code or search_symbols answer starts, and what it is bound to."""

    tool: PagedTool
    query: str = Field(description="Fingerprint of the search's arguments.")
    builds: str = Field(description="Fingerprint of the serving builds of the indexes in scope.")
    offset: int = Field(ge=1, description="Hits already returned.")
    mode: SearchMode | None = Field(default=None, description="search_code: the legs the first page ran.")
    reranked: bool = Field(default=False, description="search_code: the first page's pool was reranked.")
    depth: int | None = Field(default=None, ge=1, description="search_code: candidates per leg of the pool.")
    changed: str | None = Field(default=None, description="search_code: fingerprint of changed_since's files.")

    @classmethod
    def resume(cls, text: str, tool: PagedTool, asked: str) -> SearchCursor:
        """The cursor `text` of an earlier page of the search whose arguments' fingerprint is `asked`."""
        cursor = cls.decode(text, tool)
        if cursor.tool != tool:
            raise CursorExpired(f"not a {tool} cursor")
        if cursor.query != asked:
            raise CursorExpired("it continues another search (its arguments differ)")
        return cursor


class SearchAnswer(Strict):
    """The index actor's answer to a `SearchQuery`: hits best first, the indexes refused, and the
    fingerprint of the serving builds ranked (a cursor's `builds`)."""

    hits: list[ScoredHit]
    refused: list[str] = Field(default_factory=list, description="Indexes skipped: another encoder space.")
    builds: str


class SymbolQuery(Strict):
    """One page of search_symbols: the query, where, how many, from where, and what is left out."""

    query: str
    repo: str | None = None
    limit: int = Field(ge=1)
    offset: int = Field(default=0, ge=0)
    controls: SearchControls = Field(default_factory=SearchControls)
    builds: str | None = Field(default=None, description="A next page's: the builds its first page ranked.")


class SymbolPage(Strict):
    hits: list[SymbolHit]
    builds: str = Field(description="Fingerprint of the serving builds ranked.")
    more: bool = Field(description="Hits remain after this page.")
