"""search_code's rerank step: re-score fused candidates then cut to k; skip cleanly with no reranker.
index_status: its glob meets the `limits` caps before any matching, and git is asked about an index's
build at most once per `limits.status_git_period_s`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cluster.auth import Reader
from cluster.errors import LimitExceeded, NoProviderLeft
from cluster.index import ANONYMOUS_READER, BuildState, IndexRecord, SearchQuery
from cluster.ingest import SearchControls, SourceState, Staleness
from cluster.search import CodeSearchService, IndexStatusReader, SearchAnswer, SymbolPage
from cluster.settings import LimitsSettings
from cluster.space import EncoderIdentity
from cluster.types import ScoredHit
from tests.support.fakes.virtual_time import VirtualClock

IDENTITY = EncoderIdentity(model="m", weights_sha256="a" * 64, width=4, max_seq_length=256)


class _Method:
    """One async method of a fake port (`cluster.search.ports`): answers with `fn`, records its calls."""

    def __init__(self, fn: Any) -> None:
        self._fn = fn
        self.calls: list[tuple[Any, ...]] = []
        self.readers: list[Reader | None] = []  # the index's methods are given one; the reranker's none

    async def __call__(self, *args: Any, reader: Reader | None = None) -> Any:
        self.calls.append(args)
        self.readers.append(reader)
        return self._fn(*args)


class _Encoder:
    """The replica's query path (`actors.query_path.QueryPath`): an async encode_query."""

    def __init__(self, fn: Any, rerankers: bool = True) -> None:
        self.calls: list[tuple[str, str]] = []
        self._fn = fn
        self._rerankers = rerankers

    async def encode_query(self, text: str, project: str) -> Any:
        self.calls.append((text, project))
        return self._fn(text, project)

    async def rerankers(self) -> bool:
        return self._rerankers


class _Handle:
    """A fake port whose methods are the given functions."""

    def __init__(self, **methods: Any) -> None:
        for name, fn in methods.items():
            setattr(self, name, _Method(fn))


def hit(i: int) -> ScoredHit:
    return ScoredHit(
        id=str(i),
        score=1.0 - i / 100,
        payload={
            "repo": "r",
            "path": f"f{i}.py",
            "start_line": 1,
            "end_line": 2,
            "symbol": f"s{i}",
            "kind": "function",
            "language": "python",
            "text": f"def s{i}(): pass",
            "build": "b",
        },
    )


def answer(hits: list[ScoredHit]) -> SearchAnswer:
    """The index actor's answer: the hits, nothing refused, one build."""
    return SearchAnswer(hits=hits, builds="b")


def limit_of(call: tuple[Any, ...]) -> int:
    """The limit of a recorded `search(query)` call."""
    query: SearchQuery = call[0]
    return query.limit


def service(rerank: Any) -> tuple[CodeSearchService, _Handle]:
    index = _Handle(search=lambda query: answer([hit(i) for i in range(query.limit)]))
    encoder = _Encoder(lambda text, project: (np.ones(4, dtype=np.float32), IDENTITY, "samespace-embedder-cpu0"))
    return CodeSearchService(index, encoder, _Handle(rerank=rerank), rerank_candidates=10), index


async def test_the_reranker_reorders_the_candidates_and_the_result_is_cut_to_k() -> None:
    svc, index = service(lambda q, docs, project: ([float(i) for i in range(len(docs))], "ws-OR-Reranker"))
    result = await svc.search_code("q", 3, None, None, None)
    assert limit_of(index.search.calls[0]) == 10  # fetched the candidate pool, not just k
    assert [h.symbol for h in result.hits] == ["s9", "s8", "s7"] and result.reranked_by == "ws-OR-Reranker"
    assert result.encoded_by == "samespace-embedder-cpu0"


async def test_with_no_reranker_the_search_order_stands() -> None:
    def none_serving(q: str, docs: list[str], project: str) -> Any:
        raise NoProviderLeft("reranker", ["no eligible provider"])

    svc, _ = service(none_serving)
    result = await svc.search_code("q", 3, None, None, None)
    assert [h.symbol for h in result.hits] == ["s0", "s1", "s2"] and result.reranked_by is None


