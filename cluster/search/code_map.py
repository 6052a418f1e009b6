"""Non-semantic code tools over one index build: symbol search, file search, neighbours, overview.

Pure logic, no Ray: a `CodeMap` is built once from the payloads of every row of one build
(see `cluster.index.catalog.point_payload`) and answers from memory. `CodeMaps` keeps one per serving
build of an `IndexCatalog`, rebuilt when a new build starts serving; the index actor holds it.
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from pydantic import Field

from cluster.errors import ReadRefused, SamespaceError
from cluster.index.catalog import IndexCatalog
from cluster.index.tokens import IDENTIFIER, identifier_tokens
from cluster.types import PayloadFilter, Strict

SNIPPET_MAX_LINES = 35
SNIPPET_MAX_CHARS = 1400
README_MAX_CHARS = 1500
TOP_DIRS = 15
TOP_TYPES = 10
MOST_REFERENCED = 15
_DEFINITION_LINE_MAX_CHARS = 300

# Kinds that name a definition (rank before windows, sections and module runs in ties).
DEFINITION_KINDS = frozenset(
    {"function", "method", "class", "struct", "interface", "enum", "trait", "type", "impl", "record",
     "union", "macro"}
)
TYPE_KINDS = frozenset({"class", "struct", "interface", "trait", "record"})
_README_NAMES = ("README.md", "README", "README.rst", "README.markdown", "README.txt")

# Tier scores of search_symbols; every tier's range lies strictly below the one above it.
_SCORE_EXACT = 1.0
_SCORE_MEMBER = 0.95
_SCORE_EXACT_CI = 0.9
_SCORE_MEMBER_CI = 0.85
_PREFIX_BASE, _PREFIX_SPAN = 0.6, 0.2  # [0.6, 0.8]
_SUBSTRING_BASE, _SUBSTRING_SPAN = 0.4, 0.15  # [0.4, 0.55]
_TOKENS_SYMBOL, _TOKENS_DEFINITION = 0.3, 0.08  # (0, 0.38]

_FILE_MATCH_RANK = {"basename": 0, "stem": 1, "path": 2, "tokens": 3}


# --- models ------------------------------------------------------------------------------------


class CodeEntry(Strict):
    """One indexed chunk: where it is, what it defines, its exact source text."""

    repo: str
    path: str
    start_line: int
    end_line: int
    symbol: str | None = None
    kind: str
    language: str
    text: str


class SymbolHit(Strict):
    repo: str
    path: str
    start_line: int = Field(description="First line of the definition (of its first chunk).")
    end_line: int = Field(description="Last line of the definition, across its windows and members.")
    symbol: str | None = Field(description="None only for a chunk matched by its first line's tokens.")
    kind: str
    language: str
    score: float = Field(description="In (0, 1]; comparable across repositories.")
    match: str = Field(description="'exact' | 'member' | 'exact-ci' | 'prefix' | 'substring' | 'tokens'.")
    snippet: str = Field(description=f"First ≤{SNIPPET_MAX_LINES} lines / ≤{SNIPPET_MAX_CHARS} chars of the chunk.")


class FileSymbol(Strict):
    symbol: str
    kind: str
    start_line: int
    end_line: int


class FileHit(Strict):
    repo: str
    path: str
    language: str
    match: str = Field(description="'basename' | 'stem' | 'path' (substring) | 'tokens'.")
    symbols: list[FileSymbol] = Field(description="The file's definitions in line order, capped.")
    symbols_total: int = Field(description="How many definitions the file has (before the cap).")


class Neighbors(Strict):
    repo: str
    path: str
    line: int = Field(description="The line asked about.")
    anchor: CodeEntry = Field(description="The smallest chunk containing the line, else the nearest one.")
    before: list[CodeEntry] = Field(description="Chunks before the anchor, in line order.")
    after: list[CodeEntry] = Field(description="Chunks after the anchor, in line order.")


class TypeEntry(Strict):
    symbol: str
    kind: str
    path: str
    line: int
    references: int = Field(description="Other chunks that mention the type's name as a whole word.")


class ReferencedSymbol(Strict):
    symbol: str
    kind: str
    path: str
    line: int
    references: int = Field(description="Other chunks that mention the name's last component as a whole word.")
    definitions: int = Field(description="How many definitions share that last component.")


class RepoOverview(Strict):
    repo: str
    files: int
    chunks: int
    languages: dict[str, int] = Field(description="Files per language, most first.")
    top_dirs: dict[str, int] = Field(description=f"Files per top-level folder ('.' for the root), ≤{TOP_DIRS}.")
    top_types: list[TypeEntry] = Field(
        description=f"Classes, structs, interfaces, traits; ≤{TOP_TYPES}, most referenced first."
    )
    most_referenced: list[ReferencedSymbol] = Field(
        description=f"≤{MOST_REFERENCED} definitions, most referenced first."
    )
    readme: str | None = Field(description=f"First ≤{README_MAX_CHARS} chars of the root README, if indexed.")


# --- helpers -----------------------------------------------------------------------------------


def kind_rank(kind: str) -> int:
    """0 for definitions (function, method, class, ...), 1 for windows, sections and module runs."""
    return 0 if kind in DEFINITION_KINDS else 1


def symbol_hit_key(hit: SymbolHit) -> tuple[float, int, str, str, int]:
    return (-hit.score, kind_rank(hit.kind), hit.repo, hit.path, hit.start_line)


def file_hit_key(hit: FileHit) -> tuple[int, int, str, str]:
    return (_FILE_MATCH_RANK.get(hit.match, len(_FILE_MATCH_RANK)), len(hit.path), hit.path, hit.repo)


def merge_symbol_hits(lists: Iterable[Sequence[SymbolHit]], limit: int) -> list[SymbolHit]:
    """Per-repository results merged best first (score, then the same tie rules), cut to `limit`."""
    merged = [hit for hits in lists for hit in hits]
    merged.sort(key=symbol_hit_key)
    return merged[: max(limit, 0)]


def merge_file_hits(lists: Iterable[Sequence[FileHit]], limit: int) -> list[FileHit]:
    """Per-repository file hits merged in search_files order, cut to `limit`."""
    merged = [hit for hits in lists for hit in hits]
    merged.sort(key=file_hit_key)
    return merged[: max(limit, 0)]


def snippet(text: str) -> str:
    """The first ≤35 lines of `text`, cut at a line end to ≤1400 chars (a hard cut if one line is longer)."""
    head = "\n".join(text.split("\n", SNIPPET_MAX_LINES)[:SNIPPET_MAX_LINES])
    if len(head) <= SNIPPET_MAX_CHARS:
        return head
    cut = head.rfind("\n", 0, SNIPPET_MAX_CHARS + 1)
    return head[:cut] if cut > 0 else head[:SNIPPET_MAX_CHARS]


def _normalise_symbol(text: str) -> str:
    """C++/Ruby/PHP member separators as '.', so 'A::b', 'A#b' and 'A->b' read as 'A.b'."""
    return text.replace("::", ".").replace("->", ".").replace("#", ".")


def _normalise_query(query: str) -> str:
    query = _normalise_symbol(query.strip())
    while query.endswith("()"):
        query = query[:-2].rstrip()
    return query


def _clean_path(path: str) -> str:
    path = path.strip().replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path.lstrip("/")


def _names(symbol: str, kind: str) -> tuple[str, ...]:
    """The names a symbol goes by: itself, or each of a Go group 'A, B'. Headings stay whole."""
    normalised = _normalise_symbol(symbol)
    if kind == "section" or "," not in normalised:
        return (normalised,)
    parts = tuple(part.strip() for part in normalised.split(","))
    if any(not part or " " in part for part in parts):
        return (normalised,)
    return parts


def _member_suffixes(name: str, kind: str) -> tuple[str, ...]:
    """Proper dotted suffixes of a qualified name: 'A.B.c' → ('B.c', 'c'). None for headings."""
    if "." not in name or kind == "section" or " " in name or "." not in name.strip("."):
        return ()
    parts = name.split(".")
    return tuple(".".join(parts[i:]) for i in range(1, len(parts)) if parts[i])


def _last_component(name: str, kind: str) -> str:
    suffixes = _member_suffixes(name, kind)
    return suffixes[-1] if suffixes else name


def _definition_line(text: str, name: str | None) -> str:
    """The line naming the definition (the first holding its last name), else the first non-blank one."""
    first = ""
    for line in text.split("\n"):
        if not line.strip():
            continue
        if not first:
            first = line
            if name is None:
                break
        if name is not None and name in line:
            return line[:_DEFINITION_LINE_MAX_CHARS]
    return first[:_DEFINITION_LINE_MAX_CHARS]


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _entry(repo: str, payload: Mapping[str, Any]) -> CodeEntry | None:
    """A CodeEntry from one point payload, or None when the row lacks a path, lines or text."""
    path, text = payload.get("path"), payload.get("text")
    start, end = _as_int(payload.get("start_line")), _as_int(payload.get("end_line"))
    if not isinstance(path, str) or not path or not isinstance(text, str) or start is None or end is None:
        return None
    symbol = payload.get("symbol")
    kind = payload.get("kind")
    language = payload.get("language")
    return CodeEntry(
        repo=repo,
        path=path,
        start_line=start,
        end_line=end,
        symbol=symbol if isinstance(symbol, str) and symbol else None,
        kind=kind if isinstance(kind, str) and kind else "window",
        language=language if isinstance(language, str) and language else "text",
        text=text,
    )


def _entry_key(entry: CodeEntry) -> tuple[str, int, int, str, str, str]:
    return (entry.path, entry.start_line, entry.end_line, entry.kind, entry.symbol or "", entry.text)


@dataclass(frozen=True, slots=True)
class _Unit:
    """What symbol search ranks: one definition (its windows merged) or one symbol-less chunk."""

    path: str
    start_line: int
    end_line: int
    symbol: str | None
    kind: str
    language: str
    text: str  # of the first chunk
    chunks: tuple[int, ...]  # indexes into CodeMap.entries
    names: tuple[str, ...]  # normalised names (several for a Go type group)
    suffixes: tuple[str, ...]  # proper dotted suffixes of the names
    symbol_tokens: frozenset[str]
    definition_tokens: frozenset[str]

    @property
    def rank(self) -> int:
        return kind_rank(self.kind)


# --- the map -----------------------------------------------------------------------------------


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
        self._units: list[_Unit] = []
        self._units_by_path: dict[str, list[int]] = {}
        for path, indexes in self._by_path.items():
            self._units_by_path[path] = self._add_units(indexes)
        self._index_units()
        self._overview: RepoOverview | None = None

    @classmethod
    def from_payloads(cls, repo: str, payloads: Iterable[Mapping[str, Any]]) -> CodeMap:
        """Build from point payloads (keys of `point_payload`); rows without path, lines or text are skipped."""
        entries = (_entry(repo, payload) for payload in payloads)
        return cls(repo, (entry for entry in entries if entry is not None))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CodeMap):
            return NotImplemented
        return self.repo == other.repo and self.entries == other.entries

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"CodeMap(repo={self.repo!r}, files={len(self._by_path)}, chunks={len(self.entries)})"

    @property
    def paths(self) -> list[str]:
        return sorted(self._by_path)

    def file_entries(self, path: str) -> list[CodeEntry]:
        """The chunks of one file by (start_line, end_line); ReadRefused for a file not indexed."""
        indexes = self._by_path.get(_clean_path(path))
        if indexes is None:
            raise ReadRefused(self.repo, path, "not an indexed file of this repository")
        return [self.entries[i] for i in indexes]

    # ---- building ---------------------------------------------------------------------------
    def _add_units(self, indexes: list[int]) -> list[int]:
        """Units of one file. The windows of one definition (same symbol and kind, overlapping or
        adjacent) make one unit; a container (class, impl, ...) reaches over the members that
        follow it (symbols 'Name.member') and takes in its own later runs of lines."""
        groups: list[list[int]] = []
        group_end = 0
        for index in indexes:  # sorted by start_line, end_line
            entry = self.entries[index]
            if entry.symbol is not None and groups:
                first = self.entries[groups[-1][0]]
                if first.symbol == entry.symbol and first.kind == entry.kind and entry.start_line <= group_end + 1:
                    groups[-1].append(index)
                    group_end = max(group_end, entry.end_line)
                    continue
            groups.append([index])
            group_end = entry.end_line
        unit_ids: list[int] = []
        absorbed: set[int] = set()
        for position, group in enumerate(groups):
            if position in absorbed:
                continue
            first = self.entries[group[0]]
            chunks = list(group)
            end = max(self.entries[i].end_line for i in group)
            if first.symbol is not None and first.kind != "section":
                member_prefix = _normalise_symbol(first.symbol) + "."
                seen_member = False
                for later_position in range(position + 1, len(groups)):
                    later = groups[later_position]
                    entry = self.entries[later[0]]
                    if entry.symbol is not None and _normalise_symbol(entry.symbol).startswith(member_prefix):
                        seen_member = True
                    elif seen_member and entry.symbol == first.symbol and entry.kind == first.kind:
                        absorbed.add(later_position)
                        chunks.extend(later)
                    else:
                        break
                    end = max(end, *(self.entries[i].end_line for i in later))
            unit_ids.append(len(self._units))
            self._units.append(self._unit(first, tuple(chunks), end))
        return unit_ids

    @staticmethod
    def _unit(first: CodeEntry, chunks: tuple[int, ...], end: int) -> _Unit:
        if first.symbol is None:
            names: tuple[str, ...] = ()
            suffixes: tuple[str, ...] = ()
            symbol_tokens: frozenset[str] = frozenset()
            definition = _definition_line(first.text, None)
        else:
            names = _names(first.symbol, first.kind)
            suffixes = tuple(s for name in names for s in _member_suffixes(name, first.kind))
            symbol_tokens = frozenset(identifier_tokens(first.symbol))
            definition = _definition_line(first.text, _last_component(names[0], first.kind))
        return _Unit(
            path=first.path,
            start_line=first.start_line,
            end_line=end,
            symbol=first.symbol,
            kind=first.kind,
            language=first.language,
            text=first.text,
            chunks=chunks,
            names=names,
            suffixes=suffixes,
            symbol_tokens=symbol_tokens,
            definition_tokens=frozenset(identifier_tokens(definition)),
        )

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
            self._lowered[_normalise_symbol(unit.symbol).lower()].append(unit_id)
            for name in {_normalise_symbol(unit.symbol), *unit.names}:
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

    # ---- symbol search ----------------------------------------------------------------------
    def search_symbols(self, query: str, limit: int = 10) -> list[SymbolHit]:
        """Definitions best first: exact > member > exact-ci > prefix > substring > tokens.

        `query` is an identifier ('parse_config', 'TaxTable.lookup', 'getUserById') or a few words.
        Ties: definitions before windows/sections/module runs, then path, then line.
        """
        normalised = _normalise_query(query)
        if not normalised or limit <= 0:
            return []
        lowered = normalised.lower()
        best: dict[int, tuple[float, str]] = {}

        def offer(unit_ids: Iterable[int], score: float, match: str) -> None:
            for unit_id in unit_ids:
                current = best.get(unit_id)
                if current is None or score > current[0]:
                    best[unit_id] = (score, match)

        offer(self._exact.get(normalised, ()), _SCORE_EXACT, "exact")
        offer(self._member.get(normalised, ()), _SCORE_MEMBER, "member")
        offer(self._exact_ci.get(lowered, ()), _SCORE_EXACT_CI, "exact-ci")
        offer(self._member_ci.get(lowered, ()), _SCORE_MEMBER_CI, "member")
        for symbol, suffixes, unit_ids in self._scan:
            matched = next((s for s in (symbol, *suffixes) if s.startswith(lowered)), None)
            if matched is not None:
                offer(unit_ids, _PREFIX_BASE + _PREFIX_SPAN * len(lowered) / len(matched), "prefix")
            elif lowered in symbol:
                offer(unit_ids, _SUBSTRING_BASE + _SUBSTRING_SPAN * len(lowered) / len(symbol), "substring")
        self._offer_tokens(normalised, offer)
        ranked = sorted(
            best.items(),
            key=lambda item: (-item[1][0], self._units[item[0]].rank, self._units[item[0]].path,
                              self._units[item[0]].start_line),
        )
        return [self._hit(self._units[unit_id], score, match) for unit_id, (score, match) in ranked[:limit]]

    def _offer_tokens(self, query: str, offer: Any) -> None:
        tokens = set(identifier_tokens(query))
        if not tokens:
            return
        candidates: set[int] = set()
        for token in tokens:
            candidates.update(self._symbol_postings.get(token, ()))
            candidates.update(self._definition_postings.get(token, ()))
        for unit_id in candidates:
            unit = self._units[unit_id]
            shared = len(tokens & unit.symbol_tokens)
            jaccard = shared / len(tokens | unit.symbol_tokens) if shared else 0.0
            found = len(tokens & unit.definition_tokens) / len(tokens)
            score = _TOKENS_SYMBOL * jaccard + _TOKENS_DEFINITION * found
            if score > 0:
                offer((unit_id,), round(score, 6), "tokens")

    def _hit(self, unit: _Unit, score: float, match: str) -> SymbolHit:
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
        cleaned = _clean_path(query)
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
            found.append(((_FILE_MATCH_RANK[match], len(path), path), path, match))
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
        `count` chunks on each side. Each step takes the nearest chunk that does not overlap
        what is already shown, unless that would skip lines an overlapping chunk (a window) covers."""
        chunks = self.file_entries(path)
        anchor = min(chunks, key=lambda c: _anchor_key(c, line))
        shown = {_span_key(anchor)}
        before: list[CodeEntry] = []
        frontier = anchor.start_line
        while len(before) < count:
            pool = [c for c in chunks if c.start_line < frontier and c.end_line < anchor.end_line
                    and _span_key(c) not in shown]
            chosen = _step_before(pool, frontier)
            if chosen is None:
                break
            before.append(chosen)
            shown.add(_span_key(chosen))
            frontier = chosen.start_line
        after: list[CodeEntry] = []
        frontier = anchor.end_line
        while len(after) < count:
            pool = [c for c in chunks if c.end_line > frontier and c.start_line > anchor.start_line
                    and _span_key(c) not in shown]
            chosen = _step_after(pool, frontier)
            if chosen is None:
                break
            after.append(chosen)
            shown.add(_span_key(chosen))
            frontier = chosen.end_line
        return Neighbors(
            repo=self.repo, path=anchor.path, line=line, anchor=anchor, before=before[::-1], after=after
        )

    # ---- overview ---------------------------------------------------------------------------
    def overview(self) -> RepoOverview:
        """Files, chunks, languages, top folders, main types, most referenced symbols, README head."""
        if self._overview is None:
            self._overview = self._build_overview()
        return self._overview

    def _build_overview(self) -> RepoOverview:
        languages: Counter[str] = Counter()
        dirs: Counter[str] = Counter()
        for path, indexes in self._by_path.items():
            languages[self.entries[indexes[0]].language] += 1
            dirs[path.split("/", 1)[0] if "/" in path else "."] += 1
        references = self._reference_counts()
        types: dict[tuple[str, str], TypeEntry] = {}
        for unit in self._units:
            if unit.symbol is None or unit.kind not in TYPE_KINDS or (unit.symbol, unit.path) in types:
                continue
            types[(unit.symbol, unit.path)] = TypeEntry(
                symbol=unit.symbol, kind=unit.kind, path=unit.path, line=unit.start_line,
                references=references.get(_last_component(unit.names[0], unit.kind), (0, 0, unit))[0],
            )
        top_types = sorted(types.values(), key=lambda t: (-t.references, t.path, t.line))[:TOP_TYPES]
        referenced = sorted(
            (
                ReferencedSymbol(
                    symbol=unit.symbol or name, kind=unit.kind, path=unit.path, line=unit.start_line,
                    references=count, definitions=definitions,
                )
                for name, (count, definitions, unit) in references.items()
                if count > 0
            ),
            key=lambda r: (-r.references, r.path, r.line, r.symbol),
        )[:MOST_REFERENCED]
        return RepoOverview(
            repo=self.repo,
            files=len(self._by_path),
            chunks=len(self.entries),
            languages=dict(sorted(languages.items(), key=lambda kv: (-kv[1], kv[0]))),
            top_dirs=dict(sorted(dirs.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_DIRS]),
            top_types=top_types,
            most_referenced=referenced,
            readme=self._readme(),
        )

    def _reference_counts(self) -> dict[str, tuple[int, int, _Unit]]:
        """last name → (chunks outside its definitions that mention it as a whole word,
        number of definitions, the first definition by rank/path/line)."""
        by_name: dict[str, list[_Unit]] = defaultdict(list)
        for unit in self._units:
            if unit.symbol is None or unit.kind == "section":
                continue
            for name in unit.names:
                last = _last_component(name, unit.kind)
                if len(last) >= 3 and IDENTIFIER.fullmatch(last) and not (last.startswith("__") and last.endswith("__")):
                    by_name[last].append(unit)
        if not by_name:
            return {}
        names = set(by_name)
        mentions: list[set[str]] = [set(IDENTIFIER.findall(entry.text)) & names for entry in self.entries]
        frequency: Counter[str] = Counter(name for found in mentions for name in found)
        counts: dict[str, tuple[int, int, _Unit]] = {}
        for name, units in by_name.items():
            own = {index for unit in units for index in unit.chunks}
            count = frequency[name] - sum(1 for index in own if name in mentions[index])
            first = min(units, key=lambda u: (u.rank, u.path, u.start_line))
            counts[name] = (count, len(units), first)
        return counts

    def _readme(self) -> str | None:
        candidates = {path.lower(): path for path in self._by_path if "/" not in path}
        for name in _README_NAMES:
            path = name if name in self._by_path else candidates.get(name.lower())
            if path is None:
                continue
            lines: dict[int, str] = {}
            for entry in self.file_entries(path):
                for offset, text in enumerate(entry.text.split("\n")):
                    lines.setdefault(entry.start_line + offset, text)
            first, last = min(lines), max(lines)
            text = "\n".join(lines.get(number, "") for number in range(first, last + 1))
            return text[:README_MAX_CHARS]
        return None


