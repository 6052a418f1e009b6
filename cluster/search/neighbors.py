"""The chunks around a line of a file, for the `neighbors` tool.

The anchor is the smallest chunk containing the line, else the nearest one. Each step outwards
takes the nearest chunk that does not overlap what is already shown, unless that would skip lines
an overlapping chunk (a window) covers.
"""

from __future__ import annotations

from collections.abc import Sequence

from cluster.search.models import CodeEntry, Neighbors

__all__ = ["neighbors_of"]


def neighbors_of(repo: str, chunks: Sequence[CodeEntry], line: int, count: int) -> Neighbors:
    """The chunk at `line` among one file's `chunks` (not empty) and up to `count` chunks on each side."""
    anchor = min(chunks, key=lambda c: _anchor_key(c, line))
    shown = {_span_key(anchor)}
    before: list[CodeEntry] = []
    frontier = anchor.start_line
    while len(before) < count:
        pool = [
            c for c in chunks if c.start_line < frontier and c.end_line < anchor.end_line and _span_key(c) not in shown
        ]
        chosen = _step_before(pool, frontier)
        if chosen is None:
            break
        before.append(chosen)
        shown.add(_span_key(chosen))
        frontier = chosen.start_line
    after: list[CodeEntry] = []
    frontier = anchor.end_line
    while len(after) < count:
        pool = [
            c
            for c in chunks
            if c.end_line > frontier and c.start_line > anchor.start_line and _span_key(c) not in shown
        ]
        chosen = _step_after(pool, frontier)
        if chosen is None:
            break
        after.append(chosen)
        shown.add(_span_key(chosen))
        frontier = chosen.end_line
    return Neighbors(repo=repo, path=anchor.path, line=line, anchor=anchor, before=before[::-1], after=after)


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
