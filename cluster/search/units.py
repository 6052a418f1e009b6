"""What symbol search ranks: units, and the names a symbol goes by.

A unit is one definition (its windows merged, a container reaching over its members) or one
symbol-less chunk. Names are normalised so that 'A::b', 'A#b' and 'A->b' read as 'A.b', and a
qualified name also answers to its dotted suffixes ('A.B.c' to 'B.c' and 'c').
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cluster.index.tokens import identifier_tokens
from cluster.search.models import CodeEntry
from cluster.search.ranking import kind_rank

__all__ = [
    "Unit",
    "clean_path",
    "file_units",
    "last_component",
    "normalise_query",
    "normalise_symbol",
]

_DEFINITION_LINE_MAX_CHARS = 300


@dataclass(frozen=True, slots=True)
class Unit:
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


def normalise_symbol(text: str) -> str:
    """C++/Ruby/PHP member separators as '.', so 'A::b', 'A#b' and 'A->b' read as 'A.b'."""
    return text.replace("::", ".").replace("->", ".").replace("#", ".")


def normalise_query(query: str) -> str:
    query = normalise_symbol(query.strip())
    while query.endswith("()"):
        query = query[:-2].rstrip()
    return query


def clean_path(path: str) -> str:
    path = path.strip().replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path.lstrip("/")


def last_component(name: str, kind: str) -> str:
    suffixes = _member_suffixes(name, kind)
    return suffixes[-1] if suffixes else name


def file_units(entries: Sequence[CodeEntry], indexes: list[int]) -> list[Unit]:
    """Units of one file, from the indexes of its chunks in `entries` (sorted by start, end line).

    The windows of one definition (same symbol and kind, overlapping or adjacent) make one unit;
    a container (class, impl, ...) reaches over the members that follow it (symbols
    'Name.member') and takes in its own later runs of lines.
    """
    groups: list[list[int]] = []
    group_end = 0
    for index in indexes:
        entry = entries[index]
        if entry.symbol is not None and groups:
            first = entries[groups[-1][0]]
            if first.symbol == entry.symbol and first.kind == entry.kind and entry.start_line <= group_end + 1:
                groups[-1].append(index)
                group_end = max(group_end, entry.end_line)
                continue
        groups.append([index])
        group_end = entry.end_line
    units: list[Unit] = []
    absorbed: set[int] = set()
    for position, group in enumerate(groups):
        if position in absorbed:
            continue
        first = entries[group[0]]
        chunks = list(group)
        end = max(entries[i].end_line for i in group)
        if first.symbol is not None and first.kind != "section":
            member_prefix = normalise_symbol(first.symbol) + "."
            seen_member = False
            for later_position in range(position + 1, len(groups)):
                later = groups[later_position]
                entry = entries[later[0]]
                if entry.symbol is not None and normalise_symbol(entry.symbol).startswith(member_prefix):
                    seen_member = True
                elif seen_member and entry.symbol == first.symbol and entry.kind == first.kind:
                    absorbed.add(later_position)
                    chunks.extend(later)
                else:
                    break
                end = max(end, *(entries[i].end_line for i in later))
        units.append(_unit(first, tuple(chunks), end))
    return units


def _unit(first: CodeEntry, chunks: tuple[int, ...], end: int) -> Unit:
    if first.symbol is None:
        names: tuple[str, ...] = ()
        suffixes: tuple[str, ...] = ()
        symbol_tokens: frozenset[str] = frozenset()
        definition = _definition_line(first.text, None)
    else:
        names = _names(first.symbol, first.kind)
        suffixes = tuple(s for name in names for s in _member_suffixes(name, first.kind))
        symbol_tokens = frozenset(identifier_tokens(first.symbol))
        definition = _definition_line(first.text, last_component(names[0], first.kind))
    return Unit(
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


def _names(symbol: str, kind: str) -> tuple[str, ...]:
    """The names a symbol goes by: itself, or each of a Go group 'A, B'. Headings stay whole."""
    normalised = normalise_symbol(symbol)
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
