"""The storage seam: one `VectorStore` protocol and the checks both engines share.

Two engines implement it (opened by `cluster.index.store.engines.open_vector_store`): "embedded"
is Qdrant Edge in-process (`edge.EdgeStore`); "server" is a Qdrant server through qdrant-client
(`qdrant.QdrantServerStore`). Both keep the same
contract: cosine distance, UUID-string ids, keyword filters, atomic aliases, and a small
JSON metadata dict that lives and dies with its collection.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from cluster.errors import StoreError, WidthMismatch
from cluster.index.payload import CATEGORIES_FIELD
from cluster.index.query import SearchQuery
from cluster.settings import VectorIndexSettings
from cluster.types import CandidateHit, PayloadFilter, ScoredHit, SparseTerms, StoredPoint

KEYWORD_VECTOR = "keywords"  # the sparse vector of every collection (BM25 weights, IDF by the store)
NAME_VECTOR = "names"  # the second dense vector: a chunk's name, owner and signature (same width)
CODE_VECTOR = ""  # the default dense vector: the chunk's header and code
DENSE_LEG, NAME_LEG, KEYWORD_LEG, DEFINITION_LEG = "dense", "name", "keyword", "definition"  # a search's legs
EMBEDDED = "embedded"
SERVER = "server"
STORE_KINDS = (EMBEDDED, SERVER)

_NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
MAX_NAME_LENGTH = 200
FLOAT32_BYTES = 4


@runtime_checkable
class VectorStore(Protocol):
    """Collections of (UUID id, vector, payload) points with cosine search and aliases.

    `collection_or_alias` arguments accept either a collection name or an alias.
    Unknown names raise `CollectionNotFound`; other refusals raise `StoreError`.
    """

    def create_collection(
        self, name: str, width: int, keyword_fields: Sequence[str], *, rows: int | None = None
    ) -> None:
        """Create an empty collection: a cosine vector of `width`, the sparse `keywords` vector with
        the IDF modifier, and keyword payload indexes; StoreError if the name is taken. `rows`: how
        many rows the caller expects to write (None: unknown); the embedded engine keeps a collection
        expected under `store.vector_index.pool_below_rows` in a pool shared with other small ones
        (`edge_pool`), which changes nothing a caller sees but the cost of searching many at once."""
        ...

    def drop_collection(self, name: str) -> None:
        """Delete a collection, its metadata and the aliases pointing at it; no-op if absent."""
        ...

    def list_collections(self) -> list[str]:
        """Names of the real collections, sorted."""
        ...

    def collection_width(self, name: str) -> int:
        """Vector width of a collection (or of an alias's target)."""
        ...

    def upsert(self, collection: str, points: Sequence[StoredPoint]) -> None:
        """Insert or replace points; WidthMismatch (nothing written) if any vector has the wrong width.
        Durable at the next `flush` (or `close`) when the embedded engine keeps no write-ahead log
        (`store.vector_index.write_ahead_log`)."""
        ...

    def search(
        self,
        collection_or_alias: str,
        vector: Sequence[float],
        limit: int,
        filter: PayloadFilter | None = None,
        *,
        exact: bool = False,
    ) -> list[ScoredHit]:
        """Top `limit` points by cosine similarity of the code vector, best first; `exact`: by a full
        scan, never the approximate index (the truth an approximate search is scored against)."""
        ...

    def query(self, collection_or_alias: str, query: SearchQuery, *, payloads: bool = True) -> list[CandidateHit]:
        """The candidates of a search (`reads.plan_legs`), every leg under the query's filter: the top
        `query.leg_limit` points by cosine with the code vector and with the name vector (when the
        query has a vector), the top `query.leg_limit` by keyword score (IDF-weighted dot product, when
        it has keyword terms), and the points matching its `definitions` (e.g. `defines == name`)
        nearest the vector. Each candidate carries the exact cosines of both its vectors and its
        keyword score (0 when the keyword leg did not return it), unordered: `cluster.index.fusion`
        scores them. At least one leg is required. `payloads=False`: the candidates come with empty
        payloads (a search scores ~150 candidates and returns ~10: `payloads` reads those)."""
        ...

    def query_each(self, collections: Sequence[str], query: SearchQuery) -> dict[str, list[CandidateHit]]:
        """The candidates of `query` (as `query(..., payloads=False)`) in each of these collections or
        aliases, by the name given. Collections an engine holds together (a pool) are searched in one
        call: each leg's top `query.leg_limit` is then over all of them, and a keyword score is weighed
        by the IDF of the terms over all of them."""
        ...

    def payloads(
        self, collection_or_alias: str, ids: Sequence[str], *, leave_out: Sequence[str] = ()
    ) -> dict[str, dict[str, Any]]:
        """The payloads of these points by canonical id, whole but for the `leave_out` keys (the engine
        does not read them); an id the collection lacks is left out."""
        ...

    def index_vectors(self, collection: str) -> bool:
        """Build the collection's vector indexes (HNSW graphs, quantised copies) before it serves, when it
        is large enough to have them (`store.vector_index.exact_below_rows`); True when it built them.
        Reads of other collections go on meanwhile; an engine that indexes in the background does nothing."""
        ...

    def count(self, collection_or_alias: str, filter: PayloadFilter | None = None) -> int:
        """Exact number of points matching `filter` (all points without one)."""
        ...

    def scroll_points(
        self,
        collection_or_alias: str,
        filter: PayloadFilter | None,
        limit: int,
        offset: str | None,
    ) -> tuple[list[StoredPoint], str | None]:
        """Like `scroll`, with the dense vector and keyword terms of every point (to copy points)."""
        ...

    def scroll(
        self,
        collection_or_alias: str,
        filter: PayloadFilter | None,
        limit: int,
        offset: str | None,
    ) -> tuple[list[ScoredHit], str | None]:
        """One page of matching points (score 0.0) and the offset of the next page, None at the end."""
        ...

    def retrieve_points(self, collection_or_alias: str, ids: Sequence[str]) -> list[StoredPoint]:
        """The points with these ids, with their vectors and keyword terms (to copy points); an id
        the collection lacks is left out, and the order is the engine's."""
        ...

    def set_alias(self, alias: str, collection: str) -> None:
        """Point `alias` at `collection` atomically: readers see the old or the new target, never none."""
        ...

    def resolve_alias(self, alias: str) -> str | None:
        """The collection an alias points at, or None."""
        ...

    def aliases(self) -> dict[str, str]:
        """Every alias and its target collection."""
        ...

    def delete_alias(self, alias: str) -> None:
        """Remove an alias; no-op if absent."""
        ...

    def put_metadata(self, collection: str, metadata: dict[str, Any]) -> None:
        """Replace the JSON-able metadata dict stored with a collection."""
        ...

    def get_metadata(self, collection: str) -> dict[str, Any] | None:
        """The collection's metadata dict, or None if none was put."""
        ...

    def flush(self) -> None:
        """Make every acknowledged write durable."""
        ...

    def close(self) -> None:
        """Flush and release files, locks and connections; the store is unusable afterwards."""
        ...


# --- helpers shared by both engines -------------------------------------------------


# Keyword fields whose indexes stay on the heap when `payload_indexes_on_disk` maps the others from disk:
# every default search_code filters on them (test code left out), on every leg, and a memory-mapped
# index makes that filter cost (300k rows, the dense leg under it: 2.45 ms mapped, 1.74 ms on the heap,
# 1.22 ms unfiltered). One value or two a row: its index files are about 37 bytes a row.
HEAP_INDEXED_FIELDS = frozenset({CATEGORIES_FIELD})


def index_on_disk(tuning: VectorIndexSettings, field: str) -> bool:
    """Whether `field`'s keyword index is memory-mapped from disk (else it is held on the heap)."""
    return tuning.payload_indexes_on_disk and field not in HEAP_INDEXED_FIELDS


def threshold_kb(rows: int, width: int) -> int:
    """`rows` float32 vectors of `width` in kilobytes, at least 1 (Qdrant reads 0 as "never index"): the
    unit of the engines' indexing and full-scan thresholds, which `store.vector_index` sets in rows."""
    return max(1, math.ceil(rows * width * FLOAT32_BYTES / 1024))


def check_name(name: str, operation: str) -> str:
    """Refuse collection/alias names outside `[A-Za-z0-9_.-]+` (no leading dot, no path tricks)."""
    if not isinstance(name, str) or len(name) > MAX_NAME_LENGTH or not _NAME_PATTERN.fullmatch(name):
        raise StoreError(operation, f"invalid collection or alias name {name!r}")
    return name


def check_width(width: int) -> int:
    if not isinstance(width, int) or isinstance(width, bool) or width < 1:
        raise StoreError("create_collection", f"vector width must be a positive integer, got {width!r}")
    return width


def check_limit(limit: int, operation: str) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise StoreError(operation, f"limit must be a positive integer, got {limit!r}")
    return limit


def canonical_id(raw: str) -> str:
    """A point id as the canonical lowercase UUID string; StoreError if it is not a UUID."""
    try:
        return str(uuid.UUID(str(raw)))
    except ValueError as exc:
        raise StoreError("upsert", f"point id {raw!r} is not a UUID") from exc


def check_vector_widths(collection: str, width: int, points: Sequence[StoredPoint]) -> None:
    """WidthMismatch on the first vector whose length is not `width`."""
    for point in points:
        for vector in (point.vector, point.name_vector):
            if vector is not None and len(vector) != width:
                raise WidthMismatch(f"upsert into {collection!r}", width, len(vector))


def check_query_width(collection: str, width: int, vector: Sequence[float]) -> None:
    if len(vector) != width:
        raise WidthMismatch(f"search in {collection!r}", width, len(vector))


def filter_items(filter: PayloadFilter | None) -> list[tuple[str, str]]:
    """The (field, value) pairs a filter requires, empty when there is no filter."""
    return sorted(filter.equals.items()) if filter is not None else []


def filter_any_items(filter: PayloadFilter | None) -> list[tuple[str, list[str]]]:
    """The (field, values) pairs of which a filter requires one value each."""
    return sorted((key, sorted(set(values))) for key, values in filter.any_of.items()) if filter is not None else []


def filter_none_items(filter: PayloadFilter | None) -> list[tuple[str, list[str]]]:
    """The (field, values) pairs of which a filter requires none (an empty list requires nothing)."""
    if filter is None:
        return []
    return sorted((key, sorted(set(values))) for key, values in filter.none_of.items() if values)


class FilterTypes(Protocol):
    """How one engine writes a filter: a field equal to a value, a field equal to one of values, and
    a filter of conditions that must all hold, of which one must hold, and of which none may."""

    def match(self, key: str, value: str) -> Any: ...

    def match_any(self, key: str, values: list[str]) -> Any: ...

    def combine(self, must: list[Any], should: list[Any], must_not: list[Any]) -> Any: ...


def engine_filter(filter: PayloadFilter | None, types: FilterTypes) -> Any | None:
    """`filter` in an engine's own types (None: no condition): its `equals` and `any_of` must hold,
    its `none_of` must not, and each group of `either` is a nested filter one of whose members holds."""
    if filter is None:
        return None
    must = [types.match(key, value) for key, value in filter_items(filter)]
    must += [types.match_any(key, values) for key, values in filter_any_items(filter)]
    must_not = [types.match_any(key, values) for key, values in filter_none_items(filter)]
    for group in filter.either:
        members = [engine_filter(member, types) for member in group]
        if any(member is None for member in members):
            continue  # a member with no condition holds everywhere, and so does its group
        must.append(types.combine([], members, []))
    if not must and not must_not:
        return None
    return types.combine(must, [], must_not)


def hit(raw_id: Any, score: float, payload: dict[str, Any] | None) -> ScoredHit:
    """A ScoredHit with the id normalised to a string (engines return UUID or str)."""
    return ScoredHit(id=str(raw_id), score=float(score), payload=dict(payload or {}))


def check_query_legs(vector: Sequence[float] | None, keywords: SparseTerms | None) -> None:
    if vector is None and keywords is None:
        raise StoreError("query", "a query needs a dense vector, keyword terms, or both")


def stored_point(raw_id: Any, vectors: Any, payload: dict[str, Any] | None) -> StoredPoint:
    """A point read back from an engine: the code vector, the name vector and the keyword vector
    (both engines return `{"": code, "names": name, "keywords": sparse}` for named vectors)."""
    dense: Any = vectors
    names: Any = None
    sparse = None
    if isinstance(vectors, dict):
        dense = vectors.get(CODE_VECTOR)
        names = vectors.get(NAME_VECTOR)
        keyword = vectors.get(KEYWORD_VECTOR)
        if keyword is not None:
            sparse = SparseTerms(indices=list(keyword.indices), values=list(keyword.values))
    return StoredPoint(
        id=str(raw_id),
        vector=[float(x) for x in dense or []],
        payload=dict(payload or {}),
        sparse=sparse,
        name_vector=[float(x) for x in names] if names is not None else None,
    )


def point_vectors(point: StoredPoint, sparse_vector: Any) -> dict[str, Any]:
    """The named vectors of a point for either engine (`sparse_vector` builds its sparse type)."""
    named: dict[str, Any] = {CODE_VECTOR: list(point.vector)}
    if point.name_vector is not None:
        named[NAME_VECTOR] = list(point.name_vector)
    if point.sparse is not None:
        named[KEYWORD_VECTOR] = sparse_vector(list(point.sparse.indices), list(point.sparse.values))
    return named


def cosines(query: Sequence[float], vectors: Sequence[Sequence[float] | None]) -> list[float | None]:
    """Cosine of the query with each vector, in one matrix product (None where a point has none)."""
    rows = [i for i, vector in enumerate(vectors) if vector is not None and len(vector)]
    out: list[float | None] = [None] * len(vectors)
    if not rows:
        return out
    q = np.asarray(query, dtype=np.float32)
    matrix = np.asarray([vectors[i] for i in rows], dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1) * float(np.linalg.norm(q))
    sims = (matrix @ q) / np.where(norms > 0, norms, 1.0)
    for i, sim in zip(rows, sims.tolist(), strict=True):
        out[i] = sim
    return out


class CandidatePool:
    """The points the legs of one search returned, merged by id into candidates with every leg's
    score (`VectorStore.query`). The legs read ids and scores only; the payloads of the union are
    read once after them (`fill`): payloads dominate the cost of a read, and most points come back
    from more than one leg.

    Every candidate gets both cosines. The code and name legs score what they return; a point one
    of them missed is scored there exactly, either by the engine (`add` again with the leg's
    query restricted to `missing(leg)`: Qdrant Edge) or from vectors read with the payloads
    (`fill`: the Qdrant server)."""

    def __init__(self) -> None:
        self._order: dict[str, Any] = {}  # ids in the order the legs returned them → the engine's own id
        self._found: dict[str, tuple[Any, dict[str, Any]]] = {}
        self._scores: dict[str, dict[str, float]] = {DENSE_LEG: {}, NAME_LEG: {}, KEYWORD_LEG: {}}
        self._defined: set[str] = set()

    def add(self, leg: str, points: Iterable[Any]) -> None:
        """One leg's points (ids and scores; payloads come with `fill`)."""
        for point in points:
            raw = point.id  # Qdrant Edge makes a new UUID object at each read of `id`
            point_id = str(raw)
            self._order.setdefault(point_id, raw)
            if leg == DEFINITION_LEG:
                self._defined.add(point_id)
            else:
                self._scores[leg][point_id] = float(point.score)

    @property
    def ids(self) -> list[Any]:
        """Every point some leg returned, once, as the engine named it: what to `fill`."""
        return list(self._order.values())

    def missing(self, leg: str) -> list[Any]:
        """The candidates the code or name leg did not score, as the engine named them (to score
        them there exactly)."""
        scored = self._scores[leg]
        return [raw for point_id, raw in self._order.items() if point_id not in scored]

    def fill_bare(self) -> None:
        """Every point some leg returned, with no payload (the caller reads the payloads it keeps)."""
        for point_id in self._order:
            self._found[point_id] = (None, {})

    def fill(self, records: Iterable[Any]) -> None:
        """The payload (and the vectors, where read) of the points: one read of every candidate."""
        for record in records:
            self._found[str(record.id)] = (record.vector, dict(record.payload or {}))

    def candidates(self, query: Sequence[float] | None) -> list[CandidateHit]:
        """The keyword score is 0 for a point the keyword leg did not return."""
        ids = [point_id for point_id in self._order if point_id in self._found]  # a point deleted meanwhile: gone
        dense: list[float | None] = [None] * len(ids)
        name: list[float | None] = [None] * len(ids)
        if query is not None:
            dense = self._cosines(query, ids, DENSE_LEG, CODE_VECTOR)
            name = self._cosines(query, ids, NAME_LEG, NAME_VECTOR)
        keyword = self._scores[KEYWORD_LEG]
        return [
            CandidateHit(
                id=point_id,
                payload=self._found[point_id][1],
                dense=dense[i],
                name=name[i],
                keyword=keyword.get(point_id, 0.0),
                definition=point_id in self._defined,
            )
            for i, point_id in enumerate(ids)
        ]

    def _cosines(self, query: Sequence[float], ids: list[str], leg: str, vector_name: str) -> list[float | None]:
        """A leg's own scores; for the rest, the cosine with the vectors `fill` read (None: neither)."""
        scored = self._scores[leg]
        out: list[float | None] = [scored.get(point_id) for point_id in ids]
        unscored = [i for i, score in enumerate(out) if score is None]
        if unscored:
            vectors = [self._named(self._found[ids[i]][0]).get(vector_name) for i in unscored]
            for i, cosine in zip(unscored, cosines(query, vectors), strict=True):
                out[i] = cosine
        return out

    @staticmethod
    def _named(vectors: Any) -> dict[str, Any]:
        if vectors is None:
            return {}
        return vectors if isinstance(vectors, dict) else {CODE_VECTOR: vectors}


def with_condition(filter: PayloadFilter | None, extra: PayloadFilter) -> PayloadFilter:
    """`filter` and `extra` together (both must hold)."""
    return extra.both(filter)
