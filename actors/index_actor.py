"""The index actor: sole owner of the vector store (both engines are single-process stores).

A Ray shell around cluster.index.catalog.IndexCatalog; jobs write through it, Serve replicas read
through it. Methods run one at a time, so a query sees either the old build or the new one.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ray
from ray.actor import ActorHandle

from actors.handles import get_or_start
from actors.metrics import forget_index, publish_progress, record_commit
from cluster.errors import IndexNotFound, ReadRefused
from cluster.graph import GraphAnswer, GraphQuery
from cluster.grep import GrepRequest, GrepResult
from cluster.history import CommitRecord, CommitSearchResult, Comparison, SymbolHistory, WhatChanged
from cluster.index.carry import CarriedRow, CarryResult, carry_rows
from cluster.index.catalog import IndexCatalog, PointKey
from cluster.index.history_store import HistoryState
from cluster.index.incremental import ReusableRows, reusable_rows
from cluster.index.query import SearchQuery
from cluster.index.records import BuildProgress, BuildState, IndexRecord, export_folder, index_of
from cluster.index.store.engines import open_vector_store
from cluster.ingest.git_state import SourceState
from cluster.ingest.skips import SkipSummary
from cluster.ingest.source import SourceLines, read_source_file, read_source_lines
from cluster.ingest.walker import walk_settings
from cluster.naming import INDEX_ACTOR_NAME
from cluster.search import (
    CodeGreps,
    CodeMaps,
    CommitHistories,
    SearchAnswer,
    StoreSearch,
    SymbolPage,
    SymbolQuery,
)
from cluster.search.models import FileHit, Neighbors, RepoOverview
from cluster.settings import SamespaceSettings
from cluster.space import EncoderIdentity
from cluster.types import StoredPoint

# The store's files hold source text. New files 0600 and folders 0700; the store
# itself makes its data dir 0700 and tightens what an earlier run left behind.
STORE_UMASK = 0o077


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0)
class IndexActor:
    def __init__(self, settings: SamespaceSettings) -> None:
        self._settings = settings
        os.umask(STORE_UMASK)  # this worker process is the store's only writer: its files go 0600
        store = open_vector_store(settings.store.kind, data_dir=settings.store.data_dir, url=settings.store.url)
        self._catalog = IndexCatalog(store)
        # symbol/file/neighbour maps, per build
        self._code_maps = CodeMaps(self._catalog, settings.index.groups, settings.limits)
        self._deny = walk_settings(settings).deny_list()  # reads refuse what a reindex never opens
        self._greps = CodeGreps(self._catalog, self._code_maps, settings.index.groups, settings.limits, deny=self._deny)
        self._searches = StoreSearch(self._catalog, self._code_maps, settings.index.groups, settings.limits)
        self._histories = CommitHistories(
            self._catalog,
            settings.index.groups,
            settings.limits,
            graphs=self._code_maps.graph,
            deny=self._deny,
            max_file_bytes=settings.chunking.max_file_bytes,
        )

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
    ) -> str:
        return self._catalog.begin_build(
            name, identity, repo_root, job_id, probe_vectors, build=build, origin=origin, source=source
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
        serving = self._code_maps.prune()
        self._greps.prune(serving)
        self._searches.prune(serving)

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

    # reads (MCP)
    def names(self) -> list[str]:
        return self._catalog.names()

    def search(self, query: SearchQuery) -> SearchAnswer:
        """Hits best-first (dense, keyword, or fused), a message for each index refused, the builds ranked."""
        return self._searches.search(query)

    def read_lines(self, repo: str, path: str, start_line: int, end_line: int) -> SourceLines:
        record = self._indexed(repo, path)
        return read_source_lines(
            repo,
            Path(record.repo_root),
            path,
            start_line,
            end_line,
            self._settings.serve.read_max_lines,
            deny=self._deny,
        )

    def read_file(self, repo: str, path: str) -> SourceLines:
        """The whole of an indexed file, confined as read_lines is (the file resource); refused past
        chunking.max_file_bytes."""
        record = self._indexed(repo, path)
        cap = self._settings.chunking.max_file_bytes
        return read_source_file(repo, Path(record.repo_root), path, cap, deny=self._deny)

    def _indexed(self, repo: str, path: str) -> IndexRecord:
        """The serving record of `repo` when its build indexed `path`; ReadRefused otherwise (reads
        serve indexed files only)."""
        record = self._catalog.record(repo)
        if not self._catalog.has_path(repo, path):
            raise ReadRefused(repo, path, "not an indexed file of this repository")
        return record

    # code maps: non-semantic reads (symbols, files, neighbouring chunks, overview)
    def search_symbols(self, request: SymbolQuery) -> SymbolPage:
        """Definitions matching an identifier or a few words, best first; every index when repo is None."""
        return self._code_maps.symbol_page(request)

    def search_files(self, repo: str | None, query: str, limit: int = 8, symbols_per_file: int = 12) -> list[FileHit]:
        """Indexed files whose path matches, with their definitions; every index when repo is None."""
        return self._code_maps.search_files(repo, query, limit, symbols_per_file)

    def neighbors(self, repo: str | None, path: str, line: int, count: int = 2) -> Neighbors:
        """The chunk at path:line and up to `count` chunks on each side (repo None: the only index)."""
        return self._code_maps.neighbors(repo, path, line, count)

    def overview(self, repo: str | None) -> RepoOverview:
        """Files, languages, folders, main types, most referenced and most called symbols, README head."""
        return self._code_maps.overview(repo)

    def navigate(self, query: GraphQuery) -> GraphAnswer:
        """Definitions, references, callers, callees or impact of a symbol (`cluster.graph`)."""
        return self._code_maps.navigate(query)

    def grep(self, request: GrepRequest) -> GrepResult:
        """Lines of the indexed files that a pattern matches (`cluster.search.greps`)."""
        return self._greps.grep(request)

    # history (what changed, when and why)
    def what_changed(
        self, repo: str | None, since: str, until: str | None = None, path: str | None = None, limit: int = 100
    ) -> WhatChanged:
        """The symbols the commits of a window changed, newest first (`cluster.search.histories`)."""
        return self._histories.what_changed(repo, since, until, path, limit)

    def symbol_history(self, repo: str | None, symbol: str, path: str | None = None, limit: int = 50) -> SymbolHistory:
        """The commits that touched a symbol, newest first, through renames and moves."""
        return self._histories.symbol_history(repo, symbol, path, limit)

    def search_commits(self, text: str, query: SearchQuery, since: str | None = None) -> CommitSearchResult:
        """Commits by their messages and the symbols they changed (hybrid)."""
        return self._histories.search(text, query, since)

    def changed_paths(self, repo: str | None, since: str) -> list[str]:
        """The files changed since a date, a duration or a ref that still exist (review mode)."""
        return self._histories.changed_paths(repo, since)

    def compare(self, repo: str | None, base: str, head: str, limit: int = 100) -> Comparison:
        """The symbols that differ between two refs of an index's folder, with a short diff each."""
        return self._histories.compare(repo, base, head, limit)

    def collections(self) -> list[str]:
        return self._catalog.collections()

    def status(self) -> dict[str, Any]:
        """Every index (record, serving point count) and every build this actor has seen."""
        records = self.records()
        indexes = [{"record": record, "space": record.identity.space_id} for record in records]
        return {"indexes": indexes, "builds": self._catalog.builds(), "history": self._histories.reach()}


HEAD_NODE_RESOURCE = "node:__internal_head__"


def get_index_actor(settings: SamespaceSettings) -> ActorHandle:
    """The index actor, started on first use. An embedded store lives on the head node's disk."""
    placement = {"resources": {HEAD_NODE_RESOURCE: 0.001}} if settings.store.kind == "embedded" else {}
    return get_or_start(IndexActor, settings, INDEX_ACTOR_NAME, settings, **placement)
