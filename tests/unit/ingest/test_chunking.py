"""Syntax-aware chunking: symbols, line ranges, windows, markdown sections."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from cluster.ingest.chunking import chunk_file, split_by_bytes, split_lines
from cluster.ingest.generated import MINIFIED_AVG_LINE_CHARS, generated_reason
from cluster.ingest.languages import detect_language
from cluster.settings import ChunkingSettings
from cluster.types import Chunk

SETTINGS = ChunkingSettings()


def spans(chunks: list[Chunk]) -> list[tuple[int, int, str, str | None]]:
    return [(c.start_line, c.end_line, c.kind, c.symbol) for c in chunks]


def assert_exact_text(chunks: list[Chunk], source: str) -> None:
    lines = source.split("\n")
    for chunk in chunks:
        assert chunk.text == "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
        assert chunk.text.strip()


PYTHON_SOURCE = '''"""Module doc."""
import os

LIMIT = 3


# Adds one.
@cache
@trace(level=2)
def add_one(x):
    """Return x + 1."""
    return x + 1


class Greeter:
    """Says hello."""

    def hello(self):
        return "hi"


if __name__ == "__main__":
    add_one(LIMIT)
'''


def test_python_functions_and_small_classes_get_exact_symbols_and_line_ranges() -> None:
    chunks = chunk_file("pkg/mod.py", PYTHON_SOURCE, SETTINGS)
    assert spans(chunks) == [
        (1, 4, "module", None),
        (7, 12, "function", "add_one"),
        (15, 19, "class", "Greeter"),
        (22, 23, "module", None),
    ]
    assert {c.language for c in chunks} == {"python"}
    assert {c.path for c in chunks} == {"pkg/mod.py"}
    assert_exact_text(chunks, PYTHON_SOURCE)


def test_a_python_function_chunk_includes_its_comment_decorators_and_docstring() -> None:
    chunk = next(c for c in chunk_file("m.py", PYTHON_SOURCE, SETTINGS) if c.symbol == "add_one")
    assert chunk.text.splitlines()[:3] == ["# Adds one.", "@cache", "@trace(level=2)"]
    assert '"""Return x + 1."""' in chunk.text


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


GO_SOURCE = """package shapes

import "math"

// Circle is round.
type Circle struct {
	R float64
}

// Area of the circle.
func (c *Circle) Area() float64 {
	return math.Pi * c.R * c.R
}

func New(r float64) *Circle { return &Circle{R: r} }
"""


def test_go_types_methods_and_functions_are_chunked_with_receiver_symbols() -> None:
    chunks = chunk_file("shapes/circle.go", GO_SOURCE, SETTINGS)
    assert spans(chunks) == [
        (1, 3, "module", None),
        (5, 8, "struct", "Circle"),
        (10, 13, "method", "Circle.Area"),
        (15, 15, "function", "New"),
    ]
    assert_exact_text(chunks, GO_SOURCE)


TS_SOURCE = """import { z } from "zod";

// Adds numbers.
export const add = (a: number, b: number): number => a + b;

export interface Point {
  x: number;
  y: number;
}

type Id = string;

export class Box {
  open(): void {}
}

function helper() {
  return 1;
}
"""


def test_typescript_arrow_consts_interfaces_types_and_classes_are_chunked() -> None:
    chunks = chunk_file("src/geo.ts", TS_SOURCE, SETTINGS)
    assert spans(chunks) == [
        (1, 1, "module", None),
        (3, 4, "function", "add"),
        (6, 9, "interface", "Point"),
        (11, 11, "type", "Id"),
        (13, 15, "class", "Box"),
        (17, 19, "function", "helper"),
    ]
    assert {c.language for c in chunks} == {"typescript"}
    assert_exact_text(chunks, TS_SOURCE)


def test_tsx_files_parse_with_the_tsx_grammar() -> None:
    source = "export function App() {\n  return <div>hi</div>;\n}\n"
    chunks = chunk_file("ui/App.tsx", source, SETTINGS)
    assert spans(chunks) == [(1, 3, "function", "App")]
    assert chunks[0].language == "tsx"


RUST_SOURCE = """use std::fmt;

/// A point.
#[derive(Debug)]
pub struct Point {
    x: i32,
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}", self.x)
    }
}

enum Shape {
    Dot,
}

pub fn origin() -> Point {
    Point { x: 0 }
}
"""


def test_rust_items_keep_doc_comments_and_attributes() -> None:
    chunks = chunk_file("src/point.rs", RUST_SOURCE, SETTINGS)
    assert spans(chunks) == [
        (1, 1, "module", None),
        (3, 7, "struct", "Point"),
        (9, 13, "impl", "Point"),
        (15, 17, "enum", "Shape"),
        (19, 21, "function", "origin"),
    ]
    assert_exact_text(chunks, RUST_SOURCE)


MARKDOWN_SOURCE = """Intro text.

# Guide

Overview.

## Install

```sh
# not a heading
pip install x
```

## Use #

Run it.

Notes
-----

