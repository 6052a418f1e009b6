"""What a chunk is, for the search tools' filters, and the filters themselves.

A chunk falls in none, one or several of six categories, read from what its row stores (path,
language, the kind its syntax gave it, its text):

- function, method: a function or a method definition (a function inside a class is a method);
- class: a type that holds members: class, struct, interface, trait, enum, record, object,
  protocol, union, and a Rust `impl` block (not type aliases, macros or Go type groups);
- module: top-level code outside every definition (imports, constants, a script's statements), a
  Ruby module, and whole-file windows of files no grammar splits (YAML, JSON, SQL, ...);
- doc: documentation: Markdown and reStructuredText files;
- test: test code (`cluster.ingest.testcode`), whatever else it is.

`SearchControls` is what search_code, search_symbols and grep_code take to pick among them: paths
to leave out (globs), categories to keep, and whether test code is included, left out or alone.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field, field_validator

from cluster.ingest.syntax_rules import KIND_FUNCTION, KIND_METHOD, KIND_MODULE, KIND_WINDOW
from cluster.ingest.testcode import is_test_chunk
from cluster.types import Strict

__all__ = [
    "CATEGORIES",
    "CLASS_KINDS",
    "DOC_LANGUAGES",
    "MAX_EXCLUDE_GLOBS",
    "MAX_GLOB_CHARS",
    "MODULE_KINDS",
    "TEST",
    "Category",
    "SearchControls",
    "TestsMode",
    "chunk_categories",
]

Category = Literal["function", "method", "class", "module", "doc", "test"]
CATEGORIES: tuple[Category, ...] = get_args(Category)
TEST: Category = "test"
TestsMode = Literal["include", "exclude", "only"]  # test code: with the rest, left out, or alone

CLASS_KINDS = frozenset(
    {"class", "struct", "interface", "trait", "enum", "record", "object", "protocol", "union", "impl"}
)
MODULE_KINDS = frozenset({KIND_MODULE, KIND_WINDOW})  # top-level runs, Ruby modules, unsplit files
DOC_LANGUAGES = frozenset({"markdown", "rst"})
MAX_EXCLUDE_GLOBS = 32
MAX_GLOB_CHARS = 500  # every path glob (exclude, grep_code's path_glob); `limits.max_glob_*` caps each one's cost too


def chunk_categories(path: str, language: str, kind: str, text: str) -> list[Category]:
    """The categories of one chunk, in `CATEGORIES` order (none for a type alias, a macro, ...)."""
    found: set[Category] = set()
    if language in DOC_LANGUAGES:
        found.add("doc")
    elif kind == KIND_FUNCTION:
        found.add("function")
    elif kind == KIND_METHOD:
        found.add("method")
    elif kind in CLASS_KINDS:
        found.add("class")
    elif kind in MODULE_KINDS:
        found.add("module")
    if is_test_chunk(path, language, text):
        found.add(TEST)
    return [category for category in CATEGORIES if category in found]


class SearchControls(Strict):
    """Which chunks (or lines) a search keeps: none under an `exclude` glob, only those of a `kind`
    (any of them; empty: every kind), and test code as `tests` says. The default keeps everything."""

    exclude: list[str] = Field(
        default_factory=list,
        max_length=MAX_EXCLUDE_GLOBS,
        description="Globs of paths to leave out: '*' crosses folders, a glob without '/' matches the file name.",
    )
    kind: list[Category] = Field(default_factory=list, description="Keep only these categories (empty: all).")
    tests: TestsMode = Field(default="include", description="Test code: include, exclude, or only.")

    @field_validator("exclude", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value

    @field_validator("exclude")
    @classmethod
    def _bounded(cls, globs: list[str]) -> list[str]:
        for glob in globs:
            if not glob.strip():
                raise ValueError("an exclude glob is empty")
            if len(glob) > MAX_GLOB_CHARS:
                raise ValueError(f"an exclude glob is over {MAX_GLOB_CHARS} characters")
        return globs

    @field_validator("kind")
    @classmethod
    def _ordered(cls, kinds: list[Category]) -> list[Category]:
        return [category for category in CATEGORIES if category in kinds]  # once each, one order: one cursor

    @property
    def filters(self) -> bool:
        """Whether anything is left out at all."""
        return bool(self.exclude or self.kind or self.tests != "include")

    def keeps(self, categories: list[Category] | frozenset[str]) -> bool:
        """Whether a chunk (or a line) of these categories passes `kind` and `tests` (not `exclude`:
        the caller matches paths, `cluster.index.path_selector`)."""
        is_test = TEST in categories
        if (self.tests == "exclude" and is_test) or (self.tests == "only" and not is_test):
            return False
        return not self.kind or any(category in categories for category in self.kind)
