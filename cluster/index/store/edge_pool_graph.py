"""A pool's HNSW graphs, built on a copy of its shard while the pool serves.

A pool of many small builds grows like one large collection (a hundred indexes of 10,000 rows are a
million rows), and a full scan of it costs what it costs one: at a million rows about 70 ms a leg.
It gets the graphs a large collection gets. But a pool's shard serves every pooled index and takes
every small build's writes, so it cannot close for the hour the graphs of a million rows take on two
cores, as a large collection's own shard does (`EdgeStore.index_vectors`). So, per pool:

1. **copy**: the shard flushed and copied to `pools/<pool>/shard.graph`. Its reads go on; its
   writes wait until the files are copied (`hold_writes`; every other collection's go on);
2. **index** (no lock): Qdrant's optimizer builds the copy's graphs in a child process
   (`index_shard_apart`). The pool serves and takes writes meanwhile; a journal notes what changed
   (`PoolJournal`: the rows upserted, the collections dropped, the keyword fields indexed);
3. **swap** (the lock held): the journal replayed onto the copy (drops first, then each row upserted
   meanwhile as the pool holds it now: a row upserted then dropped is not brought back), and the
   copy moved in place of the shard.

A pool gets a pass once it holds `exact_below_rows` rows and that many rows changed since its last
pass (written or dropped; `graphed_rows` in `pool.json` says how many it held then). Qdrant's
optimizer works only on the segments that need it (rows past its threshold in no graph, a segment
with a fifth of its rows deleted), so a pass after the first costs the copy and the new rows' graph.
A store that closes mid-pass kills the child and removes the copy; a crash mid-swap is recovered at
the next open (`recover_pool_folders`).
"""

from __future__ import annotations

import logging
import shutil
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import qdrant_edge as qe

from cluster.errors import StoreError
from cluster.index.store.edge_files import SHARD_DIR, engine_errors
from cluster.index.store.edge_indexing import index_shard_apart
from cluster.index.store.edge_pool import TENANT_KEY, Pools

__all__ = ["GRAPH_COPY_DIR", "PoolGraphs", "PoolJournal", "recover_pool_folders"]

log = logging.getLogger("samespace.index")

GRAPH_COPY_DIR = "shard.graph"  # the copy a pass indexes
OLD_SHARD_DIR = "shard.old"  # the shard a swap replaces, until the copy is in place
REPLAY_BATCH = 1000  # rows read back from the pool and upserted into the copy at a time


@dataclass
class PoolJournal:
    """What changed in a pool since its copy was taken."""

    upserted: set[str] = field(default_factory=set)  # the pool's ids of the rows written
    dropped: list[str] = field(default_factory=list)  # collections whose rows were deleted
    fields: list[str] = field(default_factory=list)  # keyword fields indexed

    @property
    def changes(self) -> int:
        return len(self.upserted) + len(self.dropped)


def recover_pool_folders(pools_root: Path) -> None:
    """Undo what a pass left when the store stopped mid-way: a copy never swapped in is removed; a swap
    cut between its two renames gets its old shard back (the copy is removed with it)."""
    if not pools_root.is_dir():
        return
    for folder in pools_root.iterdir():
        old, shard, copy = folder / OLD_SHARD_DIR, folder / SHARD_DIR, folder / GRAPH_COPY_DIR
        if old.is_dir():
            if shard.is_dir():
                shutil.rmtree(old)
            else:
                old.rename(shard)
        if copy.is_dir():
            shutil.rmtree(copy)


