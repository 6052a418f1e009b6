"""Identifier tokens: the one tokenizer of code identifiers, shared by the sparse index and the code map."""

from __future__ import annotations

import re

__all__ = ["IDENTIFIER", "identifier_tokens"]

# ACRONYM before a capitalised word | Capitalised or lower word | ACRONYM | digits
_ASCII_TOKEN = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_ALNUM_RUN = re.compile(r"[^\W_]+")
# One identifier of C-family, JS and Python source (`$` for JS): the one definition of it.
IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")


def identifier_tokens(text: str) -> list[str]:
    """Lower-cased identifier-aware tokens, in order, duplicates kept.

    Splits on anything not a letter or digit, then snake_case, camelCase and PascalCase
    (acronyms stay whole: "HTTPServerError" → http, server, error); digit runs are tokens of
    their own ("utf8" → utf, 8). Non-ASCII words are kept whole (lower-cased).
    """
    if text.isascii():
        return [token.lower() for token in _ASCII_TOKEN.findall(text)]
    tokens: list[str] = []
    for run in _ALNUM_RUN.findall(text):
        if run.isascii():
            tokens.extend(token.lower() for token in _ASCII_TOKEN.findall(run))
        else:
            tokens.extend(_split_unicode(run))
    return tokens


def _split_unicode(run: str) -> list[str]:
    """identifier_tokens for one letter/digit run holding non-ASCII letters (rare, so char by char)."""
    tokens: list[str] = []
    start = 0
    for i in range(1, len(run)):
        before, here = run[i - 1], run[i]
        if (
            before.isdigit() != here.isdigit()
            or (before.islower() and here.isupper())
            or (before.isupper() and here.isupper() and i + 1 < len(run) and run[i + 1].islower())
        ):
            tokens.append(run[start:i].lower())
            start = i
    tokens.append(run[start:].lower())
    return tokens
