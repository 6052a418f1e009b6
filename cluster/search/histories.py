"""The history tools over the indexes in scope: what changed, a symbol's history, commit search.

One `History` per index, read from its history collection (`cluster.index.history_store`) and cached
until the next reindex stores more. A window end that is not a date, a duration or a full sha is a
ref, resolved in the index's git folder by the hardened git. A symbol's lines now come from the
serving build's code graph when that build is the history's newest commit with no uncommitted
change (then `symbol_history` follows those lines back, as `git log -L` does); otherwise from the
changes that name it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from cluster.auth import Reader
from cluster.errors import EncoderMismatch, RefNotFound, SamespaceError
from cluster.graph import CodeGraph
from cluster.history import (
    ChangedSymbol,
    CommitSearchHit,
    CommitSearchResult,
    Comparison,
    History,
    HistoryReach,
    Span,
    SpanLookup,
    SymbolHistory,
    WhatChanged,
    WindowEnd,
    compare_commits,
    iso,
    parse_window_end,
)
from cluster.index import (
    ANONYMOUS_READER,
    HistoryState,
    IndexAcl,
    IndexCatalog,
    SearchQuery,
    index_of,
    resolve_scope,
)
from cluster.ingest import DEFAULT_MAX_FILE_BYTES, DenyList, resolve_commit
from cluster.settings import LimitsSettings
from cluster.types import Clock

__all__ = ["CommitHistories"]

MAX_LISTED = 20  # symbols and files a commit search hit lists
Graphs = Callable[[str], CodeGraph]  # index -> the code graph of its serving build


class CommitHistories:
    """The histories of a catalogue's indexes, each loaded once per stored state. One owner. The tools
    read for a `Reader`: only the indexes `acl` lets it read."""

    def __init__(
        self,
        catalog: IndexCatalog,
        groups: Mapping[str, Sequence[str]] | None = None,
        limits: LimitsSettings | None = None,
        graphs: Graphs | None = None,
        clock: Clock = time.time,
        deny: DenyList | None = None,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        acl: IndexAcl | None = None,
    ) -> None:
        self._catalog = catalog
        self._groups = dict(groups or {})
        self._limits = limits or LimitsSettings()
        self._acl = acl or IndexAcl({}, self._limits)
        self._graphs = graphs
        self._clock = clock
        self._deny = deny
        self._max_file_bytes = max_file_bytes
        self._loaded: dict[str, tuple[HistoryState, History]] = {}

    def history(self, name: str) -> tuple[HistoryState | None, History]:
        state = self._catalog.history.state(name)
        if state is None:
            self._loaded.pop(name, None)
            return None, History(name, [])
        cached = self._loaded.get(name)
        if cached is not None and cached[0] == state:
            return cached
        loaded = (state, self._catalog.history.load(name))
        self._loaded[name] = loaded
        return loaded

    def reach(self, *, reader: Reader = ANONYMOUS_READER) -> dict[str, HistoryReach]:
        """How far each index's history goes (the indexes with one that `reader` may read)."""
        out: dict[str, HistoryReach] = {}
        for name in self._acl.readable(reader, self._catalog.names()):
            state = self._catalog.history.state(name)
            if state is not None:
                out[name] = _reach(name, state)
        return out

    def _targets(self, repo: str | None, reader: Reader) -> list[str]:
        """The indexes in scope that `reader` may read; an unknown name fails here (IndexNotFound, as
        every other tool answers it), not as an index with no history."""
        readable = self._acl.filter_for(reader)
        names = resolve_scope(repo, self._catalog.names, self._groups, self._limits, readable=readable)
        if repo is not None and names == [repo]:
            self._catalog.record(repo)  # IndexNotFound names the indexes that exist
        return names

    # ---- tools ----------------------------------------------------------------------------------

    def what_changed(
        self,
        repo: str | None,
        since: str,
        until: str | None = None,
        path: str | None = None,
        limit: int = 100,
        *,
        reader: Reader = ANONYMOUS_READER,
    ) -> WhatChanged:
        items, truncated, reach = [], False, []
        for name in self._targets(repo, reader):
            state, history = self.history(name)
            if state is None:
                continue
            reach.append(_reach(name, state))
            found, cut = history.what_changed(
                self._end(state, since), self._end(state, until) if until else None, path, limit
            )
            items.extend(found)
            truncated = truncated or cut
        items.sort(key=lambda item: item.date, reverse=True)
        note = None if reach else "no history is mined for these indexes (a git folder's reindex mines it)"
        return WhatChanged(
            since=since,
            until=until,
            items=items[:limit],
            truncated=truncated or len(items) > limit,
            reach=reach,
            note=note,
        )

    def symbol_history(
        self,
        repo: str | None,
        symbol: str,
        path: str | None = None,
        limit: int = 50,
        *,
        reader: Reader = ANONYMOUS_READER,
    ) -> SymbolHistory:
        answers: dict[str, SymbolHistory] = {}
        for name in self._targets(repo, reader):
            state, history = self.history(name)
            if state is not None:
                answers[name] = history.symbol_history(symbol, path, limit, self._span_lookup(name, state))
        holding = {name: a for name, a in answers.items() if a.commits or a.candidates}
        if len(holding) == 1:
            return next(iter(holding.values()))
        if not holding:
            where = ", ".join(answers) or "no index with a mined history"
            return SymbolHistory(repo=repo or "", symbol=symbol, note=f"no change to {symbol!r} in {where}")
        candidates = [f"{name}: {c}" for name, a in holding.items() for c in (a.candidates or [a.commits[0].path])]
        note = f"{symbol!r} has a history in {len(holding)} indexes ({', '.join(holding)}): name one with repo"
        return SymbolHistory(repo=repo or "", symbol=symbol, candidates=candidates, note=note)

    def search(
        self, text: str, query: SearchQuery, since: str | None = None, *, reader: Reader = ANONYMOUS_READER
    ) -> CommitSearchResult:
        """Commits whose message or changed symbols match; `query` carries the vector and keywords."""
        hits: list[CommitSearchHit] = []
        refused: list[str] = []
        for name in self._targets(query.scope, reader):
            state, history = self.history(name)
            if state is None:
                continue
            try:
                found = self._catalog.history.search(name, query.model_copy(update={"limit": query.limit * 4}))
            except EncoderMismatch as exc:
                refused.append(str(exc))
                continue
            after = self._end(state, since) if since else None
            allowed = None if after is None else {c.commit for c in history.window(after)}
            for hit in found:
                if allowed is not None and hit.commit not in allowed:
                    continue
                record = hit.record
                changed = [ChangedSymbol(path=s.path, symbol=s.symbol, change=s.change) for s in record.symbols]
                hits.append(
                    CommitSearchHit(
                        repo=name,
                        commit=record.commit,
                        date=iso(record.committed_at),
                        author=record.author,
                        message=record.message,
                        score=hit.score,
                        changed=changed[:MAX_LISTED],
                        files=[f.path for f in record.files][:MAX_LISTED],
                    )
                )
        hits.sort(key=lambda h: (-h.score, h.repo, h.commit))
        note = None if hits else "no commit matched (a git folder's reindex mines its history)"
        return CommitSearchResult(query=text, hits=hits[: query.limit], refused=refused, note=note)

    def changed_paths(self, repo: str | None, since: str, *, reader: Reader = ANONYMOUS_READER) -> list[str]:
        """The files the commits after `since` touched and that still exist, by their newest path (review
        mode: `search_code(changed_since=...)`), over the indexes in scope that have a history."""
        paths: set[str] = set()
        for name in self._targets(repo, reader):
            state, history = self.history(name)
            if state is None:
                continue
            gone: set[str] = set()
            for commit in history.window(self._end(state, since)):  # newest first
                for f in commit.files:
                    if f.path in gone:
                        continue
                    if f.status == "D":
                        gone.add(f.path)
                    else:
                        paths.add(f.path)
                    if f.previous_path:
                        gone.add(f.previous_path)  # renamed: known by its newer path
        return sorted(paths)

    def compare(
        self, repo: str | None, base: str, head: str, limit: int = 100, *, reader: Reader = ANONYMOUS_READER
    ) -> Comparison:
        """The symbols that differ between two refs (or shas, or the serving build: its commit) of one
        index's folder, with short diffs."""
        names = self._targets(repo, reader)
        if len(names) != 1:
            listed = ", ".join(names) or "none"
            raise SamespaceError(f"compare reads one repository: name it with repo (in scope: {listed})")
        name = names[0]
        state = self._catalog.history.state(name)
        if state is None:
            raise SamespaceError(f"{name} has no mined history: compare needs its git folder (reindex a git folder)")
        folder = Path(state.folder)
        try:
            base_sha, head_sha = self._commit_of(name, folder, base), self._commit_of(name, folder, head)
        except RefNotFound as exc:
            raise SamespaceError(f"compare in {name}: {exc}") from None
        return compare_commits(
            name, folder, base_sha, head_sha, limit, deny=self._deny, max_file_bytes=self._max_file_bytes
        )

    # ---- helpers --------------------------------------------------------------------------------

    def _commit_of(self, name: str, folder: Path, value: str) -> str:
        """A ref's commit; a build id of the index: the commit its files came from."""
        if index_of(value) == name:
            record = self._catalog.record(name)
            if value != record.build or record.source is None or record.source.commit is None:
                raise SamespaceError(f"{value} is not the serving build of {name} with a commit (only it is kept)")
            return record.source.commit
        return resolve_commit(folder, value)

    def _end(self, state: HistoryState, value: str) -> WindowEnd:
        try:
            return parse_window_end(value, self._clock)
        except ValueError:
            pass
        try:
            return WindowEnd(commit=resolve_commit(Path(state.folder), value))
        except RefNotFound as exc:
            raise SamespaceError(
                f"{value!r} is not a duration (7d, 12h), a date (2026-11-01) or a ref of {state.index}: {exc}"
            ) from None

    def _span_lookup(self, name: str, state: HistoryState) -> SpanLookup | None:
        """The serving build's lines of a symbol, when that build is the history's newest commit."""
        if self._graphs is None:
            return None
        record = self._catalog.record(name)
        source = record.source
        if source is None or source.commit != state.newest or source.dirty:
            return None
        return graph_span(self._graphs(name))


def _reach(name: str, state: HistoryState) -> HistoryReach:
    return HistoryReach(
        repo=name,
        commits=state.commits,
        newest=state.newest,
        oldest_date=iso(state.oldest_at) if state.oldest_at is not None else None,
        more=state.more,
    )


def graph_span(graph: CodeGraph) -> SpanLookup:
    """A symbol's lines in a serving build, from its code graph."""

    def span(path: str, symbol: str) -> Span | None:
        for d in graph.lookup(symbol, path):
            if d.path == path and d.qualified == symbol:
                return Span(symbol=symbol, kind=d.kind, start=d.line, end=d.end_line)
        return None

    return span
