"""What a file's code-graph facts say, as tuples a test compares (tests/unit/graph/test_*_facts.py)."""

from __future__ import annotations

from cluster.graph import FileFacts

__all__ = ["calls_of", "definitions_of", "mentions_of"]


def definitions_of(facts: FileFacts) -> list[tuple[str, str, int, int, tuple[str, ...]]]:
    """(qualified, kind, line, end line, bases) of each definition, in source order."""
    return [(d.qualified, d.kind, d.line, d.end_line, d.bases) for d in facts.definitions]


def calls_of(facts: FileFacts) -> list[tuple[str, int, str | None, str | None]]:
    """(name, line, qualifier, enclosing) of each call, in source order."""
    return [(r.name, r.line, r.qualifier, r.enclosing) for r in facts.references if r.call]


def mentions_of(facts: FileFacts) -> set[tuple[str, int, str | None]]:
    """(name, line, qualifier) of each reference that is not a call."""
    return {(r.name, r.line, r.qualifier) for r in facts.references if not r.call}
