"""Walk a repository: yield its text source files, honouring every .gitignore."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pathspec import GitIgnoreSpec

DEFAULT_MAX_FILE_BYTES = 1_000_000
BINARY_SNIFF_BYTES = 8192
GITIGNORE_NAME = ".gitignore"
ALWAYS_SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "node_modules",
        "__pycache__",
        ".samespace",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
    }
)


@dataclass(frozen=True)
class WalkSettings:
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    extra_ignores: tuple[str, ...] = ()  # gitignore-style patterns, relative to the root


@dataclass(frozen=True)
class SourceFile:
    path: str  # repository-relative POSIX path
    abs_path: Path
    text: str
    size: int  # bytes on disk


@dataclass(frozen=True)
class _IgnoreRules:
    """The patterns of one .gitignore, which apply below its folder (``base``, '' or 'a/b/')."""

    base: str
    spec: GitIgnoreSpec


def walk_repository(root: Path, settings: WalkSettings) -> Iterator[SourceFile]:
    """Yield the repository's text files in sorted path order.

    Skips ignored paths, the junk folders in ALWAYS_SKIPPED_DIRS, empty, oversize and
    binary files. Symlinked folders are never entered; symlinked files are read only
    when they resolve inside ``root``.
    """
    real_root = root.resolve()
    extra = GitIgnoreSpec.from_lines(settings.extra_ignores)
    yield from _walk_dir(real_root, real_root, "", (), extra, settings)


def _walk_dir(
    real_root: Path,
    folder: Path,
    rel: str,
    inherited: tuple[_IgnoreRules, ...],
    extra: GitIgnoreSpec,
    settings: WalkSettings,
) -> Iterator[SourceFile]:
    rules = inherited
    own = _load_gitignore(folder / GITIGNORE_NAME, rel)
    if own is not None:
        rules = (*inherited, own)
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    typed = [(entry, _is_real_dir(entry)) for entry in entries]
    # Sort "name/" for folders so the output is in plain sorted order of full paths.
    typed.sort(key=lambda pair: pair[0].name + "/" if pair[1] else pair[0].name)
    for entry, is_dir in typed:
        child_rel = rel + entry.name
        if is_dir:
            if entry.name in ALWAYS_SKIPPED_DIRS or _ignored(child_rel + "/", rules, extra):
                continue
            yield from _walk_dir(
                real_root, Path(entry.path), child_rel + "/", rules, extra, settings
            )
        elif entry.name not in ALWAYS_SKIPPED_DIRS and not _ignored(child_rel, rules, extra):
            source = _read_source(real_root, entry, child_rel, settings)
            if source is not None:
                yield source


def _is_real_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _load_gitignore(path: Path, base: str) -> _IgnoreRules | None:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return _IgnoreRules(base=base, spec=GitIgnoreSpec.from_lines(lines))


def _ignored(rel_path: str, rules: tuple[_IgnoreRules, ...], extra: GitIgnoreSpec) -> bool:
    """Git semantics: the deepest .gitignore with a matching pattern decides; extras override."""
    if extra.match_file(rel_path):
        return True
    verdict = False
    for rule in rules:
        result = rule.spec.check_file(rel_path[len(rule.base) :])
        if result.include is not None:
            verdict = result.include
    return verdict


def _read_source(
    real_root: Path, entry: os.DirEntry[str], rel_path: str, settings: WalkSettings
) -> SourceFile | None:
    path = Path(entry.path)
    try:
        if entry.is_symlink():
            target = path.resolve()
            if not target.is_relative_to(real_root) or not target.is_file():
                return None
        elif not entry.is_file(follow_symlinks=False):
            return None
        size = path.stat().st_size
        if size == 0 or size > settings.max_file_bytes:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    if not data or len(data) > settings.max_file_bytes or b"\0" in data[:BINARY_SNIFF_BYTES]:
        return None
    try:
        text = data.decode("utf-8", errors="strict")
    except UnicodeDecodeError:
        return None
    return SourceFile(path=rel_path, abs_path=path, text=text, size=len(data))
