"""The history tools over a catalogue (the real embedded store, no Ray): scope, refs resolved by git,
the build's lines used when it is the history's newest commit, several indexes, only those a reader
may read."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.auth import Reader
from cluster.errors import IndexNotFound, SamespaceError
from cluster.graph import CodeGraph, GraphRow, file_facts
from cluster.history import mine_history
from cluster.index import HistoryState, IndexAcl, IndexCatalog, SearchQuery, open_vector_store, query_keywords
from cluster.ingest import source_state
from cluster.search.histories import CommitHistories
from cluster.settings import LimitsSettings
from cluster.space import EncoderIdentity
from cluster.types import StoredPoint
from tests.support.scripted_history import ScriptedRepo, build_shop_history

pytestmark = pytest.mark.slow  # scripted git histories, mined twice and diffed: a stream of git processes
WIDTH = 4
IDENTITY = EncoderIdentity(model="m", weights_sha256="a" * 64, width=WIDTH, max_seq_length=256)


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> ScriptedRepo:
    return build_shop_history(tmp_path_factory.mktemp("histories") / "shop")


def indexed(catalog: IndexCatalog, shop: ScriptedRepo, name: str) -> None:
    """A serving build of `name` at the shop's HEAD, and its whole history."""
    build = catalog.begin_build(name, IDENTITY, str(shop.root), source=source_state(shop.root))
    point = StoredPoint(id="00000000-0000-0000-0000-000000000001", vector=[1.0, 0, 0, 0], payload={"path": "x"})
    catalog.write(build, [point])
    catalog.commit_build(build, files=1, providers=["p"])
    mined = mine_history(shop.root, "HEAD")
    state = HistoryState(index=name, folder=str(shop.root), newest=mined.commits[0].commit, identity=IDENTITY)
    count = len(mined.commits)
    catalog.history.write(state, mined.commits, [[1.0, 0.0, 0.0, 0.0]] * count, [{}] * count)


def graph_of(shop: ScriptedRepo) -> CodeGraph:
    rows = []
    for path in shop.git("ls-files", "*.py").splitlines():
        facts = file_facts(path, "python", (shop.root / path).read_text())
        rows.append(GraphRow(path, "python", facts.definitions, facts.references, facts.imports))
    return CodeGraph("shop", None, rows)


@pytest.fixture
def catalog(tmp_path: Path, shop: ScriptedRepo) -> IndexCatalog:
    catalog = IndexCatalog(open_vector_store("embedded", data_dir=tmp_path, url=None), clock=lambda: 1.7e9)
    indexed(catalog, shop, "shop")
    return catalog


def test_a_ref_window_is_resolved_in_the_indexed_folder(catalog: IndexCatalog, shop: ScriptedRepo) -> None:
    histories = CommitHistories(catalog)
    answer = histories.what_changed("shop", since="main~3")
    assert {i.commit for i in answer.items} == set(shop.first_parents("main~3..main"))
    assert answer.reach[0].commits == 12 and not answer.reach[0].more
    with pytest.raises(SamespaceError, match="not a duration"):
        histories.what_changed("shop", since="no-such-ref")


def test_symbol_history_follows_the_serving_builds_lines(catalog: IndexCatalog, shop: ScriptedRepo) -> None:
    asked: list[str] = []

    def graphs(name: str) -> CodeGraph:
        asked.append(name)
        return graph_of(shop)

    answer = CommitHistories(catalog, graphs=graphs).symbol_history("shop", "Cart.m")
    assert [c.commit for c in answer.commits if c.lines] == shop.line_log("m", "pkg/core.py")
    assert asked == ["shop"]  # the build is at the history's newest commit: its lines were used


def test_a_symbol_in_two_indexes_is_answered_with_candidates_until_repo_names_one(
    catalog: IndexCatalog, shop: ScriptedRepo
) -> None:
    indexed(catalog, shop, "shop-copy")
    histories = CommitHistories(catalog)
    both = histories.symbol_history(None, "h2")
    assert both.commits == [] and sorted(both.candidates) == ["shop-copy: pkg/b.py", "shop: pkg/b.py"]
    assert histories.symbol_history("shop-copy", "h2").commits
    changed = histories.what_changed("shop*", since="2026-02-09")
    assert {(i.repo, i.symbol) for i in changed.items} == {
        ("shop", "h2"),
        ("shop-copy", "h2"),
        ("shop", "f"),
        ("shop-copy", "f"),
        ("shop", "n"),
        ("shop-copy", "n"),
    }


