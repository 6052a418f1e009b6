"""`EdgeStore`: the embedded engine, one Qdrant Edge shard per collection, or one per pool of small ones.

Layout under `data_dir`:

    aliases.json                          {"alias": "collection", ...}
    collections/<name>/collection.json    {"width": 16, "keyword_fields": [...]}, written last
                                          (+ "pool": "pool-16" for a pooled collection)
    collections/<name>/meta.json          the caller's metadata dict
    collections/<name>/shard/             the EdgeShard (a pooled collection has none)
    pools/pool-<width>/pool.json          the pool's width and keyword fields, written last
    pools/pool-<width>/shard/             the rows of the pooled collections (`edge_pool`)

`collection.json` is the commit marker: a directory without it (or without `shard/`) is a
torn create, treated as absent and removed by the next create or drop of that name. Every
JSON file is replaced atomically. An EdgeShard directory can be opened by one process only.

The files hold source text, so `data_dir` is private: opening the store creates it
0700 and strips group and other access from whatever an earlier run left under it. Files the
engine writes afterwards are private only under a restrictive umask, which the owning process
sets before it opens the store (actors/index_actor.py).
"""

from __future__ import annotations

import functools
import os
import shutil
import threading
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from cluster.config.atomic_file import fsync_dir
from cluster.errors import CollectionNotFound, StoreError
from cluster.index.query import SearchQuery
from cluster.index.store.edge_calls import edge_filter, edge_vectors, query_shard
from cluster.index.store.edge_files import (
    ALIASES_FILE,
    COLLECTIONS_DIR,
    CONFIG_FILE,
    METADATA_FILE,
    PRIVATE_DIR_MODE,
    SHARD_DIR,
    TOMBSTONE_PREFIX,
    engine_errors,
    make_private,
    read_json,
    write_json_atomic,
)
from cluster.index.store.edge_indexing import edge_search_params, index_shard_apart, keyword_index, new_shard
from cluster.index.store.edge_pool import POOLS_DIR, Pools, Tenant, own_payload, pool_name
from cluster.index.store.edge_pool_graph import PoolGraphs, recover_pool_folders

