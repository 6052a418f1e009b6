"""Cut a source file into chunks at syntax boundaries (tree-sitter), else at line windows.

Pure functions: no I/O, no Ray.

No file can fail or stall a reindex: `chunk_file` never raises; the syntax scan
descends at most `max_syntax_depth` levels (deeper code is windowed); definitions that cover
the same lines become one chunk; no chunk text exceeds `max_chunk_bytes` (a longer line is cut
by characters), so a file's total chunk text stays within a small multiple of its size.
Which file is which language, and its parser: `cluster.ingest.languages`; which files are minified or
generated (a reindex skips them): `cluster.ingest.generated`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from cluster.ingest.languages import detect_language
from cluster.ingest.syntax_rules import KIND_MODULE, KIND_WINDOW
from cluster.ingest.syntax_spans import Span, syntax_spans
from cluster.settings import ChunkingSettings
from cluster.types import Chunk

# --- public entry point ------------------------------------------------------------------


def chunk_file(path: str, text: str, settings: ChunkingSettings) -> list[Chunk]:
    """Chunks of one file, sorted by (start_line, end_line); never an empty-text chunk, never a
    text over ``settings.max_chunk_bytes`` UTF-8 bytes. Line numbers are those of `split_lines`."""
    lines = split_lines(text)
    if not lines:
        return []
    language = detect_language(path)
    spans = syntax_spans(language, text, lines, settings)
    if spans is None:
        spans = [Span(1, len(lines), KIND_WINDOW, None)]
    return _emit(path, language, lines, spans, settings)


def split_lines(text: str) -> list[str]:
    """The lines of ``text``, as chunks and read_code number them (line n is item n - 1).

    Split on "\n" only; one trailing "\r" is stripped from each line (CRLF and LF may mix; a
    lone "\r" elsewhere stays in its line); a final "\n" opens no empty last line.
    """
    if not text:
        return []
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _emit(
    path: str, language: str, lines: Sequence[str], spans: Iterable[Span], settings: ChunkingSettings
) -> list[Chunk]:
    seen: set[tuple[int, int, str]] = set()
    chunks: list[Chunk] = []
    for span in _merge_same_lines(spans, lines):
        for first, last in _windows(span.start, span.end, settings):
            for start, end, body in _capped(lines, first, last, settings.max_chunk_bytes):
                key = (start, end, body)  # the point id is (path, lines, text): one chunk each
                if not body.strip() or key in seen:
                    continue
                seen.add(key)
                chunks.append(
                    Chunk(
                        path=path,
                        start_line=start,
                        end_line=end,
                        language=language,
                        symbol=span.symbol,
                        kind=span.kind,
                        text=body,
                    )
                )
    chunks.sort(key=lambda c: (c.start_line, c.end_line, c.kind, c.symbol or ""))
    return chunks


def _merge_same_lines(spans: Iterable[Span], lines: Sequence[str]) -> list[Span]:
    """Spans trimmed of blank edge lines; spans covering the same lines become one (a minified
    line of 5,000 definitions is one span, not 5,000 copies of the line). A merged span keeps a
    kind and a symbol only when all of its spans agree: else 'module' and no symbol."""
    merged: dict[tuple[int, int], Span] = {}
    for span in spans:
        trimmed = _trim(span.start, span.end, lines)
        if trimmed is None:
            continue
        known = merged.get(trimmed)
        if known is None:
            merged[trimmed] = Span(*trimmed, span.kind, span.symbol)
        elif (known.kind, known.symbol) != (span.kind, span.symbol):
            kind = known.kind if known.kind == span.kind else KIND_MODULE
            symbol = known.symbol if known.symbol == span.symbol else None
            merged[trimmed] = Span(*trimmed, kind, symbol)
    return list(merged.values())


def _capped(lines: Sequence[str], start: int, end: int, cap: int) -> Iterator[tuple[int, int, str]]:
    """(start, end, text) pieces of lines start..end, each at most ``cap`` UTF-8 bytes: whole
    when it fits, else consecutive runs of lines, and a line longer than ``cap`` in character
    pieces that share its line number. Pieces never overlap, so their total is the window's."""
    selected = lines[start - 1 : end]
    body = "\n".join(selected)
    if _utf8_length(body) <= cap:
        yield start, end, body
        return
    group: list[str] = []
    group_start = start
    size = 0
    for number, line in enumerate(selected, start):
        length = _utf8_length(line)
        if group and size + 1 + length > cap:
            yield group_start, number - 1, "\n".join(group)
            group = []
        if length > cap:
            for piece in split_by_bytes(line, cap):
                yield number, number, piece
            continue
        if not group:
            group_start, size = number, length
        else:
            size += 1 + length
        group.append(line)
    if group:
        yield group_start, group_start + len(group) - 1, "\n".join(group)


def _utf8_length(text: str) -> int:
    """UTF-8 bytes of ``text``; a lone surrogate (from surrogateescape or surrogatepass) counts 3."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def split_by_bytes(text: str, cap: int) -> list[str]:
    """``text`` cut into pieces of at most ``cap`` UTF-8 bytes (``cap`` >= 8), never inside a
    character's UTF-8 sequence nor between the two halves of a surrogate pair; joined, the pieces
    are ``text``."""
    if text.isascii():
        return [text[i : i + cap] for i in range(0, len(text), cap)]
    data = text.encode("utf-8", "surrogatepass")
    pieces: list[str] = []
    position = 0
    while position < len(data):
        cut = min(position + cap, len(data))
        if cut < len(data):
            while data[cut] & 0xC0 == 0x80:  # a continuation byte: back to the sequence's lead
                cut -= 1
            if _splits_surrogate_pair(data, cut) and cut - 3 > position:
                cut -= 3
        pieces.append(data[position:cut].decode("utf-8", "surrogatepass"))
        position = cut
    return pieces


def _splits_surrogate_pair(data: bytes, cut: int) -> bool:
    """A high surrogate (ED A0-AF xx) right before ``cut`` and a low one (ED B0-BF xx) at it."""
    return (
        cut >= 3
        and cut + 1 < len(data)
        and data[cut - 3] == 0xED
        and 0xA0 <= data[cut - 2] <= 0xAF
        and data[cut] == 0xED
        and 0xB0 <= data[cut + 1] <= 0xBF
    )


def _windows(start: int, end: int, settings: ChunkingSettings) -> Iterator[tuple[int, int]]:
    """Windows of window_lines overlapping by overlap_lines; the last one ends at ``end``."""
    step = settings.window_lines - settings.overlap_lines
    first = start
    while True:
        last = min(first + settings.window_lines - 1, end)
        yield first, last
        if last >= end:
            return
        first += step


def _trim(start: int, end: int, lines: Sequence[str]) -> tuple[int, int] | None:
    end = min(end, len(lines))
    while start <= end and not lines[start - 1].strip():
        start += 1
    while end >= start and not lines[end - 1].strip():
        end -= 1
    return (start, end) if start <= end else None
