"""Syntax-aware chunking by language: symbols and exact line ranges for Python, Go, TypeScript and TSX,
Rust, Java, C, C++ and bash, markdown sections, and the language detected from a file's extension."""

from __future__ import annotations

import pytest

from cluster.ingest.chunking import chunk_file
from cluster.ingest.languages import detect_language
from cluster.settings import ChunkingSettings
from tests.support.chunk_checks import SETTINGS, assert_exact_text, spans

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
