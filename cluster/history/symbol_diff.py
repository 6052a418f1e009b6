"""Which definitions a commit's hunks changed: the hunks of one file laid over the definitions of its
two versions (the parent's and the commit's), then renames and moves paired by their bodies.

A definition changed when a hunk's lines meet its span on either side (a deletion or an insertion
strictly inside it counts too). Every level is judged on its own span: a method's change is its
class's change too. A definition only in the commit's version was added, one only in the parent's
removed; an added and a removed one of the same kind whose bodies match are one definition renamed
(another name) or moved (another file, or its file renamed), and history follows it through.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from cluster.history.git_log import Hunk
from cluster.history.models import Change, LineRange, SymbolChange
from cluster.types import Definition

__all__ = ["FileSymbols", "FileVersion", "Unpaired", "file_changes", "pair_moves"]

SAME_BODY = 0.8  # body similarity from which an added and a removed definition are one renamed or moved
SHORT_BODY_LINES = 40  # bodies of this many lines together or fewer compare by characters
MAX_PAIRING = 400  # added x removed pairs compared per commit, at most (a vendored tree is not paired)


@dataclass(frozen=True)
class FileVersion:
    """One version of a file: its path, lines and definitions."""

    path: str
    lines: Sequence[str]
    definitions: Sequence[Definition]

    def body(self, d: Definition) -> list[str]:
        """The definition's lines after its first (the name line), stripped: what a rename keeps."""
        return [line.strip() for line in self.lines[d.line : d.end_line] if line.strip()]


@dataclass(frozen=True)
class Unpaired:
    """An added or removed definition, with its body, waiting to be paired with its other half."""

    change: SymbolChange
    body: list[str]


@dataclass
class FileSymbols:
    """One file's definitions changed; the added and removed ones left unpaired within the file."""

    changes: list[SymbolChange]
    added: list[Unpaired]
    removed: list[Unpaired]


def file_changes(old: FileVersion | None, new: FileVersion | None, hunks: Sequence[Hunk]) -> FileSymbols:
    """The definitions of one file the hunks changed, added or removed (renames within it paired)."""
    old_defs = _keyed(old.definitions) if old else {}
    new_defs = _keyed(new.definitions) if new else {}
    out = FileSymbols([], [], [])
    moved_from = old.path if old is not None and new is not None and old.path != new.path else None
    for key, d in new_defs.items():
        assert new is not None
        before = old_defs.get(key)
        if before is None:
            change = _change(new.path, d, Change.ADDED, [LineRange(start=d.line, end=d.end_line)])
            out.added.append(Unpaired(change, new.body(d)))
            continue
        lines = _touched(d, before, hunks)
        if lines is not None:
            previous = LineRange(start=before.line, end=before.end_line)
            symbol_before = d.qualified if moved_from else None
            out.changes.append(_change(new.path, d, Change.MODIFIED, lines, moved_from, symbol_before, previous))
        elif moved_from is not None:
            out.changes.append(_change(new.path, d, Change.MOVED, [], moved_from, d.qualified))
    for key, d in old_defs.items():
        if key not in new_defs:
            assert old is not None
            change = _change(old.path, d, Change.REMOVED, [LineRange(start=d.line, end=d.end_line)])
            out.removed.append(Unpaired(change, old.body(d)))
    out.added, out.removed, paired = pair_moves(out.added, out.removed)
    out.changes.extend(paired)
    return out