Setext body.
"""


def test_markdown_is_cut_into_sections_where_parents_keep_only_their_own_lines() -> None:
    chunks = chunk_file("docs/README.md", MARKDOWN_SOURCE, SETTINGS)
    assert spans(chunks) == [
        (1, 1, "section", None),
        (3, 5, "section", "Guide"),
        (7, 12, "section", "Install"),
        (14, 16, "section", "Use"),
        (18, 21, "section", "Notes"),
    ]
    assert {c.language for c in chunks} == {"markdown"}
    assert_exact_text(chunks, MARKDOWN_SOURCE)


def test_every_chunk_text_is_exactly_its_lines_and_chunks_are_sorted_and_unique() -> None:
    for path, source in [
        ("a.py", PYTHON_SOURCE),
        ("a.go", GO_SOURCE),
        ("a.ts", TS_SOURCE),
        ("a.rs", RUST_SOURCE),
        ("a.md", MARKDOWN_SOURCE),
    ]:
        chunks = chunk_file(path, source, ChunkingSettings(window_lines=3, overlap_lines=1))
        assert_exact_text(chunks, source)
        keys = [(c.start_line, c.end_line) for c in chunks]
        assert keys == sorted(keys)
        assert len(set(chunks)) == len(chunks)


def test_java_c_cpp_and_bash_definitions_are_found() -> None:
    java = "class A {\n  void run() {}\n}\n"
    c = "struct P { int x; };\n\nstatic int *make(void) {\n  return 0;\n}\n"
    cpp = "namespace n {\nclass K {\n public:\n  void m() {}\n};\n}\n"
    bash = "#!/bin/bash\n# Greets.\ngreet() {\n  echo hi\n}\ngreet\n"
    assert spans(chunk_file("A.java", java, SETTINGS)) == [(1, 3, "class", "A")]
    assert spans(chunk_file("p.c", c, SETTINGS)) == [
        (1, 1, "struct", "P"),
        (3, 5, "function", "make"),
    ]
    assert (2, 5, "class", "K") in spans(chunk_file("k.cpp", cpp, SETTINGS))
    assert spans(chunk_file("run.sh", bash, SETTINGS)) == [
        (1, 1, "module", None),
        (2, 5, "function", "greet"),
        (6, 6, "module", None),
    ]


@pytest.mark.parametrize(
    ("path", "language"),
    [
        ("a/b.py", "python"),
        ("main.go", "go"),
        ("app.js", "javascript"),
        ("app.ts", "typescript"),
        ("App.tsx", "tsx"),
        ("lib.rs", "rust"),
        ("A.java", "java"),
        ("x.c", "c"),
        ("x.cpp", "cpp"),
        ("README.md", "markdown"),
        ("run.sh", "bash"),
        ("data.json", "json"),
        ("ci.yml", "yaml"),
        ("pyproject.toml", "toml"),
        ("LICENSE", "text"),
    ],
)
def test_languages_are_detected_from_the_extension(path: str, language: str) -> None:
    assert detect_language(path) == language


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


# --- line splitting, byte caps, merged spans, generated files -----------------------------


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


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("static/jquery.min.js", "minified: *.min.js"),
        ("css/site.min.css", "minified: *.min.css"),
        ("dist/app.js.map", "source map: *.map"),
        ("dist/main.bundle.js", "bundle: *.bundle.js"),
        ("build/591.fe276a82.chunk.js", "bundle: *.chunk.js"),
    ],
)
def test_minified_and_bundle_names_are_generated(path: str, reason: str) -> None:
    assert generated_reason(path, "var a = 1;\n") == reason


@pytest.mark.parametrize(
    ("path", "text", "reason"),
    [
        (
            "api.pb.go",
            "// Code generated by protoc-gen-go. DO NOT EDIT.\n\npackage api\n",
            "generated: 'Code generated ... DO NOT EDIT.' marker",
        ),
        ("schema.py", "# Copyright\n#\n# @generated by codegen\nX = 1\n", "generated: '@generated' marker"),
        ("Types.java", "/*\n * @generated\n */\nclass T {}\n", "generated: '@generated' marker"),
        ("x.ts", "// <auto-generated>\nexport const x = 1;\n", "generated: '<auto-generated>' marker"),
        (
            "m_pb2.py",
            "# -*- coding: utf-8 -*-\n# Generated by the protocol buffer compiler.  DO NOT EDIT!\n",
            "generated: 'Generated by the protocol buffer compiler. DO NOT EDIT!' marker",
        ),
    ],
)
def test_generator_markers_on_comment_lines_are_generated(path: str, text: str, reason: str) -> None:
    assert generated_reason(path, text) == reason


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("gen.py", 'HEADER = """/**\n * @generated\n */\n"""\n'),  # a generator's source: a string, not a comment
        ("doc.md", "# Notes\n\n* files marked @generated are skipped\n"),  # prose is never generated
        ("notes.md", ("a long paragraph line " * 200 + "\n") * 10),  # long prose lines are normal
        ("small.js", "x=" + "1+" * 800 + "1\n"),  # one long line but a small file: cheap to chunk
        ("late.go", "package p\n" + "\n" * 50 + "// Code generated by x. DO NOT EDIT.\n"),  # past the head
        ("admin.js", "var admin = 1;\n"),  # "min" only as part of a word
        ("minify.py", "def minify(text):\n    return text\n"),
        ("readme.txt", "word " * 2000 + "\n"),  # text is prose
    ],
)
def test_ordinary_files_are_not_generated(path: str, text: str) -> None:
    assert generated_reason(path, text) is None


def test_a_long_average_line_marks_code_minified_at_the_threshold() -> None:
    line = "a" * MINIFIED_AVG_LINE_CHARS
    assert generated_reason("x.js", (line + "\n") * 5) == f"minified: average line {MINIFIED_AVG_LINE_CHARS:,} chars"
    assert generated_reason("x.js", (line[:-1] + "\n") * 5) is None


REPO = Path(__file__).resolve().parents[3]
SKIPPED_DIRS = {
    ".git",
    ".venv",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".grimp_cache",
    ".import_linter_cache",
    ".samespace",
    "results",
}


def test_no_file_of_this_repository_or_its_fixtures_is_called_generated() -> None:
    checked = 0
    for path in REPO.rglob("*"):
        relative = path.relative_to(REPO)
        if not path.is_file() or SKIPPED_DIRS & set(relative.parts) or relative.parts[0].endswith(".egg-info"):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        assert generated_reason(relative.as_posix(), text) is None, relative
        checked += 1
    assert checked > 100
