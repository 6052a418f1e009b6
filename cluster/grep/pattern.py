"""A grep pattern compiled for RE2, the linear-time engine: what ripgrep matches, line by line.

RE2 runs in time linear in the text whatever the pattern (no backtracking), so a pattern that takes
a backtracking engine exponential time (`(a+)+$` over a long line of `a`) answers at once. The price
is syntax: no look-around and no back-references; a pattern using them is refused with the construct
named. As in ripgrep, a match never crosses a line break: a pattern naming one (`\\n`) is refused, and
a class that could match one (`\\s`, `[^a]`) is checked within each line only (`GrepPattern.line_match`).
`regex=False` takes the pattern as a literal string; `case_sensitive=False` folds case (Unicode
simple folding, as `rg -i`). `\\w`, `\\d` and `\\s` (and their negations outside a class) are rewritten
to their Unicode classes, as ripgrep reads them (RE2's own are ASCII); `\\b` stays ASCII (RE2 has no
Unicode word boundary), and so do `\\W`, `\\S` inside a bracket class: the differences from ripgrep left.
Repetition counts over 1000 are refused (RE2's cap).
"""

from __future__ import annotations

from dataclasses import dataclass

import re2

from cluster.errors import PatternRefused

__all__ = ["MAX_PATTERN_CHARS", "GrepPattern"]

MAX_PATTERN_CHARS = 1000
# RE2's memory for one compiled pattern (its DFA cache); past it RE2 falls back to its NFA, still linear.
_MAX_MEMORY = 64 << 20

_CONSTRUCTS = (  # what a pattern holds that RE2 refuses, found in the pattern's own text
    ("(?<=", "look-behind (?<=...) is not supported"),
    ("(?<!", "negative look-behind (?<!...) is not supported"),
    ("(?=", "look-ahead (?=...) is not supported"),
    ("(?!", "negative look-ahead (?!...) is not supported"),
    ("(?>", "atomic groups (?>...) are not supported"),
    ("(?P=", "back-references (?P=name) are not supported"),
    ("++", "possessive quantifiers (++) are not supported"),
    ("*+", "possessive quantifiers (*+) are not supported"),
    ("?+", "possessive quantifiers (?+) are not supported"),
)
_LINEAR = "grep_code runs RE2, a linear-time engine without backtracking"


@dataclass(frozen=True)
class GrepPattern:
    """A compiled pattern: `search` finds candidates in a buffer of lines, `line_match` confirms one line."""

    text: str
    regex: bool
    case_sensitive: bool
    _compiled: re2._Regexp

    @classmethod
    def compile(cls, pattern: str, *, regex: bool = True, case_sensitive: bool = True) -> GrepPattern:
        if not pattern:
            raise PatternRefused(pattern, "the pattern is empty")
        if len(pattern) > MAX_PATTERN_CHARS:
            raise PatternRefused(pattern, f"over {MAX_PATTERN_CHARS} characters")
        if "\n" in pattern or (regex and _names_line_break(pattern)):
            raise PatternRefused(pattern, "it names a line break (\\n): grep_code matches within one line")
        body = _unicode_classes(pattern) if regex else re2.escape(pattern)
        flags = "(?m)" if case_sensitive else "(?mi)"
        options = re2.Options()
        options.log_errors = False
        options.max_mem = _MAX_MEMORY
        try:
            compiled = re2.compile((flags + body).encode("utf-8"), options)
        except re2.error as exc:
            raise PatternRefused(pattern, _reason(pattern, exc)) from None
        return cls(pattern, regex, case_sensitive, compiled)

    def search(self, buffer: bytes, start: int, end: int) -> tuple[int, int] | None:
        """The span of the leftmost match in buffer[start:end] (it may cross lines here), or None."""
        found = self._compiled.search(buffer, start, end)
        return None if found is None else found.span()

    def line_match(self, buffer: bytes, line_start: int, line_end: int) -> int | None:
        """The start of the first match within the one line buffer[line_start:line_end] (no line break)."""
        found = self._compiled.search(buffer, line_start, line_end)
        return None if found is None else found.start()


def _names_line_break(pattern: str) -> bool:
    """Whether a regex names a line feed: the escape `\\n` (not an escaped backslash before an `n`)."""
    at = 0
    while (at := pattern.find("\\", at)) != -1:
        if pattern[at + 1 : at + 2] == "n":
            return True
        at += 2
    return False


_WORD = r"\p{L}\p{M}\p{Nd}\p{Pc}"
_SPACE = r"\t\n\v\f\r \x{85}\p{Z}"
_OUTSIDE = {
    "w": f"[{_WORD}]",
    "W": f"[^{_WORD}]",
    "d": r"\p{Nd}",
    "D": r"\P{Nd}",
    "s": f"[{_SPACE}]",
    "S": f"[^{_SPACE}]",
}
_INSIDE = {"w": _WORD, "d": r"\p{Nd}", "D": r"\P{Nd}", "s": _SPACE}


def _unicode_classes(pattern: str) -> str:
    """`\\w`, `\\d`, `\\s` and kin as ripgrep reads them (Unicode), in and out of bracket classes."""
    out: list[str] = []
    at, n, in_class = 0, len(pattern), False
    while at < n:
        char = pattern[at]
        if char == "\\" and at + 1 < n:
            escaped = pattern[at + 1]
            table = _INSIDE if in_class else _OUTSIDE
            out.append(table.get(escaped, pattern[at : at + 2]))
            at += 2
            continue
        if in_class:
            if pattern.startswith("[:", at) and (close := pattern.find(":]", at + 2)) != -1:
                out.append(pattern[at : close + 2])  # a POSIX class, [:alpha:]
                at = close + 2
                continue
            if char == "]":
                in_class = False
        elif char == "[":
            in_class = True
            out.append(char)
            at += 1
            if pattern.startswith("^", at):
                out.append("^")
                at += 1
            if pattern.startswith("]", at):  # a leading ] is a literal
                out.append("]")
                at += 1
            continue
        out.append(char)
        at += 1
    return "".join(out)


def _reason(pattern: str, exc: re2.error) -> str:
    raw = exc.args[0] if exc.args else exc
    message = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    if message.startswith(("invalid perl operator", "bad repetition operator")):
        for construct, hint in _CONSTRUCTS:
            if construct in pattern:
                return f"{hint} ({_LINEAR}; RE2 says: {message})"
    if message.startswith("invalid escape sequence: \\") and message[-1:].isdigit():
        return f"back-references ({message.rpartition(' ')[2]}) are not supported ({_LINEAR})"
    return f"RE2 cannot compile it: {message}"
