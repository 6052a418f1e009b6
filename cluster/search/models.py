"""What the code tools answer (pydantic models for MCP and the ask path), and their size limits.

A `CodeEntry` is one indexed chunk; the rest are the answers of `CodeMap`'s look-ups: symbol hits,
file hits, neighbouring chunks and a repository overview. `snippet` is the head of a chunk a
symbol hit shows.
"""

from __future__ import annotations

from pydantic import Field

from cluster.types import Strict

__all__ = [
    "MOST_REFERENCED",
    "README_MAX_CHARS",
    "SNIPPET_MAX_CHARS",
    "SNIPPET_MAX_LINES",
    "TOP_DIRS",
    "TOP_TYPES",
    "CodeEntry",
    "FileHit",
    "FileSymbol",
    "Neighbors",
    "ReferencedSymbol",
    "RepoOverview",
    "SymbolHit",
    "TypeEntry",
    "snippet",
]

SNIPPET_MAX_LINES = 35
SNIPPET_MAX_CHARS = 1400
README_MAX_CHARS = 1500
TOP_DIRS = 15
TOP_TYPES = 10
MOST_REFERENCED = 15
MOST_CALLED = 10


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


class CalledSymbol(Strict):
    symbol: str
    kind: str
    path: str
    line: int
    calls: int = Field(description="Call sites the code graph resolves to it (surely or as one of two).")


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
    most_called: list[CalledSymbol] = Field(
        default_factory=list, description=f"≤{MOST_CALLED} functions and methods with the most resolved call sites."
    )


def snippet(text: str) -> str:
    """The first ≤35 lines of `text`, cut at a line end to ≤1400 chars (a hard cut if one line is longer)."""
    head = "\n".join(text.split("\n", SNIPPET_MAX_LINES)[:SNIPPET_MAX_LINES])
    if len(head) <= SNIPPET_MAX_CHARS:
        return head
    cut = head.rfind("\n", 0, SNIPPET_MAX_CHARS + 1)
    return head[:cut] if cut > 0 else head[:SNIPPET_MAX_CHARS]