async def test_a_query_is_encoded_once_per_cache_lifetime_and_the_given_cache_is_the_one_used() -> None:
    from cluster.search.query_cache import QueryVectorCache
    from tests.support.fakes.virtual_time import VirtualClock

    clock = VirtualClock()
    index = _Handle(search=lambda query: answer([hit(0)]))
    encoder = _Encoder(lambda text, project: (np.ones(4, dtype=np.float32), IDENTITY, "e"))
    cache: QueryVectorCache[Any] = QueryVectorCache(ttl_s=60, max_entries=8, clock=clock)  # empty: falsy by len()
    svc = CodeSearchService(index, encoder, _Handle(rerank=lambda q, d, p: ([], "r")), 10, cache)
    for _ in range(3):
        await svc.search_code("same question", 3, None, None, None, rerank=False)
    assert len(encoder.calls) == 1 and len(cache) == 1
    clock.now += 61
    await svc.search_code("same question", 3, None, None, None, rerank=False)
    assert len(encoder.calls) == 2
    assert limit_of(index.search.calls[-1]) == 4  # no rerank: no candidate pool either (k, and one: more?)


async def test_with_no_reranker_serving_the_next_searches_fetch_k_and_skip_the_call_until_the_window_ends() -> None:
    from tests.support.fakes.virtual_time import VirtualClock

    def none_serving(q: str, docs: list[str], project: str) -> Any:
        raise NoProviderLeft("reranker", ["no eligible provider"])

    clock = VirtualClock()
    reranker = _Handle(rerank=none_serving)
    index = _Handle(search=lambda query: answer([hit(i) for i in range(query.limit)]))
    encoder = _Encoder(lambda text, project: (np.ones(4, dtype=np.float32), IDENTITY, "e"))
    svc = CodeSearchService(index, encoder, reranker, 10, clock=clock)
    await svc.search_code("q", 3, None, None, None)
    await svc.search_code("q", 3, None, None, None)
    assert [limit_of(call) for call in index.search.calls] == [10, 4]  # the pool once, then k and one (more?)
    assert len(reranker.rerank.calls) == 1
    clock.now += 2.5  # the dispatcher's discovery window: a reranker may have joined
    await svc.search_code("q", 3, None, None, None)
    assert limit_of(index.search.calls[-1]) == 10 and len(reranker.rerank.calls) == 2


async def test_with_no_reranker_in_the_cluster_a_search_fetches_k_and_never_asks_the_reranker() -> None:
    reranker = _Handle(rerank=lambda q, docs, project: ([1.0] * len(docs), "never"))
    index = _Handle(search=lambda query: answer([hit(i) for i in range(query.limit)]))
    encoder = _Encoder(lambda text, project: (np.ones(4, dtype=np.float32), IDENTITY, "e"), rerankers=False)
    result = await CodeSearchService(index, encoder, reranker, 10).search_code("q", 3, None, None, None)
    assert limit_of(index.search.calls[0]) == 4 and reranker.rerank.calls == [] and result.reranked_by is None


GIT_SOURCE = SourceState(vcs="git", commit="c1")


def record(name: str, build: str, source: SourceState | None = GIT_SOURCE) -> IndexRecord:
    return IndexRecord(
        name=name, build=build, repo_root=f"/src/{name}", source=source, identity=IDENTITY, started_at=1, built_at=2
    )


def status_handle(records: list[IndexRecord]) -> _Handle:
    """An index actor whose `status` lists `records` (a list the test may change) and a build of each."""
    return _Handle(
        status=lambda: {
            "indexes": [{"record": r} for r in records],
            "builds": {
                r.name: BuildState(index=r.name, build=r.build, state="committed", started_at=1) for r in records
            },
        }
    )


