"""search_code's controls in the store, on both engines: `kind`, `tests` and `exclude` narrow every leg
(each query below asks every leg deep enough to return every row the filter keeps, so a row missing
is a row the store left out); a build from before rows carried their categories is filtered by what
its rows carry (the test rule on paths); a next page is refused once a build in scope changed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from cluster.errors import CursorExpired
from cluster.index import IndexCatalog, SearchQuery, VectorStore, open_vector_store
from cluster.ingest import SearchControls
from cluster.search import CodeMaps, SearchAnswer, StoreSearch
from tests.support.code_maps import IDENTITY, WIDTH
from tests.support.search_controls import TEST_FILES, build, forget_categories, write_tree

Row = tuple[str, int, str]  # path, first line, kind
RUST_TEST_ROWS = {("src/lib.rs", 5, "module"), ("src/lib.rs", 9, "function")}  # the #[cfg(test)] module


@pytest.fixture(params=["embedded", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorStore]:
    if request.param == "embedded":
        opened = open_vector_store("embedded", data_dir=tmp_path / "edge", url=None)
    else:
        opened = open_vector_store("server", data_dir=None, url=":memory:")
    yield opened
    opened.close()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "shop")


def searches(catalog: IndexCatalog) -> StoreSearch:
    return StoreSearch(catalog, CodeMaps(catalog))


def ask(search: StoreSearch, controls: SearchControls | None, scope: str | None = None) -> SearchAnswer:
    """Every row the controls keep: a vector query whose legs reach past every row of the indexes."""
    vector = np.ones(WIDTH) / np.sqrt(WIDTH)
    query = SearchQuery(scope=scope, vector=vector.tolist(), identity=IDENTITY, controls=controls, limit=500, depth=500)
    return search.search(query)


def rows(answer: SearchAnswer) -> set[Row]:
    return {(h.payload["path"], h.payload["start_line"], h.payload["kind"]) for h in answer.hits}


def test_kind_keeps_only_chunks_of_the_kinds_asked(store: VectorStore, repo: Path) -> None:
    catalog = IndexCatalog(store)
    build(catalog, "shop", repo)
    search = searches(catalog)
    everything = rows(ask(search, None))
    classes = rows(ask(search, SearchControls(kind=["class"])))
    assert classes == {("src/billing.py", 6, "class"), ("src/test/java/BillingTest.java", 1, "class")}
    methods = rows(ask(search, SearchControls(kind=["method"])))
    assert len(methods) == 11 and {kind for _, _, kind in methods} == {"method"}
    both = rows(ask(search, SearchControls(kind=["class", "method"])))
    assert both == classes | methods
    assert rows(ask(search, SearchControls(kind=["doc"]))) == {("docs/billing.md", 1, "section")}
    modules = rows(ask(search, SearchControls(kind=["module"])))
    assert ("src/billing.py", 1, "module") in modules and {kind for _, _, kind in modules} == {"module"}
    functions = rows(ask(search, SearchControls(kind=["function"])))
    assert functions.isdisjoint(classes | methods | modules) and everything > functions | classes | methods | modules


def test_tests_are_included_left_out_or_alone_by_path_and_by_the_rust_test_module(
    store: VectorStore, repo: Path
) -> None:
    catalog = IndexCatalog(store)
    build(catalog, "shop", repo)
    search = searches(catalog)
    everything = rows(ask(search, SearchControls(tests="include")))
    assert everything == rows(ask(search, None))
    tests = {row for row in everything if row[0] in TEST_FILES} | RUST_TEST_ROWS
    assert {path for path, _, _ in tests} == TEST_FILES | {"src/lib.rs"}
    assert rows(ask(search, SearchControls(tests="only"))) == tests
    left = rows(ask(search, SearchControls(tests="exclude")))
    assert left == everything - tests and ("src/lib.rs", 1, "function") in left  # the code beside the test module
    test_functions = rows(ask(search, SearchControls(kind=["function"], tests="only")))
    assert test_functions == {row for row in tests if row[2] == "function"} and len(test_functions) == 4
    assert rows(ask(search, SearchControls(kind=["test"]))) == tests


def test_exclude_globs_leave_out_files_and_whole_folders(store: VectorStore, repo: Path) -> None:
    catalog = IndexCatalog(store)
    build(catalog, "shop", repo)
    search = searches(catalog)
    everything = rows(ask(search, None))
    left = rows(ask(search, SearchControls(exclude=["docs", "*.ts", "src/test/*"])))
    gone = {row for row in everything if row[0].startswith(("docs/", "web/", "src/test/"))}
    assert gone and left == everything - gone
    kept = rows(ask(search, SearchControls(exclude=["src/**/*.py"], kind=["method"])))
    assert kept == set()  # every method is in src/billing.py


def test_a_build_from_before_categories_is_filtered_by_what_its_rows_carry(
    store: VectorStore, tmp_path: Path, repo: Path
) -> None:
    catalog = IndexCatalog(store)
    build(catalog, "new", repo)
    forget_categories(store, build(catalog, "old", write_tree(tmp_path / "old"), categorised=False))
    catalog = IndexCatalog(store)  # reads the old build's record afresh
    assert catalog.record("new").categorised and not catalog.record("old").categorised
    search = searches(catalog)
    for controls in (SearchControls(kind=["class"]), SearchControls(kind=["method", "doc"], exclude=["docs/*"])):
        assert rows(ask(search, controls, "old")) == rows(ask(search, controls, "new"))
    by_path = {row for row in rows(ask(search, None, "old")) if row[0] in TEST_FILES}
    assert rows(ask(search, SearchControls(tests="only"), "old")) == by_path  # the path rule: no Rust attribute
    assert rows(ask(search, SearchControls(kind=["test"]), "old")) == by_path
    assert (
        rows(ask(search, SearchControls(tests="exclude"), "old"))
        == rows(ask(search, SearchControls(tests="exclude"), "new")) | RUST_TEST_ROWS
    )
    mixed = ask(search, SearchControls(tests="exclude", kind=["function"]), "*")  # old and new, fused together
    found = {
        (h.payload["path"], h.payload["start_line"]): [h.payload["repo"], *h.payload.get("also_in", [])]
        for h in mixed.hits
    }
    code = {("src/billing.py", 61), ("src/lib.rs", 1), ("pkg/amount.go", 3), ("web/cart.ts", 1)}
    assert found == {**{place: ["new", "old"] for place in code}, ("src/lib.rs", 9): ["old"]}  # a place once


def test_a_page_bound_to_other_builds_is_refused(store: VectorStore, repo: Path) -> None:
    catalog = IndexCatalog(store)
    build(catalog, "shop", repo)
    search = searches(catalog)
    first = ask(search, None)
    vector = (np.ones(WIDTH) / np.sqrt(WIDTH)).tolist()
    again = SearchQuery(scope="shop", vector=vector, identity=IDENTITY, limit=3, builds=first.builds)
    assert search.search(again).builds == first.builds
    build(catalog, "shop", repo, seed=8)
    with pytest.raises(CursorExpired, match="rebuilt"):
        search.search(again)
    build(catalog, "other", repo)
    assert ask(search, None, "*").builds != ask(search, None, "shop").builds  # another index in scope
