"""Non-semantic code tools over one index build: symbol search, file search, neighbours, overview.

Pure logic, no Ray: a `CodeMap` is built once from the payloads of every row of one build
(`cluster.index.RowPayload`) and answers from memory. `cluster.search.maps.CodeMaps`
keeps one per serving build of an `IndexCatalog`; the index actor holds it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from pathlib import PurePosixPath
from typing import Any

from pydantic import ValidationError

from cluster.errors import ReadRefused
from cluster.index.payload import RowPayload
from cluster.index.tokens import identifier_tokens
from cluster.ingest import TEST, Category, SearchControls, chunk_categories, is_test_path
from cluster.search.models import CodeEntry, FileHit, FileSymbol, Neighbors, RepoOverview, SymbolHit, snippet
from cluster.search.neighbors import neighbors_of
from cluster.search.overview import build_overview
from cluster.search.ranking import (
    FILE_MATCH_RANK,
    SCORE_EXACT,
    SCORE_EXACT_CI,
    SCORE_MEMBER,
    SCORE_MEMBER_CI,
    prefix_score,
    substring_score,
    tokens_score,
)
from cluster.search.units import Unit, clean_path, file_units, normalise_query, normalise_symbol

__all__ = ["CodeMap"]

Offer = Callable[[Iterable[int], float, str], None]
PathTest = Callable[[str], bool]  # which files a search keeps (`cluster.index.path_selector`)


class CodeMap:
    """Every chunk of one index build, indexed for symbol, file and neighbour look-ups."""

    def __init__(self, repo: str, entries: Iterable[CodeEntry]) -> None:
        self.repo = repo
        unique = {_entry_key(entry): entry for entry in entries}
        self.entries: tuple[CodeEntry, ...] = tuple(unique[key] for key in sorted(unique))
        self._by_path: dict[str, list[int]] = defaultdict(list)
        for index, entry in enumerate(self.entries):
            self._by_path[entry.path].append(index)
        self._by_path = dict(self._by_path)
        self._units: list[Unit] = []
        self._units_by_path: dict[str, list[int]] = {}
        for path, indexes in self._by_path.items():
            units = file_units(self.entries, indexes)
            self._units_by_path[path] = list(range(len(self._units), len(self._units) + len(units)))
            self._units.extend(units)
        self._index_units()
        self._overview: RepoOverview | None = None
        self._unit_categories: dict[int, list[Category]] = {}  # worked out on first use
        self._entry_categories: dict[int, list[Category]] = {}

    @classmethod
    def from_payloads(cls, repo: str, payloads: Iterable[Mapping[str, Any]]) -> CodeMap:
        """Build from point payloads (`RowPayload`); rows without path, lines or text are skipped."""
        return cls.from_rows(repo, (row for row in map(readable_row, payloads) if row is not None))

    @classmethod
    def from_rows(cls, repo: str, rows: Iterable[RowPayload]) -> CodeMap:
        """Build from rows already read; rows without path, lines or text are skipped."""
        entries = (_entry(repo, row) for row in rows)
        return cls(repo, (entry for entry in entries if entry is not None))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CodeMap):
            return NotImplemented
        return self.repo == other.repo and self.entries == other.entries

    __hash__ = None  # type: ignore[assignment]  # equal by content, never a dict key: unhashable

    def __repr__(self) -> str:
        return f"CodeMap(repo={self.repo!r}, files={len(self._by_path)}, chunks={len(self.entries)})"

    @property
    def paths(self) -> list[str]:
        return sorted(self._by_path)

    def file_entries(self, path: str) -> list[CodeEntry]:
        """The chunks of one file by (start_line, end_line); ReadRefused for a file not indexed."""
        indexes = self._by_path.get(clean_path(path))
        if indexes is None:
            raise ReadRefused(self.repo, path, "not an indexed file of this repository")
        return [self.entries[i] for i in indexes]

    # ---- building ---------------------------------------------------------------------------
    def _index_units(self) -> None:
        self._exact: dict[str, list[int]] = defaultdict(list)
        self._exact_ci: dict[str, list[int]] = defaultdict(list)
        self._member: dict[str, list[int]] = defaultdict(list)
        self._member_ci: dict[str, list[int]] = defaultdict(list)
        self._lowered: dict[str, list[int]] = defaultdict(list)  # lower-cased normalised symbol → units
        self._symbol_postings: dict[str, list[int]] = defaultdict(list)
        self._definition_postings: dict[str, list[int]] = defaultdict(list)
        for unit_id, unit in enumerate(self._units):
            for token in unit.symbol_tokens:
                self._symbol_postings[token].append(unit_id)
            for token in unit.definition_tokens:
                self._definition_postings[token].append(unit_id)
            if unit.symbol is None:
                continue
            self._lowered[normalise_symbol(unit.symbol).lower()].append(unit_id)
            for name in {normalise_symbol(unit.symbol), *unit.names}:
                self._exact[name].append(unit_id)
                self._exact_ci[name.lower()].append(unit_id)
            for suffix in set(unit.suffixes):
                self._member[suffix].append(unit_id)
                self._member_ci[suffix.lower()].append(unit_id)
        # prefix/substring candidates: every distinct lower-cased symbol with its lower-cased suffixes
        self._scan: list[tuple[str, tuple[str, ...], list[int]]] = []
        for lowered, ids in self._lowered.items():
            parts = {part.lower() for i in ids for part in (*self._units[i].names, *self._units[i].suffixes)}
            parts.discard(lowered)
            self._scan.append((lowered, tuple(sorted(parts)), ids))

    # ---- categories (the search tools' `kind` and `tests`) ----------------------------------
    def unit_categories(self, unit_id: int) -> list[Category]:
        unit = self._units[unit_id]
        found = self._unit_categories.get(unit_id)
        if found is None:
            found = self._unit_categories[unit_id] = chunk_categories(unit.path, unit.language, unit.kind, unit.text)
        return found

    def line_categories(self, path: str, line: int) -> list[Category]:
        """The categories of the smallest chunk of `path` holding `line`; a line no chunk holds (blank,
        punctuation) is test code when its file is, and nothing else."""
        holding = [
            i for i in self._by_path.get(path, ()) if self.entries[i].start_line <= line <= self.entries[i].end_line
        ]
        if not holding:
            return [TEST] if is_test_path(path) else []
        smallest = min(holding, key=lambda i: (self.entries[i].end_line - self.entries[i].start_line, i))
        found = self._entry_categories.get(smallest)
        if found is None:
            entry = self.entries[smallest]
            found = chunk_categories(entry.path, entry.language, entry.kind, entry.text)
            self._entry_categories[smallest] = found
        return found

    def _kept(self, unit_id: int, controls: SearchControls, select: PathTest | None) -> bool:
        unit = self._units[unit_id]
        return (select is None or select(unit.path)) and controls.keeps(self.unit_categories(unit_id))

    # ---- symbol search ----------------------------------------------------------------------
    def search_symbols(
        self, query: str, limit: int = 10, controls: SearchControls | None = None, select: PathTest | None = None
    ) -> list[SymbolHit]:
        """Definitions best first: exact > member > exact-ci > prefix > substring > tokens; only those
        whose path `select` keeps and whose categories `controls` keeps.

        `query` is an identifier ('parse_config', 'TaxTable.lookup', 'getUserById') or a few words.
        Ties: definitions before windows/sections/module runs, then path, then line.
        """
        normalised = normalise_query(query)
        if not normalised or limit <= 0:
            return []
        lowered = normalised.lower()
        best: dict[int, tuple[float, str]] = {}

        def offer(unit_ids: Iterable[int], score: float, match: str) -> None:
            for unit_id in unit_ids:
                current = best.get(unit_id)
                if current is None or score > current[0]:
                    best[unit_id] = (score, match)

        offer(self._exact.get(normalised, ()), SCORE_EXACT, "exact")
        offer(self._member.get(normalised, ()), SCORE_MEMBER, "member")
        offer(self._exact_ci.get(lowered, ()), SCORE_EXACT_CI, "exact-ci")
        offer(self._member_ci.get(lowered, ()), SCORE_MEMBER_CI, "member")
        for symbol, suffixes, unit_ids in self._scan:
            matched = next((s for s in (symbol, *suffixes) if s.startswith(lowered)), None)
            if matched is not None:
                offer(unit_ids, prefix_score(len(lowered), len(matched)), "prefix")
            elif lowered in symbol:
                offer(unit_ids, substring_score(len(lowered), len(symbol)), "substring")
        self._offer_tokens(normalised, offer)
        if select is not None or (controls is not None and controls.filters):
            wanted = controls or SearchControls()
            best = {unit_id: found for unit_id, found in best.items() if self._kept(unit_id, wanted, select)}
        ranked = sorted(
            best.items(),
            key=lambda item: (
                -item[1][0],
                self._units[item[0]].rank,
                self._units[item[0]].path,
                self._units[item[0]].start_line,
            ),
        )
        return [self._hit(self._units[unit_id], score, match) for unit_id, (score, match) in ranked[:limit]]

    def _offer_tokens(self, query: str, offer: Offer) -> None:
        tokens = set(identifier_tokens(query))
        if not tokens:
            return
        candidates: set[int] = set()
        for token in tokens:
            candidates.update(self._symbol_postings.get(token, ()))
            candidates.update(self._definition_postings.get(token, ()))
        for unit_id in candidates:
            unit = self._units[unit_id]
            score = tokens_score(tokens, unit.symbol_tokens, unit.definition_tokens)
            if score > 0:
                offer((unit_id,), round(score, 6), "tokens")

    def _hit(self, unit: Unit, score: float, match: str) -> SymbolHit:
        return SymbolHit(
            repo=self.repo,
            path=unit.path,
            start_line=unit.start_line,
            end_line=unit.end_line,
            symbol=unit.symbol,
            kind=unit.kind,
            language=unit.language,
            score=round(score, 6),
            match=match,
            snippet=snippet(unit.text),
        )

    # ---- file search ------------------------------------------------------------------------
    def search_files(self, query: str, limit: int = 8, symbols_per_file: int = 12) -> list[FileHit]:
        """Files whose path contains the query (case-insensitive) or every identifier token of it
        ('text util' finds 'pkg/textutil.py'). Exact basename first, then exact name without
        extension, then substring, then tokens; within each, shorter paths first."""
        cleaned = clean_path(query)
        if not cleaned or limit <= 0:
            return []
        lowered = cleaned.lower()
        tokens = set(identifier_tokens(cleaned))
        found: list[tuple[tuple[int, int, str], str, str]] = []
        for path in self._by_path:
            lowered_path = path.lower()
            name = PurePosixPath(lowered_path).name
            if name == lowered:
                match = "basename"
            elif PurePosixPath(name).stem == lowered:
                match = "stem"
            elif lowered in lowered_path:
                match = "path"
            elif tokens and all(token in lowered_path for token in tokens):
                match = "tokens"
            else:
                continue
            found.append(((FILE_MATCH_RANK[match], len(path), path), path, match))
        found.sort()
        return [self._file_hit(path, match, symbols_per_file) for _, path, match in found[:limit]]

    def _file_hit(self, path: str, match: str, symbols_per_file: int) -> FileHit:
        symbols = [
            FileSymbol(symbol=unit.symbol, kind=unit.kind, start_line=unit.start_line, end_line=unit.end_line)
            for unit in (self._units[i] for i in self._units_by_path[path])
            if unit.symbol is not None
        ]
        return FileHit(
            repo=self.repo,
            path=path,
            language=self.entries[self._by_path[path][0]].language,
            match=match,
            symbols=symbols[: max(symbols_per_file, 0)],
            symbols_total=len(symbols),
        )

    # ---- neighbours -------------------------------------------------------------------------
    def neighbors(self, path: str, line: int, count: int = 2) -> Neighbors:
        """The chunk at `line` of `path` (smallest containing span, else the nearest) and up to
        `count` chunks on each side (`cluster.search.neighbors`)."""
        return neighbors_of(self.repo, self.file_entries(path), line, count)

    # ---- overview ---------------------------------------------------------------------------
    def overview(self) -> RepoOverview:
        """Files, chunks, languages, top folders, main types, most referenced symbols, README head."""
        if self._overview is None:
            self._overview = build_overview(self.repo, self.entries, self._by_path, self._units)
        return self._overview


def readable_row(payload: Mapping[str, Any]) -> RowPayload | None:
    """A stored payload as a row, or None when it does not read as one (skipped, never fatal)."""
    try:
        return RowPayload.model_validate(payload)
    except ValidationError:
        return None


def _entry(repo: str, row: RowPayload) -> CodeEntry | None:
    """A CodeEntry from one row, or None when the row lacks a path, lines or text."""
    if not row.path or row.text is None or row.start_line is None or row.end_line is None:
        return None
    return CodeEntry(
        repo=repo,
        path=row.path,
        start_line=row.start_line,
        end_line=row.end_line,
        symbol=row.symbol or None,
        kind=row.kind or "window",
        language=row.language or "text",
        text=row.text,
    )


def _entry_key(entry: CodeEntry) -> tuple[str, int, int, str, str, str]:
    return (entry.path, entry.start_line, entry.end_line, entry.kind, entry.symbol or "", entry.text)