def _span_key(entry: CodeEntry) -> tuple[int, int, str]:
    return (entry.start_line, entry.end_line, entry.text)


def _anchor_key(entry: CodeEntry, line: int) -> tuple[int, int, int, int]:
    if entry.start_line <= line <= entry.end_line:
        return (0, entry.end_line - entry.start_line, entry.start_line, entry.end_line)
    distance = entry.start_line - line if line < entry.start_line else line - entry.end_line
    return (1, distance, entry.start_line, entry.end_line)


def _step_before(pool: list[CodeEntry], frontier: int) -> CodeEntry | None:
    """Nearest chunk ending before `frontier`; an overlapping one (start < frontier ≤ end) instead
    when the nearest would leave lines between it and the frontier that the overlapping one covers."""
    if not pool:
        return None
    separate = [c for c in pool if c.end_line < frontier]
    overlapping = [c for c in pool if c.end_line >= frontier]
    nearest = max(separate, key=lambda c: (c.end_line, c.start_line, -len(c.text)), default=None)
    if overlapping and (nearest is None or nearest.end_line < frontier - 1):
        return min(overlapping, key=lambda c: (c.start_line, -c.end_line))
    return nearest


def _step_after(pool: list[CodeEntry], frontier: int) -> CodeEntry | None:
    """Mirror of `_step_before` for chunks after the frontier."""
    if not pool:
        return None
    separate = [c for c in pool if c.start_line > frontier]
    overlapping = [c for c in pool if c.start_line <= frontier]
    nearest = min(separate, key=lambda c: (c.start_line, c.end_line, len(c.text)), default=None)
    if overlapping and (nearest is None or nearest.start_line > frontier + 1):
        return max(overlapping, key=lambda c: (c.end_line, -c.start_line))
    return nearest