class PoolGraphs:
    """The graph passes of one store's pools. The store calls `hold_writes` before it changes a pool,
    then `written`, `dropped` and `indexed_field`, its lock held throughout; `start` runs a pass on a
    thread of its own, `run` on the caller's; `stop` (at close) kills a pass's child and waits for its
    thread."""

    def __init__(
        self,
        pools: Pools,
        lock: threading.RLock,
        threshold_rows: int,
        keyword_index: Callable[[str], qe.KeywordIndexParams],
    ) -> None:
        self._pools, self._lock, self._threshold = pools, lock, max(1, threshold_rows)
        self._keyword_index = keyword_index  # how a keyword field indexed during a pass is indexed on the copy
        self._changed: dict[str, int] = {}  # rows changed since the last pass, by pool
        self._journals: dict[str, PoolJournal] = {}  # the pools a pass is indexing a copy of
        self._copying: set[str] = set()  # the pools whose files are being copied: their writes wait
        self._copied = threading.Condition(lock)
        self._cancel = threading.Event()
        self._worker: threading.Thread | None = None

    # --- what changed (the store's lock held) -------------------------------------

    def written(self, pool: str, engine_ids: list[str]) -> None:
        self._note(pool, len(engine_ids))
        if pool in self._journals:
            self._journals[pool].upserted.update(engine_ids)

    def dropped(self, pool: str, collection: str, rows: int) -> None:
        self._note(pool, rows)
        if pool in self._journals:
            self._journals[pool].dropped.append(collection)

    def indexed_field(self, pool: str, name: str) -> None:
        if pool in self._journals:
            self._journals[pool].fields.append(name)

    def needs_pass(self, pool: str) -> bool:
        """True when the pool holds `exact_below_rows` rows or more and that many changed since its
        last pass, and no pass is indexing it now. The changes are asked first: the pool's rows are an
        exact count, made only when the changes call for a pass."""
        if pool in self._journals or self._changes(pool) < self._threshold:
            return False
        return self._pools.rows(pool) >= self._threshold

    # --- passes -------------------------------------------------------------------

    def start(self, pool: str) -> bool:
        """A pass over `pool` on a thread of its own, unless one runs (on any pool); True if started."""
        with self._lock:
            if self._cancel.is_set() or (self._worker is not None and self._worker.is_alive()):
                return False
            self._worker = threading.Thread(target=self._background, args=(pool,), name=f"graph-{pool}", daemon=True)
            self._worker.start()
            return True

    def run(self, pool: str) -> bool:
        """A pass over `pool` now, on this thread, once any pass in the background is done; True when the
        copy with its graphs is now the pool's shard, False when it needed none. StoreError when it failed
        (the pool serves on as before)."""
        self.join()
        with self._lock:
            if self._cancel.is_set() or not self.needs_pass(pool):
                return False
            copy = self._copy(pool)
        try:
            index_shard_apart(copy, self._cancel)
        except BaseException:
            with self._lock:
                journal = self._journals.pop(pool)
                self._changed[pool] = self._changed.get(pool, 0) + journal.changes
                shutil.rmtree(copy, ignore_errors=True)
            raise
        with self._lock:
            journal = self._journals.pop(pool)
            if self._cancel.is_set():  # the store closed meanwhile
                shutil.rmtree(copy, ignore_errors=True)
                return False
            self._swap(pool, copy, journal)
        return True

    def hold_writes(self, pool: str) -> None:
        """Wait while the pool's files are being copied (the store's lock held: it is let go meanwhile,
        so reads go on; the caller checks what may have changed, the store closed)."""
        while pool in self._copying:
            self._copied.wait()

    def join(self) -> None:
        worker = self._worker
        if worker is not None and worker is not threading.current_thread():
            worker.join()

    def stop(self) -> None:
        """Cancel a running pass (its child is killed, its copy removed) and wait for its thread. Call
        without the store's lock."""
        self._cancel.set()
        self.join()

    def _background(self, pool: str) -> None:
        try:
            self.run(pool)
        except StoreError as exc:
            if not self._cancel.is_set():
                log.warning("the graph pass of %s failed, it serves on without: %s", pool, exc)

    # --- internals (the store's lock held) -------------------------------------------

    def _note(self, pool: str, rows: int) -> None:
        self._changed[pool] = self._changes(pool) + rows

    def _changes(self, pool: str) -> int:
        """Rows changed since the last pass; first asked, the rows the pool holds beyond those its last
        pass indexed (`pool.json`)."""
        if pool not in self._changed:
            self._changed[pool] = abs(self._pools.rows(pool) - self._pools.graphed_rows(pool))
        return self._changed[pool]

    def _copy(self, pool: str) -> Path:
        """The pool's shard flushed and copied, its writes held meanwhile (`hold_writes`) but not its
        reads: the lock is let go while the files are copied, then the journal starts. Called with the
        lock held; returns with it held."""
        shard, folder = self._pools.shard(pool), self._pools.folder(pool)
        copy = folder / GRAPH_COPY_DIR
        if copy.exists():
            shutil.rmtree(copy)
        with engine_errors("index_vectors"):
            shard.flush()
        self._copying.add(pool)
        failure: OSError | None = None
        self._lock.release()
        try:
            shutil.copytree(folder / SHARD_DIR, copy, copy_function=self._copy_file)
        except OSError as exc:
            failure = exc
        finally:
            self._lock.acquire()
            self._copying.discard(pool)
            self._copied.notify_all()
        if failure is not None or self._cancel.is_set():
            shutil.rmtree(copy, ignore_errors=True)
            raise StoreError("index_vectors", f"cannot copy the pool {pool!r}: {failure or 'the store is closing'}")
        self._journals[pool] = PoolJournal()
        self._changed[pool] = 0
        return copy

    def _copy_file(self, source: str, target: str) -> object:
        if self._cancel.is_set():
            raise OSError("the store is closing")
        return shutil.copy2(source, target)

    def _swap(self, pool: str, copy: Path, journal: PoolJournal) -> None:
        """The journal replayed onto the indexed copy, then the copy in the shard's place."""
        live = self._pools.shard(pool)
        with engine_errors("index_vectors"):
            indexed = qe.EdgeShard.load(str(copy))
            try:
                _replay(journal, live, indexed, self._keyword_index)
                indexed.flush()
            finally:
                indexed.close()
        self._pools.replace_shard(pool, copy, OLD_SHARD_DIR)


def _replay(
    journal: PoolJournal, live: qe.EdgeShard, copy: qe.EdgeShard, keyword_index: Callable[[str], qe.KeywordIndexParams]
) -> None:
    """Bring the copy to what the pool holds now: fields, then drops, then the rows written meanwhile
    as they are now (a row written then dropped is gone from both)."""
    for name in journal.fields:
        copy.update(qe.UpdateOperation.create_field_index(name, keyword_index(name)))
    for collection in journal.dropped:
        rows = qe.Filter(must=[qe.FieldCondition(key=TENANT_KEY, match=qe.MatchValue(collection))])
        copy.update(qe.UpdateOperation.delete_points_by_filter(rows))
    upserted = sorted(journal.upserted)
    for start in range(0, len(upserted), REPLAY_BATCH):
        batch = list[int | uuid.UUID | str](upserted[start : start + REPLAY_BATCH])
        records = live.retrieve(batch, with_payload=True, with_vector=True)
        if records:
            points = [qe.Point(record.id, record.vector or {}, record.payload) for record in records]
            copy.update(qe.UpdateOperation.upsert_points(points))
