"""What a chunk is for the search filters: test code by each language's conventions (and Rust's test
attributes), the categories a chunk's kind and language make, and the controls that pick among them."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from cluster.ingest import SearchControls, chunk_categories, is_test_chunk, is_test_path

TEST_PATHS = [
    "tests/test_parser.py",  # Python: tests/ folder, test_*.py
    "pkg/test_parser.py",
    "pkg/parser_test.py",
    "conftest.py",
    "app/sub/conftest.py",
    "pkg/parser_test.go",  # Go
    "internal/testdata/input.json",
    "web/parser.test.ts",  # Jest, Vitest, Mocha
    "web/Parser.spec.js",
    "web/widget.test.tsx",
    "web/__tests__/parser.js",
    "web/__mocks__/fs.js",
    "src/test/java/org/acme/ParserTest.java",  # Maven/Gradle
    "lib/src/main/java/org/acme/ParserTests.java",
    "app/src/test/kotlin/ParserSpec.kt",
    "core/src/test/scala/ParserSuite.scala",
    "core/src/it/java/ParserIT.java",
    "crates/cli/tests/cli.rs",  # Rust integration tests
    "spec/parser_spec.rb",  # RSpec, minitest
    "test/parser_test.rb",
    "Acme.Tests/ParserTests.cs",  # .NET
    "src/ParserTest.cs",
    "tests/Unit/ParserTest.php",  # PHPUnit
    "Tests/AcmeTests/ParserTests.swift",  # XCTest, SwiftPM
    "spec/parser_spec.lua",  # busted
    "test/parser.bats",  # Bats
    "src/parser_unittest.cc",  # C++
]
CODE_PATHS = [
    "src/parser.py",
    "pkg/testing.py",  # a library's test helpers module, not a test
    "pkg/contest.py",
    "src/latest.go",
    "src/main/java/org/acme/Parser.java",
    "src/main/java/org/acme/Test.java",  # a class named Test, outside test sources
    "src/Attestation.cs",
    "docs/testing-guide.md",
    "web/spectrum.ts",
    "src/lib.rs",
    "protest/app.rb",
    "jinja2/tests.py",  # Jinja's template tests: a module named tests is left to the folder rules
]


@pytest.mark.parametrize("path", TEST_PATHS)
def test_a_test_file_is_test_code_by_its_path(path: str) -> None:
    assert is_test_path(path)


@pytest.mark.parametrize("path", CODE_PATHS)
def test_code_beside_tests_is_not_test_code(path: str) -> None:
    assert not is_test_path(path)


@pytest.mark.parametrize(
    ("text", "is_test"),
    [
        ("#[cfg(test)]\nmod tests {\n    use super::*;", True),
        ("    #[test]\n    fn parses() {}", True),
        ("#[tokio::test]\nasync fn serves() {}", True),
        ("#[rstest]\nfn cases(#[case] x: u8) {}", True),
        ("#[test_case(1)]\nfn one(x: u8) {}", True),
        ("#[cfg(not(test))]\nfn real() {}", False),
        ("#[derive(Debug)]\nstruct Testable;", False),
        ("// #[test] in a comment\nfn later() {}", False),
    ],
)
def test_a_rust_chunk_under_a_test_attribute_is_test_code_anywhere(text: str, is_test: bool) -> None:
    assert is_test_chunk("src/lib.rs", "rust", text) is is_test
    assert not is_test_chunk("src/app.py", "python", text)  # the attribute is Rust's only


@pytest.mark.parametrize(
    ("path", "language", "kind", "expected"),
    [
        ("src/a.py", "python", "function", ["function"]),
        ("src/a.py", "python", "method", ["method"]),
        ("src/a.go", "go", "struct", ["class"]),
        ("src/a.rs", "rust", "impl", ["class"]),
        ("src/a.ts", "typescript", "interface", ["class"]),
        ("src/a.py", "python", "module", ["module"]),
        ("deploy.yaml", "yaml", "window", ["module"]),
        ("README.md", "markdown", "section", ["doc"]),
        ("docs/guide.rst", "rst", "window", ["doc"]),
        ("src/a.ts", "typescript", "type", []),  # a type alias: none of the six
        ("tests/test_a.py", "python", "function", ["function", "test"]),
        ("tests/fixtures/notes.md", "markdown", "section", ["doc", "test"]),
    ],
)
def test_a_chunks_categories_come_from_its_kind_language_and_path(
    path: str, language: str, kind: str, expected: list[str]
) -> None:
    assert chunk_categories(path, language, kind, "x = 1") == expected


def test_controls_keep_by_kind_and_tests_and_refuse_what_they_cannot_read() -> None:
    assert SearchControls().keeps([]) and not SearchControls().filters
    only_tests = SearchControls(tests="only")
    assert only_tests.keeps(["function", "test"]) and not only_tests.keeps(["function"])
    no_tests = SearchControls(tests="exclude", kind=["method", "class"])
    assert no_tests.keeps(["method"]) and not no_tests.keeps(["method", "test"]) and not no_tests.keeps(["function"])
    assert SearchControls(kind=["test", "class", "class"]).kind == ["class", "test"]  # once each, one order
    assert SearchControls.model_validate({"exclude": "vendor"}).exclude == ["vendor"]
    for bad, field in (({"kind": ["lambda"]}, "kind"), ({"tests": "some"}, "tests"), ({"exclude": [""]}, "exclude")):
        with pytest.raises(ValidationError, match=field):
            SearchControls.model_validate(bad)
    with pytest.raises(ValidationError, match="exclude"):
        SearchControls(exclude=["x" * 501])
    with pytest.raises(ValidationError, match="exclude"):
        SearchControls(exclude=[f"a{i}" for i in range(33)])
