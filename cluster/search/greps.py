"""grep_code over the indexes in scope: each serving build's files in one buffer, scanned by RE2.

Pure logic, no Ray: the index actor holds one `CodeGreps`. An index's text is read on its first grep
after a build, from the build's own folder (a ref index's exported tree), for exactly the files the
build indexed (`CodeMaps`: deny-listed, ignored, generated and secret files were never indexed), each
read as read_code reads it (confined, no symlink followed, credentials redacted), and kept until
another build serves. Files past `limits.grep_max_bytes` are left out, and the answer says so.

Measured (bench/grep.py): scanning the held text beats a ripgrep process over the same files, so no
trigram index is kept. Indexes are scanned in name order, files in path order; a call stops at
`limit` lines or after `limits.grep_budget_s`, and its cursor goes on from the next line.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cluster.auth import Reader
from cluster.errors import CursorExpired, ReadRefused
from cluster.graph import CodeGraph
from cluster.grep import GrepCorpus, GrepCursor, GrepMatch, GrepPattern, GrepRequest, GrepResult, LineHit, ScanPage
from cluster.index.access import ANONYMOUS_READER, IndexAcl
from cluster.index.catalog import IndexCatalog
from cluster.index.globs import path_selector
from cluster.index.scope import resolve_scope
from cluster.ingest import DenyList, SearchControls, read_source_text
from cluster.search.maps import CodeMaps
from cluster.settings import LimitsSettings
from cluster.types import Clock

__all__ = ["MAX_LINE_CHARS", "CodeGreps", "load_corpus"]

MAX_LINE_CHARS = 400  # a longer line is cut around its match


@dataclass(frozen=True)
class HeldCorpus:
    """One index build's text, and what was left out of it."""

    build: str
    commit: str | None
    corpus: GrepCorpus
    notes: tuple[str, ...]


def load_corpus(
    repo: str, root: Path, paths: Sequence[str], deny: DenyList | None, max_bytes: int
) -> tuple[GrepCorpus, list[str]]:
    """The text of `paths` below `root`, read as read_code reads them; notes say what was left out."""
    texts: list[tuple[str, str]] = []
    unreadable: list[str] = []
    held = 0
    over = 0
    for path in sorted(paths):
        try:
            text = read_source_text(repo, root, path, deny)
        except ReadRefused:
            unreadable.append(path)
            continue
        size = len(text.encode("utf-8"))
        if held + size > max_bytes:
            over += 1
            continue
        held += size
        texts.append((path, text))
    notes = []
    if unreadable:
        shown = ", ".join(unreadable[:5]) + (" ..." if len(unreadable) > 5 else "")
        notes.append(f"{repo}: {len(unreadable)} indexed files could not be read now ({shown})")
    if over:
        notes.append(f"{repo}: {over} files left out past limits.grep_max_bytes ({max_bytes} bytes held)")
    return GrepCorpus(texts), notes


