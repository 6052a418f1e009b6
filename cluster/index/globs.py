"""Index-name globs at a bounded cost: `*`, `?` and `[...]` exactly as `fnmatch.fnmatchcase` reads them,
matched in O(len(name) x len(pattern)) steps with no regex over the whole pattern (fnmatch translates a
pattern into one, and translating and compiling a long one costs seconds), after the caps a pattern must
meet before any matching: `limits.max_glob_chars` and `limits.max_glob_wildcards`. `path_selector` reads
file paths with them, the same way for every search tool."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cluster.errors import LimitExceeded
from cluster.settings import LimitsSettings, limit_name

__all__ = ["GLOB_CHARS", "Glob", "check_glob", "compile_glob", "is_glob", "literal_chars", "path_selector"]

GLOB_CHARS = frozenset("*?[")

CharTest = Callable[[str], bool]  # one pattern position that consumes exactly one character
_STAR = None  # the position that consumes any run of characters


def is_glob(text: str) -> bool:
    return not GLOB_CHARS.isdisjoint(text)


def check_glob(pattern: str, limits: LimitsSettings, what: str = "index-name") -> None:
    """LimitExceeded, naming the setting, for a pattern too long or with too many wildcards."""
    if len(pattern) > limits.max_glob_chars:
        raise LimitExceeded(f"{what} pattern length", len(pattern), limits.max_glob_chars, limit_name("max_glob_chars"))
    wildcards = sum(pattern.count(c) for c in GLOB_CHARS)
    if wildcards > limits.max_glob_wildcards:
        raise LimitExceeded(
            f"wildcards in {'an' if what[:1] in 'aeiou' else 'a'} {what} pattern",
            wildcards,
            limits.max_glob_wildcards,
            limit_name("max_glob_wildcards"),
        )


@dataclass(frozen=True)
class Glob:
    """A checked pattern, parsed into positions: `matches` runs the positions as a set of states over
    the name (each character advances every live state once), so no input backtracks."""

    pattern: str
    positions: tuple[CharTest | None, ...]

    def matches(self, name: str) -> bool:
        end = len(self.positions)
        live = self._closure({0})
        for char in name:
            step = set()
            for state in live:
                if state == end:
                    continue
                test = self.positions[state]
                if test is _STAR:
                    step.add(state)
                elif test(char):
                    step.add(state + 1)
            live = self._closure(step)
            if not live:
                return False
        return end in live

    def _closure(self, states: set[int]) -> set[int]:
        """The states plus those a star reaches by matching nothing (stars never follow each other)."""
        return states | {
            state + 1 for state in states if state < len(self.positions) and self.positions[state] is _STAR
        }


def compile_glob(pattern: str, limits: LimitsSettings, what: str = "index-name") -> Glob:
    """The pattern checked against the caps, then parsed; a name without wildcards matches itself only."""
    check_glob(pattern, limits, what)
    return Glob(pattern, tuple(_positions(pattern)))


def _positions(pattern: str) -> list[CharTest | None]:
    positions: list[CharTest | None] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        i += 1
        if char == "*":
            if not positions or positions[-1] is not _STAR:  # '**' is '*'
                positions.append(_STAR)
        elif char == "?":
            positions.append(_any)
        elif char == "[" and (end := _class_end(pattern, i)) is not None:
            positions.append(_char_class(pattern[i - 1 : end + 1]))
            i = end + 1
        else:
            positions.append(char.__eq__)
    return positions


def literal_chars(pattern: str) -> int:
    """How many characters of `pattern` match only themselves (not '*', '?' or a '[...]' class, read as
    `compile_glob` reads them): how specific a glob is (`cluster.index.access` ranks globs by it)."""
    count, i, n = 0, 0, len(pattern)
    while i < n:
        char = pattern[i]
        i += 1
        if char == "[" and (end := _class_end(pattern, i)) is not None:
            i = end + 1
        elif char not in "*?":
            count += 1
    return count


def _any(char: str) -> bool:
    return True


def _class_end(pattern: str, start: int) -> int | None:
    """Where the class opened just before `start` closes, as fnmatch finds it ('!' and a leading ']' are
    part of it); None: no ']' follows, so the '[' is a plain character."""
    j = start
    if j < len(pattern) and pattern[j] == "!":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    end = pattern.find("]", j)
    return None if end < 0 else end


def _char_class(bracket: str) -> CharTest:
    """One '[...]' (ranges, '!' negation, fnmatch's handling of '-' and of empty ranges) as fnmatch
    translates it alone: a regex of one character class, applied to one character at a time."""
    regex = re.compile(fnmatch.translate(bracket))
    return lambda char: regex.match(char) is not None


def path_selector(
    path_glob: str | None, exclude: Sequence[str], limits: LimitsSettings
) -> Callable[[str], bool] | None:
    """Which files a search keeps (search_code, search_symbols, grep_code: one glob reading for all):
    those `path_glob` matches and no `exclude` glob does (None: every one).

    `*` matches across folders (`src/*.py` takes `src/a/b.py`); a glob without '/' matches a name
    anywhere (`*.py`, `test_*`), one with a '/' the path from the root (`./vendor`, `vendor/`); `**/`
    also matches no folder (`src/**/x.py` takes `src/x.py`); a glob matching a folder takes every file
    under it (`vendor`, `src/legacy`, `docs/*`)."""
    include = None if path_glob is None else _PathGlob.of(path_glob, limits)
    excluded = [_PathGlob.of(pattern, limits) for pattern in exclude]
    if include is None and not excluded:
        return None

    def keep(path: str) -> bool:
        if include is not None and not include.matches(path):
            return False
        return not any(glob.matches(path) for glob in excluded)

    return keep


@dataclass(frozen=True)
class _PathGlob:
    globs: tuple[Glob, ...]
    by_name: bool

    @classmethod
    def of(cls, pattern: str, limits: LimitsSettings) -> _PathGlob:
        raw = pattern.strip()
        pattern = raw.removeprefix("./").strip("/")  # any '/' at all ('./x', 'x/') anchors it at the root
        forms = {pattern, pattern.replace("**/", "")}
        return cls(tuple(compile_glob(form, limits, "path") for form in sorted(forms)), "/" not in raw)

    def matches(self, path: str) -> bool:
        """The path, or a folder above it, matches (by its whole path, or by its name for a glob
        without '/')."""
        parts = path.split("/")
        for end in range(len(parts), 0, -1):
            whole, name = "/".join(parts[:end]), parts[end - 1]
            if any(glob.matches(whole) or (self.by_name and glob.matches(name)) for glob in self.globs):
                return True
        return False