# --- per serving build -------------------------------------------------------------------------


class CodeMaps:
    """One CodeMap per index, built lazily from every row of its serving build and cached by build id.

    A new build of an index rebuilds its map on the next read; maps of builds no longer serving
    (superseded or dropped indexes) are dropped on every read. Not thread-safe: one owner.
    """

    def __init__(self, catalog: IndexCatalog) -> None:
        self._catalog = catalog
        self._maps: dict[str, tuple[str, CodeMap]] = {}  # index name → (build, map)

    def cached_builds(self) -> dict[str, str]:
        return {name: build for name, (build, _) in self._maps.items()}

    def prune(self) -> dict[str, str]:
        """Drop maps whose build no longer serves; return every serving index and its build."""
        serving = {name: self._catalog.record(name).build for name in self._catalog.names()}
        for name in [n for n, (build, _) in self._maps.items() if serving.get(n) != build]:
            del self._maps[name]
        return serving

    def get(self, repo: str) -> CodeMap:
        """The map of the serving build of `repo`; IndexNotFound for an unknown repo."""
        serving = self.prune()
        build = serving.get(repo)
        if build is None:
            build = self._catalog.record(repo).build  # raises IndexNotFound, naming the ones that exist
        cached = self._maps.get(repo)
        if cached is not None and cached[0] == build:
            return cached[1]
        rows = self._catalog.scroll(repo, PayloadFilter(), sys.maxsize)
        code_map = CodeMap.from_payloads(repo, (row.payload for row in rows))
        self._maps[repo] = (build, code_map)
        return code_map

    def resolve(self, repo: str | None) -> str:
        """`repo`, or the only index when None; an error listing the indexes when None is ambiguous."""
        if repo is not None:
            return repo
        names = self._catalog.names()
        if len(names) == 1:
            return names[0]
        listed = ", ".join(names) or "none"
        raise SamespaceError(f"name a repo: this tool reads one repository; indexed repos: {listed}")

    def _targets(self, repo: str | None) -> list[str]:
        return [repo] if repo is not None else self._catalog.names()

    def search_symbols(self, repo: str | None, query: str, limit: int = 10) -> list[SymbolHit]:
        return merge_symbol_hits((self.get(name).search_symbols(query, limit) for name in self._targets(repo)), limit)

    def search_files(
        self, repo: str | None, query: str, limit: int = 8, symbols_per_file: int = 12
    ) -> list[FileHit]:
        return merge_file_hits(
            (self.get(name).search_files(query, limit, symbols_per_file) for name in self._targets(repo)), limit
        )

    def neighbors(self, repo: str | None, path: str, line: int, count: int = 2) -> Neighbors:
        return self.get(self.resolve(repo)).neighbors(path, line, count)

    def overview(self, repo: str | None) -> RepoOverview:
        return self.get(self.resolve(repo)).overview()
