"""grep_code's patterns: RE2 refuses what it cannot run in linear time, naming the construct; literals
and case folding; a line break is never matched."""

from __future__ import annotations

import pickle
import time

import pytest

from cluster.errors import CursorExpired, PatternRefused
from cluster.grep import GrepCorpus, GrepPattern


@pytest.mark.parametrize(
    ("pattern", "named"),
    [
        (r"foo(?=bar)", "look-ahead (?=...)"),
        (r"foo(?!bar)", "negative look-ahead (?!...)"),
        (r"(?<=x)foo", "look-behind (?<=...)"),
        (r"(?<!x)foo", "negative look-behind (?<!...)"),
        (r"(a)\1", "back-references"),
        (r"(?P<w>a)(?P=w)", "back-references (?P=name)"),
        (r"a++", "possessive quantifiers (++)"),
        (r"(unclosed", "missing )"),
        (r"a{1001}", "invalid repetition size"),
    ],
)
def test_what_re2_cannot_run_is_refused_naming_the_construct(pattern: str, named: str) -> None:
    with pytest.raises(PatternRefused) as refused:
        GrepPattern.compile(pattern)
    assert named in str(refused.value) and refused.value.pattern == pattern


@pytest.mark.parametrize("pattern", ["a\nb", r"foo\nbar", r"[\n]"])
def test_a_pattern_naming_a_line_break_is_refused(pattern: str) -> None:
    with pytest.raises(PatternRefused, match="line break"):
        GrepPattern.compile(pattern)


def test_an_escaped_backslash_before_n_is_not_a_line_break() -> None:
    corpus = GrepCorpus([("a.txt", "path c:\\new\\nothing\n")])
    page = corpus.scan(GrepPattern.compile(r"c:\\new\\n"), limit=10)
    assert [(h.line, h.column) for h in page.hits] == [(1, 6)]


def test_empty_and_overlong_patterns_are_refused() -> None:
    with pytest.raises(PatternRefused, match="empty"):
        GrepPattern.compile("")
    with pytest.raises(PatternRefused, match="over 1000 characters"):
        GrepPattern.compile("a" * 1001)


def test_a_literal_takes_metacharacters_as_text_and_case_folding_is_unicode() -> None:
    corpus = GrepCorpus([("a.py", "x = f(a.b)\nx = f(aXb)\nSTRASSE Straße ÉTÉ\n")])
    literal = GrepPattern.compile("f(a.b)", regex=False)
    assert [h.line for h in corpus.scan(literal, limit=10).hits] == [1]
    assert [h.line for h in corpus.scan(GrepPattern.compile(r"f\(a.b\)"), limit=10).hits] == [1, 2]
    assert corpus.scan(GrepPattern.compile("été"), limit=10).hits == []
    folded = corpus.scan(GrepPattern.compile("été", case_sensitive=False), limit=10).hits
    assert [(h.line, h.column) for h in folded] == [(3, 16)]  # columns count characters, not bytes


def test_a_catastrophic_pattern_over_a_long_line_answers_at_once() -> None:
    corpus = GrepCorpus([("long.txt", "a" * 200_000 + "b\n" + "x" * 100_000 + "\n")])
    began = time.perf_counter()
    for pattern in (r"(a+)+$", r"(x+x+)+y", r"(a|aa)+c", r"^(a?){40}a{40}$"):
        assert corpus.scan(GrepPattern.compile(pattern), limit=10).hits == []
    assert time.perf_counter() - began < 3.0


def test_the_refusals_pickle_across_actors_with_their_fields() -> None:
    refused = pickle.loads(pickle.dumps(PatternRefused("(?=x)", "look-ahead")))
    assert (refused.pattern, refused.reason, str(refused)) == (
        "(?=x)",
        "look-ahead",
        "pattern '(?=x)' refused: look-ahead",
    )
    expired = pickle.loads(pickle.dumps(CursorExpired("rebuilt")))
    assert str(expired) == "cursor refused: rebuilt; ask again without a cursor"
