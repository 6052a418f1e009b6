"""Every read of the index actor, for one caller: the one place per-index access is enforced.

Pure logic, no Ray: the index actor holds one `IndexReads` over its catalogue (and a test holds one
over a catalogue of its own). Each read takes the caller's `Reader`; the indexes it may not read
(`index.acl`, `cluster.index.IndexAcl`) are left out of every scope (`cluster.index.resolve_scope`),
every list (status, history reach) and every answer naming indexes, and a name it may not read is
answered as an unknown one: each read runs under `IndexAcl.hiding`, so an `IndexNotFound` from
anywhere below lists only the names the caller may read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cluster.auth import Reader
from cluster.errors import ReadRefused
from cluster.graph import GraphAnswer, GraphQuery
from cluster.grep import GrepRequest, GrepResult
from cluster.history import CommitSearchResult, Comparison, SymbolHistory, WhatChanged
from cluster.index import IndexAcl, IndexCatalog, IndexRecord, SearchQuery
from cluster.ingest import SourceLines, read_source_file, read_source_lines, walk_settings
from cluster.search.greps import CodeGreps
from cluster.search.histories import CommitHistories
from cluster.search.maps import CodeMaps
from cluster.search.models import FileHit, Neighbors, RepoOverview
from cluster.search.pages import SearchAnswer, SymbolPage, SymbolQuery
from cluster.search.store_search import StoreSearch
from cluster.settings import SamespaceSettings

__all__ = ["IndexReads"]


class IndexReads:
    """The code maps, greps, store searches and histories of one catalogue, read for a caller."""

    def __init__(self, catalog: IndexCatalog, settings: SamespaceSettings) -> None:
        self._catalog = catalog
        self._settings = settings
        self.acl = IndexAcl(settings.index.acl, settings.limits)
        groups, limits, acl = settings.index.groups, settings.limits, self.acl
        self.maps = CodeMaps(catalog, groups, limits, acl)  # symbol/file/neighbour maps, per build
        self._deny = walk_settings(settings).deny_list()  # reads refuse what a reindex never opens
        self._greps = CodeGreps(catalog, self.maps, groups, limits, deny=self._deny, acl=acl)
        self._searches = StoreSearch(catalog, self.maps, groups, limits, acl)
        self._histories = CommitHistories(
            catalog,
            groups,
            limits,
            graphs=self.maps.graph,
            deny=self._deny,
            max_file_bytes=settings.chunking.max_file_bytes,
            acl=acl,
        )

    def prune(self) -> None:
        """Drop what the maps, greps and searches hold of builds that no longer serve."""
        serving = self.maps.prune()
        self._greps.prune(serving)
        self._searches.prune(serving)

    def status(self, *, reader: Reader) -> dict[str, Any]:
        """Every index `reader` may read (record, space), every build of one, and how far each history goes."""
        with self.acl.hiding(reader):
            names = self.acl.readable(reader, self._catalog.names())
            records = [self._catalog.record(name) for name in names]
            builds = {
                key: state for key, state in self._catalog.builds().items() if self.acl.may_read(reader, state.index)
            }
            return {
                "indexes": [{"record": record, "space": record.identity.space_id} for record in records],
                "builds": builds,
                "history": self._histories.reach(reader=reader),
            }

    def search(self, query: SearchQuery, *, reader: Reader) -> SearchAnswer:
        with self.acl.hiding(reader):
            return self._searches.search(query, reader=reader)

    def read_lines(self, repo: str, path: str, start_line: int, end_line: int, *, reader: Reader) -> SourceLines:
        with self.acl.hiding(reader):
            record = self._indexed(repo, path, reader)
            max_lines = self._settings.serve.read_max_lines
            root = Path(record.repo_root)
            return read_source_lines(repo, root, path, start_line, end_line, max_lines, deny=self._deny)

    def read_file(self, repo: str, path: str, *, reader: Reader) -> SourceLines:
        """The whole of an indexed file, confined as read_lines is; refused past chunking.max_file_bytes."""
        with self.acl.hiding(reader):
            record = self._indexed(repo, path, reader)
            cap = self._settings.chunking.max_file_bytes
            return read_source_file(repo, Path(record.repo_root), path, cap, deny=self._deny)

    def _indexed(self, repo: str, path: str, reader: Reader) -> IndexRecord:
        """The serving record of `repo` when `reader` may read it and its build indexed `path`;
        ReadRefused otherwise (reads serve indexed files only)."""
        record = self._catalog.record(self.maps.resolve(repo, reader=reader))
        if not self._catalog.has_path(repo, path):
            raise ReadRefused(repo, path, "not an indexed file of this repository")
        return record

    def search_symbols(self, request: SymbolQuery, *, reader: Reader) -> SymbolPage:
        with self.acl.hiding(reader):
            return self.maps.symbol_page(request, reader=reader)

    def search_files(
        self, repo: str | None, query: str, limit: int = 8, symbols_per_file: int = 12, *, reader: Reader
    ) -> list[FileHit]:
        with self.acl.hiding(reader):
            return self.maps.search_files(repo, query, limit, symbols_per_file, reader=reader)

    def neighbors(self, repo: str | None, path: str, line: int, count: int = 2, *, reader: Reader) -> Neighbors:
        with self.acl.hiding(reader):
            return self.maps.neighbors(repo, path, line, count, reader=reader)

    def overview(self, repo: str | None, *, reader: Reader) -> RepoOverview:
        with self.acl.hiding(reader):
            return self.maps.overview(repo, reader=reader)

    def navigate(self, query: GraphQuery, *, reader: Reader) -> GraphAnswer:
        with self.acl.hiding(reader):
            return self.maps.navigate(query, reader=reader)

    def grep(self, request: GrepRequest, *, reader: Reader) -> GrepResult:
        with self.acl.hiding(reader):
            return self._greps.grep(request, reader=reader)

    def what_changed(
        self, repo: str | None, since: str, until: str | None, path: str | None, limit: int, *, reader: Reader
    ) -> WhatChanged:
        with self.acl.hiding(reader):
            return self._histories.what_changed(repo, since, until, path, limit, reader=reader)

    def symbol_history(
        self, repo: str | None, symbol: str, path: str | None, limit: int, *, reader: Reader
    ) -> SymbolHistory:
        with self.acl.hiding(reader):
            return self._histories.symbol_history(repo, symbol, path, limit, reader=reader)

    def search_commits(self, text: str, query: SearchQuery, since: str | None, *, reader: Reader) -> CommitSearchResult:
        with self.acl.hiding(reader):
            return self._histories.search(text, query, since, reader=reader)

    def changed_paths(self, repo: str | None, since: str, *, reader: Reader) -> list[str]:
        with self.acl.hiding(reader):
            return self._histories.changed_paths(repo, since, reader=reader)

    def compare(self, repo: str | None, base: str, head: str, limit: int, *, reader: Reader) -> Comparison:
        with self.acl.hiding(reader):
            return self._histories.compare(repo, base, head, limit, reader=reader)
