"""Lines followed back through hunks, as `git log -L` does: which commit touched a range of lines,
and where those lines were in its parent.

Ranges are 0-based and half-open inside (`[start, end)`), 1-based and inclusive at the edges
(`LineRange`). A hunk's sides are its new (target) and old (parent) line ranges; a side with no
lines is an empty range at the place the other side's lines went. A hunk touches a range when its
target side overlaps it; an empty side strictly inside the range (lines deleted there) touches it,
one on its edge does not (git's `ranges_overlap`). Into the parent, the range keeps its untouched
lines, shifted by the hunks before them, and takes the parent side of each hunk that touched it;
what is left empty was born in that commit.
"""

from __future__ import annotations

from collections.abc import Sequence

from cluster.history.models import LineRange

__all__ = ["HunkSides", "Range", "across", "from_lines", "sides", "to_lines"]

Range = tuple[int, int]
HunkSides = tuple[Range, Range]  # (target, parent)


def sides(hunk: Sequence[int]) -> HunkSides:
    """(target, parent) 0-based ranges of a unified hunk `(old_start, old_count, new_start, new_count)`."""
    old_start, old_count, new_start, new_count = hunk
    target_start = new_start - 1 if new_count else new_start
    parent_start = old_start - 1 if old_count else old_start
    return (target_start, target_start + new_count), (parent_start, parent_start + old_count)


def from_lines(start: int, end: int) -> Range:
    return start - 1, end


def to_lines(ranges: Sequence[Range]) -> list[LineRange]:
    """1-based lines; an empty range (lines deleted there) is the line after which they were."""
    return [LineRange(start=a + 1, end=b) if b > a else LineRange(start=a, end=a) for a, b in ranges]


def across(ranges: Sequence[Range], hunks: Sequence[Sequence[int]]) -> tuple[list[Range], list[Range]]:
    """The parts of `ranges` the hunks touched (in the commit's lines; a deletion inside: the empty
    range where it was) and where `ranges` were in the parent (empty: every line born here)."""
    all_sides = sorted((sides(h) for h in hunks), key=lambda s: (s[0][0], s[0][1]))
    touched = [s for s in all_sides if any(_overlap(r, s[0]) for r in ranges)]
    touched_parts = [(max(t[0], r[0]), min(t[1], r[1])) for t, _ in touched for r in ranges if _overlap(r, t)]
    untouched = _minus(list(ranges), [t for t, _ in touched])
    parent = [_shift(segment, all_sides) for segment in untouched] + [p for _, p in touched if p[1] > p[0]]
    return touched_parts, _union(parent)


def _overlap(a: Range, b: Range) -> bool:
    return not (a[1] <= b[0] or b[1] <= a[0])


def _minus(ranges: list[Range], holes: list[Range]) -> list[Range]:
    out: list[Range] = []
    for start, end in ranges:
        pieces = [(start, end)]
        for hole_start, hole_end in holes:
            if hole_end <= hole_start:
                continue
            nxt: list[Range] = []
            for a, b in pieces:
                if hole_end <= a or b <= hole_start:
                    nxt.append((a, b))
                    continue
                if a < hole_start:
                    nxt.append((a, hole_start))
                if hole_end < b:
                    nxt.append((hole_end, b))
            pieces = nxt
        out.extend(p for p in pieces if p[1] > p[0])
    return out


def _shift(segment: Range, all_sides: Sequence[HunkSides]) -> Range:
    """An untouched segment's place in the parent: aligned at the end of the last hunk before it."""
    offset = 0
    for target, parent in all_sides:  # sorted: targets do not overlap
        if target[1] > segment[0]:
            break
        offset = parent[1] - target[1]
    return segment[0] + offset, segment[1] + offset


def _union(ranges: list[Range]) -> list[Range]:
    out: list[Range] = []
    for start, end in sorted(r for r in ranges if r[1] > r[0]):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out
