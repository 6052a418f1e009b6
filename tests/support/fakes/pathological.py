"""A pathological repository generated on the spot: files that once failed or
stalled a reindex. Every supported grammar nested 10,000 deep, one-line files near 1 MB, a
100,000-line file, NULs, invalid UTF-8 and mixed line endings.

    paths = write_pathological_corpus(tmp_path)   # {relative path: what it is}

The unit tests (tests/unit/ingest/test_pathological.py), the hostile-repository end-to-end test and
bench/pathological.py all use it. Everything is generated; nothing is read from the network.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

DEPTH = 10_000  # nesting depth of the deep files
PYTHON_CLASS_DEPTH = 1_000  # nested Python classes need indentation: ~0.5 MB at this depth
ONE_LINE_JS_BYTES = 990_000  # just under the default chunking.max_file_bytes (1,000,000)
ONE_LINE_TEXT_BYTES = 900_000
LONG_FILE_LINES = 100_000


def _nested(opening: str, middle: str, closing: str, depth: int = DEPTH) -> str:
    return opening * depth + middle + closing * depth


def _deep_files() -> dict[str, tuple[str, str]]:
    """path -> (text, description), one or more per grammar chunking parses."""
    return {**_deep_compiled_files(), **_deep_scripted_files()}


def _deep_compiled_files() -> dict[str, tuple[str, str]]:
    """The deep files of C++, C, Rust, Java and Go."""
    return {
        "deep/namespaces.cpp": (
            "int top_level(int x) { return x + 1; }\n"
            + _nested("namespace n {\n", "int innermost() { return 1; }\n", "}\n"),
            f"C++: {DEPTH:,} nested namespaces",
        ),
        "deep/templates.cpp": (
            _nested("template <>\n", "void f<int>() {}\n", ""),
            f"C++: {DEPTH:,} stacked template<> headers",
        ),
        "deep/blocks.c": (
            "int top_level(void) { return 0; }\nint f(void) {\n" + _nested("{\n", "return 1;\n", "}\n") + "}\n",
            f"C: {DEPTH:,} nested blocks in one function",
        ),
        "deep/declarator.c": (
            "int " + _nested("(\n", "f", "\n)") + "(void) { return 0; }\n",
            f"C: a function declarator in {DEPTH:,} parentheses",
        ),
        "deep/mods.rs": (
            "fn top_level() -> u32 { 1 }\n" + _nested("mod m {\n", "fn innermost() {}\n", "}\n"),
            f"Rust: {DEPTH:,} nested `mod` blocks",
        ),
        "deep/exprs.rs": (
            "fn f() -> u32 {\n" + _nested("(\n", "1", "\n)") + "\n}\n",
            f"Rust: {DEPTH:,} nested parentheses",
        ),
        "deep/classes.java": (
            _nested("class A {\n", "void innermost() {}\n", "}\n"),
            f"Java: {DEPTH:,} nested classes",
        ),
        "deep/blocks.go": (
            "package p\n\nfunc TopLevel() int { return 1 }\n\nfunc F() {\n" + _nested("{\n", "_ = 1\n", "}\n") + "}\n",
            f"Go: {DEPTH:,} nested blocks",
        ),
        "deep/calls.go": (
            "package p\n\nvar x = " + _nested("f(\n", "1", ",\n)") + "\n",
            f"Go: {DEPTH:,} nested calls",
        ),
    }


def _deep_scripted_files() -> dict[str, tuple[str, str]]:
    """The deep files of Python, JavaScript, TypeScript, TSX, Markdown and Bash."""
    python_classes = "".join(f"{' ' * level}class C{level}:\n" for level in range(PYTHON_CLASS_DEPTH))
    python_classes += " " * PYTHON_CLASS_DEPTH + "def innermost(self):\n"
    python_classes += " " * (PYTHON_CLASS_DEPTH + 1) + "return 1\n"
    return {
        "deep/parens.py": (
            "def top_level():\n    return 1\n\n\nx = " + _nested("(\n", "1", "\n)") + "\n",
            f"Python: {DEPTH:,} nested parentheses",
        ),
        "deep/lists.py": ("x = " + _nested("[\n", "1", "\n]") + "\n", f"Python: {DEPTH:,} nested lists"),
        "deep/classes.py": (python_classes, f"Python: {PYTHON_CLASS_DEPTH:,} nested classes, one space per level"),
        "deep/blocks.js": (
            "function topLevel() { return 1; }\nfunction f() {\n" + _nested("{\n", "x = 1;\n", "}\n") + "}\n",
            f"JavaScript: {DEPTH:,} nested blocks",
        ),
        "deep/arrays.js": ("const x = " + _nested("[\n", "1", "\n]") + ";\n", f"JavaScript: {DEPTH:,} nested arrays"),
        "deep/functions.js": (
            _nested("function f() {\n", "return 1;\n", "}\n"),
            f"JavaScript: {DEPTH:,} nested function declarations",
        ),
        "deep/namespaces.ts": (
            _nested("namespace n {\n", "export function innermost(): number { return 1; }\n", "}\n"),
            f"TypeScript: {DEPTH:,} nested namespaces",
        ),
        "deep/parens.ts": (
            "const x: number = " + _nested("(\n", "1", "\n)") + ";\n",
            f"TypeScript: {DEPTH:,} nested parentheses",
        ),
        "deep/elements.tsx": (
            "export const App = () => (\n" + _nested("<div>\n", "x\n", "</div>\n") + ");\n",
            f"TSX: {DEPTH:,} nested elements",
        ),
        "deep/quotes.md": ("# Title\n\n" + "> " * DEPTH + "quoted\n", f"Markdown: {DEPTH:,} nested blockquotes"),
        "deep/lists.md": ("# Title\n\n" + "- " * DEPTH + "item\n", f"Markdown: {DEPTH:,} nested list items"),
        "deep/quote_lines.md": (
            "# Title\n\n" + "".join(">" * level + " line\n" for level in range(1, 1_001)),
            "Markdown: 1,000 lines of ever deeper blockquotes",
        ),
        "deep/subshells.sh": (
            "#!/bin/sh\n" + _nested("(\n", "true", "\n)") + "\n",
            f"Bash: {DEPTH:,} nested subshells",
        ),
        "deep/subshells_one_line.sh": (
            "#!/bin/sh\n" + _nested("( ", "true", " )") + "\n",
            f"Bash: {DEPTH:,} nested subshells on one line",
        ),
        "deep/functions.sh": (
            "#!/bin/sh\n" + _nested("f() {\n", "true\n", "}\n"),
            f"Bash: {DEPTH:,} nested function definitions",
        ),
    }


def _minified_js() -> str:
    """One line of small functions (a minified bundle), ONE_LINE_JS_BYTES long."""
    parts = ["/*! bundle */"]
    size = len(parts[0])
    index = 0
    while size < ONE_LINE_JS_BYTES - 64:
        part = f"function f{index}(a,b){{return a*{index}+b}}var v{index}=f{index}(1,2);"
        parts.append(part)
        size += len(part)
        index += 1
    return "".join(parts).ljust(ONE_LINE_JS_BYTES, ";") + "\n"


def _one_line_text() -> str:
    words = ("alpha", "beta", "gamma", "δέλτα", "数据", "emoji🙂")  # multi-byte characters too
    out: list[str] = []
    size = 0
    index = 0
    while size < ONE_LINE_TEXT_BYTES:
        word = f"{words[index % len(words)]}{index} "
        out.append(word)
        size += len(word.encode("utf-8"))
        index += 1
    return "".join(out) + "\n"


def _one_line_python() -> str:
    statements: list[str] = []
    size = 0
    index = 0
    while size < ONE_LINE_TEXT_BYTES:
        statement = f"v{index} = {index}; "
        statements.append(statement)
        size += len(statement)
        index += 1
    return "".join(statements) + "\n"


def _long_python() -> str:
    body = "".join(f"{index % 1000},\n" for index in range(LONG_FILE_LINES - 3))  # ~490 KB
    return "def values():\n    return [\n" + body + "]\n"


_LONG: dict[str, tuple[Callable[[], str], str]] = {
    "long/bundle.js": (_minified_js, f"a {ONE_LINE_JS_BYTES:,}-byte one-line minified bundle"),
    "long/one_line.txt": (_one_line_text, f"a {ONE_LINE_TEXT_BYTES:,}-byte one-line text with multi-byte characters"),
    "long/one_line.py": (_one_line_python, f"a {ONE_LINE_TEXT_BYTES:,}-byte one-line Python file"),
    "long/lines.py": (_long_python, f"a {LONG_FILE_LINES:,}-line Python file"),
}
_BINARY: dict[str, tuple[bytes, str]] = {
    "encoding/nuls.py": (
        b"def with_nuls():\n    return '\x00\x00'\n\x00\x00\x00\ndef after():\n    return 2\n",
        "NUL bytes in a Python file",
    ),
    "encoding/invalid_utf8.py": (
        (
            b"def broken():\n    return '\xff\xfe\xc3('\n"
            b"# \xed\xa0\x80 a lone surrogate, \xf0\x28\x8c\x28 a bad 4-byte\n"
            b"def after():\n    return 2\n"
        ),
        "invalid UTF-8 (bad lead bytes, truncated sequences, an encoded surrogate)",
    ),
    "encoding/mixed_endings.py": (
        (
            b"def crlf():\r\n    return 1\r\n\ndef lf():\n    return 2\n"
            b"\rdef lone_cr():\r    return 3\r\n\r\ndef last():\n"
            b"    return 4"
        ),
        "mixed CRLF, LF and lone CR line endings, no final newline",
    ),
}

# What cluster.ingest.generated.generated_reason calls minified (a reindex skips them); every other
# file of the corpus is chunked.
MINIFIED = frozenset({"long/bundle.js", "long/one_line.py", "deep/subshells_one_line.sh"})


def corpus_descriptions() -> dict[str, str]:
    """{path: what it is} of the corpus, without writing it (for test parametrisation)."""
    return {
        **{path: description for path, (_, description) in _deep_files().items()},
        **{path: description for path, (_, description) in _LONG.items()},
        **{path: description for path, (_, description) in _BINARY.items()},
    }


def corpus_bytes(path: str) -> bytes:
    """The bytes of one of the small encoding files (NULs, invalid UTF-8, mixed endings)."""
    return _BINARY[path][0]


def write_pathological_corpus(root: Path) -> dict[str, str]:
    """Write the corpus under ``root``; returns {POSIX path relative to root: what it is}."""
    texts = {**_deep_files(), **{path: (build(), description) for path, (build, description) in _LONG.items()}}
    written: dict[str, str] = {}
    for relative, (text, description) in texts.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8", newline="")
        written[relative] = description
    for relative, (data, description) in _BINARY.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        written[relative] = description
    return written
