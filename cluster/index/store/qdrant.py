"""`QdrantServerStore`: the server engine on qdrant-client.

`url` is a server address, or ":memory:" / "path:/dir" for qdrant-client's local mode (the
stand-in for a server in tests). Aliases are real Qdrant aliases, switched with one
delete+create request (atomic on the server). Metadata rides in the collection's own
`metadata` config under one key, so a put replaces it whole (Qdrant merges top-level keys)
and it is dropped with the collection. Local mode keeps no payload indexes; that is fine.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from cluster.errors import CollectionNotFound, StoreError, WidthMismatch
from cluster.index.query import SearchQuery
from cluster.index.store.protocol import (
    CODE_VECTOR,
    KEYWORD_VECTOR,
    NAME_VECTOR,
    CandidatePool,
    canonical_id,
    check_limit,
    check_name,
    check_query_width,
    check_vector_widths,
    check_width,
    engine_filter,
    hit,
    index_on_disk,
    point_vectors,
    threshold_kb,
)
from cluster.index.store.reads import Leg, Page, PagedReads, plan_legs
from cluster.settings import VectorIndexSettings
from cluster.types import CandidateHit, PayloadFilter, ScoredHit, StoredPoint

MEMORY_URL = ":memory:"
PATH_URL_PREFIX = "path:"
METADATA_KEY = "samespace"
HTTP_NOT_FOUND = 404


class _QdrantFilters:
    """qdrant-client's filter types (`engine_filter`)."""

    @staticmethod
    def match(key: str, value: str) -> Any:
        return models.FieldCondition(key=key, match=models.MatchValue(value=value))

    @staticmethod
    def match_any(key: str, values: list[str]) -> Any:
        return models.FieldCondition(key=key, match=models.MatchAny(any=values))

    @staticmethod
    def combine(must: list[Any], should: list[Any], must_not: list[Any]) -> Any:
        return models.Filter(must=must or None, should=should or None, must_not=must_not or None)


def _qdrant_filter(filter: PayloadFilter | None) -> models.Filter | None:
    built: models.Filter | None = engine_filter(filter, _QdrantFilters())
    return built


def _vectors(point: StoredPoint) -> Any:
    """The code vector, the name vector and the keyword vector a point has, by name."""
    return point_vectors(point, lambda indices, values: models.SparseVector(indices=indices, values=values))


def _leg_query(leg: Leg) -> Any:
    """A leg as qdrant-client's query: its dense vector, or its keyword terms as a sparse vector."""
    if isinstance(leg.vector, list):
        return leg.vector
    return models.SparseVector(indices=list(leg.vector.indices), values=list(leg.vector.values))


def _keyword_index(tuning: VectorIndexSettings, field: str) -> models.KeywordIndexParams:
    """A keyword field's index: memory-mapped (cold) or on the heap, as `index_on_disk` says."""
    memory = models.Memory.COLD if index_on_disk(tuning, field) else models.Memory.PINNED
    return models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, memory=memory)


def _index_config(width: int, tuning: VectorIndexSettings) -> dict[str, Any]:
    """A new collection's HNSW, quantisation and payload placement, as `store.vector_index` says (the
    server's thresholds, like Edge's, in kilobytes of one vector)."""
    threshold = threshold_kb(tuning.exact_below_rows, width)
    quantized = tuning.quantization == "int8"
    return {
        "hnsw_config": models.HnswConfigDiff(
            m=tuning.hnsw_m, ef_construct=tuning.hnsw_ef_construct, full_scan_threshold=threshold
        ),
        "optimizers_config": models.OptimizersConfigDiff(indexing_threshold=threshold),
        "quantization_config": (
            models.ScalarQuantization(
                scalar=models.ScalarQuantizationConfig(type=models.ScalarType.INT8, quantile=0.99, always_ram=True)
            )
            if quantized
            else None
        ),
        "on_disk_payload": tuning.payload_on_disk,
    }


def _search_params(tuning: VectorIndexSettings) -> models.SearchParams:
    quantization = (
        models.QuantizationSearchParams(rescore=True, oversampling=tuning.oversampling)
        if tuning.quantization == "int8"
        else None
    )
    return models.SearchParams(hnsw_ef=tuning.hnsw_ef, quantization=quantization)


def _is_not_found(exc: Exception) -> bool:
    if isinstance(exc, UnexpectedResponse):
        return exc.status_code == HTTP_NOT_FOUND
    return isinstance(exc, ValueError) and "not found" in str(exc).lower()


