"""The graph's parts, as one build's rows give them: definitions and reference sites, numbered."""

from __future__ import annotations

from dataclasses import dataclass

from cluster.types import Definition, ImportBinding, Reference


@dataclass(frozen=True)
class GraphRow:
    """What one stored row gives the graph: its file and the facts on its lines."""

    path: str
    language: str
    definitions: tuple[Definition, ...] = ()
    references: tuple[Reference, ...] = ()
    imports: tuple[ImportBinding, ...] = ()


@dataclass(frozen=True)
class DefNode:
    """A definition of the graph: where it is and what it is called, in its file and its module."""

    id: int
    path: str
    language: str
    module: str  # the dotted key of its file (`cluster.graph.module_of`)
    name: str
    qualified: str  # in its file: `Class.method`
    kind: str
    line: int
    end_line: int
    bases: tuple[str, ...]

    @property
    def container(self) -> str | None:
        """The qualified name of the definition it is nested in (None: top level)."""
        head, dot, _ = self.qualified.rpartition(".")
        return head if dot else None

    @property
    def full(self) -> str:
        """Its name qualified by its module: `pkg.mod.Class.method`."""
        return f"{self.module}.{self.qualified}" if self.module else self.qualified


@dataclass(frozen=True)
class RefSite:
    """A reference of the graph: a call or mention of `name` at a line, inside `enclosing`."""

    id: int
    path: str
    language: str
    name: str
    line: int
    qualifier: str | None
    enclosing: str | None
    call: bool
