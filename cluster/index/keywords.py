"""The keyword leg of search: BM25 term weights as a sparse vector; the store supplies the IDF.

Tokens are identifier-aware (`getUserById` → get, user, by, id; `parse_config` → parse, config)
and every compound identifier is also one whole term (`=getuserbyid`), so an exact identifier in
a query matches the chunks that spell it before the ones that merely share its words. A chunk's
path and symbol count as extra occurrences (its definition outranks its callers). Term ids are a
stable 32-bit hash of the term: no vocabulary to store, the same ids at index and query time.
No model, no download: the store applies IDF over the collection (Qdrant's `idf` modifier).

Every function here is linear in its input: no pattern backtracks super-linearly,
and a line longer than MAX_DECLARATION_LINE_CHARS is never read as a method declaration.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

from cluster.index.tokens import IDENTIFIER, identifier_tokens
from cluster.types import SparseTerms

K1 = 1.2  # BM25 term-frequency saturation
B = 0.75  # BM25 length normalisation
AVG_CHUNK_TERMS = 200.0  # a typical chunk's term count (40-line windows of code)
SYMBOL_BOOST = 3  # a chunk's own symbol counts as this many extra occurrences of its terms
PATH_BOOST = 1
WHOLE_PREFIX = "="
MIN_TERM_CHARS = 2
MAX_DECLARATION_LINE_CHARS = 500  # a longer line is no method declaration (real ones are < 200)
MAX_RECEIVER_CHARS = 200  # `func (r *Repo) Name`: the receiver list read between the parentheses

# Where a name is defined rather than used: keyword declarations (def, function, func (recv), fn,
# class, interface, struct, enum, trait, type), a method declaration line ending in `{`
# (TS/Java/C#/C++), and `const name = (...) =>` / `= function`.
_DECLARED = re.compile(
    r"\b(?:def|function|func|fn|class|interface|struct|enum|trait|type|record|module)\s+"
    rf"(?:\([^)]{{0,{MAX_RECEIVER_CHARS}}}\)\s*)?\*?([A-Za-z_$][A-Za-z0-9_$]*)"
)
# A method declaration line: `<modifiers> [type] name[<generics>](params)[: ret][throws ...] {`.
# One regex for it backtracks quadratically on a long line (4.9 s on 16 KB), so the part after
# the parameters' "(" is decided by `_method_name` in one pass, and the regex below only reads
# the head up to a "(" that pass marked (as _PARAMS_MARK).
_PARAMS_MARK = "\x00"
_METHOD_HEAD = re.compile(
    r"\s*(?:(?:public|private|protected|static|async|readonly|override|abstract|final|export|default|"
    r"virtual|inline|pub|unsafe|get|set)\s+)*(?:[\w<>\[\],.?]+\s+)?([A-Za-z_$][A-Za-z0-9_$]*)\s*(?:<[^>]*>)?"
    + _PARAMS_MARK
)
_CLOSE_THEN_COLON = re.compile(r"\)\s*:")  # `) : ReturnType` (TS/Kotlin-style return types)
_THROWS = re.compile(r"\s*throws [\w., ]+")
_ASSIGNED = re.compile(r"\b(?:const|let|var)\s+([A-Za-z_$][A-Za-z0-9_$]*)\s*=\s*(?:async\s*)?(?:function\b|\()")
_NOT_NAMES = frozenset(
    {
        "if",
        "for",
        "while",
        "switch",
        "catch",
        "return",
        "function",
        "func",
        "fn",
        "def",
        "else",
        "do",
        "try",
        "with",
        "new",
        "await",
    }
)
_BARE_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*(?:(?:\.|::|#)[A-Za-z_$][A-Za-z0-9_$]*)*(?:\(\))?")


def identifier_query(query: str) -> str | None:
    """The name a query asks for when it is one bare identifier (`parse_config`, `Repo.getUserById`,
    `getUserById()`), lower-cased last part; None for prose."""
    text = query.strip()
    if not _BARE_IDENTIFIER.fullmatch(text):
        return None
    last = re.split(r"\.|::|#", text.removesuffix("()"))[-1]
    return last.lower().strip("_$") or None


# English function words: a docstring-style query is mostly these, code comments too.
STOPWORDS = frozenset(
    """a an the of to in for and or is are be been being this that these those it its with as by
