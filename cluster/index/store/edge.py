"""`EdgeStore`: the embedded engine, one Qdrant Edge shard per collection.

Layout under `data_dir`:

    aliases.json                          {"alias": "collection", ...}
    collections/<name>/collection.json    {"width": 16, "keyword_fields": [...]}, written last
    collections/<name>/meta.json          the caller's metadata dict
    collections/<name>/shard/             the EdgeShard

`collection.json` is the commit marker: a directory without it (or without `shard/`) is a
torn create, treated as absent and removed by the next create or drop of that name. Every
JSON file is replaced atomically. An EdgeShard directory can be opened by one process only.

The files hold source text, so `data_dir` is private: opening the store creates it
0700 and strips group and other access from whatever an earlier run left under it. Files the
engine writes afterwards are private only under a restrictive umask, which the owning process
sets before it opens the store (actors/index_actor.py).
"""

from __future__ import annotations

import os
import shutil
import threading
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from cluster.config.atomic_file import fsync_dir
from cluster.errors import CollectionNotFound, StoreError
from cluster.index.query import SearchQuery
from cluster.index.store.edge_files import PRIVATE_DIR_MODE, make_private, read_json, write_json_atomic
from cluster.index.store.edge_indexing import edge_collection_config, edge_search_params, index_shard_apart
from cluster.index.store.protocol import (
    CandidatePool,
    canonical_id,
    check_limit,
    check_name,
    check_query_width,
    check_vector_widths,
    check_width,
    engine_filter,
    hit,
    point_vectors,
)
from cluster.index.store.reads import VECTOR_LEGS, Leg, Page, PagedReads, plan_legs
from cluster.settings import VectorIndexSettings
from cluster.types import CandidateHit, PayloadFilter, ScoredHit, StoredPoint

COLLECTIONS_DIR = "collections"
ALIASES_FILE = "aliases.json"
CONFIG_FILE = "collection.json"
METADATA_FILE = "meta.json"
SHARD_DIR = "shard"
TOMBSTONE_PREFIX = ".dropping-"


class _EdgeFilters:
    """Qdrant Edge's filter types (`engine_filter`)."""

    @staticmethod
    def match(key: str, value: str) -> Any:
        return qe.FieldCondition(key=key, match=qe.MatchValue(value))

    @staticmethod
    def match_any(key: str, values: list[str]) -> Any:
        return qe.FieldCondition(key=key, match=qe.MatchAny(values))

    @staticmethod
    def combine(must: list[Any], should: list[Any], must_not: list[Any]) -> Any:
        return qe.Filter(must=must or None, should=should or None, must_not=must_not or None)


def _edge_filter(filter: PayloadFilter | None) -> qe.Filter | None:
    built: qe.Filter | None = engine_filter(filter, _EdgeFilters())
    return built


def _edge_query(leg: Leg) -> qe.Query:
    """A leg as Qdrant Edge's query: nearest to its dense vector or its sparse keyword terms."""
    if isinstance(leg.vector, list):
        return qe.Query.Nearest(leg.vector, using=leg.using or None)
    return qe.Query.Nearest(qe.SparseVector(list(leg.vector.indices), list(leg.vector.values)), using=leg.using)


def _ids_and_scores(leg: Leg, limit: int, where: qe.Filter | None, params: qe.SearchParams | None) -> qe.QueryRequest:
    """One leg of a search: ids and scores only (payloads are read once, for the union); a dense leg
    searches with the store's parameters (the graph's ef, rescoring of quantised vectors)."""
    dense = isinstance(leg.vector, list)
    return qe.QueryRequest(
        limit=limit,
        query=_edge_query(leg),
        with_payload=False,
        with_vector=False,
        filter=where,
        params=params if dense else None,
    )


def _run_legs(shard: Any, pool: CandidatePool, requests: list[tuple[str, qe.QueryRequest]]) -> None:
    """Legs in one engine call; each leg's ids and scores go into the pool."""
    if not requests:
        return
    with _engine_errors("query"):
        found = shard.query_batch(qe.QueryBatchRequest([request for _, request in requests]))
    for (leg, _), points in zip(requests, found, strict=True):
        pool.add(leg, points)


def _has_ids(ids: Sequence[Any]) -> qe.Filter:
    """Only these points (ids as the engine returned them)."""
    return qe.Filter(must=[qe.HasIdCondition(set(ids))])


