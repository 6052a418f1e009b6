"""The corpus scan against ripgrep over the same files: the same lines, whatever the file's shape
(CRLF, no final line feed, Unicode, long lines, a match only across a line break), and pages, time
budgets and windows that never lose or repeat a line."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.grep import GrepCorpus, GrepPattern, StopReason
from cluster.grep import corpus as corpus_module
from tests.support.ripgrep import RG, ripgrep

pytestmark = pytest.mark.skipif(RG is None, reason="ripgrep (the PyPI wheel `ripgrep`) is not installed")

FILES = {
    "a/crlf.py": "def alpha():\r\n    return 1\r\n\r\nTODO = 'x'\r\n",
    "a/no_newline.py": "import os\nTODO(auth): check\nlast line without feed",
    "b/unicode.md": "# Été\nnaïve café ÉTÉ\nStraße\n\n  indented TODO\nx\u00a0y \u0663 \u2003end\n",
    "b/long.txt": "x" * 5000 + "needle" + "y" * 5000 + "\n" + "short needle\n",
    "c/space.py": "foo\nbar baz\n\nfoo bar\nend\n",
    "c/empty_lines.txt": "\n\n\nfull\n\n",
}

CASES = [
    ("TODO", {}),
    ("todo", {"case_sensitive": False}),
    (r"^\s*TODO", {}),
    (r"^$", {}),
    (r"^", {}),
    (r"\w+$", {}),
    (r"foo\sbar", {}),  # would match across a line break; rg never does
    (r"[^a-z]bar", {}),
    (r"return \d$", {}),
    (r"1$", {}),  # the CRLF line ends "1\r": $ is before \n only, as in rg
    ("été", {"case_sensitive": False}),
    ("needle", {}),
    (r"x{1000}needle", {}),
    ("(auth):", {"regex": False}),
    (".", {"regex": False}),
    (r"caf.", {}),
    # ripgrep's \w, \d, \s are Unicode: rewritten for RE2 (whose own are ASCII), in and out of classes
    (r"x\sy", {}),
    (r"\d", {}),
    (r"[\w]+é", {}),
    (r"\S+$", {}),
    (r"\W\w+$", {}),
    (r"[[:alpha:]]+ [\d]", {}),
]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    for path, text in FILES.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(text.encode("utf-8"))
    return root


def ripgrep_lines(root: Path, pattern: str, **options: bool) -> list[tuple[str, int, str]]:
    return [(hit.path, hit.line, hit.text) for hit in ripgrep(root, pattern, sorted(FILES), **options)]


def corpus_of(root: Path) -> GrepCorpus:
    return GrepCorpus((path, (root / path).read_bytes().decode("utf-8")) for path in FILES)


@pytest.mark.parametrize(("pattern", "options"), CASES)
def test_the_lines_are_exactly_ripgreps(tree: Path, pattern: str, options: dict[str, bool]) -> None:
    page = corpus_of(tree).scan(GrepPattern.compile(pattern, **options), limit=10_000)
    assert [(h.path, h.line, h.text) for h in page.hits] == ripgrep_lines(tree, pattern, **options)
    assert page.resume is None and page.stopped is None and page.files == len(FILES)


@pytest.mark.parametrize(("pattern", "options"), CASES)
def test_small_windows_find_the_same_lines(
    tree: Path, pattern: str, options: dict[str, bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(corpus_module, "WINDOW", 7)  # windows cut at line ends, lines longer than one
    page = corpus_of(tree).scan(GrepPattern.compile(pattern, **options), limit=10_000)
    assert [(h.path, h.line) for h in page.hits] == [(p, n) for p, n, _ in ripgrep_lines(tree, pattern, **options)]


def test_pages_of_one_line_walk_every_match_once(tree: Path) -> None:
    corpus, pattern = corpus_of(tree), GrepPattern.compile(r"\w")
    whole = corpus.scan(pattern, limit=10_000).hits
    paged, start, pages = [], 0, 0
    while True:
        page = corpus.scan(pattern, limit=1, start=start)
        paged.extend(page.hits)
        pages += 1
        if page.resume is None:
            break
        assert page.stopped is StopReason.LIMIT
        start = page.resume
    assert paged == whole and len(whole) > 10 and pages in (len(whole), len(whole) + 1)


def test_a_scan_past_its_deadline_stops_and_goes_on_where_it_stopped(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(corpus_module, "WINDOW", 64)  # the clock is read between windows
    corpus, pattern = corpus_of(tree), GrepPattern.compile("e")
    whole = corpus.scan(pattern, limit=10_000).hits
    ticks = iter([0.0, 0.0, 0.0, 1.0])
    stopped = corpus.scan(pattern, limit=10_000, deadline=0.5, clock=lambda: next(ticks, 1.0))
    assert stopped.stopped is StopReason.TIME and stopped.resume is not None
    assert 0 < len(stopped.hits) < len(whole)
    rest = corpus.scan(pattern, limit=10_000, start=stopped.resume)
    assert stopped.hits + rest.hits == whole and rest.stopped is None


def test_a_selection_scans_only_the_files_it_keeps(tree: Path) -> None:
    corpus = corpus_of(tree)
    page = corpus.scan(GrepPattern.compile("TODO"), limit=100, select=lambda path: path.startswith("a/"))
    assert {h.path for h in page.hits} == {"a/crlf.py", "a/no_newline.py"} and page.files == 2


def test_context_lines_stay_within_the_file(tree: Path) -> None:
    corpus = corpus_of(tree)
    first, last = corpus.scan(GrepPattern.compile(r"^(import os|last line)"), limit=10).hits
    assert corpus.around(first, 2, 2) == ([], ["TODO(auth): check", "last line without feed"])
    assert corpus.around(last, 5, 5) == (["import os", "TODO(auth): check"], [])
    (crlf,) = corpus.scan(GrepPattern.compile("return"), limit=10).hits
    assert corpus.around(crlf, 1, 1) == (["def alpha():"], [""])


def test_an_empty_corpus_and_empty_files_have_nothing_to_match() -> None:
    assert GrepCorpus([]).scan(GrepPattern.compile("^"), limit=10).hits == []
    corpus = GrepCorpus([("empty.py", ""), ("one.py", "x")])
    assert [(h.path, h.line, h.text) for h in corpus.scan(GrepPattern.compile("^"), limit=10).hits] == [
        ("one.py", 1, "x")
    ]
