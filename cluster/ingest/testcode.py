"""Which code is test code: by its path, the conventions of each language's test frameworks, and for
Rust by the chunk itself (unit tests live beside the code they test, in `#[cfg(test)]` modules).

One rule for every reader: the search filters (`cluster.ingest.categories`, stored on each row at
index time) and the code graph's `impact` (the tests a change reaches) both ask `is_test_path`.
A path is test code when any convention below names it; the conventions are by file and folder
name only, so a file is judged the same in every language that shares a convention.

search_code leaves test code out by default, so a name that is not always a test costs more as a
test (real code hidden) than as code (a test shown): a module named `tests.py` is left to the folder
rules, as Django's are usually under `tests/`, because `jinja2/tests.py` (Jinja's template tests)
held 23 of the 607 dev queries of bench.quality that the name rule made unreachable.
"""

from __future__ import annotations

import re

__all__ = ["TEST_FOLDERS", "is_test_chunk", "is_test_path"]

# Folders whose files are tests, fixtures or test helpers, at any depth: tests/ and test/ (Python,
# Rust integration tests, Ruby minitest, PHP, C and C++), spec/ and specs/ (RSpec, busted, Jasmine),
# __tests__/ and __mocks__/ (Jest), testing/ (test helpers), testdata/ (Go's fixtures), Tests/
# (SwiftPM, .NET solutions).
TEST_FOLDERS = frozenset(
    {"test", "tests", "spec", "specs", "__tests__", "__mocks__", "testing", "testdata", "Test", "Tests"}
)

_TEST_FILE_RULES = (
    r"^test_[^/]+\.\w+$",  # Python (pytest, unittest), C, Lua: test_parser.py, test_main.c
    r"^conftest\.py$",  # pytest fixtures
    r"_test\.\w+$",  # Go (the only way), Python, Ruby minitest, C++ (gtest): parser_test.go, a_test.rb
    r"_unittest\.\w+$",  # C++ (Chromium style): parser_unittest.cc
    r"_spec\.\w+$",  # RSpec, busted: parser_spec.rb, parser_spec.lua
    r"\.(test|spec)\.\w+$",  # Jest, Mocha, Vitest: parser.test.ts, Parser.spec.js
    r"[a-z0-9_](Tests?|Spec|Suite|IT)\.\w+$",  # JUnit, Kotest, ScalaTest, XCTest, NUnit/xUnit, PHPUnit
    r"\.bats$",  # Bats (Bash)
)
_TEST_FILE = re.compile("|".join(f"(?:{rule})" for rule in _TEST_FILE_RULES))
# Maven and Gradle's test source sets (Java, Kotlin, Scala), and .NET test projects (`App.Tests/`).
_TEST_TREE = re.compile(r"(^|/)src/(test|testFixtures|integrationTest)/|(^|/)[\w.]+\.(Tests?|Specs?)/")
# A Rust chunk that is test code wherever its file is: a `#[cfg(test)]` module's head, or a function
# under a test attribute (`#[test]`, `#[tokio::test]`, `#[rstest]`, `#[test_case(...)]`).
_RUST_TEST_ATTRIBUTE = re.compile(r"^\s*#\[\s*(cfg\(\s*test\s*\)|(\w+::)*test\b|rstest\b|test_case\b)", re.MULTILINE)


def is_test_path(path: str) -> bool:
    """True when the repository-relative POSIX `path` is test code by its name or its folders."""
    folders, _, name = path.rpartition("/")
    if folders and not TEST_FOLDERS.isdisjoint(folders.split("/")):
        return True
    return bool(_TEST_FILE.search(name) or _TEST_TREE.search(path))


def is_test_chunk(path: str, language: str, text: str) -> bool:
    """True when a chunk is test code: its file is (`is_test_path`), or, in Rust, the chunk carries a
    test attribute. A helper inside a big `#[cfg(test)]` module, chunked apart from the module's
    head, has no attribute of its own and is not recognised: the chunk alone cannot tell."""
    return is_test_path(path) or (language == "rust" and _RUST_TEST_ATTRIBUTE.search(text) is not None)
