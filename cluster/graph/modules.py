"""Module keys: what a file's definitions are imported as, and an import's module as that key."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from cluster.graph.spec import GraphSpec, ModuleStyle

__all__ = ["module_of", "normalise_module", "unify"]

_SOURCE_SUFFIXES = re.compile(r"\.(py|pyi|js|mjs|cjs|jsx|ts|tsx|mts|cts|h|hh|hpp|php|rb|lua|sh|bash|rs|go)$")


_FOLDER_FILES = {  # files that stand for their folder: `import "./dir"`, `mod dir;`, `require "dir"`
    ".py": {"__init__"},
    ".pyi": {"__init__"},
    ".rs": {"mod", "lib", "main"},
    ".js": {"index"},
    ".jsx": {"index"},
    ".mjs": {"index"},
    ".ts": {"index"},
    ".tsx": {"index"},
    ".lua": {"init"},
}


def module_of(path: str, style: ModuleStyle) -> str:
    """The dotted module key of a file: what its definitions are imported as (see ModuleStyle)."""
    pure = PurePosixPath(path)
    if style is ModuleStyle.FOLDER or pure.stem in _FOLDER_FILES.get(pure.suffix, ()):
        parts = pure.parent.parts
    else:
        parts = (*pure.parent.parts, pure.stem)
    return ".".join(part for part in parts if part not in ("", "."))


def unify(text: str, spec: GraphSpec) -> str:
    for separator in spec.separators:
        if separator != ".":
            text = text.replace(separator, ".")
    return text


def normalise_module(written: str, path: str, spec: GraphSpec) -> str:
    """A module as an import writes it, as the dotted key `module_of` gives its file: quotes and
    source suffixes dropped, `./` `../` and Python's leading dots made absolute from `path`."""
    text = written.strip().strip("\"'`<>")
    folder = list(PurePosixPath(path).parent.parts)
    if spec.module_style is ModuleStyle.PYTHON and text.startswith("."):
        dots = len(text) - len(text.lstrip("."))
        base = folder[: len(folder) - (dots - 1)] if dots - 1 <= len(folder) else []
        rest = text[dots:]
        return ".".join([*base, *([rest] if rest else [])])
    text = _SOURCE_SUFFIXES.sub("", text)
    if text.startswith(("./", "../")):
        parts = folder[:]
        for piece in text.split("/"):
            if piece == "..":
                if parts:
                    parts.pop()
            elif piece not in (".", ""):
                parts.append(piece)
        return ".".join(parts)
    return unify(text, spec).replace("/", ".").replace("\\", ".").strip(".")
