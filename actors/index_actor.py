"""The index actor: sole owner of the vector store (both engines are single-process stores).

A Ray shell around cluster.index.catalog.IndexCatalog; jobs write through it, Serve replicas read
through it. Methods run one at a time, so a query sees either the old build or the new one. Every
read takes the caller's `Reader` (`cluster.auth`): the indexes `index.acl` keeps from it do not exist
for it (`cluster.search.IndexReads`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from typing import Any

import ray
from ray.actor import ActorHandle

from actors.handles import get_or_start
from actors.metrics import forget_index, publish_progress, record_commit
from cluster.auth import Reader
from cluster.errors import IndexNotFound
from cluster.graph import GraphAnswer, GraphQuery
from cluster.grep import GrepRequest, GrepResult
from cluster.history import CommitRecord, CommitSearchResult, Comparison, SymbolHistory, WhatChanged
from cluster.index.access import ANONYMOUS_READER
from cluster.index.carry import CarriedRow, CarryResult, carry_rows
from cluster.index.catalog import IndexCatalog, PointKey
from cluster.index.history_store import HistoryState
from cluster.index.incremental import ReusableRows, reusable_rows
from cluster.index.query import SearchQuery
from cluster.index.records import BuildProgress, BuildState, IndexRecord, export_folder, index_of
from cluster.index.store.engines import open_vector_store
from cluster.ingest.git_state import SourceState
from cluster.ingest.skips import SkipSummary
from cluster.ingest.source import SourceLines
from cluster.naming import INDEX_ACTOR_NAME
from cluster.search import IndexReads, SearchAnswer, SymbolPage, SymbolQuery
from cluster.search.models import FileHit, Neighbors, RepoOverview
from cluster.settings import SamespaceSettings
from cluster.space import EncoderIdentity
from cluster.types import StoredPoint

# The store's files hold source text. New files 0600 and folders 0700; the store
# itself makes its data dir 0700 and tightens what an earlier run left behind.
STORE_UMASK = 0o077


@ray.remote(  # type: ignore[call-overload]  # Ray's stubs list task options only, not actor ones
    num_cpus=0, max_restarts=-1, max_task_retries=0, concurrency_groups={"indexing": 1}
)
class IndexActor:
    def __init__(self, settings: SamespaceSettings) -> None:
        self._settings = settings
        os.umask(STORE_UMASK)  # this worker process is the store's only writer: its files go 0600
        store = open_vector_store(
            settings.store.kind,
            data_dir=settings.store.data_dir,
            url=settings.store.url,
            vector_index=settings.store.vector_index,
        )
        self._catalog = IndexCatalog(store)
        # every read for a caller, per-index access (index.acl) enforced: maps, greps, searches, histories
        self._reads = IndexReads(self._catalog, settings)

    # writes (reindex job)
    def begin_build(
        self,
        name: str,
        identity: EncoderIdentity,
        repo_root: str,
        job_id: str | None,
        probe_vectors: list[list[float]] | None = None,
        build: str | None = None,
        origin: str | None = None,
        source: SourceState | None = None,
        rows: int | None = None,
    ) -> str:
        return self._catalog.begin_build(
            name, identity, repo_root, job_id, probe_vectors, build=build, origin=origin, source=source, rows=rows
        )

    def record(self, name: str) -> IndexRecord | None:
        """The serving record of an index, or None when there is none yet."""
        try:
            return self._catalog.record(name)
        except IndexNotFound:
            return None

    def write(self, build: str, points: Sequence[StoredPoint]) -> int:
        self._catalog.write(build, points)
        return len(points)

    @ray.method(concurrency_group="indexing")
    def index_vectors(self, build: str) -> bool:
        """Build a finished build's vector indexes before it serves (`VectorStore.index_vectors`): on a
        thread of its own, so searches and other builds' writes go on meanwhile."""
        return self._catalog.index_vectors(build)

    def report_progress(self, build: str, progress: BuildProgress) -> None:
        self._catalog.report_progress(build, progress)
        publish_progress(index_of(build), progress.chunks_done, progress.chunks_total)

    def commit_build(
        self,
        build: str,
        files: int,
        providers: list[str],
        skipped: SkipSummary | None = None,
        embedded: int = 0,
        reused: int = 0,
    ) -> IndexRecord:
        record = self._catalog.commit_build(
            build, files=files, providers=providers, skipped=skipped, embedded=embedded, reused=reused
        )
        # the superseded build's map and text go now, the new ones are made on first read
        self._prune()
        took = None if record.built_at is None else record.built_at - record.started_at
        record_commit(record.name, embedded, reused, took)
        return record

    def fail_build(self, build: str, error: str) -> None:
        self._catalog.fail_build(build, error)

    def _prune(self) -> None:
        """Drop what the maps, greps and searches hold of builds that no longer serve."""
        self._reads.prune()

    def history_state(self, name: str) -> HistoryState | None:
        """What the index's history holds (None: nothing mined yet)."""
        return self._catalog.history.state(name)

    def write_history(
        self,
        state: HistoryState,
        commits: Sequence[CommitRecord],
        vectors: Sequence[Sequence[float]],
        writers: Sequence[dict[str, Any]],
        replace: bool = False,
    ) -> HistoryState:
        """Add mined commits to the index's history (the reindex job's history step)."""
        return self._catalog.history.write(state, commits, vectors, writers, replace=replace)

    def update_source(self, name: str, source: SourceState) -> IndexRecord:
        """A reindex found the serving build current: record the source it now matches."""
        return self._catalog.update_source(name, source)

    def remove(self, name: str) -> list[str]:
        """Drop an index, every build of it and the exported files of its ref builds; returns the builds."""
        dropped = self._catalog.remove(name)
        self._prune()
        forget_index(name)
        for build in dropped:
            shutil.rmtree(export_folder(self._settings.store.data_dir, build), ignore_errors=True)
        return dropped

    def builds(self) -> dict[str, BuildState]:
        """The latest build of each index this actor has seen (state, progress, error)."""
        return self._catalog.builds()

    def records(self) -> list[IndexRecord]:
        """The serving record of every index."""
        return [self._catalog.record(name) for name in self._catalog.names()]

    def cleanup_partial(self, name: str) -> list[str]:
        """Drop leftover builds of `name` (killed runs); a reindex with nothing to do still cleans up."""
        return self._catalog.cleanup_partial(name)

    # reuse (incremental reindex): paged, so queries interleave with a long read
    def point_keys(
        self, build: str, offset: str | None = None, limit: int = 1024
    ) -> tuple[list[PointKey | None], str | None]:
        """One page of a build's row keys (what was embedded, where; no vectors) and the next offset."""
        return self._catalog.point_keys(build, offset, limit)

    def reusable_vectors(
        self, build: str, offset: str | None = None, limit: int = 512
    ) -> tuple[ReusableRows, str | None]:
        """One page of a build's vectors by embed hash, with the provider and encoder of each."""
        page, next_offset = self._catalog.points_page(build, offset, limit)
        return reusable_rows(page), next_offset

    def carry_rows(self, base: str, build: str, rows: Sequence[CarriedRow]) -> CarryResult:
        """Write `rows` into `build` with the vectors of their source rows in `base`: reused vectors
        never leave this actor (a page of rows per call, so queries interleave)."""
        return carry_rows(self._catalog, base, build, rows)

    # reads (MCP): each for the caller's Reader (None: the anonymous reader, which reads only the
    # indexes open to everyone); `cluster.search.IndexReads` leaves out what it may not read
    def names(self) -> list[str]:
        return self._catalog.names()

    def search(self, query: SearchQuery, reader: Reader | None = None) -> SearchAnswer:
        """Hits best-first (dense, keyword, or fused), a message for each index refused, the builds ranked."""
        return self._reads.search(query, reader=_reader(reader))

    def read_lines(
        self, repo: str, path: str, start_line: int, end_line: int, reader: Reader | None = None
    ) -> SourceLines:
        return self._reads.read_lines(repo, path, start_line, end_line, reader=_reader(reader))

    def read_file(self, repo: str, path: str, reader: Reader | None = None) -> SourceLines:
        """The whole of an indexed file, confined as read_lines is (the file resource); refused past
        chunking.max_file_bytes."""
        return self._reads.read_file(repo, path, reader=_reader(reader))

    # code maps: non-semantic reads (symbols, files, neighbouring chunks, overview)
    def search_symbols(self, request: SymbolQuery, reader: Reader | None = None) -> SymbolPage:
        """Definitions matching an identifier or a few words, best first; every index when repo is None."""
        return self._reads.search_symbols(request, reader=_reader(reader))

    def search_files(
        self, repo: str | None, query: str, limit: int = 8, symbols_per_file: int = 12, reader: Reader | None = None
    ) -> list[FileHit]:
        """Indexed files whose path matches, with their definitions; every index when repo is None."""
        return self._reads.search_files(repo, query, limit, symbols_per_file, reader=_reader(reader))

    def neighbors(
        self, repo: str | None, path: str, line: int, count: int = 2, reader: Reader | None = None
    ) -> Neighbors:
        """The chunk at path:line and up to `count` chunks on each side (repo None: the only index)."""
        return self._reads.neighbors(repo, path, line, count, reader=_reader(reader))

    def overview(self, repo: str | None, reader: Reader | None = None) -> RepoOverview:
        """Files, languages, folders, main types, most referenced and most called symbols, README head."""
        return self._reads.overview(repo, reader=_reader(reader))

    def navigate(self, query: GraphQuery, reader: Reader | None = None) -> GraphAnswer:
        """Definitions, references, callers, callees or impact of a symbol (`cluster.graph`)."""
        return self._reads.navigate(query, reader=_reader(reader))

    def grep(self, request: GrepRequest, reader: Reader | None = None) -> GrepResult:
        """Lines of the indexed files that a pattern matches (`cluster.search.greps`)."""
        return self._reads.grep(request, reader=_reader(reader))

    # history (what changed, when and why)
    def what_changed(
        self,
        repo: str | None,
        since: str,
        until: str | None = None,
        path: str | None = None,
        limit: int = 100,
        reader: Reader | None = None,
    ) -> WhatChanged:
        """The symbols the commits of a window changed, newest first (`cluster.search.histories`)."""
        return self._reads.what_changed(repo, since, until, path, limit, reader=_reader(reader))

    def symbol_history(
        self, repo: str | None, symbol: str, path: str | None = None, limit: int = 50, reader: Reader | None = None
    ) -> SymbolHistory:
        """The commits that touched a symbol, newest first, through renames and moves."""
        return self._reads.symbol_history(repo, symbol, path, limit, reader=_reader(reader))

    def search_commits(
        self, text: str, query: SearchQuery, since: str | None = None, reader: Reader | None = None
    ) -> CommitSearchResult:
        """Commits by their messages and the symbols they changed (hybrid)."""
        return self._reads.search_commits(text, query, since, reader=_reader(reader))

    def changed_paths(self, repo: str | None, since: str, reader: Reader | None = None) -> list[str]:
        """The files changed since a date, a duration or a ref that still exist (review mode)."""
        return self._reads.changed_paths(repo, since, reader=_reader(reader))

    def compare(
        self, repo: str | None, base: str, head: str, limit: int = 100, reader: Reader | None = None
    ) -> Comparison:
        """The symbols that differ between two refs of an index's folder, with a short diff each."""
        return self._reads.compare(repo, base, head, limit, reader=_reader(reader))

    def collections(self) -> list[str]:
        return self._catalog.collections()

    def status(self, reader: Reader | None = None) -> dict[str, Any]:
        """Every index the reader may read (record, space), its builds and how far its history goes."""
        return self._reads.status(reader=_reader(reader))


def _reader(reader: Reader | None) -> Reader:
    """The caller's reader; none given: the anonymous one (only the indexes open to every reader)."""
    return reader if reader is not None else ANONYMOUS_READER


HEAD_NODE_RESOURCE = "node:__internal_head__"


def get_index_actor(settings: SamespaceSettings) -> ActorHandle:
    """The index actor, started on first use. An embedded store lives on the head node's disk."""
    placement = {"resources": {HEAD_NODE_RESOURCE: 0.001}} if settings.store.kind == "embedded" else {}
    return get_or_start(IndexActor, settings, INDEX_ACTOR_NAME, settings, **placement)
