"""search_code's side in the index actor: the indexes in scope, their serving builds (what a page
cursor is bound to), and the query's `SearchControls` made one store filter on every leg.

Pure logic, no Ray: the index actor holds one `StoreSearch` beside its `CodeMaps`. The filter itself
is `cluster.index.controls_filter`; this class gives it what the store cannot work out: the indexed
paths each `exclude` glob matches, and for a build written before rows carried their categories,
its paths the test rule names. Both are read from the code map of the serving build (its paths,
every row read once per build) and kept per build, so a repeated search matches no glob again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cluster.auth import Reader
from cluster.index import (
    ANONYMOUS_READER,
    IndexAcl,
    IndexCatalog,
    IndexRecord,
    SearchQuery,
    controls_filter,
    path_selector,
    resolve_scope,
)
from cluster.ingest import TEST, SearchControls, is_test_path
from cluster.search.maps import CodeMaps
from cluster.search.pages import SearchAnswer, check_builds
from cluster.settings import LimitsSettings

__all__ = ["StoreSearch"]

MAX_HELD_GLOB_SETS = 256  # (build, globs) → the paths they match; the oldest goes first


class StoreSearch:
    """Searches of the indexes a query's scope names, narrowed by its controls, bound to their builds."""

    def __init__(
        self,
        catalog: IndexCatalog,
        maps: CodeMaps,
        groups: Mapping[str, Sequence[str]] | None = None,
        limits: LimitsSettings | None = None,
        acl: IndexAcl | None = None,
    ) -> None:
        self._catalog = catalog
        self._maps = maps
        self._groups = dict(groups or {})
        self._limits = limits or LimitsSettings()
        self._acl = acl or IndexAcl({}, self._limits)
        self._excluded: dict[tuple[str, tuple[str, ...]], frozenset[str]] = {}
        self._old_tests: dict[str, frozenset[str]] = {}  # by build: rows without categories only

    def prune(self, serving: Mapping[str, str]) -> None:
        """Forget the paths of builds that no longer serve (`CodeMaps.prune` returns `serving`)."""
        live = set(serving.values())
        self._excluded = {key: paths for key, paths in self._excluded.items() if key[0] in live}
        self._old_tests = {build: paths for build, paths in self._old_tests.items() if build in live}

    def search(self, query: SearchQuery, *, reader: Reader = ANONYMOUS_READER) -> SearchAnswer:
        """Hits best first over the indexes in scope that `reader` may read, the indexes refused, and the
        builds ranked; CursorExpired when the query is a next page and those builds changed since its first."""
        readable = self._acl.filter_for(reader)
        names = resolve_scope(query.scope, self._catalog.names, self._groups, self._limits, readable=readable)
        records = {name: self._catalog.record(name) for name in names}
        builds = check_builds(query.builds, {name: record.build for name, record in records.items()})
        if query.controls is not None and query.controls.filters:
            narrowed = controls_filter(query.controls, *self._paths(query.controls, records))
            query = query.model_copy(update={"filter": narrowed.both(query.filter) if narrowed else query.filter})
        hits, refused = self._catalog.search_scope(query, names)
        return SearchAnswer(hits=hits, refused=refused, builds=builds)

    def _paths(
        self, controls: SearchControls, records: Mapping[str, IndexRecord]
    ) -> tuple[frozenset[str], frozenset[str] | None]:
        """(the paths in scope an `exclude` glob matches, the test paths of uncategorised builds or
        None when every build is categorised)."""
        excluded: set[str] = set()
        if controls.exclude:
            keep = path_selector(None, controls.exclude, self._limits)
            for name, record in records.items():
                key = (record.build, tuple(controls.exclude))
                if key not in self._excluded:
                    if len(self._excluded) >= MAX_HELD_GLOB_SETS:
                        del self._excluded[next(iter(self._excluded))]
                    paths = self._maps.get(name).paths
                    self._excluded[key] = frozenset(p for p in paths if keep is not None and not keep(p))
                excluded |= self._excluded[key]
        old = {name: record for name, record in records.items() if not record.categorised}
        if not old:
            return frozenset(excluded), None
        old_tests: set[str] = set()
        if controls.tests != "include" or TEST in controls.kind:
            for name, record in old.items():
                if record.build not in self._old_tests:
                    self._old_tests[record.build] = frozenset(filter(is_test_path, self._maps.get(name).paths))
                old_tests |= self._old_tests[record.build]
        return frozenset(excluded), frozenset(old_tests)
