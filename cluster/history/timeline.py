"""The history tools over one index's mined commits: what changed in a window, a symbol's history.

Pure logic over `CommitRecord`s (newest first, the first-parent order of the indexed ref). A window's
ends are dates, durations back from now (`7d`, `12h`, `2w`) or commits of the history (a ref is
resolved to its commit by the caller, who has git); dates compare with the commit date, as `git log
--since` does. A symbol is followed back through renames and moves its changes record.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import Field

from cluster.errors import SamespaceError
from cluster.history.line_log import across, from_lines, to_lines
from cluster.history.models import Change, CommitRecord, LineRange, Span, SymbolChange
from cluster.types import Clock, Strict

__all__ = [
    "History",
    "HistoryItem",
    "SpanLookup",
    "SymbolCommit",
    "SymbolHistory",
    "WindowEnd",
    "iso",
    "parse_window_end",
]

_DURATION = re.compile(r"^\s*(\d+)\s*(m|min|h|d|w|y)\s*$", re.IGNORECASE)
_UNIT_S = {"m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}
SpanLookup = Callable[[str, str], "Span | None"]  # (path, symbol) -> its lines now, where known
_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


class WindowEnd(Strict):
    """One end of a window: a time (unix seconds) or a commit of the history."""

    at: float | None = None
    commit: str | None = None


def parse_window_end(value: str, clock: Clock) -> WindowEnd:
    """`7d`, `12h`: that long before now; an ISO date or time (`2026-11-01`, `2026-11-01T12:00:00Z`); a
    full sha. Anything else is a ref for the caller to resolve (ValueError here)."""
    text = value.strip()
    matched = _DURATION.match(text)
    if matched:
        return WindowEnd(at=clock() - int(matched.group(1)) * _UNIT_S[matched.group(2).lower()])
    if _SHA.match(text):
        return WindowEnd(commit=text)
    try:
        when = datetime.fromisoformat(text)  # Python 3.11 reads a trailing Z
    except ValueError:
        raise ValueError(f"{value!r} is not a duration (7d, 12h), a date (2026-11-01) or a commit sha") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return WindowEnd(at=when.timestamp())


class HistoryItem(Strict):
    """One symbol one commit changed."""

    repo: str
    path: str
    symbol: str
    kind: str
    change: Change
    commit: str
    date: str = Field(description="The commit date, ISO 8601, UTC.")
    author: str
    subject: str
    lines: list[LineRange] = Field(default_factory=list)
    previous_path: str | None = None
    previous_symbol: str | None = None


class SymbolCommit(Strict):
    """One commit that touched a symbol."""

    commit: str
    date: str
    author: str
    message: str
    change: Change
    path: str = Field(description="The symbol's path in that commit.")
    symbol: str = Field(description="The symbol's name in that commit.")
    lines: list[LineRange] = Field(default_factory=list, description="Its changed lines in that commit.")
    previous_path: str | None = None
    previous_symbol: str | None = None


class SymbolHistory(Strict):
    repo: str
    symbol: str
    commits: list[SymbolCommit] = Field(default_factory=list)
    candidates: list[str] = Field(default_factory=list, description="`path: symbol` of each it may name.")
    note: str | None = None


class History:
    """The mined history of index `repo` (commits newest first)."""

    def __init__(
        self, repo: str, commits: Sequence[CommitRecord], spans: Mapping[str, Sequence[Span]] | None = None
    ) -> None:
        self.repo = repo
        self.commits = list(commits)
        self.spans = dict(spans or {})  # path -> its definitions in the newest version mined
        self._position = {c.commit: i for i, c in enumerate(self.commits)}

    def __len__(self) -> int:
        return len(self.commits)

    def window(self, since: WindowEnd, until: WindowEnd | None = None) -> list[CommitRecord]:
        """The commits after `since` and up to `until` (now when None), newest first."""
        start = self._at(until.commit) if until is not None and until.commit is not None else 0
        end = self._at(since.commit) if since.commit is not None else len(self)
        latest = until.at if until is not None else None
        return [
            c
            for c in self.commits[start:end]
            if (since.at is None or c.committed_at > since.at) and (latest is None or c.committed_at <= latest)
        ]

    def _at(self, commit: str) -> int:
        position = self._position.get(commit)
        if position is None:
            raise SamespaceError(f"commit {commit} is not in the mined history of {self.repo}")
        return position

    def what_changed(
        self, since: WindowEnd, until: WindowEnd | None = None, path: str | None = None, limit: int = 100
    ) -> tuple[list[HistoryItem], bool]:
        """The symbols the window's commits changed, newest commit first, under `path` when given;
        and whether `limit` cut the list."""
        items: list[HistoryItem] = []
        for commit in self.window(since, until):
            for change in commit.symbols:
                if path and not (
                    _under(change.path, path) or (change.previous_path and _under(change.previous_path, path))
                ):
                    continue
                if len(items) == limit:
                    return items, True
                items.append(
                    HistoryItem(
                        repo=self.repo,
                        **_where(change),
                        kind=change.kind,
                        commit=commit.commit,
                        date=iso(commit.committed_at),
                        author=commit.author,
                        subject=commit.subject,
                    )
                )
        return items, False

    def symbol_history(
        self, symbol: str, path: str | None = None, limit: int = 50, span_of: SpanLookup | None = None
    ) -> SymbolHistory:
        """The commits that touched `symbol` (bare or qualified; `path` picks among files), newest
        first, followed back through renames and moves. Its lines now (`span_of`, else the newest
        version mined) are followed back through each commit's hunks, as `git log -L` does; without
        them, the changes that name it are listed."""
        wanted = symbol.strip().replace("::", ".").replace("#", ".")
        heads = self._heads(wanted, path)
        if not heads:
            where = f" in {path}" if path else ""
            return SymbolHistory(repo=self.repo, symbol=symbol, note=f"no change to {symbol!r}{where} was mined")
        if len(heads) > 1:
            candidates = [f"{p}: {s}" for p, s in sorted(heads)]
            note = f"{symbol!r} names {len(heads)} symbols: ask again with a path or a qualified name"
            return SymbolHistory(repo=self.repo, symbol=symbol, candidates=candidates, note=note)
        head = next(iter(heads))
        span = (span_of or self.span)(*head)
        commits = self._line_walk(head, span, limit) if span is not None else self._name_walk(head, limit)
        return SymbolHistory(repo=self.repo, symbol=symbol, commits=commits)

    def span(self, path: str, symbol: str) -> Span | None:
        """The lines of `symbol` in the newest version of `path` mined."""
        return next((x for x in self.spans.get(path, ()) if x.symbol == symbol), None)

    def _line_walk(self, head: tuple[str, str], span: Span, limit: int) -> list[SymbolCommit]:
        """The definition's lines followed back commit by commit through the hunks, as `git log -L`
        does (through files renamed); where its lines are born, on through a rename or move its
        changes record (another file: where git stops)."""
        path, name = head
        ranges = [from_lines(span.start, span.end)]
        out: list[SymbolCommit] = []
        for commit in self.commits:
            if len(out) == limit:
                break
            f = next((f for f in commit.files if f.path == path), None)
            if f is None:
                continue
            change = next((c for c in commit.symbols if (c.path, c.symbol) == (path, name)), None)
            touched, parent = across(ranges, f.hunks)
            if touched or (f.status == "R" and f.previous_path):
                kind = change.change if change is not None else Change.MOVED if not touched else Change.MODIFIED
                moved_from = f.previous_path if f.status == "R" else None
                out.append(self._entry(commit, path, name, kind, to_lines(touched), change, moved_from))
            if change is not None and change.previous_symbol is not None:
                name = change.previous_symbol
            if f.status == "R" and f.previous_path:
                path = f.previous_path
            if parent and f.status != "A":
                ranges = parent
                continue
            if change is None or change.previous_path is None or change.previous_lines is None:
                break  # born in this commit
            path, ranges = change.previous_path, [from_lines(change.previous_lines.start, change.previous_lines.end)]
        return out

    def _entry(
        self,
        commit: CommitRecord,
        path: str,
        name: str,
        kind: Change,
        lines: list[LineRange],
        change: SymbolChange | None,
        moved_from: str | None,
    ) -> SymbolCommit:
        return SymbolCommit(
            commit=commit.commit,
            date=iso(commit.committed_at),
            author=commit.author,
            message=commit.message,
            change=kind,
            path=path,
            symbol=name,
            lines=lines,
            previous_path=change.previous_path if change is not None and change.previous_path else moved_from,
            previous_symbol=change.previous_symbol if change is not None else None,
        )

    def _name_walk(self, head: tuple[str, str], limit: int) -> list[SymbolCommit]:
        """Without the definition's lines (none mined in its newest version): the commits whose changes
        name it, through the renames and moves they record."""
        following = {head}
        commits: list[SymbolCommit] = []
        for commit in self.commits:
            for change in commit.symbols:
                if (change.path, change.symbol) not in following:
                    continue
                commits.append(
                    SymbolCommit(
                        **_where(change),
                        commit=commit.commit,
                        date=iso(commit.committed_at),
                        author=commit.author,
                        message=commit.message,
                    )
                )
                if change.previous_path is not None and change.previous_symbol is not None:
                    following.discard((change.path, change.symbol))
                    following.add((change.previous_path, change.previous_symbol))
                elif change.change is Change.ADDED:
                    following.discard((change.path, change.symbol))
                break  # one entry per commit
            if len(commits) == limit or not following:
                break
        return commits

    def _heads(self, wanted: str, path: str | None) -> set[tuple[str, str]]:
        """The newest (path, symbol) of each symbol `wanted` names: a symbol renamed or moved is one."""
        heads: set[tuple[str, str]] = set()
        older: set[tuple[str, str]] = set()  # names a renamed or moved symbol had before
        for commit in self.commits:
            for change in commit.symbols:
                here = (change.path, change.symbol)
                if here not in older and _names(change.symbol, wanted) and (not path or _under(change.path, path)):
                    heads.add(here)
                if change.previous_path is not None and change.previous_symbol is not None:
                    before = (change.previous_path, change.previous_symbol)
                    if here in heads or here in older:
                        older.add(before)
        return heads


def _where(change: SymbolChange) -> dict[str, Any]:
    """What an answer repeats of a change: the symbol, where it is, what happened to which lines."""
    return change.model_dump(include={"path", "symbol", "change", "lines", "previous_path", "previous_symbol"})


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat().replace("+00:00", "Z")


def _names(symbol: str, wanted: str) -> bool:
    return symbol == wanted or symbol.endswith("." + wanted) or symbol.rpartition(".")[2] == wanted


def _under(path: str, wanted: str) -> bool:
    wanted = wanted.strip().strip("/")
    return not wanted or path == wanted or path.startswith(wanted + "/") or path.endswith("/" + wanted)
