"""Find high-confidence credentials in text, so that no chunk holding one is embedded, stored or sent,
and no read serves one.

A small rule set of our own (SecretRule). The maintained detector we tried, detect-secrets 1.5.0,
installs offline but has no rule for Anthropic, OpenRouter, Google API or fine-grained GitHub keys,
keeps its configuration in process-global state, and its entropy rules flag thousands of lines of
ordinary code (hashes, base64 test data) in this repository alone.

Every rule is linear-time: each regex is anchored on a literal or a short class, every repetition is
bounded and none is nested, so one 1 MB line costs one pass per rule. Private-key blocks are found
by a single forward pass over their BEGIN/END lines (no regex spans a whole block).

Nothing here ever returns, logs or raises the matched text: a SecretFinding names its rule and lines
only, and ``redact`` replaces each match by ``[redacted:<rule>]``, keeping the line count.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum


class SecretRule(str, Enum):
    PRIVATE_KEY = "private-key"  # PEM/OpenSSH/PGP private-key blocks (RSA, EC, DSA, ENCRYPTED, ...)
    AWS_ACCESS_KEY_ID = "aws-access-key-id"  # AKIA.../ASIA... (20 characters; up to 28 accepted)
    AWS_SECRET_KEY = "aws-secret-access-key"  # 40 characters, assigned to an aws..secret / secret_access_key name
    GITHUB_TOKEN = "github-token"  # ghp_ gho_ ghu_ ghs_ ghr_ github_pat_
    GITLAB_TOKEN = "gitlab-token"  # glpat- and the other gl*- token kinds
    OPENROUTER_KEY = "openrouter-key"  # sk-or-v1-...
    ANTHROPIC_KEY = "anthropic-key"  # sk-ant-...
    OPENAI_KEY = "openai-key"  # sk-proj-/sk-svcacct-/sk-admin-..., legacy sk-<32+ alphanumerics>
    SLACK_TOKEN = "slack-token"  # xoxb-/xoxp-/xoxa-/xoxo-/xoxr-/xoxs-, xapp-
    SLACK_WEBHOOK = "slack-webhook"  # hooks.slack.com/services/T../B../..
    STRIPE_KEY = "stripe-live-key"  # sk_live_ / rk_live_ (publishable pk_ keys are not secret)
    GOOGLE_API_KEY = "google-api-key"  # AIza + 35
    NPM_TOKEN = "npm-token"  # npm_ + 36
    PYPI_TOKEN = "pypi-token"  # pypi- + a macaroon for pypi.org
    HUGGINGFACE_TOKEN = "huggingface-token"  # hf_ + 34..40 mixed-case alphanumerics
    URL_CREDENTIALS = "url-credentials"  # scheme://user:password@host, https://<token>@host


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
    spans = sorted(set(_spans(text)), key=lambda s: (s[0], -s[1]))
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
# single-match rules

_NEWLINE = re.compile("\n")
_NOT_WORD_BEFORE = r"(?<![A-Za-z0-9_])"
_NOT_TOKEN_BEFORE = r"(?<![A-Za-z0-9_-])"


@dataclass(frozen=True)
class _Rule:
    rule: SecretRule
    needles: tuple[str, ...]  # the regex runs only on text holding one of these (lower-cased text if folded)
    pattern: re.Pattern[str]
    accept: Callable[[re.Match[str]], bool] = lambda _: True  # a post-filter against look-alikes
    folded: bool = False  # needles are looked up in the lower-cased text
    secret_group: str | None = None  # redact only this group (the value, not the name it is assigned to)


def _mixed_case(match: re.Match[str]) -> bool:
    value = match.group(0)[3:]  # after the lower-case prefix
    return any(c.isupper() for c in value) and any(c.islower() for c in value)


# Passwords that are placeholders, templates or masks, not credentials.
_PLACEHOLDER_PASSWORDS = frozenset(
    {"password", "passwd", "pass", "pwd", "secret", "token", "changeme", "example", "redacted", "your-password"}
)
_TEMPLATE_STARTS = ("$", "{", "<", "%", "*", "(")


def _real_password(match: re.Match[str]) -> bool:
    password = match.group("password")
    if password.startswith(_TEMPLATE_STARTS) or password.lower() in _PLACEHOLDER_PASSWORDS:
        return False
    if len(set(password)) == 1:
        return False  # xxxx, ****
    return not (password.isdigit() and len(password) <= 5)  # host:port@, not a password


def _token_like(match: re.Match[str]) -> bool:
    token = match.group("token")
    return any(c.isdigit() for c in token) and any(c.isalpha() for c in token)


_RULES: tuple[_Rule, ...] = (
    _Rule(
        SecretRule.AWS_ACCESS_KEY_ID,
        ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
        re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16,24}(?![A-Za-z0-9])"),
    ),
    _Rule(
        SecretRule.AWS_SECRET_KEY,
        ("secret",),
        re.compile(
            r"(?i:aws[A-Za-z0-9_.-]{0,20}secret|secret[_.-]?access[_.-]?key)[A-Za-z0-9_.-]{0,20}[\"']?"
            r"[ \t]{0,4}(?:=>|:=|=|:)[ \t]{0,4}[\"']?(?P<secret>[A-Za-z0-9/+]{40,100})(?![A-Za-z0-9/+=])"
        ),
        folded=True,
        secret_group="secret",
    ),
    _Rule(
        SecretRule.GITHUB_TOKEN,
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        re.compile(
            _NOT_WORD_BEFORE + r"(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{22,251})(?![A-Za-z0-9_])"
        ),
    ),
    _Rule(
        SecretRule.GITLAB_TOKEN,
        ("glpat-", "glptt-", "gldt-", "glrt-", "glft-", "glcbt-", "glsoat-"),
        re.compile(_NOT_WORD_BEFORE + r"gl(?:pat|ptt|dt|rt|ft|cbt|soat)-[A-Za-z0-9_.-]{20,250}"),
    ),
    _Rule(SecretRule.OPENROUTER_KEY, ("sk-or-v1-",), re.compile(_NOT_TOKEN_BEFORE + r"sk-or-v1-[A-Za-z0-9]{16,250}")),
    _Rule(SecretRule.ANTHROPIC_KEY, ("sk-ant-",), re.compile(_NOT_TOKEN_BEFORE + r"sk-ant-[A-Za-z0-9_-]{20,250}")),
    _Rule(
        SecretRule.OPENAI_KEY,
        ("sk-",),
        re.compile(_NOT_TOKEN_BEFORE + r"sk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,250}|[A-Za-z0-9]{32,250})"),
    ),
    _Rule(
        SecretRule.SLACK_TOKEN,
        ("xox", "xapp-"),
        re.compile(
            r"(?<![A-Za-z0-9])(?:xox[abposr]-[A-Za-z0-9]{1,40}-[A-Za-z0-9-]{8,250}|xapp-[0-9]{1,3}-[A-Za-z0-9-]{20,250})"
        ),
    ),
    _Rule(
        SecretRule.SLACK_WEBHOOK,
        ("hooks.slack.com/",),
        re.compile(r"hooks\.slack\.com/services/T[A-Za-z0-9_]{6,20}/B[A-Za-z0-9_]{6,20}/[A-Za-z0-9_]{16,64}"),
    ),
    _Rule(SecretRule.STRIPE_KEY, ("k_live_",), re.compile(r"(?<![A-Za-z0-9])[rs]k_live_[A-Za-z0-9]{20,250}")),
    _Rule(
        SecretRule.GOOGLE_API_KEY, ("AIza",), re.compile(_NOT_TOKEN_BEFORE + r"AIza[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])")
    ),
    _Rule(SecretRule.NPM_TOKEN, ("npm_",), re.compile(_NOT_WORD_BEFORE + r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])")),
    _Rule(SecretRule.PYPI_TOKEN, ("pypi-",), re.compile(r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,250}")),
    _Rule(
        SecretRule.HUGGINGFACE_TOKEN,
        ("hf_",),
        re.compile(_NOT_WORD_BEFORE + r"hf_[A-Za-z0-9]{34,40}(?![A-Za-z0-9_])"),
        _mixed_case,
    ),
    # scheme://user:password@host (x-access-token:..., oauth2:..., postgres://u:p@...). Anchored on
    # "://", so git@github.com:org/repo and user@host never match.
    _Rule(
        SecretRule.URL_CREDENTIALS,
        ("://",),
        re.compile(r"://[^\s/?#@:'\"<>\\\[\]]{0,256}:(?P<password>[^\s/?#@'\"<>\\\[\]]{1,256})@(?=[A-Za-z0-9\[])"),
        _real_password,
        secret_group="password",
    ),
    # https://<token>@host: a long user part without a password, as `git clone https://TOKEN@github.com/...`
    _Rule(
        SecretRule.URL_CREDENTIALS,
        ("://",),
        re.compile(r"://(?P<token>[A-Za-z0-9_.~+-]{20,256})@(?=[A-Za-z0-9\[])"),
        _token_like,
        secret_group="token",
    ),
)


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
    lowered: str | None = None
    for rule in _RULES:
        haystack = text
        if rule.folded:
            lowered = text.lower() if lowered is None else lowered
            haystack = lowered
        if not any(needle in haystack for needle in rule.needles):
            continue
        for match in rule.pattern.finditer(text):
            if rule.accept(match):
                start, end = match.span(rule.secret_group or 0)
                yield start, end, rule.rule