on from at if not no into than then else when whether which who whom what will would can could should may might must
do does did has have had was were so such also only any all each other some more most very just but about over under
""".split()
)


_TERM_CACHE = 1 << 16  # stem, term_id and compounds are pure; identifiers repeat, so cache them


@lru_cache(maxsize=_TERM_CACHE)
def stem(term: str) -> str:
    """A light suffix stripper, the same at index and query time: parses/parsed/parsing → pars,
    headers → header, classes → class, entries → entry. Whole identifiers are never stemmed."""
    if len(term) <= 3 or term.startswith(WHOLE_PREFIX):
        return term
    for suffix, replacement in (
        ("sses", "ss"),
        ("ies", "y"),
        ("ied", "y"),
        ("ing", ""),
        ("ed", ""),
        ("es", ""),
        ("ly", ""),
    ):
        if term.endswith(suffix) and len(term) - len(suffix) >= 3:
            term = term[: -len(suffix)] + replacement
            break
    else:
        if term.endswith("s") and not term.endswith("ss") and len(term) > 4:
            term = term[:-1]
    if term.endswith("e") and len(term) > 4:
        term = term[:-1]
    return term


def terms(text: str) -> list[str]:
    """Index/query terms of a text: identifier pieces (stop words out, stemmed), and each compound
    identifier whole."""
    found = [stem(t) for t in identifier_tokens(text) if len(t) >= MIN_TERM_CHARS and t not in STOPWORDS]
    for word in IDENTIFIER.findall(text):
        whole = _whole_term(word)
        if whole is not None:
            found.append(whole)
    return found


@lru_cache(maxsize=_TERM_CACHE)
def _whole_term(word: str) -> str | None:
    """The whole-identifier term of a compound identifier (more than one token), else None."""
    return WHOLE_PREFIX + word.lower().strip("_$") if len(identifier_tokens(word)) > 1 else None


@lru_cache(maxsize=_TERM_CACHE)
def term_id(term: str) -> int:
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=4).digest(), "big")


def defined_names(text: str, symbol: str | None) -> list[str]:
    """Names a chunk defines (its own symbol's last part first), lower-cased, without repeats:
    a chunk that defines `getUserById` outranks the chunks that call it."""
    found = [symbol.rsplit(".", 1)[-1]] if symbol else []
    found += _DECLARED.findall(text) + _ASSIGNED.findall(text)
    found += [name for line in text.splitlines() if (name := method_name(line)) is not None]
    names: dict[str, None] = {}  # insertion-ordered set
    for name in found:
        lowered = name.lower().strip("_$")
        if lowered and lowered not in _NOT_NAMES:
            names.setdefault(lowered, None)
    return list(names)


def method_name(line: str) -> str | None:
    """The name a method declaration line declares (`  public List<User> listAll(int n) {`), or None.

    The same answer as the single regex `_METHOD_HEAD` + `\\([^;=]*\\)\\s*(?::[^;={]*)?(?:throws
    [\\w., ]+)?\\{\\s*$` gives, in linear time: that tail holds after a "(" at ``o`` exactly when
    nothing after ``o`` is ';' or '=' and some ')' after ``o`` is followed only by whitespace, by
    `: type` with no '{', or by `throws ...`; so one pass finds the last ')' that closes a valid
    tail, every "(" between the last ';'/'=' and it is marked, and the head regex, which reads
    each character class the same for "(" and the mark, stops at the first mark it can reach.
    """
    if len(line) > MAX_DECLARATION_LINE_CHARS or "(" not in line:
        return None
    stripped = line.rstrip()
    if not stripped.endswith("{"):
        return None
    head = stripped[:-1]
    ends = [-1]
    last_nonblank = head.rstrip()
    if last_nonblank.endswith(")"):
        ends.append(len(last_nonblank) - 1)  # `(...) {`
    last_close = head.rfind(")")
    if last_close >= 0 and _THROWS.fullmatch(head, last_close + 1):
        ends.append(last_close)  # `(...) throws X {`
    colons = [m.start() for m in _CLOSE_THEN_COLON.finditer(head)]
    if colons and colons[-1] > head.rfind("{"):
        ends.append(colons[-1])  # `(...): Type {`
    end = max(ends)
    first = max(head.rfind(";"), head.rfind("=")) + 1  # a "(" before this sees a ';' or '=' after it
    if end <= first:
        return None
    marked = line[:first].replace(_PARAMS_MARK, "\x01") + line[first:end].replace(_PARAMS_MARK, "\x01").replace(
        "(", _PARAMS_MARK
    )
    match = _METHOD_HEAD.match(marked)
    return match.group(1) if match else None


def chunk_keywords(text: str, path: str, symbol: str | None) -> SparseTerms:
    """BM25 term weights of one chunk (its text, path, symbol and the names it defines)."""
    counts = Counter(terms(text))
    for term in terms(path.replace("/", " ").replace(".", " ")):
        counts[term] += PATH_BOOST
    boosted = set(terms(symbol)) if symbol else set()
    for name in defined_names(text, symbol):
        boosted.update([*terms(name), WHOLE_PREFIX + name])
    for term in boosted:
        counts[term] += SYMBOL_BOOST
    length = sum(counts.values())
    norm = K1 * (1 - B + B * length / AVG_CHUNK_TERMS)
    return _sparse((term, tf * (K1 + 1) / (tf + norm)) for term, tf in counts.items())


def query_keywords(query: str) -> SparseTerms:
    """A query's terms, each weighted 1 (BM25's query side; the store multiplies in the IDF)."""
    return _sparse((term, 1.0) for term in set(terms(query)))


def _sparse(weights: Iterable[tuple[str, float]]) -> SparseTerms:
    merged: dict[int, float] = {}
    for term, weight in weights:
        index = term_id(term)
        merged[index] = merged.get(index, 0.0) + weight  # a 32-bit collision adds up; harmless
    ordered = sorted(merged)
    return SparseTerms(indices=ordered, values=[round(merged[i], 6) for i in ordered])