def _edge_vectors(point: StoredPoint) -> Any:
    """The code vector, the name vector and the keyword vector a point has, by name."""
    return point_vectors(point, qe.SparseVector)


@contextmanager
def _engine_errors(operation: str) -> Iterator[None]:
    """Translate the bare Exceptions qdrant_edge raises into StoreError."""
    try:
        yield
    except StoreError:
        raise
    except Exception as exc:
        raise StoreError(operation, f"qdrant edge: {exc}") from exc


class EdgeStore(PagedReads):
    """A `VectorStore` on Qdrant Edge shards in one directory; thread-safe, one process."""

    def __init__(self, data_dir: Path, vector_index: VectorIndexSettings | None = None) -> None:
        self._root = Path(data_dir)
        self._tuning = vector_index or VectorIndexSettings()
        self._search_params = edge_search_params(self._tuning)
        self._indexing: set[str] = set()  # collections a child process is indexing: not opened here meanwhile
        self._collections = self._root / COLLECTIONS_DIR
        self._lock = threading.RLock()
        self._shards: dict[str, qe.EdgeShard] = {}
        self._widths: dict[str, int] = {}
        self._closed = False
        make_private(self._root)
        try:
            self._collections.mkdir(mode=PRIVATE_DIR_MODE, exist_ok=True)
        except OSError as exc:
            raise StoreError("open", f"cannot create {self._collections}: {exc}") from exc
        self._remove_tombstones()
        self._aliases = self._load_aliases()

    # --- collections ------------------------------------------------------------

    def create_collection(self, name: str, width: int, keyword_fields: Sequence[str]) -> None:
        check_name(name, "create_collection")
        check_width(width)
        with self._lock:
            self._check_open()
            if self._exists(name):
                raise StoreError("create_collection", f"collection {name!r} already exists")
            if name in self._aliases:
                raise StoreError("create_collection", f"{name!r} is already an alias")
            directory = self._collections / name
            if directory.exists():
                self._remove_dir(directory)
            config = edge_collection_config(width, self._tuning)
            with _engine_errors("create_collection"):
                directory.mkdir(parents=True)
                shard = qe.EdgeShard.create(str(directory / SHARD_DIR), config)
                try:
                    for field in keyword_fields:
                        shard.update(qe.UpdateOperation.create_field_index(field, qe.PayloadSchemaType.Keyword))
                    shard.flush()
                    # The commit marker goes last: until it exists the directory is a torn create.
                    write_json_atomic(
                        directory / CONFIG_FILE,
                        {"width": width, "keyword_fields": list(keyword_fields)},
                        "create_collection",
                    )
                except BaseException:
                    shard.close()
                    raise
            self._shards[name] = shard
            self._widths[name] = width

    def drop_collection(self, name: str) -> None:
        check_name(name, "drop_collection")
        with self._lock:
            self._check_open()
            shard = self._shards.pop(name, None)
            self._widths.pop(name, None)
            if shard is not None:
                with _engine_errors("drop_collection"):
                    shard.close()
            remaining = {alias: target for alias, target in self._aliases.items() if target != name}
            if remaining != self._aliases:
                self._write_aliases(remaining)
            directory = self._collections / name
            if directory.exists():
                self._remove_dir(directory)

    def list_collections(self) -> list[str]:
        with self._lock:
            self._check_open()
            return sorted(entry.name for entry in self._collections.iterdir() if self._is_valid(entry))

    def collection_width(self, name: str) -> int:
        with self._lock:
            self._check_open()
            return self._width(self._resolve(name))

    # --- points -----------------------------------------------------------------

    def upsert(self, collection: str, points: Sequence[StoredPoint]) -> None:
        with self._lock:
            self._check_open()
            name = self._resolve(collection)
            check_vector_widths(collection, self._width(name), points)
            if not points:
                return
            edge_points = [qe.Point(canonical_id(p.id), _edge_vectors(p), dict(p.payload)) for p in points]
            with _engine_errors("upsert"):
                self._shard(name).update(qe.UpdateOperation.upsert_points(edge_points))

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
        with self._lock:
            self._check_open()
            name = self._resolve(collection_or_alias)
            check_query_width(collection_or_alias, self._width(name), vector)
            request = qe.QueryRequest(
                limit=limit,
                query=qe.Query.Nearest([float(x) for x in vector]),
                with_payload=True,
                filter=_edge_filter(filter),
                params=qe.SearchParams(exact=True) if exact else self._search_params,
            )
            with _engine_errors("search"):
                found = self._shard(name).query(request)
            return [hit(point.id, point.score, point.payload) for point in found]

    def query(self, collection_or_alias: str, query: SearchQuery, *, payloads: bool = True) -> list[CandidateHit]:
        legs, limit = plan_legs(query), query.leg_limit
        with self._lock:
            self._check_open()
            name = self._resolve(collection_or_alias)
            if query.vector is not None:
                check_query_width(collection_or_alias, self._width(name), query.vector)
            pool, shard = CandidatePool(), self._shard(name)
            params = self._search_params
            _run_legs(
                shard, pool, [(leg.name, _ids_and_scores(leg, limit, _edge_filter(leg.filter), params)) for leg in legs]
            )
            if query.vector is not None:  # a candidate one vector leg missed gets its exact cosine there
                missed = [(leg, pool.missing(leg.name)) for leg in legs if leg.name in VECTOR_LEGS]
                _run_legs(
                    shard,
                    pool,
                    [(leg.name, _ids_and_scores(leg, len(ids), _has_ids(ids), params)) for leg, ids in missed if ids],
                )
            if not payloads:
                pool.fill_bare()
            else:
                with _engine_errors("query"):
                    pool.fill(shard.retrieve(pool.ids, with_payload=True, with_vector=False))
            return pool.candidates(query.vector)

    def index_vectors(self, collection: str) -> bool:
        """Build the collection's HNSW graphs (and quantised copies) now, in a child process, when it
        holds `exact_below_rows` rows or more: Qdrant Edge runs no optimizer of its own, and its
        optimizer holds the interpreter while it runs. The shard is closed here meanwhile (an EdgeShard
        opens in one process) and reopened on its next use; reads of other collections go on."""
        with self._lock:
            self._check_open()
            name = self._resolve(collection)
            with _engine_errors("index_vectors"):
                rows = int(self._shard(name).count(qe.CountRequest(exact=True)))
            if rows < max(1, self._tuning.exact_below_rows):
                return False
            shard = self._shards.pop(name)
            with _engine_errors("index_vectors"):
                shard.flush()
                shard.close()
            self._indexing.add(name)
        try:
            index_shard_apart(self._collections / name / SHARD_DIR)
        finally:
            with self._lock:
                self._indexing.discard(name)
        return True

    def count(self, collection_or_alias: str, filter: PayloadFilter | None = None) -> int:
        with self._lock:
            self._check_open()
            name = self._resolve(collection_or_alias)
            with _engine_errors("count"):
                return int(self._shard(name).count(qe.CountRequest(exact=True, filter=_edge_filter(filter))))

    def _read_page(self, collection_or_alias: str, page: Page) -> tuple[Iterable[Any], Any]:
        with self._lock:
            self._check_open()
            name = self._resolve(collection_or_alias)
            request = qe.ScrollRequest(
                offset=page.start,
                limit=page.limit,
                filter=_edge_filter(page.filter),
                with_payload=True,
                with_vector=page.with_vectors,
            )
            with _engine_errors(page.operation):
                records, next_offset = self._shard(name).scroll(request)
            return records, next_offset

    def _read_points(self, collection_or_alias: str, ids: list[str], *, with_vectors: bool) -> Iterable[Any]:
        with self._lock:
            self._check_open()
            shard, wanted = self._shard(self._resolve(collection_or_alias)), list[int | uuid.UUID | str](ids)
            with _engine_errors("retrieve_points"):
                return shard.retrieve(wanted, with_payload=True, with_vector=with_vectors)

    # --- aliases ----------------------------------------------------------------

    def set_alias(self, alias: str, collection: str) -> None:
        check_name(alias, "set_alias")
        check_name(collection, "set_alias")
        with self._lock:
            self._check_open()
            if not self._exists(collection):
                raise CollectionNotFound(collection)
            if self._exists(alias):
                raise StoreError("set_alias", f"{alias!r} is a collection, not an alias")
            # One atomic file replace, then one dict swap: readers see old or new, never none.
            self._write_aliases({**self._aliases, alias: collection})

    def resolve_alias(self, alias: str) -> str | None:
        with self._lock:
            self._check_open()
            return self._aliases.get(alias)

    def aliases(self) -> dict[str, str]:
        with self._lock:
            self._check_open()
            return dict(self._aliases)

    def delete_alias(self, alias: str) -> None:
        with self._lock:
            self._check_open()
            if alias in self._aliases:
                self._write_aliases({k: v for k, v in self._aliases.items() if k != alias})

    # --- metadata ---------------------------------------------------------------

    def put_metadata(self, collection: str, metadata: dict[str, Any]) -> None:
        with self._lock:
            self._check_open()
            name = self._resolve(collection)
            if not isinstance(metadata, dict):
                raise StoreError("put_metadata", f"metadata must be a dict, got {type(metadata).__name__}")
            write_json_atomic(self._collections / name / METADATA_FILE, metadata, "put_metadata")

    def get_metadata(self, collection: str) -> dict[str, Any] | None:
        with self._lock:
            self._check_open()
            name = self._resolve(collection)
            path = self._collections / name / METADATA_FILE
            if not path.exists():
                return None
            value = read_json(path)
            if not isinstance(value, dict):
                raise StoreError("get_metadata", f"metadata of {name!r} is unreadable")
            return value

    # --- lifecycle --------------------------------------------------------------

    def flush(self) -> None:
        with self._lock:
            self._check_open()
            with _engine_errors("flush"):
                for shard in self._shards.values():
                    shard.flush()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            shards, self._shards = self._shards, {}
            failures: list[str] = []
            for name, shard in shards.items():
                try:
                    shard.flush()
                    shard.close()
                except Exception as exc:  # noqa: BLE001 - keep closing the others, report them all
                    failures.append(f"{name}: {exc}")
            if failures:
                raise StoreError("close", "qdrant edge: " + "; ".join(failures))

    # --- internals (call with the lock held) ------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("use", "the embedded vector store is closed")

    def _is_valid(self, directory: Path) -> bool:
        if directory.name.startswith(".") or not (directory / SHARD_DIR).is_dir():
            return False
        config = read_json(directory / CONFIG_FILE)
        return isinstance(config, dict) and isinstance(config.get("width"), int)

    def _exists(self, name: str) -> bool:
        return name in self._shards or self._is_valid(self._collections / name)

    def _resolve(self, collection_or_alias: str) -> str:
        """The collection behind a name or alias; CollectionNotFound if there is none."""
        name = self._aliases.get(collection_or_alias, collection_or_alias)
        check_name(name, "lookup")
        if not self._exists(name):
            raise CollectionNotFound(collection_or_alias)
        return name

    def _width(self, name: str) -> int:
        if name not in self._widths:
            config = read_json(self._collections / name / CONFIG_FILE)
            if not isinstance(config, dict) or not isinstance(config.get("width"), int):
                raise CollectionNotFound(name)
            self._widths[name] = config["width"]
        return self._widths[name]

    def _shard(self, name: str) -> qe.EdgeShard:
        """The open shard of a collection, loaded on first use and kept open."""
        shard = self._shards.get(name)
        if shard is None:
            if name in self._indexing:
                raise StoreError("open_collection", f"collection {name!r} is being indexed; try again when it is done")
            with _engine_errors("open_collection"):
                shard = qe.EdgeShard.load(str(self._collections / name / SHARD_DIR))
            self._shards[name] = shard
        return shard

    def _load_aliases(self) -> dict[str, str]:
        path = self._root / ALIASES_FILE
        if not path.exists():
            return {}
        loaded = read_json(path)
        if not isinstance(loaded, dict):
            raise StoreError("open", f"alias file {path} is unreadable")
        return {str(alias): str(target) for alias, target in loaded.items()}

    def _write_aliases(self, aliases: dict[str, str]) -> None:
        write_json_atomic(self._root / ALIASES_FILE, aliases, "set_alias")
        self._aliases = aliases

    def _remove_dir(self, directory: Path) -> None:
        """Rename aside (atomic: never half a collection under its name), then delete."""
        tombstone = directory.with_name(f"{TOMBSTONE_PREFIX}{directory.name}-{uuid.uuid4().hex}")
        try:
            os.replace(directory, tombstone)
            fsync_dir(directory.parent)
            shutil.rmtree(tombstone)
        except OSError as exc:
            raise StoreError("drop_collection", f"cannot remove {directory}: {exc}") from exc

    def _remove_tombstones(self) -> None:
        for entry in self._collections.iterdir():
            if entry.name.startswith(TOMBSTONE_PREFIX):
                shutil.rmtree(entry, ignore_errors=True)
