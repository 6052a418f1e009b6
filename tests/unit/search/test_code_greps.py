"""grep_code over a real catalogue: the serving build's files as the walker indexed them (secrets,
ignored and generated files never match), the enclosing symbol and the commit, globs, pages and
cursors across indexes, the time budget, and a build that changes under a cursor."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from cluster.build import collect_repository
from cluster.errors import CursorExpired, IndexNotFound, LimitExceeded, PatternRefused
from cluster.grep import GrepRequest, StopReason
from cluster.index.catalog import IndexCatalog, point_id, point_payload
from cluster.index.store.engines import open_vector_store
from cluster.ingest import SearchControls, SourceState
from cluster.search import CodeGreps, CodeMaps
from cluster.settings import LimitsSettings, SamespaceSettings
from cluster.types import StoredPoint
from tests.support.code_maps import IDENTITY, WIDTH

APP = '''"""The app."""

SECRET_HINT = "see config"


class Billing:
    def charge(self, amount):
        # TODO(auth): check the caller
        return amount * RATE

    def refund(self, amount):
        return -amount


def helper():
    return "TODO(auth) later"
'''
FILES = {
    "app/billing.py": APP,
    "app/util.js": "function util() {\n  // TODO(auth): util\n  return 1;\n}\n",
    "tests/test_billing.py": "def test_charge():\n    # TODO(auth): test it\n    assert True\n",
    "README.md": "# Demo\n\nTODO(auth) in the docs\n",
    ".gitignore": "ignored/\n",
    "ignored/skip.py": "# TODO(auth): ignored by git\n",
    ".env": "TOKEN=TODO(auth)-secret\n",
    "build/gen.min.js": "// TODO(auth)" + " x" * 3000 + "\n",
    "app/config.py": 'API_KEY = "sk-or-v1-' + "a" * 64 + '"  # TODO(auth)\n',
}
SETTINGS = SamespaceSettings()


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def build(catalog: IndexCatalog, name: str, root: Path, commit: str | None = "c0ffee" * 6 + "abcd") -> str:
    """Index `root` as a reindex does (the walker's file set and chunks), with random vectors."""
    found = collect_repository(root, SETTINGS)
    source = None if commit is None else SourceState(vcs="git", commit=commit, branch="main", dirty=False)
    build_id = catalog.begin_build(name, IDENTITY, str(root), None, source=source)
    rng = np.random.default_rng(7)
    points = []
    for chunk in found.chunks:
        vector = rng.normal(size=WIDTH)
        payload = point_payload(name, chunk, IDENTITY, IDENTITY, "p0", build_id)
        points.append(
            StoredPoint(id=point_id(name, chunk), vector=(vector / np.linalg.norm(vector)).tolist(), payload=payload)
        )
    catalog.write(build_id, points)
    catalog.commit_build(build_id, files=found.files, providers=["p0"])
    return build_id


@pytest.fixture
def catalog(tmp_path: Path) -> IndexCatalog:
    return IndexCatalog(open_vector_store("embedded", data_dir=tmp_path / "store", url=None))


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "shop", FILES)


def greps(catalog: IndexCatalog, **limits: float) -> CodeGreps:
    settings = LimitsSettings(**limits)
    return CodeGreps(catalog, CodeMaps(catalog), limits=settings, deny=None)


def places(result: object) -> list[tuple[str, int]]:
    return [(m.path, m.line) for m in result.matches]  # type: ignore[attr-defined]


def test_only_the_indexed_files_match_with_their_symbol_and_commit(catalog: IndexCatalog, shop: Path) -> None:
    build(catalog, "shop", shop)
    result = greps(catalog).grep(GrepRequest(pattern="TODO(auth)", regex=False, repo="shop"))
    assert places(result) == [
        ("README.md", 3),
        ("app/billing.py", 8),
        ("app/billing.py", 16),
        ("app/util.js", 2),
        ("tests/test_billing.py", 2),
    ]  # never .env (a secret), ignored/ (git-ignored), the minified file, nor config.py's key line
    charge = result.matches[1]
    assert (charge.symbol, charge.column, charge.text) == (
        "Billing.charge",
        11,
        "        # TODO(auth): check the caller",
    )
    assert charge.commit == "c0ffee" * 6 + "abcd" and charge.repo == "shop"
    assert result.matches[2].symbol == "helper" and result.matches[0].symbol is None
    assert not result.truncated and result.cursor is None and result.files_searched >= 5


