"""Find high-confidence credentials in text, so that no chunk holding one is embedded, stored or sent,
and no read serves one.

Our own rule table (`secret_rules`, `secret_config_rules`: one entry per credential form, each citing
the gitleaks or GitHub secret scanning rule it follows). The maintained detector we tried,
detect-secrets 1.5.0, installs offline but has no rule for Anthropic, OpenRouter, Google API or
fine-grained GitHub keys, keeps its configuration in process-global state, and its entropy rules
flag thousands of lines of ordinary code (hashes, base64 test data) in this repository alone.

Every rule is linear-time (`secret_rules` says how: a literal start, bounded repetitions, none
nested), so one 1 MB line costs one pass per rule. Private-key blocks are found
by a single forward pass over their BEGIN/END lines (no regex spans a whole block). A key built by
concatenating string literals (``"sk_live_" + "..."``, ``'AKIA' '...'``, PHP's ``.``) is found by one
more pass of the token rules over the stretches around such glue, with the glue removed (`_Joined`).

Nothing here ever returns, logs or raises the matched text: a SecretFinding names its rule and lines
only, and ``redact`` replaces each match by ``[redacted:<rule>]``, keeping the line count.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

from cluster.ingest.secret_config_rules import CONFIG_RULES
from cluster.ingest.secret_rules import TOKEN_RULES, ContentRule, Haystack, SecretRule

__all__ = ["CONTENT_RULES", "SecretFinding", "SecretRule", "find_secrets", "has_secret", "redact"]

CONTENT_RULES: tuple[ContentRule, ...] = TOKEN_RULES + CONFIG_RULES
"""Every single-match rule; private-key blocks are found by `_private_key_spans`."""

_NEWLINE = re.compile("\n")
_PRECEDENCE = {rule: i for i, rule in enumerate(SecretRule)}  # one span, two rules: the more specific names it
JOIN_REACH = 512  # characters either side of glue between literals that the joined pass reads


@dataclass(frozen=True)
class SecretFinding:
    """One credential found: which rule and where (1-based lines). Never the matched text."""

    rule: SecretRule
    line: int
    end_line: int  # the same as line except for a multi-line private-key block


def find_secrets(text: str) -> list[SecretFinding]:
    """Every credential in ``text``, by line then rule (a match found by two rules is listed twice)."""
    spans = sorted(set(_spans(text)))
    if not spans:
        return []
    newlines = [m.start() for m in _NEWLINE.finditer(text)]
    findings = {
        SecretFinding(rule, bisect_right(newlines, start - 1) + 1, bisect_right(newlines, max(start, end - 1) - 1) + 1)
        for start, end, rule in spans
    }
    return sorted(findings, key=lambda f: (f.line, f.end_line, f.rule.value))


def has_secret(text: str) -> bool:
    return next(_spans(text), None) is not None


def redact(text: str) -> str:
    """``text`` with each credential replaced by ``[redacted:<rule>]``; line breaks inside a match are
    kept, so line n of the result is line n of the input."""
    spans = sorted(set(_spans(text)), key=lambda s: (s[0], -s[1], _PRECEDENCE[s[2]]))
    if not spans:
        return text
    out: list[str] = []
    pos = 0
    for start, end, rule in spans:
        if end <= pos:
            continue  # inside a span already replaced
        start = max(start, pos)
        out.append(text[pos:start])
        out.append(f"[redacted:{rule.value}]" + "\n" * text.count("\n", start, end))
        pos = end
    out.append(text[pos:])
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# the rule table, on the text and on its string literals joined

# The glue between two string literals whose facing ends are token characters: a closing quote, an
# operator (+ . .. & ||) or only blanks, at most one line break (with a backslash continuation), and
# the next literal's opening quote. The look-behind is written after the quote (see starts_with).
_TOKEN_END = r"[A-Za-z0-9_.+/=-]"
_LITERAL_GLUE = re.compile(
    rf"[\"'](?<={_TOKEN_END}[\"'])(?=[ \t\r\n\\+.&|])[ \t]{{0,8}}(?:\+|\.\.?|&|\|\|)?[ \t]{{0,8}}"
    rf"(?:\\?\r?\n[ \t]{{0,40}})?(?:\+|\.\.?|&|\|\|)?[ \t]{{0,8}}[\"'](?={_TOKEN_END})"
)


def _rule_spans(text: str, rules: tuple[ContentRule, ...] = CONTENT_RULES) -> Iterator[tuple[int, int, SecretRule]]:
    haystack = Haystack(text)
    for rule in rules:
        if rule.applies(haystack):
            for start, end in rule.spans(text):
                yield start, end, rule.rule


class _Joined:
    """``text`` with the glue between adjacent string literals removed, and the way back: a match in
    the joined text maps to the span of the original that holds it, glue included."""

    def __init__(self, text: str, glue: list[tuple[int, int]]) -> None:
        pieces: list[str] = []
        self.at: list[int] = []  # where each removed glue was, in joined positions
        self.shift: list[int] = []  # characters removed up to and including each glue
        pos = removed = 0
        for start, end in glue:
            pieces.append(text[pos:start])
            self.at.append(start - removed)
            removed += end - start
            self.shift.append(removed)
            pos = end
        pieces.append(text[pos:])
        self.text = "".join(pieces)

    def _removed_before(self, joined_pos: int) -> int:
        i = bisect_right(self.at, joined_pos)
        return self.shift[i - 1] if i else 0

    def original(self, start: int, end: int) -> tuple[int, int] | None:
        """The original span of joined ``[start, end)``; None when it crosses no glue (found already)."""
        first, last = self._removed_before(start), self._removed_before(end - 1)
        return None if first == last else (start + first, end + last)


def _glued_windows(text: str) -> Iterator[tuple[int, list[tuple[int, int]]]]:
    """Each stretch of ``text`` within JOIN_REACH of glue between literals: (its start, the glue in it,
    relative to that start). Windows that touch are merged, so a chain of literals is one window."""
    window: tuple[int, int] | None = None
    glue: list[tuple[int, int]] = []
    for match in _LITERAL_GLUE.finditer(text):
        start, end = match.span()
        if window is not None and start - JOIN_REACH > window[1]:
            yield window[0], [(s - window[0], e - window[0]) for s, e in glue]
            window, glue = None, []
        window = (window[0] if window else max(0, start - JOIN_REACH), min(len(text), end + JOIN_REACH))
        glue.append((start, end))
    if window is not None:
        yield window[0], [(s - window[0], e - window[0]) for s, e in glue]


def _joined_spans(text: str) -> Iterator[tuple[int, int, SecretRule]]:
    """Tokens that only exist once string literals are joined (``"sk_live_" + "..."``), as spans of
    the original text. Only the token rules, only near glue: a credential split across literals is a
    provider key someone hid from a scanner, not a config file."""
    for offset, glue in _glued_windows(text):
        joined = _Joined(text[offset : offset + glue[-1][1] + JOIN_REACH], glue)
        for start, end, rule in _rule_spans(joined.text, TOKEN_RULES):
            span = joined.original(start, end)
            if span is not None:
                yield offset + span[0], offset + span[1], rule


# ---------------------------------------------------------------------------------------------
# private-key blocks

_PEM_BEGIN = re.compile(r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re.compile(r"-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----")
MAX_KEY_LINES = 2000  # a block is followed at most this many lines without its END line
_KEY_BODY = re.compile(r"[A-Za-z0-9+/=]{1,120}")
_KEY_HEADER = re.compile(r"(?:Proc-Type|DEK-Info|Version|Comment|Hash|Charset): ?[^\n]{0,200}")
_GLUE = " \t\r\"'+,();"  # what string literals and concatenation put around key lines in code


def _key_line(line: str) -> bool:
    """A line of key material: base64, an armour header, or empty, once code's quoting is removed."""
    core = line.strip(_GLUE)
    if core.endswith("\\n"):
        core = core[:-2].strip(_GLUE)
    return not core or bool(_KEY_BODY.fullmatch(core) or _KEY_HEADER.fullmatch(core))


