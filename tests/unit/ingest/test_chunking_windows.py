"""Chunking into windows and byte caps: long classes and functions cut into methods and overlapping
windows, plain line windows, the window settings that are refused, line splitting, pieces of a long line,
runs of whole lines under the byte cap, and definitions sharing lines merged into one chunk."""

from __future__ import annotations

import itertools

import pytest

from cluster.ingest.chunking import chunk_file, split_by_bytes, split_lines
from cluster.settings import ChunkingSettings
from tests.support.chunk_checks import SETTINGS, assert_exact_text, spans


def test_a_class_longer_than_the_window_is_split_into_methods_and_its_header() -> None:
    body = "\n".join(f"        step_{i} = {i}" for i in range(8))
    source = (
        "class Store:\n"
        '    """Keeps things."""\n'
        "    limit = 5\n"
        "\n"
        "    # Put a thing.\n"
        "    def put(self, x):\n"
        f"{body}\n"
        "\n"
        "    @property\n"
        "    def size(self):\n"
        f"{body}\n"
    )
    chunks = chunk_file("store.py", source, ChunkingSettings(window_lines=12, overlap_lines=2))
    assert spans(chunks) == [
        (1, 3, "class", "Store"),
        (5, 14, "method", "Store.put"),
        (16, 25, "method", "Store.size"),
    ]
    assert chunks[1].text.startswith("    # Put a thing.\n    def put(self, x):")
    assert chunks[2].text.startswith("    @property\n")
    assert_exact_text(chunks, source)


def test_a_hundred_line_function_becomes_overlapping_windows_that_keep_the_symbol() -> None:
    source = "def long():\n" + "".join(f"    x{i} = {i}\n" for i in range(99))
    chunks = chunk_file("long.py", source, SETTINGS)
    assert spans(chunks) == [
        (1, 40, "function", "long"),
        (31, 70, "function", "long"),
        (61, 100, "function", "long"),
    ]
    assert_exact_text(chunks, source)


def test_the_last_window_ends_at_the_span_end_without_a_contained_extra_window() -> None:
    source = "".join(f"line {i}\n" for i in range(1, 102))
    chunks = chunk_file("notes.txt", source, SETTINGS)
    assert [(c.start_line, c.end_line) for c in chunks] == [
        (1, 40),
        (31, 70),
        (61, 100),
        (91, 101),
    ]


def test_an_unsupported_extension_is_cut_into_plain_line_windows() -> None:
    source = "".join(f"key{i}: {i}\n" for i in range(50))
    chunks = chunk_file("conf/settings.yaml", source, SETTINGS)
    assert spans(chunks) == [(1, 40, "window", None), (31, 50, "window", None)]
    assert {c.language for c in chunks} == {"yaml"}
    assert_exact_text(chunks, source)


def test_blank_text_yields_no_chunks() -> None:
    assert chunk_file("empty.py", "", SETTINGS) == []
    assert chunk_file("blank.txt", "\n   \n\n", SETTINGS) == []


@pytest.mark.parametrize(
    ("window", "overlap", "refusal"),
    [
        (10, 10, r"overlap_lines must be smaller than chunking\.window_lines"),
        (10, 11, r"overlap_lines must be smaller than chunking\.window_lines"),
        (0, 0, r"window_lines\s+Input should be greater than or equal to 2"),
        (10, -1, r"overlap_lines\s+Input should be greater than or equal to 0"),
    ],
    ids=["10-10", "10-11", "0-0", "10--1"],
)
def test_chunk_settings_reject_an_overlap_that_is_not_smaller_than_the_window(
    window: int, overlap: int, refusal: str
) -> None:
    with pytest.raises(ValueError, match=refusal):
        ChunkingSettings(window_lines=window, overlap_lines=overlap)


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        ("", []),
        ("a", ["a"]),
        ("a\n", ["a"]),
        ("a\n\n", ["a", ""]),
        ("a\r\nb\nc\r\n", ["a", "b", "c"]),  # CRLF and LF mixed
        ("a\rb\nc", ["a\rb", "c"]),  # a lone CR is no line break
        ("a\r\r\nb", ["a\r", "b"]),  # one trailing CR stripped, not two
        ("\n", [""]),
    ],
)
def test_split_lines_splits_on_newline_only_and_strips_one_trailing_cr(text: str, lines: list[str]) -> None:
    assert split_lines(text) == lines


