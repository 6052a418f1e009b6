"""The code maps of a catalogue: one `CodeMap` and one `CodeGraph` per index, for the build that serves it.

Pure logic, no Ray: the index actor holds one `CodeMaps` over its `IndexCatalog`. A map and its
graph are built from every row of the serving build on first read (one scroll) and rebuilt when a
new build starts serving.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence

from cluster.auth import Reader
from cluster.errors import IndexNotFound, SamespaceError
from cluster.graph import CodeGraph, GraphAnswer, GraphQuery, GraphRow
from cluster.index.access import ANONYMOUS_READER, IndexAcl
from cluster.index.catalog import IndexCatalog
from cluster.index.globs import path_selector
from cluster.index.scope import resolve_scope
from cluster.ingest import SearchControls
from cluster.search.code_map import CodeMap, readable_row
from cluster.search.models import MOST_CALLED, CalledSymbol, FileHit, Neighbors, RepoOverview, SymbolHit
from cluster.search.navigation import navigate
from cluster.search.pages import SymbolPage, SymbolQuery, check_builds
from cluster.search.ranking import merge_file_hits, merge_symbol_hits
from cluster.settings import LimitsSettings
from cluster.types import PayloadFilter

__all__ = ["CodeMaps"]


class CodeMaps:
    """One CodeMap per index, built lazily from every row of its serving build and cached by build id.

    A new build of an index rebuilds its map on the next read; maps of builds no longer serving
    (superseded or dropped indexes) are dropped on every read. Not thread-safe: one owner. The tools
    read for a `Reader`: only the indexes `acl` lets it read (`get` and `graph` look up a name already
    resolved for one).
    """

    def __init__(
        self,
        catalog: IndexCatalog,
        groups: Mapping[str, Sequence[str]] | None = None,
        limits: LimitsSettings | None = None,
        acl: IndexAcl | None = None,
    ) -> None:
        self._catalog = catalog
        self._groups = dict(groups or {})
        self._limits = limits or LimitsSettings()
        self._acl = acl or IndexAcl({}, self._limits)
        self._maps: dict[str, tuple[str, CodeMap, CodeGraph]] = {}  # index name → (build, map, graph)

    def cached_builds(self) -> dict[str, str]:
        return {name: build for name, (build, _, _) in self._maps.items()}

    def prune(self) -> dict[str, str]:
        """Drop maps whose build no longer serves; return every serving index and its build."""
        serving = {name: self._catalog.record(name).build for name in self._catalog.names()}
        for name in [n for n, (build, _, _) in self._maps.items() if serving.get(n) != build]:
            del self._maps[name]
        return serving

    def get(self, repo: str) -> CodeMap:
        """The map of the serving build of `repo`; IndexNotFound for an unknown repo."""
        return self._built(repo)[0]

    def graph(self, repo: str) -> CodeGraph:
        """The code graph of the serving build of `repo`; IndexNotFound for an unknown repo."""
        return self._built(repo)[1]

    def _built(self, repo: str) -> tuple[CodeMap, CodeGraph]:
        serving = self.prune()
        build = serving.get(repo)
        if build is None:
            build = self._catalog.record(repo).build  # raises IndexNotFound, naming the ones that exist
        cached = self._maps.get(repo)
        if cached is not None and cached[0] == build:
            return cached[1], cached[2]
        record = self._catalog.record(repo)
        hits = self._catalog.scroll(repo, PayloadFilter(), sys.maxsize)
        rows = [row for row in (readable_row(hit.payload) for hit in hits) if row is not None]  # read once, for both
        code_map = CodeMap.from_rows(repo, rows)
        commit = record.source.commit if record.source is not None else None
        facts = (GraphRow(r.path, r.language, r.definitions, r.references, r.imports) for r in rows)
        graph = CodeGraph(repo, commit, facts)
        self._maps[repo] = (build, code_map, graph)
        return code_map, graph

    def resolve(self, repo: str | None, *, reader: Reader = ANONYMOUS_READER) -> str:
        """`repo`, or the only index `reader` may read when None; an error listing the indexes it may
        read when None is ambiguous, the IndexNotFound of an unknown name for one it may not read."""
        readable = self._acl.readable(reader, self._catalog.names())
        if repo is not None:
            if not self._acl.may_read(reader, repo):
                raise IndexNotFound(repo, readable)
            return repo
        if len(readable) == 1:
            return readable[0]
        listed = ", ".join(readable) or "none"
        raise SamespaceError(f"name a repo: this tool reads one repository; indexed repos: {listed}")

    def _targets(self, repo: str | None, reader: Reader) -> list[str]:
        """The indexes `repo` stands for that `reader` may read: a name, a glob, a group ('@backend'),
        or every index (`cluster.index.scope`)."""
        return resolve_scope(
            repo, self._catalog.names, self._groups, self._limits, readable=self._acl.filter_for(reader)
        )

    def search_symbols(
        self,
        repo: str | None,
        query: str,
        limit: int = 10,
        controls: SearchControls | None = None,
        *,
        reader: Reader = ANONYMOUS_READER,
    ) -> list[SymbolHit]:
        select = path_selector(None, controls.exclude, self._limits) if controls is not None else None
        found = (self.get(name).search_symbols(query, limit, controls, select) for name in self._targets(repo, reader))
        return merge_symbol_hits(found, limit)

    def symbol_page(self, request: SymbolQuery, *, reader: Reader = ANONYMOUS_READER) -> SymbolPage:
        """One page of search_symbols over the indexes in scope, bound to their serving builds: the
        ranking of the first `offset + limit` hits is that of any longer cut, so pages never overlap."""
        names = self._targets(request.repo, reader)
        serving = self.prune()
        builds = check_builds(request.builds, {name: serving[name] for name in names if name in serving})
        end = request.offset + request.limit
        ranked = self.search_symbols(request.repo, request.query, end + 1, request.controls, reader=reader)
        return SymbolPage(hits=ranked[request.offset : end], builds=builds, more=len(ranked) > end)

    def search_files(
        self,
        repo: str | None,
        query: str,
        limit: int = 8,
        symbols_per_file: int = 12,
        *,
        reader: Reader = ANONYMOUS_READER,
    ) -> list[FileHit]:
        return merge_file_hits(
            (self.get(name).search_files(query, limit, symbols_per_file) for name in self._targets(repo, reader)), limit
        )

    def neighbors(
        self, repo: str | None, path: str, line: int, count: int = 2, *, reader: Reader = ANONYMOUS_READER
    ) -> Neighbors:
        return self.get(self.resolve(repo, reader=reader)).neighbors(path, line, count)

    def overview(self, repo: str | None, *, reader: Reader = ANONYMOUS_READER) -> RepoOverview:
        name = self.resolve(repo, reader=reader)
        called = [
            CalledSymbol(symbol=d.symbol, kind=d.kind, path=d.path, line=d.line, calls=n)
            for d, n in self.graph(name).most_called(MOST_CALLED)
        ]
        return self.get(name).overview().model_copy(update={"most_called": called})

    def navigate(self, query: GraphQuery, *, reader: Reader = ANONYMOUS_READER) -> GraphAnswer:
        """A navigation tool's answer over the indexes `query.repo` stands for (`cluster.search.navigation`)."""
        return navigate({name: self.graph(name) for name in self._targets(query.repo, reader)}, query)
