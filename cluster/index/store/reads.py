"""How both engines read: the legs a search plans, and pages of a scroll.

`plan_legs` turns a `SearchQuery` into its legs (the code vector, the name vector, the definition
leg, the keyword terms), each with the named vector it searches and its filter; an engine only
writes each leg in its own client's types. `PagedReads` is the scroll of both engines: a page of
payloads (`scroll`) or of whole points (`scroll_points`) from an offset; an engine reads one `Page`.
Its `retrieve_points` reads whole points by id (a reindex carries them into a new build).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from cluster.index.query import SearchQuery
from cluster.index.store.protocol import (
    CODE_VECTOR,
    DEFINITION_LEG,
    DENSE_LEG,
    KEYWORD_LEG,
    KEYWORD_VECTOR,
    NAME_LEG,
    NAME_VECTOR,
    canonical_id,
    check_limit,
    check_query_legs,
    hit,
    stored_point,
    with_condition,
)
from cluster.types import CandidateHit, PayloadFilter, ScoredHit, SparseTerms, StoredPoint

__all__ = ["VECTOR_LEGS", "Leg", "Page", "PagedReads", "plan_legs"]

VECTOR_LEGS = (DENSE_LEG, NAME_LEG)  # the legs every candidate gets an exact score of


@dataclass(frozen=True)
class Leg:
    """One leg of a search: its name, the named vector it searches, what it searches with, its filter."""

    name: str
    using: str
    vector: list[float] | SparseTerms
    filter: PayloadFilter | None


def plan_legs(query: SearchQuery) -> list[Leg]:
    """The legs of a search, every one under the query's filter (the definition leg under the
    definitions too): the code and name vectors and the definitions when the query has a vector,
    the keyword terms when it has them. StoreError when it has neither."""
    check_query_legs(query.vector, query.keywords)
    check_limit(query.leg_limit, "query")
    legs: list[Leg] = []
    if query.vector is not None:
        legs.append(Leg(DENSE_LEG, CODE_VECTOR, query.vector, query.filter))
        legs.append(Leg(NAME_LEG, NAME_VECTOR, query.vector, query.filter))
        if query.definitions is not None:
            where = with_condition(query.filter, query.definitions)
            legs.append(Leg(DEFINITION_LEG, CODE_VECTOR, query.vector, where))
    if query.keywords is not None:
        legs.append(Leg(KEYWORD_LEG, KEYWORD_VECTOR, query.keywords, query.filter))
    return legs


@dataclass(frozen=True)
class Page:
    """One page of a scroll: the operation (named in errors), its filter, how many points, the canonical
    id to start from (None: the first), and whether vectors come with the payloads."""

    operation: str
    filter: PayloadFilter | None
    limit: int
    start: str | None
    with_vectors: bool


class PagedReads(ABC):
    """`scroll` and `scroll_points` of the `VectorStore` protocol over one engine call, `_read_page`,
    `retrieve_points` and `payloads` over another, `_read_points`, and `query_each` over `query`."""

    def scroll(
        self, collection_or_alias: str, filter: PayloadFilter | None, limit: int, offset: str | None
    ) -> tuple[list[ScoredHit], str | None]:
        records, next_offset = self._page(collection_or_alias, Page("scroll", filter, limit, offset, False))
        return [hit(record.id, 0.0, record.payload) for record in records], next_offset

    def scroll_points(
        self, collection_or_alias: str, filter: PayloadFilter | None, limit: int, offset: str | None
    ) -> tuple[list[StoredPoint], str | None]:
        records, next_offset = self._page(collection_or_alias, Page("scroll_points", filter, limit, offset, True))
        return [stored_point(record.id, record.vector, record.payload) for record in records], next_offset

    def retrieve_points(self, collection_or_alias: str, ids: Sequence[str]) -> list[StoredPoint]:
        wanted = [canonical_id(point_id) for point_id in ids]
        records = self._read_points(collection_or_alias, wanted, with_vectors=True) if wanted else []
        return [stored_point(record.id, record.vector, record.payload) for record in records]

    def query_each(self, collections: Sequence[str], query: SearchQuery) -> dict[str, list[CandidateHit]]:
        """One `query` per collection (an engine that holds collections together overrides it)."""
        return {name: self.query(name, query, payloads=False) for name in dict.fromkeys(collections)}

    @abstractmethod
    def query(self, collection_or_alias: str, query: SearchQuery, *, payloads: bool = True) -> list[CandidateHit]:
        """The candidates of a search in one collection (`VectorStore.query`)."""

    def payloads(
        self, collection_or_alias: str, ids: Sequence[str], *, leave_out: Sequence[str] = ()
    ) -> dict[str, dict[str, Any]]:
        wanted = [canonical_id(point_id) for point_id in ids]
        records = (
            self._read_points(collection_or_alias, wanted, with_vectors=False, leave_out=leave_out) if wanted else []
        )
        return {str(record.id): dict(record.payload or {}) for record in records}

    def _page(self, collection_or_alias: str, page: Page) -> tuple[list[Any], str | None]:
        """`page` from its offset (any id spelling; the engine reads the canonical one) and the next offset."""
        check_limit(page.limit, page.operation)
        start = canonical_id(page.start) if page.start is not None else None
        records, next_offset = self._read_page(collection_or_alias, replace(page, start=start))
        return list(records), (str(next_offset) if next_offset is not None else None)

    @abstractmethod
    def _read_page(self, collection_or_alias: str, page: Page) -> tuple[Iterable[Any], Any]:
        """One page of records (id, vector, payload) and the engine's next offset (None: the end)."""

    @abstractmethod
    def _read_points(
        self, collection_or_alias: str, ids: list[str], *, with_vectors: bool, leave_out: Sequence[str] = ()
    ) -> Iterable[Any]:
        """The records (id, payload but its `leave_out` keys, and the vectors when `with_vectors`) of these
        canonical ids; one the collection lacks is left out."""
