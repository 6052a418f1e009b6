"""Pages of search_code and search_symbols over a real catalogue (the service, the index actor's
`StoreSearch` and `CodeMaps` in process; the query encoder and the reranker are the edges replaced):
the pages of a search are one ranking cut in turn, none repeated or skipped, with or without rerank
and under the controls; a cursor is refused for another search, another tool, or once a build in scope
changed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cluster.errors import CursorExpired, NoProviderLeft
from cluster.index import IndexCatalog, VectorStore, open_vector_store
from cluster.ingest import SearchControls
from cluster.search import CodeSearchService, SearchResult, SymbolSearchResult
from tests.support.code_maps import IDENTITY, WIDTH
from tests.support.in_process_index import InProcessIndex
from tests.support.search_controls import TEST_FILES, build, write_tree

RERANK_POOL = 10


class Encoder:
    """The query path: one fixed vector for every text (the rows' vectors are random)."""

    def __init__(self, rerankers: bool) -> None:
        self._rerankers = rerankers

    async def encode_query(self, text: str, project: str) -> Any:
        return np.ones(WIDTH, dtype=np.float32) / np.sqrt(WIDTH), IDENTITY, "encoder"

    async def rerankers(self) -> bool:
        return self._rerankers


class Reranker:
    """Scores a document by its length (deterministic); `gone` makes it fail as when none serves."""

    def __init__(self) -> None:
        self.gone = False
        self.calls = 0

    async def rerank(self, query: str, documents: list[str], project: str) -> tuple[list[float], str]:
        self.calls += 1
        if self.gone:
            raise NoProviderLeft("reranker", ["no eligible provider"])
        return [float(len(doc)) for doc in documents], "reranker"


@pytest.fixture(params=["embedded", "memory"])
def catalog(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[IndexCatalog]:
    store: VectorStore = (
        open_vector_store("embedded", data_dir=tmp_path / "edge", url=None)
        if request.param == "embedded"
        else open_vector_store("server", data_dir=None, url=":memory:")
    )
    catalog = IndexCatalog(store)
    build(catalog, "shop", write_tree(tmp_path / "shop"))
    yield catalog
    store.close()


def service(catalog: IndexCatalog, rerankers: bool = False, reranker: Reranker | None = None) -> CodeSearchService:
    return CodeSearchService(InProcessIndex(catalog), Encoder(rerankers), reranker or Reranker(), RERANK_POOL)


def places(result: SearchResult | SymbolSearchResult) -> list[tuple[str, int]]:
    return [(hit.path, hit.start_line) for hit in result.hits]


async def pages(search: CodeSearchService, k: int, **asked: Any) -> list[SearchResult]:
    """Every page of one search_code, following the cursors to the end."""
    found = [await search.search_code("invoice amount", k, "shop", None, None, **asked)]
    while found[-1].cursor is not None:
        found.append(
            await search.search_code("invoice amount", k, "shop", None, None, cursor=found[-1].cursor, **asked)
        )
        assert len(found) < 50
    return found


async def test_the_pages_of_a_search_are_one_ranking_cut_in_turn(catalog: IndexCatalog) -> None:
    search = service(catalog)
    whole = await search.search_code("invoice amount", 50, "shop", None, None, rerank=False)
    assert whole.cursor is None and len(whole.hits) > 20  # every row: the pool ran out
    followed = await pages(search, 4, rerank=False)
    assert [len(page.hits) for page in followed[:-1]] == [4] * (len(followed) - 1) and followed[-1].hits
    assert [place for page in followed for place in places(page)] == places(whole)
    assert {page.mode for page in followed} == {"hybrid"}


async def test_reranked_pages_run_through_the_reranked_pool(catalog: IndexCatalog) -> None:
    reranker = Reranker()
    search = service(catalog, rerankers=True, reranker=reranker)
    whole = await search.search_code("invoice amount", RERANK_POOL, "shop", None, None)
    assert whole.reranked_by == "reranker" and len(whole.hits) == RERANK_POOL
    followed = await pages(search, 3)
    assert [len(page.hits) for page in followed] == [3, 3, 3, 1] and followed[-1].cursor is None
    assert [place for page in followed for place in places(page)] == places(whole)
    reranker.gone = True  # a next page of a reranked first page needs the reranker
    first = await service(catalog, rerankers=True, reranker=Reranker()).search_code("q", 3, "shop", None, None)
    assert first.cursor is not None
    with pytest.raises(CursorExpired, match="reranker"):
        await search.search_code("q", 3, "shop", None, None, cursor=first.cursor)


async def test_pages_under_controls_keep_them(catalog: IndexCatalog) -> None:
    search = service(catalog)
    controls = SearchControls(tests="exclude", exclude=["docs"])
    followed = await pages(search, 5, rerank=False, controls=controls)
    found = [place for page in followed for place in places(page)]
    assert len(found) == len(set(found)) > 10
    assert not {path for path, _ in found} & (TEST_FILES | {"docs/billing.md"})
    assert ("src/lib.rs", 9) not in found and ("src/lib.rs", 1) in found  # the Rust test, not the code


async def test_a_cursor_continues_only_its_own_search_on_the_same_builds(tmp_path: Path, catalog: IndexCatalog) -> None:
    search = service(catalog)
    first = await search.search_code("invoice amount", 3, "shop", None, None, rerank=False)
    assert first.cursor is not None
    for other in ({"k": 4}, {"language": "python"}, {"mode": "keyword"}, {"controls": SearchControls(kind=["class"])}):
        asked: dict[str, Any] = {"k": 3, "language": None, "rerank": False, **other}
        k, language = asked.pop("k"), asked.pop("language")
        with pytest.raises(CursorExpired, match="another search"):
            await search.search_code("invoice amount", k, "shop", None, language, cursor=first.cursor, **asked)
    with pytest.raises(CursorExpired, match="not a search_code cursor"):
        await search.search_code("invoice amount", 3, "shop", None, None, rerank=False, cursor="bm90IGEgY3Vyc29y")
    symbols = await search.search_symbols("Invoice", "shop", 2)
    assert symbols.cursor is not None
    with pytest.raises(CursorExpired, match="not a search_code cursor"):
        await search.search_code("invoice amount", 3, "shop", None, None, rerank=False, cursor=symbols.cursor)
    build(catalog, "shop", tmp_path / "shop", seed=9)  # the index is rebuilt between two pages
    with pytest.raises(CursorExpired, match="rebuilt"):
        await search.search_code("invoice amount", 3, "shop", None, None, rerank=False, cursor=first.cursor)
    with pytest.raises(CursorExpired, match="rebuilt"):
        await search.search_symbols("Invoice", "shop", 2, cursor=symbols.cursor)


async def test_symbol_pages_are_one_ranking_cut_in_turn_and_keep_the_controls(catalog: IndexCatalog) -> None:
    search = service(catalog)
    whole = await search.search_symbols("Invoice", "shop", 50)
    assert whole.cursor is None and len(whole.hits) >= 12
    followed = [await search.search_symbols("Invoice", "shop", 5)]
    while followed[-1].cursor is not None:
        followed.append(await search.search_symbols("Invoice", "shop", 5, cursor=followed[-1].cursor))
    assert [place for page in followed for place in places(page)] == places(whole)
    methods = await search.search_symbols("Invoice", "shop", 50, controls=SearchControls(kind=["method"]))
    assert len(methods.hits) == 11 and {hit.kind for hit in methods.hits} == {"method"}
    tests = await search.search_symbols("test", "shop", 50, controls=SearchControls(tests="only"))
    assert tests.hits and {hit.path for hit in tests.hits} <= TEST_FILES | {"src/lib.rs"}
    kept = await search.search_symbols("parse", "shop", 50, controls=SearchControls(tests="exclude", exclude=["*.go"]))
    assert [(hit.path, hit.symbol) for hit in kept.hits] == [("src/lib.rs", "parse_amount")]