class QdrantServerStore(PagedReads):
    """A `VectorStore` on a Qdrant server (or qdrant-client local mode)."""

    def __init__(
        self, url: str, *, api_key: str | None = None, vector_index: VectorIndexSettings | None = None
    ) -> None:
        self._local = url == MEMORY_URL or url.startswith(PATH_URL_PREFIX)
        self._tuning = vector_index or VectorIndexSettings()
        # Local mode is not safe for concurrent callers; a server is.
        self._lock: contextlib.AbstractContextManager[Any] = (
            threading.RLock() if self._local else contextlib.nullcontext()
        )
        try:
            if url == MEMORY_URL:
                self._client = QdrantClient(location=MEMORY_URL)
            elif url.startswith(PATH_URL_PREFIX):
                path = url[len(PATH_URL_PREFIX) :]
                self._client = QdrantClient(path=path, force_disable_check_same_thread=True)
            else:
                self._client = QdrantClient(url=url, api_key=api_key)
        except (RuntimeError, ValueError, OSError, ResponseHandlingException) as exc:
            raise StoreError("open", f"cannot open qdrant at {url!r}: {exc}") from exc

    @contextlib.contextmanager
    def _call(self, operation: str, name: str | None = None) -> Iterator[None]:
        """Serialise local-mode calls and translate qdrant-client errors at this boundary."""
        with self._lock:
            try:
                yield
            except (StoreError, WidthMismatch):
                raise
            except Exception as exc:
                if name is not None and _is_not_found(exc):
                    raise CollectionNotFound(name) from exc
                raise StoreError(operation, f"qdrant: {exc}") from exc

    # --- collections ------------------------------------------------------------

    def create_collection(
        self, name: str, width: int, keyword_fields: Sequence[str], *, rows: int | None = None
    ) -> None:
        """`rows` is not used: the server holds each collection on its own, however small."""
        del rows
        check_name(name, "create_collection")
        check_width(width)
        with self._call("create_collection", name):
            if self._client.collection_exists(name):
                raise StoreError("create_collection", f"collection {name!r} already exists")
            if name in self._alias_map():
                raise StoreError("create_collection", f"{name!r} is already an alias")
            on_disk = True if self._tuning.quantization == "int8" else None  # the originals, for rescoring
            self._client.create_collection(
                name,
                vectors_config={
                    CODE_VECTOR: models.VectorParams(size=width, distance=models.Distance.COSINE, on_disk=on_disk),
                    NAME_VECTOR: models.VectorParams(size=width, distance=models.Distance.COSINE, on_disk=on_disk),
                },
                sparse_vectors_config={KEYWORD_VECTOR: models.SparseVectorParams(modifier=models.Modifier.IDF)},
                **_index_config(width, self._tuning),
            )
            with warnings.catch_warnings():
                if self._local:  # "Payload indexes have no effect in the local Qdrant"
                    warnings.simplefilter("ignore", UserWarning)
                for field in keyword_fields:
                    self._client.create_payload_index(name, field, _keyword_index(self._tuning, field), wait=True)

    def index_vectors(self, collection: str) -> bool:
        """Nothing to do: a server builds its collections' indexes in the background."""
        self.collection_width(collection)  # CollectionNotFound for an unknown name, as Edge
        return False

    def drop_collection(self, name: str) -> None:
        check_name(name, "drop_collection")
        with self._call("drop_collection"):
            self._client.delete_collection(name)

    def list_collections(self) -> list[str]:
        with self._call("list_collections"):
            return sorted(c.name for c in self._client.get_collections().collections)

    def collection_width(self, name: str) -> int:
        with self._call("collection_width", name):
            vectors = self._client.get_collection(self._target(name)).config.params.vectors
        code = vectors.get(CODE_VECTOR) if isinstance(vectors, dict) else None
        if not isinstance(code, models.VectorParams):
            raise StoreError("collection_width", f"collection {name!r} has no code vector (not a samespace collection)")
        return code.size

    # --- points -----------------------------------------------------------------

    def upsert(self, collection: str, points: Sequence[StoredPoint]) -> None:
        check_vector_widths(collection, self.collection_width(collection), points)
        if not points:
            return
        structs = [
            models.PointStruct(id=canonical_id(p.id), vector=_vectors(p), payload=dict(p.payload)) for p in points
        ]
        with self._call("upsert", collection):
            self._client.upsert(collection, points=structs, wait=True)

    def search(
        self,
        collection_or_alias: str,
        vector: Sequence[float],
        limit: int,
        filter: PayloadFilter | None = None,
        *,
        exact: bool = False,
    ) -> list[ScoredHit]:
        check_limit(limit, "search")
        try:
            with self._call("search", collection_or_alias):
                found = self._client.query_points(
                    collection_or_alias,
                    query=[float(x) for x in vector],
                    limit=limit,
                    query_filter=_qdrant_filter(filter),
                    search_params=models.SearchParams(exact=True) if exact else _search_params(self._tuning),
                    with_payload=True,
                    with_vectors=False,
                ).points
        except CollectionNotFound:
            raise
        except StoreError:
            # Diagnose after the fact, so a good query costs no extra round trip.
            check_query_width(collection_or_alias, self.collection_width(collection_or_alias), vector)
            raise
        return [hit(point.id, point.score, point.payload) for point in found]

    def query(self, collection_or_alias: str, query: SearchQuery, *, payloads: bool = True) -> list[CandidateHit]:
        legs = plan_legs(query)
        if query.vector is not None:
            check_query_width(collection_or_alias, self.collection_width(collection_or_alias), query.vector)
        pool = CandidatePool()
        with self._call("query", collection_or_alias):
            for leg in legs:
                found = self._client.query_points(
                    collection_or_alias,
                    query=_leg_query(leg),
                    using=leg.using,
                    limit=query.leg_limit,
                    query_filter=_qdrant_filter(leg.filter),
                    search_params=_search_params(self._tuning) if isinstance(leg.vector, list) else None,
                    with_payload=False,
                    with_vectors=False,
                ).points
                pool.add(leg.name, found)
            if pool.ids:
                pool.fill(
                    self._client.retrieve(
                        collection_or_alias, pool.ids, with_payload=payloads, with_vectors=[CODE_VECTOR, NAME_VECTOR]
                    )
                )
        return pool.candidates(query.vector)

    def count(self, collection_or_alias: str, filter: PayloadFilter | None = None) -> int:
        with self._call("count", collection_or_alias):
            result = self._client.count(collection_or_alias, count_filter=_qdrant_filter(filter), exact=True)
        return int(result.count)

    def _read_page(self, collection_or_alias: str, page: Page) -> tuple[Iterable[Any], Any]:
        with self._call(page.operation, collection_or_alias):
            return self._client.scroll(
                collection_or_alias,
                scroll_filter=_qdrant_filter(page.filter),
                limit=page.limit,
                offset=page.start,
                with_payload=True,
                with_vectors=page.with_vectors,
            )

    def _read_points(
        self, collection_or_alias: str, ids: list[str], *, with_vectors: bool, leave_out: Sequence[str] = ()
    ) -> Iterable[Any]:
        payload = models.PayloadSelectorExclude(exclude=list(leave_out)) if leave_out else True
        with self._call("retrieve_points", collection_or_alias):
            return self._client.retrieve(collection_or_alias, ids, with_payload=payload, with_vectors=with_vectors)

    # --- aliases ----------------------------------------------------------------

    def set_alias(self, alias: str, collection: str) -> None:
        check_name(alias, "set_alias")
        check_name(collection, "set_alias")
        with self._call("set_alias", collection):
            if not self._client.collection_exists(collection):
                raise CollectionNotFound(collection)
            if self._client.collection_exists(alias) and alias not in self._alias_map():
                raise StoreError("set_alias", f"{alias!r} is a collection, not an alias")
            operations: list[models.DeleteAliasOperation | models.CreateAliasOperation] = []
            if alias in self._alias_map():
                operations.append(models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=alias)))
            operations.append(
                models.CreateAliasOperation(
                    create_alias=models.CreateAlias(collection_name=collection, alias_name=alias)
                )
            )
            # One request: the server applies the delete and the create atomically.
            self._client.update_collection_aliases(change_aliases_operations=operations)

    def resolve_alias(self, alias: str) -> str | None:
        with self._call("resolve_alias"):
            return self._alias_map().get(alias)

    def aliases(self) -> dict[str, str]:
        with self._call("aliases"):
            return self._alias_map()

    def delete_alias(self, alias: str) -> None:
        with self._call("delete_alias"):
            if alias not in self._alias_map():
                return
            self._client.update_collection_aliases(
                change_aliases_operations=[
                    models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=alias))
                ]
            )

    # --- metadata ---------------------------------------------------------------

    def put_metadata(self, collection: str, metadata: dict[str, Any]) -> None:
        if not isinstance(metadata, dict):
            raise StoreError("put_metadata", f"metadata must be a dict, got {type(metadata).__name__}")
        with self._call("put_metadata", collection):
            self._client.update_collection(self._target(collection), metadata={METADATA_KEY: metadata})

    def get_metadata(self, collection: str) -> dict[str, Any] | None:
        with self._call("get_metadata", collection):
            stored = self._client.get_collection(self._target(collection)).config.metadata
        value = (stored or {}).get(METADATA_KEY)
        return dict(value) if isinstance(value, dict) else None

    # --- lifecycle --------------------------------------------------------------

    def flush(self) -> None:
        """Nothing to do: every write is sent with wait=True."""

    def close(self) -> None:
        with self._call("close"):
            self._client.close()

    # --- internals --------------------------------------------------------------

    def _alias_map(self) -> dict[str, str]:
        return {a.alias_name: a.collection_name for a in self._client.get_aliases().aliases}

    def _target(self, collection_or_alias: str) -> str:
        """The collection behind an alias (local mode does not resolve aliases everywhere)."""
        return self._alias_map().get(collection_or_alias, collection_or_alias)