@pytest.mark.parametrize(
    "text",
    [
        "x" * 1000,
        "é" * 700,  # 2-byte sequences
        "数据" * 400,  # 3-byte sequences
        "🙂a" * 300,  # 4-byte sequences at odd offsets
        "\ud83d\ude42" * 300,  # surrogate pairs as two code points (surrogatepass text)
        "a\udcff" * 300,  # lone surrogates from surrogateescape
    ],
)
def test_split_by_bytes_cuts_on_character_boundaries_within_the_cap(text: str) -> None:
    pieces = split_by_bytes(text, 64)
    assert "".join(pieces) == text
    sizes = [len(p.encode("utf-8", "surrogatepass")) for p in pieces]
    assert max(sizes) <= 64 and min(sizes[:-1] or [64]) >= 60  # full pieces, less at most one sequence
    assert not any("\ud800" <= piece[-1] <= "\udbff" for piece in pieces)  # no pair split after its high half


def test_a_long_line_is_split_into_pieces_sharing_its_line_number() -> None:
    settings = ChunkingSettings(max_chunk_bytes=1024)
    long_line = "value = [" + ", ".join(str(i) for i in range(2000)) + "]"
    source = "def small():\n    return 1\n\n" + long_line + "\n"
    chunks = chunk_file("big.py", source, settings)
    pieces = [c for c in chunks if c.start_line == 4]
    assert len(pieces) == -(-len(long_line) // 1024)
    assert {c.end_line for c in pieces} == {4}
    assert "".join(c.text for c in pieces) == long_line
    assert spans(chunk_file("big.py", source, settings))[0] == (1, 2, "function", "small")


def test_a_window_over_the_byte_cap_is_cut_into_runs_of_whole_lines() -> None:
    settings = ChunkingSettings(max_chunk_bytes=300)
    source = "".join(f"line_{i} = '{'x' * 40}'\n" for i in range(30))  # ~55 bytes a line
    chunks = chunk_file("data.py", source, settings)
    lines = split_lines(source)
    assert all(len(c.text.encode()) <= 300 for c in chunks)
    assert [c.text for c in chunks] == ["\n".join(lines[c.start_line - 1 : c.end_line]) for c in chunks]
    assert chunks[0].start_line == 1 and chunks[-1].end_line == 30
    assert all(a.end_line + 1 == b.start_line for a, b in itertools.pairwise(chunks))  # runs do not overlap


def test_normal_chunks_stay_whole_under_the_default_byte_cap() -> None:
    body = "".join(f"    total += compute_something_long(argument_{i}, other_{i})  # note {i}\n" for i in range(39))
    source = "def f():\n" + body
    chunks = chunk_file("loop.py", source, SETTINGS)
    assert [(c.start_line, c.end_line, c.symbol) for c in chunks] == [(1, 40, "f")]
    assert chunks[0].text == source.rstrip("\n") and len(chunks[0].text) > 2_500


def test_definitions_on_the_same_lines_become_one_chunk() -> None:
    source = "function a() { return 1; } function b() { return 2; }\nfunction c() {\n  return 3;\n}\n"
    assert spans(chunk_file("two.js", source, SETTINGS)) == [
        (1, 1, "function", None),  # a and b share the line: one chunk, no single symbol
        (2, 4, "function", "c"),
    ]
    mixed = "class K {} function f() {}\n"
    assert spans(chunk_file("mixed.js", mixed, SETTINGS)) == [(1, 1, "module", None)]