def test_a_credential_in_an_indexed_file_is_redacted_before_it_can_match(catalog: IndexCatalog, shop: Path) -> None:
    key = "sk-or-v1-" + "b" * 64
    (shop / "app" / "keys.py").write_text(
        f'DEBUG = 2\nAPI_KEY = "{key}"  # the key\nZ = 1\n\n\ndef g():\n    return 2\n'
    )
    build(catalog, "shop", shop)
    grep = greps(catalog)
    assert grep.grep(GrepRequest(pattern="sk-or-v1", regex=False, repo="shop")).matches == []
    assert grep.grep(GrepRequest(pattern="b{64}", repo="shop")).matches == []
    (line,) = grep.grep(GrepRequest(pattern="API_KEY", repo="shop")).matches
    assert (line.path, line.line, line.text) == ("app/keys.py", 2, 'API_KEY = "[redacted:openrouter-key]"  # the key')
    assert places(grep.grep(GrepRequest(pattern="^DEBUG", repo="shop"))) == [("app/keys.py", 1)]


def test_globs_keep_and_leave_out_files(catalog: IndexCatalog, shop: Path) -> None:
    build(catalog, "shop", shop)
    grep = greps(catalog)
    asked = {"pattern": "TODO", "repo": "shop"}
    assert {p for p, _ in places(grep.grep(GrepRequest(**asked, path_glob="*.py")))} == {
        "app/billing.py",
        "tests/test_billing.py",
    }
    assert {p for p, _ in places(grep.grep(GrepRequest(**asked, path_glob="app/**/*.js")))} == {"app/util.js"}
    left = grep.grep(GrepRequest(**asked, controls=SearchControls(exclude=["tests/*", "*.md"])))
    assert {p for p, _ in places(left)} == {"app/billing.py", "app/util.js"}
    one = grep.grep(GrepRequest.model_validate({**asked, "controls": {"exclude": "*.js"}}))  # one glob as a string
    assert "app/util.js" not in {p for p, _ in places(one)}
    folder = grep.grep(GrepRequest(**asked, controls=SearchControls(exclude=["tests"])))  # a folder: all of it
    everything = {p for p, _ in places(grep.grep(GrepRequest(**asked)))}
    assert "tests/test_billing.py" in everything
    assert {p for p, _ in places(folder)} == everything - {"tests/test_billing.py"}
    with pytest.raises(LimitExceeded, match="path pattern"):
        grep.grep(GrepRequest(**asked, path_glob="*" * 40))


def test_kind_and_tests_keep_the_lines_of_the_chunks_asked_and_pages_keep_them(
    catalog: IndexCatalog, shop: Path
) -> None:
    build(catalog, "shop", shop)
    grep = greps(catalog)

    def found(**controls: object) -> list[tuple[str, int]]:
        asked = SearchControls.model_validate(controls)
        return places(grep.grep(GrepRequest(pattern="TODO(auth)", regex=False, repo="shop", controls=asked)))

    assert found(kind=["class"]) == [("app/billing.py", 8)]  # inside Billing, chunked whole
    assert found(kind=["function"]) == [("app/billing.py", 16), ("app/util.js", 2), ("tests/test_billing.py", 2)]
    assert found(kind=["doc"]) == [("README.md", 3)]
    assert found(tests="only") == [("tests/test_billing.py", 2)]
    assert found(tests="exclude", kind=["function"]) == [("app/billing.py", 16), ("app/util.js", 2)]
    assert found(tests="exclude", exclude="*.md") == [("app/billing.py", 8), ("app/billing.py", 16), ("app/util.js", 2)]
    paged: list[tuple[str, int]] = []
    cursor = None
    for _ in range(10):
        asked = SearchControls(tests="exclude")
        page = grep.grep(
            GrepRequest(pattern="TODO(auth)", regex=False, repo="shop", controls=asked, limit=1, cursor=cursor)
        )
        paged += places(page)
        if page.cursor is None:
            break
        cursor = page.cursor
    assert paged == found(tests="exclude")  # one line a page, none lost or repeated, no test among them
    with pytest.raises(CursorExpired, match="another search"):
        grep.grep(GrepRequest(pattern="TODO(auth)", regex=False, repo="shop", cursor=cursor))  # the controls differ


def test_context_lines_and_case(catalog: IndexCatalog, shop: Path) -> None:
    build(catalog, "shop", shop)
    grep = greps(catalog)
    (hit,) = grep.grep(GrepRequest(pattern="def refund", repo="shop", context_lines=2)).matches
    assert (hit.before, hit.after) == (["        return amount * RATE", ""], ["        return -amount", ""])
    assert grep.grep(GrepRequest(pattern="billing", repo="shop", path_glob="*.py")).matches == []
    assert places(grep.grep(GrepRequest(pattern="billing", repo="shop", case_sensitive=False, path_glob="*.py"))) == [
        ("app/billing.py", 6)
    ]