__all__ = ["COLLECTIONS_DIR", "SHARD_DIR", "EdgeStore"]
from cluster.index.store.protocol import (
    canonical_id,
    check_limit,
    check_name,
    check_query_width,
    check_vector_widths,
    check_width,
    hit,
)
from cluster.index.store.reads import Page, PagedReads
from cluster.settings import VectorIndexSettings
from cluster.types import CandidateHit, PayloadFilter, ScoredHit, StoredPoint


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
        self._new_shard = functools.partial(new_shard, tuning=self._tuning)  # (folder, width, fields, pool=)
        keyword = functools.partial(keyword_index, self._tuning)  # how a keyword field a pool takes in is indexed
        self._pools = Pools(self._root / POOLS_DIR, self._collections, self._new_shard, keyword)
        self._graphs = PoolGraphs(self._pools, self._lock, self._tuning.exact_below_rows, keyword)
        self._configs: dict[str, dict[str, Any]] = {}  # collection.json of each collection seen
        self._closed = False
        make_private(self._root)
        try:
            self._collections.mkdir(mode=PRIVATE_DIR_MODE, exist_ok=True)
        except OSError as exc:
            raise StoreError("open", f"cannot create {self._collections}: {exc}") from exc
        self._remove_tombstones()
        recover_pool_folders(self._root / POOLS_DIR)
        self._aliases = self._load_aliases()

    # --- collections ------------------------------------------------------------

    def create_collection(
        self, name: str, width: int, keyword_fields: Sequence[str], *, rows: int | None = None
    ) -> None:
        check_name(name, "create_collection")
        check_width(width)
        with self._lock:
            self._check_open()
            if rows is not None and rows < self._tuning.pool_below_rows:
                self._graphs.hold_writes(pool_name(width))  # its pool's files may be being copied
                self._check_open()
            if self._exists(name):
                raise StoreError("create_collection", f"collection {name!r} already exists")
            if name in self._aliases:
                raise StoreError("create_collection", f"{name!r} is already an alias")
            directory = self._collections / name
            if directory.exists():
                self._remove_dir(directory)
            config: dict[str, Any] = {"width": width, "keyword_fields": list(keyword_fields)}
            with engine_errors("create_collection"):
                directory.mkdir(parents=True)
                if rows is not None and rows < self._tuning.pool_below_rows:
                    config["pool"], config["slot"] = self._pools.admit(name, width, keyword_fields)
                    for field in keyword_fields:
                        self._graphs.indexed_field(config["pool"], field)
                else:
                    self._shards[name] = self._new_shard(directory / SHARD_DIR, width, keyword_fields)
                # The commit marker goes last: until it exists the directory is a torn create.
                write_json_atomic(directory / CONFIG_FILE, config, "create_collection")
            self._configs[name] = config

    def drop_collection(self, name: str) -> None:
        check_name(name, "drop_collection")
        with self._lock:
            self._check_open()
            if self._exists(name):
                self._hold_pool_writes(name)
            shard = self._shards.pop(name, None)
            config = self._configs.pop(name, None) or read_json(self._collections / name / CONFIG_FILE)
            with engine_errors("drop_collection"):
                if shard is not None:
                    shard.close()
                pool = config.get("pool") if isinstance(config, dict) else None
                if isinstance(pool, str):  # its rows first, then its folder
                    self._graphs.dropped(pool, name, self._pools.drop(pool, name))
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
            self._hold_pool_writes(name)
            shard, tenant = self._place(name)
            if tenant is None:
                edge_points = [qe.Point(canonical_id(p.id), edge_vectors(p), dict(p.payload)) for p in points]
            else:
                edge_points = [
                    qe.Point(
                        tenant.engine_id(canonical_id(p.id)),
                        tenant.vectors(edge_vectors(p)),
                        tenant.stored(dict(p.payload)),
                    )
                    for p in points
                ]
            with engine_errors("upsert"):
                shard.update(qe.UpdateOperation.upsert_points(edge_points))
            if tenant is not None:
                self._graphs.written(self._config(name)["pool"], [str(point.id) for point in edge_points])

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
            shard, tenant = self._place(name)
            request = qe.QueryRequest(
                limit=limit,
                query=qe.Query.Nearest([float(x) for x in vector]),
                with_payload=True,
                filter=edge_filter(filter if tenant is None else tenant.where(filter)),
                params=qe.SearchParams(exact=True) if exact else self._search_params,
            )
            with engine_errors("search"):
                found = shard.query(request)
            if tenant is None:
                return [hit(point.id, point.score, point.payload) for point in found]
            return [hit(tenant.own_id(point.id), point.score, own_payload(point.payload)) for point in found]

    def query(self, collection_or_alias: str, query: SearchQuery, *, payloads: bool = True) -> list[CandidateHit]:
        with self._lock:
            self._check_open()
            name = self._resolve(collection_or_alias)
            if query.vector is not None:
                check_query_width(collection_or_alias, self._width(name), query.vector)
            shard, tenant = self._place(name)
            found = query_shard(shard, query, self._search_params, [(name, tenant)], payloads=payloads)
            return found[name]

    def query_each(self, collections: Sequence[str], query: SearchQuery) -> dict[str, list[CandidateHit]]:
        """The pooled collections of one pool are searched in one engine call (`edge_pool`)."""
        with self._lock:
            self._check_open()
            groups: dict[tuple[str, str], tuple[qe.EdgeShard, list[tuple[str, Tenant | None]]]] = {}
            for collection in dict.fromkeys(collections):
                name = self._resolve(collection)
                if query.vector is not None:
                    check_query_width(collection, self._width(name), query.vector)
                shard, tenant = self._place(name)
                key = ("collection", name) if tenant is None else ("pool", str(self._configs[name]["pool"]))
                groups.setdefault(key, (shard, []))[1].append((collection, tenant))
            found: dict[str, list[CandidateHit]] = {}
            for (kind, pool), (shard, members) in groups.items():
                every = kind == "pool" and self._pools.holds_only({t.name for _, t in members if t is not None}, pool)
                found.update(query_shard(shard, query, self._search_params, members, payloads=False, every=every))
            return found

    def index_vectors(self, collection: str) -> bool:
        """Build the collection's HNSW graphs (and quantised copies) now, in a child process, when it
        holds `exact_below_rows` rows or more: Qdrant Edge runs no optimizer of its own, and its
        optimizer holds the interpreter while it runs. The shard is closed here meanwhile (an EdgeShard
        opens in one process) and reopened on its next use; reads of other collections go on."""
        with self._lock:
            self._check_open()
            name = self._resolve(collection)
            shard, tenant = self._place(name)
            if tenant is not None:  # its pool gets graphs in the background once it is large enough
                pool = str(self._config(name)["pool"])
                if self._graphs.needs_pass(pool):
                    self._graphs.start(pool)
                return False
            with engine_errors("index_vectors"):
                rows = int(shard.count(qe.CountRequest(exact=True)))
            if rows < max(1, self._tuning.exact_below_rows):
                return False
            shard = self._shards.pop(name)
            with engine_errors("index_vectors"):
                shard.flush()
                shard.close()
            self._indexing.add(name)
        try:
            index_shard_apart(self._collections / name / SHARD_DIR)
        finally:
            with self._lock:
                self._indexing.discard(name)
        return True

    def index_pools(self) -> list[str]:
        """Give every pool that needs them its graphs now, on this thread (`edge_pool_graph`; a pass
        running in the background is waited for first); the pools indexed. Only the embedded engine has
        pools: a benchmark or a test waits here for what `index_vectors` starts in the background."""
        with self._lock:
            self._check_open()
            pools = self._pools.names()
        return [pool for pool in pools if self._graphs.run(pool)]

    def count(self, collection_or_alias: str, filter: PayloadFilter | None = None) -> int:
        with self._lock:
            self._check_open()
            shard, tenant = self._place(self._resolve(collection_or_alias))
            where = edge_filter(filter if tenant is None else tenant.where(filter))
            with engine_errors("count"):
                return int(shard.count(qe.CountRequest(exact=True, filter=where)))

    def _read_page(self, collection_or_alias: str, page: Page) -> tuple[Iterable[Any], Any]:
        with self._lock:
            self._check_open()
            shard, tenant = self._place(self._resolve(collection_or_alias))
            request = qe.ScrollRequest(
                offset=page.start,  # in a pool: the pool's id, as the previous page said it
                limit=page.limit,
                filter=edge_filter(page.filter if tenant is None else tenant.where(page.filter)),
                with_payload=True,
                with_vector=page.with_vectors,
            )
            with engine_errors(page.operation):
                records, next_offset = shard.scroll(request)
            return (records if tenant is None else [tenant.row(record) for record in records]), next_offset

    def _read_points(
        self, collection_or_alias: str, ids: list[str], *, with_vectors: bool, leave_out: Sequence[str] = ()
    ) -> Iterable[Any]:
        with self._lock:
            self._check_open()
            shard, tenant = self._place(self._resolve(collection_or_alias))
            wanted = list[int | uuid.UUID | str](ids if tenant is None else [tenant.engine_id(i) for i in ids])
            with engine_errors("retrieve_points"):
                payload = qe.PayloadSelector.Exclude(list(leave_out)) if leave_out else True
                records = shard.retrieve(wanted, with_payload=payload, with_vector=with_vectors)
            return records if tenant is None else [tenant.row(record) for record in records]

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
            with engine_errors("flush"):
                for shard in self._shards.values():
                    shard.flush()
                self._pools.flush()

    def close(self) -> None:
        self._graphs.stop()  # a pool's graph pass: its child killed, its copy removed
        with self._lock:
            if self._closed:
                return
            self._closed = True
            shards = {**self._shards, **self._pools.take_open()}
            self._shards = {}
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

    def _hold_pool_writes(self, name: str) -> None:
        """Before a pooled collection's rows change: wait while its pool's files are copied (reads go on
        meanwhile), then check the store is still open."""
        pool = self._config(name).get("pool")
        if isinstance(pool, str):
            self._graphs.hold_writes(pool)
            self._check_open()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("use", "the embedded vector store is closed")

    def _is_valid(self, directory: Path) -> bool:
        if directory.name.startswith("."):
            return False
        config = read_json(directory / CONFIG_FILE)
        if not isinstance(config, dict) or not isinstance(config.get("width"), int):
            return False
        return isinstance(config.get("pool"), str) or (directory / SHARD_DIR).is_dir()

    def _exists(self, name: str) -> bool:
        return name in self._shards or name in self._configs or self._is_valid(self._collections / name)

    def _resolve(self, collection_or_alias: str) -> str:
        """The collection behind a name or alias; CollectionNotFound if there is none."""
        name = self._aliases.get(collection_or_alias, collection_or_alias)
        check_name(name, "lookup")
        if not self._exists(name):
            raise CollectionNotFound(collection_or_alias)
        return name

    def _width(self, name: str) -> int:
        return int(self._config(name)["width"])

    def _config(self, name: str) -> dict[str, Any]:
        if name not in self._configs:
            config = read_json(self._collections / name / CONFIG_FILE)
            if not isinstance(config, dict) or not isinstance(config.get("width"), int):
                raise CollectionNotFound(name)
            self._configs[name] = config
        return self._configs[name]

    def _place(self, name: str) -> tuple[qe.EdgeShard, Tenant | None]:
        """Where a collection's rows are: its own shard, or its pool's with it as the tenant."""
        pool = self._config(name).get("pool")
        if not isinstance(pool, str):
            return self._shard(name), None
        return self._pools.shard(pool), Tenant(name, int(self._config(name)["slot"]))

    def _shard(self, name: str) -> qe.EdgeShard:
        """The open shard of a collection, loaded on first use and kept open."""
        shard = self._shards.get(name)
        if shard is None:
            if name in self._indexing:
                raise StoreError("open_collection", f"collection {name!r} is being indexed; try again when it is done")
            with engine_errors("open_collection"):
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