def test_commit_search_keeps_the_window_and_names_the_index(catalog: IndexCatalog, shop: ScriptedRepo) -> None:
    histories = CommitHistories(catalog)
    query = SearchQuery(scope="shop", keywords=query_keywords("Rename h to h2"), limit=3)
    found = histories.search("Rename h to h2", query)
    assert found.hits[0].commit == shop.shas["h2"] and found.hits[0].repo == "shop"
    assert ("pkg/b.py", "h2") in {(c.path, c.symbol) for c in found.hits[0].changed}
    later = histories.search("Rename h to h2", query, since="2026-02-01")
    assert shop.shas["h2"] not in [h.commit for h in later.hits]


def test_compare_resolves_refs_in_the_folder_of_the_one_index_named(catalog: IndexCatalog, shop: ScriptedRepo) -> None:
    histories = CommitHistories(catalog)
    found = histories.compare("shop", "main~1", "main")
    assert (found.base, found.head) == (shop.git("rev-parse", "main~1"), shop.git("rev-parse", "main"))
    assert {(i.path, i.symbol, i.change.value) for i in found.items} == {
        ("pkg/core.py", "f", "modified"),
        ("pkg/c.py", "n", "added"),
    }
    indexed(catalog, shop, "shop-copy")
    with pytest.raises(SamespaceError, match="compare reads one repository"):
        histories.compare(None, "main~1", "main")
    with pytest.raises(SamespaceError, match="no-such-ref"):
        histories.compare("shop", "no-such-ref", "main")


def test_review_mode_paths_are_the_files_git_log_names_since_then(catalog: IndexCatalog, shop: ScriptedRepo) -> None:
    histories = CommitHistories(catalog)
    touched = shop.git("log", "--first-parent", "--name-only", "--format=", "main~4..main").split()
    alive = set(shop.git("ls-files").split())
    assert histories.changed_paths("shop", "main~4") == sorted({p for p in touched if p in alive} - {".env"})
    assert histories.changed_paths("shop", "2027-01-01") == []


def test_compare_takes_the_serving_build_for_its_commit(catalog: IndexCatalog, shop: ScriptedRepo) -> None:
    histories = CommitHistories(catalog)
    build = catalog.record("shop").build
    found = histories.compare("shop", "main~1", build)
    assert found.head == shop.git("rev-parse", "HEAD") and found.items
    with pytest.raises(SamespaceError, match="not the serving build"):
        histories.compare("shop", "shop__b20200101000000abcdef", "main")


def test_a_reader_hears_only_of_the_histories_of_indexes_it_may_read(catalog: IndexCatalog, shop: ScriptedRepo) -> None:
    indexed(catalog, shop, "shop-copy")
    acl = IndexAcl({"shop-copy": ["group:ops"]}, LimitsSettings())
    histories = CommitHistories(catalog, acl=acl)
    ann = Reader(subject="ann")
    one = histories.symbol_history(None, "h2", reader=ann)  # held by both: ann reads shop's alone
    assert one.commits and one.candidates == [] and "shop-copy" not in one.model_dump_json()
    changed = histories.what_changed("shop*", since="2026-02-09", reader=ann)
    assert {i.repo for i in changed.items} == {"shop"} and [r.repo for r in changed.reach] == ["shop"]
    query = SearchQuery(keywords=query_keywords("Rename h to h2"), limit=5)
    assert {h.repo for h in histories.search("Rename h to h2", query, reader=ann).hits} == {"shop"}
    assert list(histories.reach(reader=ann)) == ["shop"]
    assert histories.compare(None, "main~1", "main", reader=ann).repo == "shop"  # the one index ann may read
    for tool in (
        lambda repo: histories.what_changed(repo, since="main~1", reader=ann),
        lambda repo: histories.changed_paths(repo, "main~1", reader=ann),
        lambda repo: histories.compare(repo, "main~1", "main", reader=ann),
    ):
        with pytest.raises(IndexNotFound) as hidden:
            tool("shop-copy")
        with pytest.raises(IndexNotFound) as unknown, acl.hiding(ann):  # as the index actor reads for ann
            tool("nope")
        assert str(hidden.value) == str(unknown.value).replace("nope", "shop-copy")
    assert sorted(histories.reach(reader=Reader(subject="o", groups=frozenset({"ops"})))) == ["shop", "shop-copy"]