def test_pages_follow_the_cursor_across_indexes_without_losing_or_repeating_a_line(
    catalog: IndexCatalog, shop: Path, tmp_path: Path
) -> None:
    build(catalog, "shop", shop)
    build(catalog, "docs", write_tree(tmp_path / "docs", {"guide.md": "TODO one\nTODO two\n"}), commit=None)
    grep = greps(catalog)
    whole = grep.grep(GrepRequest(pattern="TODO", limit=1000))
    assert {m.repo for m in whole.matches} == {"docs", "shop"} and not whole.truncated
    paged: list[tuple[str, str, int]] = []
    cursor = None
    for _ in range(50):
        page = grep.grep(GrepRequest(pattern="TODO", limit=2, cursor=cursor))
        paged.extend((m.repo, m.path, m.line) for m in page.matches)
        if not page.truncated:
            break
        assert page.stopped is StopReason.LIMIT and page.cursor is not None
        cursor = page.cursor
    assert paged == [(m.repo, m.path, m.line) for m in whole.matches]
    assert whole.matches[0].repo == "docs" and whole.matches[0].commit is None


def test_a_cursor_of_another_search_or_of_a_replaced_build_is_refused(catalog: IndexCatalog, shop: Path) -> None:
    build(catalog, "shop", shop)
    grep = greps(catalog)
    first = grep.grep(GrepRequest(pattern="TODO", repo="shop", limit=1))
    assert first.truncated and first.cursor is not None
    with pytest.raises(CursorExpired, match="another search"):
        grep.grep(GrepRequest(pattern="FIXME", repo="shop", cursor=first.cursor))
    with pytest.raises(CursorExpired, match="not a grep_code cursor"):
        grep.grep(GrepRequest(pattern="TODO", repo="shop", cursor="not-a-cursor"))
    same = grep.grep(GrepRequest(pattern="TODO", repo="shop", limit=50, cursor=first.cursor))  # a bigger page is fine
    assert len(same.matches) >= 4
    (shop / "app" / "more.py").write_text("# TODO new\n")
    build(catalog, "shop", shop)
    with pytest.raises(CursorExpired, match="rebuilt since"):
        grep.grep(GrepRequest(pattern="TODO", repo="shop", cursor=first.cursor))
    assert ("app/more.py", 1) in places(grep.grep(GrepRequest(pattern="TODO", repo="shop")))  # the new build's text


def test_the_time_budget_cuts_a_call_and_its_cursor_goes_on(catalog: IndexCatalog, shop: Path) -> None:
    build(catalog, "shop", shop)
    whole = greps(catalog).grep(GrepRequest(pattern="TODO", repo="shop"))
    clock = iter([0.0, 10.0, 10.0])
    slow = CodeGreps(
        catalog, CodeMaps(catalog), limits=LimitsSettings(grep_budget_s=1.0), clock=lambda: next(clock, 10.0)
    )
    cut = slow.grep(GrepRequest(pattern="TODO", repo="shop"))
    assert cut.truncated and cut.stopped is StopReason.TIME and cut.matches == [] and cut.cursor is not None
    rest = greps(catalog).grep(GrepRequest(pattern="TODO", repo="shop", cursor=cut.cursor))
    assert places(rest) == places(whole)


def test_a_file_gone_or_replaced_by_a_link_since_the_build_is_left_out_and_said(
    catalog: IndexCatalog, shop: Path, tmp_path: Path
) -> None:
    build(catalog, "shop", shop)
    (shop / "README.md").unlink()
    outside = tmp_path / "outside.txt"
    outside.write_text("TODO(auth) outside the repository\n")
    (shop / "app" / "util.js").unlink()
    os.symlink(outside, shop / "app" / "util.js")
    result = greps(catalog).grep(GrepRequest(pattern="TODO", repo="shop"))
    assert {p for p, _ in places(result)} == {"app/billing.py", "tests/test_billing.py"}
    assert any("2 indexed files could not be read now (README.md, app/util.js)" in note for note in result.notes)


def test_bad_patterns_and_unknown_indexes_are_named(catalog: IndexCatalog, shop: Path) -> None:
    build(catalog, "shop", shop)
    grep = greps(catalog)
    with pytest.raises(PatternRefused, match="look-behind"):
        grep.grep(GrepRequest(pattern="(?<=x)y", repo="shop"))
    with pytest.raises(IndexNotFound):
        grep.grep(GrepRequest(pattern="x", repo="nope"))