def _private_key_spans(text: str) -> Iterator[tuple[int, int, SecretRule]]:
    """BEGIN..END blocks; a BEGIN without its END runs over the key lines after it, an END without
    its BEGIN (a chunk cut mid-key) over the key lines before it. One forward pass."""
    if "PRIVATE KEY" not in text:
        return
    begins = [(m.start(), m.end()) for m in _PEM_BEGIN.finditer(text)]
    ends = [(m.start(), m.end()) for m in _PEM_END.finditer(text)]
    cursor = 0
    e = 0
    for begin_start, begin_end in begins:
        if begin_start < cursor:
            continue
        while e < len(ends) and ends[e][0] < begin_start:  # END lines with no BEGIN before them
            if ends[e][0] >= cursor:
                yield _orphan_end(text, ends[e], cursor)
                cursor = ends[e][1]
            e += 1
        while e < len(ends) and ends[e][0] < begin_end:
            e += 1
        end = _block_end(text, begin_end, ends[e] if e < len(ends) else None)
        yield begin_start, end, SecretRule.PRIVATE_KEY
        cursor = end
        while e < len(ends) and ends[e][0] < cursor:
            e += 1
    for end_span in ends[e:]:
        if end_span[0] >= cursor:
            yield _orphan_end(text, end_span, cursor)
            cursor = end_span[1]


def _block_end(text: str, begin_end: int, next_end: tuple[int, int] | None) -> int:
    line_end = _line_end(text, begin_end)
    if next_end is not None and next_end[0] < line_end:
        return next_end[1]  # the whole block on one line (a JSON "private_key": "...\n..." value)
    end = line_end
    pos = line_end + 1
    for _ in range(MAX_KEY_LINES):
        if pos > len(text):
            break
        nl = _line_end(text, pos)
        if next_end is not None and next_end[0] < nl:
            return next_end[1]
        if not _key_line(text[pos:nl]):
            break
        end = nl
        pos = nl + 1
    return end


def _orphan_end(text: str, end_span: tuple[int, int], cursor: int) -> tuple[int, int, SecretRule]:
    start = text.rfind("\n", cursor, end_span[0]) + 1  # the END line's start (or cursor's line)
    start = max(start, cursor)
    for _ in range(MAX_KEY_LINES):
        if start <= cursor:
            break
        prev = max(text.rfind("\n", cursor, start - 1) + 1, cursor)
        if not _key_line(text[prev : start - 1]):
            break
        start = prev
    return start, end_span[1], SecretRule.PRIVATE_KEY


def _line_end(text: str, pos: int) -> int:
    nl = text.find("\n", pos)
    return len(text) if nl < 0 else nl


def _spans(text: str) -> Iterator[tuple[int, int, SecretRule]]:
    """(start, end, rule) of every match, lazily (has_secret stops at the first)."""
    yield from _private_key_spans(text)
    yield from _rule_spans(text)
    yield from _joined_spans(text)