class CodeGreps:
    """grep_code over a catalogue: one held text per index, for the build that serves it."""

    def __init__(
        self,
        catalog: IndexCatalog,
        maps: CodeMaps,
        groups: Mapping[str, Sequence[str]] | None = None,
        limits: LimitsSettings | None = None,
        deny: DenyList | None = None,
        clock: Clock = time.monotonic,
        acl: IndexAcl | None = None,
    ) -> None:
        self._catalog = catalog
        self._maps = maps
        self._groups = dict(groups or {})
        self._limits = limits or LimitsSettings()
        self._acl = acl or IndexAcl({}, self._limits)
        self._deny = deny
        self._clock = clock
        self._held: dict[str, HeldCorpus] = {}

    def prune(self, serving: Mapping[str, str]) -> None:
        """Drop the text of builds that no longer serve; `serving`: each index's serving build, as
        `CodeMaps.prune` returns it (the index actor calls both on every commit and removal)."""
        for name in [n for n, held in self._held.items() if serving.get(n) != held.build]:
            del self._held[name]

    def grep(self, request: GrepRequest, *, reader: Reader = ANONYMOUS_READER) -> GrepResult:
        """The matching lines of the indexes in scope that `reader` may read."""
        pattern = GrepPattern.compile(request.pattern, regex=request.regex, case_sensitive=request.case_sensitive)
        select = path_selector(request.path_glob, request.controls.exclude, self._limits)
        readable = self._acl.filter_for(reader)
        names = resolve_scope(request.repo, self._catalog.names, self._groups, self._limits, readable=readable)
        cursor = None if request.cursor is None else GrepCursor.resume(request.cursor, request)
        if cursor is not None:
            if cursor.index not in names:
                raise CursorExpired(f"index {cursor.index!r} is no longer in scope")
            names = names[names.index(cursor.index) :]
        deadline = self._clock() + self._limits.grep_budget_s
        matches: list[GrepMatch] = []
        notes: list[str] = []
        files = 0
        for at, name in enumerate(names):
            held = self._corpus(name)
            notes.extend(held.notes)
            start = 0
            if cursor is not None and name == cursor.index:
                if cursor.build is not None and cursor.build != held.build:
                    raise CursorExpired(f"index {name!r} was rebuilt since (now build {held.build})")
                start = cursor.offset
            page = held.corpus.scan(
                pattern,
                limit=request.limit - len(matches),
                start=start,
                select=select,
                keep=self._line_kinds(name, request.controls),
                deadline=deadline,
                clock=self._clock,
            )
            files += page.files
            if page.hits:
                graph = self._maps.graph(name)  # once per index: each look-up checks every index's build
                matches.extend(self._match(name, held, graph, hit, request.context_lines) for hit in page.hits)
            if page.stopped is not None:
                following = self._next(request, name, held, page, names[at + 1 :])
                return GrepResult(
                    pattern=request.pattern,
                    matches=matches,
                    files_searched=files,
                    truncated=following is not None,
                    stopped=page.stopped,
                    cursor=None if following is None else following.encode(),
                    notes=notes,
                )
        return GrepResult(pattern=request.pattern, matches=matches, files_searched=files, truncated=False, notes=notes)

    def _line_kinds(self, name: str, controls: SearchControls) -> Callable[[LineHit], bool] | None:
        """Which lines `kind` and `tests` keep: by the chunk holding each (`CodeMap.line_categories`)."""
        if not controls.kind and controls.tests == "include":
            return None
        code_map = self._maps.get(name)
        return lambda hit: controls.keeps(code_map.line_categories(hit.path, hit.line))

    @staticmethod
    def _next(
        request: GrepRequest, name: str, held: HeldCorpus, page: ScanPage, later: Sequence[str]
    ) -> GrepCursor | None:
        """Where the next page starts: on in this index, else at the top of the next one (None: the end)."""
        if page.resume is not None:
            return GrepCursor(query=request.fingerprint(), index=name, build=held.build, offset=page.resume)
        if later:
            return GrepCursor(query=request.fingerprint(), index=later[0], build=None, offset=0)
        return None

    def _match(self, name: str, held: HeldCorpus, graph: CodeGraph, hit: LineHit, context: int) -> GrepMatch:
        text, cut = hit.text, False
        if len(text) > MAX_LINE_CHARS:
            begin = max(0, min(hit.column - 1 - MAX_LINE_CHARS // 4, len(text) - MAX_LINE_CHARS))
            text, cut = text[begin : begin + MAX_LINE_CHARS], True
        before, after = held.corpus.around(hit, context, context) if context else ([], [])
        return GrepMatch(
            repo=name,
            path=hit.path,
            line=hit.line,
            column=hit.column,
            text=text,
            text_cut=cut,
            commit=held.commit,
            symbol=graph.enclosing(hit.path, hit.line),
            before=[line[:MAX_LINE_CHARS] for line in before],
            after=[line[:MAX_LINE_CHARS] for line in after],
        )

    def _corpus(self, name: str) -> HeldCorpus:
        """The held text of the serving build of `name`, read now when another build served before."""
        record = self._catalog.record(name)  # IndexNotFound names the indexes that exist
        held = self._held.get(name)
        if held is not None and held.build == record.build:
            return held
        corpus, notes = load_corpus(
            name, Path(record.repo_root), self._maps.get(name).paths, self._deny, self._limits.grep_max_bytes
        )
        commit = record.source.commit if record.source is not None else None
        held = HeldCorpus(record.build, commit, corpus, tuple(notes))
        self._held[name] = held
        return held
