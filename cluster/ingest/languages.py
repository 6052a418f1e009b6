"""Which language a file is (by name), the tree-sitter grammars we parse, and their parsers.

Parsers are built on first use and cached per language; a Parser is not safe to share between
threads, so parsing takes a lock. A broken grammar or parse returns None: the caller windows.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import PurePosixPath

import tree_sitter_bash
import tree_sitter_c
import tree_sitter_c_sharp
import tree_sitter_cpp
import tree_sitter_go
import tree_sitter_java
import tree_sitter_javascript
import tree_sitter_kotlin
import tree_sitter_lua
import tree_sitter_markdown
import tree_sitter_php
import tree_sitter_python
import tree_sitter_ruby
import tree_sitter_rust
import tree_sitter_scala
import tree_sitter_swift
import tree_sitter_typescript
from tree_sitter import Language, Parser, Tree

FALLBACK_LANGUAGE = "text"

_EXTENSIONS: Mapping[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".go": "go",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".rs": "rust",
    ".java": "java",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".c++": "cpp",
    ".hh": "cpp",
    ".hpp": "cpp",
    ".hxx": "cpp",
    ".h++": "cpp",
    ".md": "markdown",
    ".markdown": "markdown",
    ".sh": "bash",
    ".bash": "bash",
    ".json": "json",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".toml": "toml",
    ".ini": "ini",
    ".cfg": "ini",
    ".html": "html",
    ".htm": "html",
    ".css": "css",
    ".sql": "sql",
    ".xml": "xml",
    ".rst": "rst",
    ".rb": "ruby",
    ".rake": "ruby",
    ".gemspec": "ruby",
    ".cs": "csharp",
    ".kt": "kotlin",
    ".kts": "kotlin",
    ".scala": "scala",
    ".sc": "scala",
    ".php": "php",
    ".swift": "swift",
    ".lua": "lua",
    ".txt": "text",
}
_FILENAMES: Mapping[str, str] = {"Dockerfile": "dockerfile", "Makefile": "make", "Rakefile": "ruby", "Gemfile": "ruby"}

KNOWN_LANGUAGES: frozenset[str] = frozenset({*_EXTENSIONS.values(), *_FILENAMES.values(), FALLBACK_LANGUAGE})

GRAMMARS: Mapping[str, Callable[[], object]] = {
    "python": tree_sitter_python.language,
    "go": tree_sitter_go.language,
    "javascript": tree_sitter_javascript.language,
    "typescript": tree_sitter_typescript.language_typescript,
    "tsx": tree_sitter_typescript.language_tsx,
    "rust": tree_sitter_rust.language,
    "java": tree_sitter_java.language,
    "c": tree_sitter_c.language,
    "cpp": tree_sitter_cpp.language,
    "markdown": tree_sitter_markdown.language,
    "bash": tree_sitter_bash.language,
    "csharp": tree_sitter_c_sharp.language,
    "kotlin": tree_sitter_kotlin.language,
    "scala": tree_sitter_scala.language,
    "php": tree_sitter_php.language_php,
    "ruby": tree_sitter_ruby.language,
    "swift": tree_sitter_swift.language,
    "lua": tree_sitter_lua.language,
}


def detect_language(path: str) -> str:
    """Language name from the file name; FALLBACK_LANGUAGE ('text') when unknown."""
    pure = PurePosixPath(path)
    if pure.name in _FILENAMES:
        return _FILENAMES[pure.name]
    return _EXTENSIONS.get(pure.suffix.lower(), FALLBACK_LANGUAGE)


def has_grammar(language: str) -> bool:
    return language in GRAMMARS


_PARSERS: dict[str, Parser] = {}
_PARSER_LOCK = threading.Lock()  # a Parser is not safe to share between threads


def parse(language: str, source: bytes) -> Tree | None:
    try:
        with _PARSER_LOCK:
            parser = _PARSERS.get(language)
            if parser is None:
                parser = Parser(Language(GRAMMARS[language]()))
                _PARSERS[language] = parser
            return parser.parse(source)
    except Exception:  # noqa: BLE001 - a broken grammar or parse must not lose the file: fall back to windows
        return None
