"""No single file can fail or stall a reindex: the chunker and the keyword leg on
a generated pathological corpus, and the cases that once did, one by one."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.index.keywords import chunk_keywords, defined_names, method_name
from cluster.ingest.chunking import chunk_file, split_lines
from cluster.ingest.generated import generated_reason
from cluster.settings import ChunkingSettings
from cluster.types import Chunk
from tests.support.fakes.pathological import MINIFIED, corpus_bytes, corpus_descriptions, write_pathological_corpus

SETTINGS = ChunkingSettings()
TINY = ChunkingSettings(window_lines=4, overlap_lines=1, max_chunk_bytes=256, max_syntax_depth=1)
OVERLAP_FACTOR = 2  # total chunk text stays within this multiple of the file (measured: <= 1.43)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pathological")
    write_pathological_corpus(root)
    return root


def utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def assert_bounded(path: str, text: str, chunks: list[Chunk], settings: ChunkingSettings) -> None:
    """Each chunk capped and exact; the file's chunk text and chunk count bounded by its size."""
    lines = split_lines(text)
    for chunk in chunks:
        assert utf8_size(chunk.text) <= settings.max_chunk_bytes, (path, chunk.start_line)
        assert 1 <= chunk.start_line <= chunk.end_line <= len(lines)
        assert chunk.text.strip()
        if chunk.start_line == chunk.end_line:
            assert chunk.text in lines[chunk.start_line - 1]  # a whole line or a piece of it
        else:
            assert chunk.text == "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
    size = utf8_size(text)
    assert sum(utf8_size(c.text) for c in chunks) <= OVERLAP_FACTOR * size
    step = settings.window_lines - settings.overlap_lines
    assert len(chunks) <= 2 * (len(lines) // step + size // settings.max_chunk_bytes) + 8


@pytest.mark.timeout(60)
@pytest.mark.parametrize("path", sorted(corpus_descriptions()))
def test_every_corpus_file_chunks_and_keywords_within_bounds(corpus: Path, path: str) -> None:
    text = (corpus / path).read_bytes().decode("utf-8", errors="replace")
    reason = generated_reason(path, text)
    assert (reason is not None) == (path in MINIFIED), reason
    chunks = chunk_file(path, text, SETTINGS)
    assert chunks
    assert_bounded(path, text, chunks, SETTINGS)
    for chunk in chunks:
        assert chunk_keywords(chunk.text, path, chunk.symbol).indices
        defined_names(chunk.text, chunk.symbol)


@pytest.mark.timeout(120)
def test_tiny_caps_hold_for_every_corpus_file_read_with_surrogate_escapes(corpus: Path) -> None:
    """Lone surrogates (surrogateescape) and the smallest caps: still no error, still capped."""
    for path in sorted(corpus_descriptions()):
        text = (corpus / path).read_bytes().decode("utf-8", errors="surrogateescape")
        chunks = chunk_file(path, text, TINY)
        assert_bounded(path, text, chunks, TINY)


def nested_namespaces(depth: int) -> str:
    """A 16 KB C++ file that once raised RecursionError: shallow definitions, then `depth` namespaces, one per line."""
    shallow = "int top_level(int x) { return x + 1; }\nnamespace outer {\nint shallow() { return 2; }\n"
    return shallow + "namespace n {\n" * depth + "int innermost() { return 1; }\n" + "}\n" * (depth + 1)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("depth", [1_000, 10_000])
def test_a_deeply_nested_cpp_file_chunks_and_keeps_its_shallow_definitions(depth: int) -> None:
    text = nested_namespaces(depth)
    chunks = chunk_file("deep.cpp", text, SETTINGS)  # once raised RecursionError
    symbols = {c.symbol for c in chunks if c.kind == "function"}
    assert {"top_level", "shallow"} <= symbols
    assert_bounded("deep.cpp", text, chunks, SETTINGS)
    covered = {line for c in chunks for line in range(c.start_line, c.end_line + 1)}
    assert covered >= {i + 1 for i, line in enumerate(split_lines(text)) if line.strip()}  # nothing lost


@pytest.mark.timeout(30)
def test_deep_rust_mods_chunk_and_keep_their_shallow_definitions() -> None:
    text = "fn top_level() -> u32 { 1 }\nmod outer {\n    fn shallow() {}\n" + "mod m {\n" * 5_000 + "}\n" * 5_001
    chunks = chunk_file("deep.rs", text, SETTINGS)
    assert {"top_level", "shallow"} <= {c.symbol for c in chunks}
    assert_bounded("deep.rs", text, chunks, SETTINGS)


@pytest.mark.timeout(30)
def test_deep_java_classes_stop_descending_at_the_depth_cap() -> None:
    body = "    void member() { run(); }\n" * 50
    text = "class Outer {\n" + body + "class A {\n" * 5_000 + "}\n" * 5_001
    chunks = chunk_file("Deep.java", text, SETTINGS)
    assert "Outer.member" in {c.symbol for c in chunks}
    depths = [c.symbol.count(".") for c in chunks if c.symbol]
    assert max(depths) <= SETTINGS.max_syntax_depth
    assert_bounded("Deep.java", text, chunks, SETTINGS)


def minified_bundle(functions: int) -> str:
    return "".join(f"function f{i}(a,b){{return a*{i}+b}}" for i in range(functions)) + "\n"


@pytest.mark.timeout(30)
def test_a_one_line_bundle_of_5000_functions_is_size_over_cap_chunks_not_one_line_per_function() -> None:
    text = minified_bundle(5_000)
    chunks = chunk_file("bundle.js", text, SETTINGS)
    size = utf8_size(text.rstrip("\n"))
    assert len(chunks) == -(-size // SETTINGS.max_chunk_bytes)  # ceil: pieces of one line never overlap
    assert {(c.start_line, c.end_line) for c in chunks} == {(1, 1)}
    assert "".join(c.text for c in chunks) == text.rstrip("\n")
    assert {(c.kind, c.symbol) for c in chunks} == {("function", None)}  # 5,000 definitions merged
    assert generated_reason("bundle.js", text) == f"minified: average line {size:,} chars"


@pytest.mark.timeout(10)
def test_the_method_line_match_is_linear_on_a_16_kb_line() -> None:
    """The old regex took 4.9 s on this line; lines past the cap are no declarations at all."""
    hostile = "  public foo(" + "a): b " * 2_700 + "{"
    assert len(hostile) > 16_000
    assert method_name(hostile) is None
    assert defined_names(hostile, None) == []
    assert method_name("  public foo(" + "a): b " * 60 + "{") == "foo"  # the same shape, short: still read


def test_mixed_line_endings_number_chunks_as_split_lines_does() -> None:
    text = corpus_bytes("encoding/mixed_endings.py").decode("utf-8")
    lines = split_lines(text)
    assert lines == [
        "def crlf():",
        "    return 1",
        "",
        "def lf():",
        "    return 2",
        "\rdef lone_cr():\r    return 3",
        "",
        "def last():",
        "    return 4",
    ]
    chunks = chunk_file("mixed.py", text, SETTINGS)
    for chunk in chunks:
        assert chunk.text == "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
    assert [(c.start_line, c.end_line, c.symbol) for c in chunks] == [
        (1, 2, "crlf"),
        (4, 5, "lf"),
        (6, 6, "lone_cr"),
        (8, 9, "last"),  # a lone CR starts no line
    ]
