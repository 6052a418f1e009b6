"""Per-index access through the search service: the request's caller reaches every read of the index
actor (`IndexReads`, in process over a real catalogue; the query encoder is the edge replaced). Two
indexes of one tree: 'alpha' readable by group A, 'beta' by group B. A reader of group A never sees
beta: not in a search of everything, a glob, a group, `also_in`, symbols, files, navigation, grep,
status; beta named directly is answered exactly as an unknown name. An unrestricted caller sees both."""

from __future__ import annotations

from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.auth import acting_as
from cluster.errors import IndexNotFound, SamespaceError
from cluster.graph import GraphQuery, GraphTool
from cluster.grep import GrepRequest
from cluster.search import CodeSearchService
from tests.support.in_process_index import InProcessIndex
from tests.support.index_access import ANN, BEN, SETTINGS, SHARED, indexed, service_over


@pytest.fixture
def index(tmp_path: Path) -> Iterator[InProcessIndex]:
    store, catalog = indexed(tmp_path)  # one tree twice: every place of alpha is also a place of beta
    yield InProcessIndex(catalog, SETTINGS)
    store.close()


@pytest.fixture
def service(index: InProcessIndex) -> CodeSearchService:
    return service_over(index)


async def refused(call: Awaitable[Any]) -> str:
    with pytest.raises(IndexNotFound) as raised:
        await call
    return str(raised.value)


async def test_a_search_of_everything_a_glob_or_a_group_leaves_out_what_the_caller_may_not_read(
    service: CodeSearchService,
) -> None:
    with acting_as(ANN):
        found = [await service.search_code("invoice total", 10, scope, None, None) for scope in (None, "*", "@both")]
    for result in found:
        assert result.hits and {h.repo for h in result.hits} == {"alpha"}
        assert all(h.also_in == [] for h in result.hits)  # beta holds every place too: never named
        assert "beta" not in result.model_dump_json()
    with acting_as(SHARED):
        both = await service.search_code("invoice total", 10, None, None, None)
    assert {h.repo for h in both.hits} | {i for h in both.hits for i in h.also_in} == {"alpha", "beta"}


async def test_a_glob_or_group_of_unreadable_indexes_and_an_unreadable_name_are_answered_as_unknown_ones(
    service: CodeSearchService,
) -> None:
    with acting_as(ANN):
        glob = await refused(service.search_code("invoice", 5, "beta*", None, None))
        nothing = await refused(service.search_code("invoice", 5, "zzz*", None, None))
        group = await refused(service.search_symbols("Invoice", "@only-b", 5))
        named = await refused(service.search_code("invoice", 5, "beta", None, None))
        unknown = await refused(service.search_code("invoice", 5, "nope", None, None))
    assert glob == nothing.replace("zzz*", "beta*") == "unknown repo 'beta*'; indexed repos: alpha"
    assert group == "unknown repo '@only-b'; indexed repos: alpha"
    assert named == unknown.replace("nope", "beta") == "unknown repo 'beta'; indexed repos: alpha"


async def test_every_read_by_name_answers_an_unreadable_index_as_an_unknown_one(service: CodeSearchService) -> None:
    calls = {
        "read_code": lambda repo: service.read_code(repo, "src/billing.py", 1, 3),
        "read_file": lambda repo: service.read_file(repo, "src/billing.py"),
        "search_symbols": lambda repo: service.search_symbols("Invoice", repo, 5),
        "search_files": lambda repo: service.search_files("billing", repo, 5),
        "neighbors": lambda repo: service.neighbors(repo, "src/billing.py", 6, 1),
        "repo_overview": lambda repo: service.repo_overview(repo),
        "navigate": lambda repo: service.navigate(GraphQuery(tool=GraphTool.CALLERS, symbol="charge_card", repo=repo)),
        "grep_code": lambda repo: service.grep_code(GrepRequest(pattern="Invoice", repo=repo)),
        "what_changed": lambda repo: service.what_changed(repo, "7d", None, None, 10),
        "symbol_history": lambda repo: service.symbol_history(repo, "Invoice", None, 10),
        "search_commits": lambda repo: service.search_commits("invoice", repo, None, 5),
        "compare": lambda repo: service.compare(repo, "HEAD~1", "HEAD", 10),
        "changed_since": lambda repo: service.search_code("invoice", 5, repo, None, None, changed_since="7d"),
    }
    with acting_as(ANN):
        for tool, call in calls.items():
            beta, nope = await refused(call("beta")), await refused(call("nope"))
            assert beta == nope.replace("nope", "beta") == "unknown repo 'beta'; indexed repos: alpha", tool
    with acting_as(BEN):
        assert (await service.read_code("beta", "src/billing.py", 1, 1)).repo == "beta"


async def test_symbols_files_navigation_grep_and_the_one_index_tools_read_only_what_the_caller_may(
    service: CodeSearchService, index: InProcessIndex
) -> None:
    with acting_as(ANN):
        symbols = await service.search_symbols("Invoice", None, 10)
        files = await service.search_files("billing", None, 10)
        callers = await service.navigate(GraphQuery(tool=GraphTool.DEFINITION, symbol="charge_card"))
        grepped = await service.grep_code(GrepRequest(pattern="charge_card"))
        overview = await service.repo_overview(None)  # the only index ann may read
        around = await service.neighbors(None, "src/billing.py", 6, 1)
    assert symbols.hits and {h.repo for h in symbols.hits} == {"alpha"}
    assert files.files and {f.repo for f in files.files} == {"alpha"}
    assert callers.definitions and {d.repo for d in callers.definitions} == {"alpha"} and "beta" not in str(callers)
    assert grepped.matches and {m.repo for m in grepped.matches} == {"alpha"}
    assert overview.repo == "alpha" and around.anchor.repo == "alpha"
    assert {reader.subject for _, reader in index.readers} == {"ann"}  # every read carried the caller
    with acting_as(SHARED):
        both = await service.navigate(GraphQuery(tool=GraphTool.CALLERS, symbol="charge_card"))
        with pytest.raises(SamespaceError, match="indexed repos: alpha, beta"):
            await service.repo_overview(None)
    assert "alpha" in str(both.note) and "beta" in str(both.note)  # defined in both: named as candidates


async def test_status_and_the_summaries_list_only_the_readable_indexes(service: CodeSearchService) -> None:
    with acting_as(ANN):
        status = await service.index_status()
        globbed = await service.index_status("*")
        summaries = await service.index_summaries()
    assert [i.repo for i in status.indexes] == [i.repo for i in globbed.indexes] == ["alpha"]
    assert [s.name for s in summaries] == ["alpha"]
    assert "beta" not in status.model_dump_json()
    with acting_as(SHARED):
        assert [s.name for s in await service.index_summaries()] == ["alpha", "beta"]
    assert [s.name for s in await service.index_summaries()] == []  # outside any request: anonymous, both have entries


async def test_outside_any_request_the_indexes_no_entry_names_stay_open(tmp_path: Path) -> None:
    store, catalog = indexed(tmp_path, ("gamma", "beta"))
    service = service_over(InProcessIndex(catalog, SETTINGS))
    try:
        result = await service.search_code("invoice", 5, None, None, None)
        assert {h.repo for h in result.hits} == {"gamma"}
        assert [s.name for s in await service.index_summaries()] == ["gamma"]
    finally:
        store.close()