def pair_moves(
    added: list[Unpaired], removed: list[Unpaired]
) -> tuple[list[Unpaired], list[Unpaired], list[SymbolChange]]:
    """Pair added with removed definitions of the same kind whose bodies match, best first: each pair
    is one change, RENAMED (another name) or MOVED (the same name in another file). Returns what is
    left unpaired on each side and the pairs."""
    if not added or not removed or len(added) * len(removed) > MAX_PAIRING:
        return added, removed, []
    scored: list[tuple[float, int, int]] = []
    for i, a in enumerate(added):
        for j, r in enumerate(removed):
            if a.change.kind != r.change.kind:
                continue
            same_name = a.change.symbol.rpartition(".")[2] == r.change.symbol.rpartition(".")[2]
            ratio = _similarity(a.body, r.body)
            if ratio >= SAME_BODY or (same_name and a.change.path != r.change.path and ratio >= SAME_BODY / 2):
                scored.append((ratio + (0.5 if same_name else 0.0), i, j))
    scored.sort(key=lambda item: (-item[0], item[1], item[2]))
    used_a: set[int] = set()
    used_r: set[int] = set()
    pairs: list[SymbolChange] = []
    for _, i, j in scored:
        if i in used_a or j in used_r:
            continue
        used_a.add(i)
        used_r.add(j)
        new, old = added[i].change, removed[j].change
        change = Change.MOVED if new.path != old.path and new.symbol == old.symbol else Change.RENAMED
        update = {
            "change": change,
            "previous_path": old.path,
            "previous_symbol": old.symbol,
            "previous_lines": old.lines[0] if old.lines else None,
        }
        pairs.append(new.model_copy(update=update))  # its lines: all of it, new where it is now
    rest_a = [u for i, u in enumerate(added) if i not in used_a]
    rest_r = [u for j, u in enumerate(removed) if j not in used_r]
    return rest_a, rest_r, pairs


def _keyed(definitions: Sequence[Definition]) -> dict[tuple[str, str, int], Definition]:
    """Definitions by (qualified name, kind, occurrence): overloads and redefinitions stay apart."""
    seen: dict[tuple[str, str], int] = {}
    out: dict[tuple[str, str, int], Definition] = {}
    for d in sorted(definitions, key=lambda d: (d.line, d.end_line)):
        n = seen.get((d.qualified, d.kind), 0)
        seen[(d.qualified, d.kind)] = n + 1
        out[(d.qualified, d.kind, n)] = d
    return out


def _touched(new: Definition, old: Definition, hunks: Sequence[Hunk]) -> list[LineRange] | None:
    """The lines of `new` the hunks changed (a deletion inside it: the line after which), or None when
    no hunk meets it on either side."""
    lines: list[LineRange] = []
    met = False
    for h in hunks:
        if h.new_count:
            start, end = max(h.new_start, new.line), min(h.new_start + h.new_count - 1, new.end_line)
            if start <= end:
                lines.append(LineRange(start=start, end=end))
                met = True
                continue
        elif new.line <= h.new_start < new.end_line:  # lines deleted inside it
            lines.append(LineRange(start=h.new_start, end=h.new_start))
            met = True
            continue
        if h.old_count:
            if max(h.old_start, old.line) <= min(h.old_start + h.old_count - 1, old.end_line):
                met = True
        elif old.line <= h.old_start < old.end_line:
            met = True
    return lines if met else None


def _change(
    path: str,
    d: Definition,
    change: Change,
    lines: list[LineRange],
    previous_path: str | None = None,
    previous_symbol: str | None = None,
    previous_lines: LineRange | None = None,
) -> SymbolChange:
    return SymbolChange(
        path=path,
        symbol=d.qualified,
        kind=d.kind,
        change=change,
        lines=lines,
        previous_path=previous_path,
        previous_symbol=previous_symbol,
        previous_lines=previous_lines,
    )


def _similarity(a: list[str], b: list[str]) -> float:
    """How alike two bodies are: by characters when short (a renamed two-line function with one line
    edited is still itself), by lines when long (quadratic in what it compares)."""
    if not a and not b:
        return 1.0
    short = len(a) + len(b) <= SHORT_BODY_LINES
    matcher = SequenceMatcher(None, "\n".join(a) if short else a, "\n".join(b) if short else b, autojunk=False)
    return matcher.ratio() if matcher.real_quick_ratio() >= SAME_BODY / 2 else 0.0
