"""What the history of an index holds: commits, the files they touched and the symbols they changed."""

from __future__ import annotations

from enum import Enum

from pydantic import Field

from cluster.types import Strict


class Change(str, Enum):
    ADDED = "added"
    MODIFIED = "modified"
    REMOVED = "removed"
    RENAMED = "renamed"  # the same definition under another name (its body says so)
    MOVED = "moved"  # the same definition in another file (a file renamed, or the definition moved)


class LineRange(Strict):
    """Lines `start`..`end` (1-based, inclusive) of the file in the commit (the parent's for a removal)."""

    start: int = Field(ge=0)
    end: int = Field(ge=0)


class SymbolChange(Strict):
    """One definition a commit added, modified, removed, renamed or moved."""

    path: str
    symbol: str = Field(description="Its qualified name in the file (`Class.method`).")
    kind: str
    change: Change
    lines: list[LineRange] = Field(
        default_factory=list, description="The changed lines of the definition (none: moved unchanged)."
    )
    previous_path: str | None = Field(default=None, description="Renamed or moved: the path it had.")
    previous_symbol: str | None = Field(default=None, description="Renamed or moved: the name it had.")
    previous_lines: LineRange | None = Field(
        default=None, description="Modified, renamed or moved: all its lines in the parent."
    )


class FileChange(Strict):
    path: str
    status: str = Field(description="A added, M modified, D deleted, R renamed or moved.")
    previous_path: str | None = None
    hunks: list[tuple[int, int, int, int]] = Field(
        default_factory=list, description="Each hunk's (old start, old count, new start, new count), as diff -U0 says."
    )


class Span(Strict):
    """A definition's lines in the newest version of its file the history has seen."""

    symbol: str
    kind: str
    start: int = Field(ge=1)
    end: int = Field(ge=1)


class CommitRecord(Strict):
    """One commit of the indexed ref's first-parent history, as mined."""

    commit: str = Field(description="The full sha.")
    parent: str | None = Field(description="The first parent (None: a root commit).")
    merge: bool = False
    author: str
    authored_at: int
    committed_at: int = Field(description="Unix seconds; `since`/`until` dates compare with it, as git log does.")
    subject: str
    body: str = ""
    files: list[FileChange] = Field(default_factory=list)
    symbols: list[SymbolChange] = Field(default_factory=list)

    @property
    def message(self) -> str:
        return f"{self.subject}\n\n{self.body}".strip()