class CountingGit:
    """`staleness_of`: how many times git was asked, per index and build."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def __call__(self, record: IndexRecord) -> Staleness:
        self.asked.append((record.name, record.build))
        return Staleness(changed_files=len(self.asked), commits_behind=0, commit_now="c1")


async def test_index_status_asks_git_about_an_index_at_most_once_per_period_and_says_when() -> None:
    clock, git = VirtualClock(), CountingGit()
    clock.now = 1000.0
    records = [record("api", "api__b1"), record("web", "web__b1"), record("plain", "plain__b1", source=None)]
    index = status_handle(records)
    reader = IndexStatusReader(LimitsSettings(status_git_period_s=30), clock=clock, staleness_of=git)

    async def read() -> dict[str, tuple[int | None, float | None]]:
        status = await reader.read(index, reader=ANONYMOUS_READER)
        return {
            i.repo: (i.staleness.changed_files if i.staleness else None, i.staleness_checked_at) for i in status.indexes
        }

    first = await read()
    assert sorted(git.asked) == [("api", "api__b1"), ("web", "web__b1")]  # never for an index with no source
    assert first["plain"] == (None, None) and first["api"][1] == first["web"][1] == 1000.0
    clock.now = 1029.0
    assert (await read()) == first and len(git.asked) == 2  # from the recorded answer
    records[0] = record("api", "api__b2")  # a new build of api is checked at once
    assert (await read())["api"] == (3, 1029.0) and len(git.asked) == 3
    clock.now = 1031.0  # web's check is past the period
    assert (await read())["web"] == (4, 1031.0) and git.asked[-1] == ("web", "web__b1")
    assert len(git.asked) == 4


async def test_concurrent_index_status_reads_share_one_git_check() -> None:
    git = CountingGit()
    index = status_handle([record("api", "api__b1")])
    reader = IndexStatusReader(LimitsSettings(), clock=VirtualClock(), staleness_of=git)

    await asyncio.gather(*(reader.read(index, reader=ANONYMOUS_READER) for _ in range(5)))
    assert git.asked == [("api", "api__b1")]


async def test_index_status_through_the_service_asks_git_once_for_two_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[Path] = []

    def counting_staleness(folder: Path, source: SourceState, built_at: float) -> Staleness:
        asked.append(folder)
        return Staleness(changed_files=0, commits_behind=0, commit_now="c1")

    monkeypatch.setattr("cluster.search.status.staleness", counting_staleness)
    index = status_handle([record("api", "api__b1")])
    search = CodeSearchService(index, _Encoder(lambda text, project: None), _Handle(), rerank_candidates=10)

    assert [len((await search.index_status()).indexes) for _ in range(2)] == [1, 1]
    assert asked == [Path("/src/api")]


async def test_an_index_status_glob_over_the_caps_is_refused_before_the_index_actor_is_asked() -> None:
    index = status_handle([record("api", "api__b1")])
    search = CodeSearchService(index, _Encoder(lambda text, project: None), _Handle(), rerank_candidates=10)
    with pytest.raises(LimitExceeded, match=r"limits\.max_glob_chars"):
        await search.index_status("api" + "*" * 400_000)
    assert index.status.calls == []  # type: ignore[attr-defined]
    assert [i.repo for i in (await search.index_status("a[o-q]?")).indexes] == ["api"]


async def test_a_search_scope_over_the_caps_is_refused_before_the_query_is_encoded() -> None:
    no_symbols = SymbolPage(hits=[], builds="b", more=False)
    index = _Handle(search=lambda query: answer([hit(0)]), search_symbols=lambda request: no_symbols)
    encoder = _Encoder(lambda text, project: (np.ones(4, dtype=np.float32), IDENTITY, "e"), rerankers=False)
    search = CodeSearchService(index, encoder, _Handle(), rerank_candidates=10)
    with pytest.raises(LimitExceeded, match=r"limits\.max_glob_wildcards"):
        await search.search_code("fee", 3, "*a" * 17, None, None)
    with pytest.raises(LimitExceeded, match=r"limits\.max_glob_chars"):
        await search.search_symbols("fee", "x" * 201, 3)
    wild = SearchControls(exclude=["*a" * 17])  # an exclude glob meets the same caps, before any work
    with pytest.raises(LimitExceeded, match=r"wildcards in a path pattern.*limits\.max_glob_wildcards"):
        await search.search_code("fee", 3, None, None, None, controls=wild)
    with pytest.raises(LimitExceeded, match=r"limits\.max_glob_wildcards"):
        await search.search_symbols("fee", None, 3, controls=wild)
    assert encoder.calls == [] and index.search.calls == [] and index.search_symbols.calls == []  # type: ignore[attr-defined]
    assert (await search.search_code("fee", 3, "a*", None, None)).hits  # within the caps: searched
