"""The text of an index's files in one buffer, scanned by a compiled pattern line by line.

Every file's text (UTF-8, each file ending in a line feed) is laid end to end in one `bytes`, so a
scan is one RE2 pass over the buffer, in windows of `WINDOW` bytes cut at line ends. RE2 finds the
leftmost match from a position; a match that ends within its line is that line's first, one that
took the line feed is checked against its line alone (`line_match`), and the scan goes on from the
next line. Every line ripgrep matches is found: a match within one line is a match of the buffer,
so no candidate starts after it. A candidate that only matched across a line break (`\\s` taking
the line feed) is dropped by the line's own match, as ripgrep never matches one.

A scan stops at `limit` matching lines or at its deadline (checked between windows and every
`_CHECK_EVERY` candidates) and says where to go on: `ScanPage.resume`, a buffer offset.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum

from cluster.grep.pattern import GrepPattern
from cluster.types import Clock

__all__ = ["WINDOW", "CorpusFile", "GrepCorpus", "LineHit", "ScanPage", "StopReason"]

WINDOW = 1 << 20  # bytes a window holds (a longer line is a window of its own)
_CHECK_EVERY = 512  # candidates between two looks at the clock


class StopReason(StrEnum):
    LIMIT = "limit"
    TIME = "time"


@dataclass(frozen=True)
class CorpusFile:
    path: str
    start: int  # its first byte in the buffer
    end: int  # one past its last line feed


@dataclass(frozen=True)
class LineHit:
    """A matching line: its file, number (1-based), first match's column (1-based, in characters), text."""

    path: str
    line: int
    column: int
    text: str  # the whole line, without its line break (a trailing "\r" dropped)
    at: int  # the line's first byte in the buffer


@dataclass(frozen=True)
class ScanPage:
    hits: list[LineHit]
    files: int  # the files the scan covered (those selected)
    resume: int | None  # where a next page goes on; None: the scan reached the end
    stopped: StopReason | None


class GrepCorpus:
    """The files of one index build, in one buffer (immutable once made)."""

    def __init__(self, files: Iterable[tuple[str, str]]) -> None:
        parts: list[bytes] = []
        table: list[CorpusFile] = []
        at = 0
        for path, text in sorted(files):
            if not text:
                continue
            data = text.encode("utf-8")
            if not data.endswith(b"\n"):
                data += b"\n"
            parts.append(data)
            table.append(CorpusFile(path, at, at + len(data)))
            at += len(data)
        self.buffer = b"".join(parts)
        self.files: tuple[CorpusFile, ...] = tuple(table)
        self._starts = [f.start for f in table]

    def __repr__(self) -> str:
        return f"GrepCorpus(files={len(self.files)}, bytes={len(self.buffer)})"

    @property
    def size(self) -> int:
        return len(self.buffer)

    def scan(
        self,
        pattern: GrepPattern,
        *,
        limit: int,
        start: int = 0,
        select: Callable[[str], bool] | None = None,
        keep: Callable[[LineHit], bool] | None = None,
        deadline: float | None = None,
        clock: Clock | None = None,
    ) -> ScanPage:
        """Matching lines from buffer offset `start` on, in path order, of the files `select` keeps;
        with `keep`, only the lines it keeps count (e.g. the lines of a kind of chunk)."""
        segments, files = self._segments(select)
        hits: list[LineHit] = []
        lines = _LineCounter(self)
        checks = 0

        def late() -> bool:
            return deadline is not None and clock is not None and clock() >= deadline

        buf = self.buffer
        for low, high in segments:
            pos = max(low, start)
            while pos < high:
                if late():
                    return ScanPage(hits, files, pos, StopReason.TIME)
                window_end = self._window_end(pos, high)
                while pos < window_end:
                    found = pattern.search(buf, pos, window_end)
                    if found is None or found[0] >= window_end:  # an empty match after the last line feed
                        break
                    line_start = buf.rfind(b"\n", 0, found[0]) + 1
                    line_end = buf.find(b"\n", found[0])
                    # a match within its line is that line's first (none starts before it in the line);
                    # one that took the line feed is checked against the line alone
                    first = found[0] if found[1] <= line_end else pattern.line_match(buf, line_start, line_end)
                    pos = line_end + 1
                    found_line = None if first is None else lines.hit(line_start, line_end, first)
                    if found_line is not None and (keep is None or keep(found_line)):
                        hits.append(found_line)
                        if len(hits) >= limit:
                            return ScanPage(hits, files, pos if pos < len(buf) else None, StopReason.LIMIT)
                    checks += 1
                    if checks % _CHECK_EVERY == 0 and late():
                        return ScanPage(hits, files, pos, StopReason.TIME)
                pos = max(pos, window_end)
        return ScanPage(hits, files, None, None)

    def around(self, hit: LineHit, before: int, after: int) -> tuple[list[str], list[str]]:
        """Up to `before` lines above the hit's line and `after` below it, within its file."""
        file = self.files[self._file_at(hit.at)]
        buf = self.buffer
        above: list[str] = []
        at = hit.at
        while len(above) < before and at > file.start:
            previous = buf.rfind(b"\n", file.start, at - 1) + 1
            previous = max(previous, file.start)
            above.append(_text(buf[previous : at - 1]))
            at = previous
        below: list[str] = []
        at = buf.find(b"\n", hit.at) + 1
        while len(below) < after and at < file.end:
            end = buf.find(b"\n", at)
            below.append(_text(buf[at:end]))
            at = end + 1
        return above[::-1], below

    def _segments(self, select: Callable[[str], bool] | None) -> tuple[list[tuple[int, int]], int]:
        """The buffer ranges of the files kept, contiguous runs merged, and how many files they hold."""
        if select is None:
            return ([(0, len(self.buffer))] if self.buffer else []), len(self.files)
        segments: list[tuple[int, int]] = []
        kept = 0
        for f in self.files:
            if not select(f.path):
                continue
            kept += 1
            if segments and segments[-1][1] == f.start:
                segments[-1] = (segments[-1][0], f.end)
            else:
                segments.append((f.start, f.end))
        return segments, kept

    def _window_end(self, pos: int, high: int) -> int:
        """One past the last line feed within WINDOW bytes of `pos` (or the end of a longer line)."""
        if high - pos <= WINDOW:
            return high
        cut = self.buffer.rfind(b"\n", pos, pos + WINDOW)
        if cut == -1:
            cut = self.buffer.find(b"\n", pos + WINDOW)
        return min(cut + 1, high)

    def _file_at(self, offset: int) -> int:
        return bisect.bisect_right(self._starts, offset) - 1


class _LineCounter:
    """Line numbers of hits met in buffer order: counts line feeds from the previous hit of the file."""

    def __init__(self, corpus: GrepCorpus) -> None:
        self._corpus = corpus
        self._file = -1
        self._offset = 0
        self._line = 1

    def hit(self, line_start: int, line_end: int, first: int) -> LineHit:
        corpus = self._corpus
        buf = corpus.buffer
        index = corpus._file_at(line_start)  # noqa: SLF001 - the counter is the corpus's own helper
        file = corpus.files[index]
        if index != self._file or line_start < self._offset:
            self._file, self._offset, self._line = index, file.start, 1
        self._line += buf.count(b"\n", self._offset, line_start)
        self._offset = line_start
        column = len(buf[line_start:first].decode("utf-8", "replace")) + 1
        return LineHit(file.path, self._line, column, _text(buf[line_start:line_end]), line_start)


def _text(line: bytes) -> str:
    return line.decode("utf-8", "replace").removesuffix("\r")
