"""search_code's rerank step: re-score fused candidates then cut to k; skip cleanly with no reranker."""

from __future__ import annotations

from typing import Any

import numpy as np

from cluster.errors import NoProviderLeft
from cluster.space import EncoderIdentity
from cluster.types import ScoredHit
from serve_apps.code_search import CodeSearchService

IDENTITY = EncoderIdentity(model="m", weights_sha256="a" * 64, width=4, max_seq_length=256)


class _Method:
    def __init__(self, fn: Any) -> None:
        self._fn = fn
        self.calls: list[tuple[Any, ...]] = []

    def remote(self, *args: Any) -> Any:
        self.calls.append(args)

        async def run() -> Any:
            return self._fn(*args)

        return run()


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


def service(rerank: Any) -> tuple[CodeSearchService, _Handle]:
    index = _Handle(
        search=lambda repo, vector, identity, limit, flt, keywords=None, fusion=None, definitions=None: (
            [hit(i) for i in range(limit)],
            [],
        )
    )
    encoder = _Encoder(lambda text, project: (np.ones(4, dtype=np.float32), IDENTITY, "samespace-embedder-cpu0"))
    return CodeSearchService(index, encoder, _Handle(rerank=rerank), rerank_candidates=10), index


async def test_the_reranker_reorders_the_candidates_and_the_result_is_cut_to_k() -> None:
    svc, index = service(lambda q, docs, project: ([float(i) for i in range(len(docs))], "ws-OR-Reranker"))
    result = await svc.search_code("q", 3, None, None, None)
    assert index.search.calls[0][3] == 10  # fetched the candidate pool, not just k
    assert [h.symbol for h in result.hits] == ["s9", "s8", "s7"] and result.reranked_by == "ws-OR-Reranker"
    assert result.encoded_by == "samespace-embedder-cpu0"


async def test_with_no_reranker_the_search_order_stands() -> None:
    def none_serving(q: str, docs: list[str], project: str) -> Any:
        raise NoProviderLeft("reranker", ["no eligible provider"])

    svc, _ = service(none_serving)
    result = await svc.search_code("q", 3, None, None, None)
    assert [h.symbol for h in result.hits] == ["s0", "s1", "s2"] and result.reranked_by is None


async def test_a_query_is_encoded_once_per_cache_lifetime_and_the_given_cache_is_the_one_used() -> None:
    from fakes.virtual_time import VirtualClock

    from cluster.search.query_cache import QueryVectorCache

    clock = VirtualClock()
    index = _Handle(
        search=lambda repo, vector, identity, limit, flt, keywords=None, fusion=None, definitions=None: ([hit(0)], [])
    )
    encoder = _Encoder(lambda text, project: (np.ones(4, dtype=np.float32), IDENTITY, "e"))
    cache: QueryVectorCache[Any] = QueryVectorCache(ttl_s=60, max_entries=8, clock=clock)  # empty: falsy by len()
    svc = CodeSearchService(index, encoder, _Handle(rerank=lambda q, d, p: ([], "r")), 10, cache)
    for _ in range(3):
        await svc.search_code("same question", 3, None, None, None, rerank=False)
    assert len(encoder.calls) == 1 and len(cache) == 1
    clock.now += 61
    await svc.search_code("same question", 3, None, None, None, rerank=False)
    assert len(encoder.calls) == 2
    assert index.search.calls[-1][3] == 3  # no rerank: no candidate pool either


async def test_with_no_reranker_serving_the_next_searches_fetch_k_and_skip_the_call_until_the_window_ends() -> None:
    from fakes.virtual_time import VirtualClock

    def none_serving(q: str, docs: list[str], project: str) -> Any:
        raise NoProviderLeft("reranker", ["no eligible provider"])

    clock = VirtualClock()
    reranker = _Handle(rerank=none_serving)
    index = _Handle(
        search=lambda repo, vector, identity, limit, flt, keywords=None, fusion=None, definitions=None: (
            [hit(i) for i in range(limit)],
            [],
        )
    )
    encoder = _Encoder(lambda text, project: (np.ones(4, dtype=np.float32), IDENTITY, "e"))
    svc = CodeSearchService(index, encoder, reranker, 10, clock=clock)
    await svc.search_code("q", 3, None, None, None)
    await svc.search_code("q", 3, None, None, None)
    assert [call[3] for call in index.search.calls] == [10, 3]  # the pool once, then just k
    assert len(reranker.rerank.calls) == 1
    clock.now += 2.5  # the dispatcher's discovery window: a reranker may have joined
    await svc.search_code("q", 3, None, None, None)
    assert index.search.calls[-1][3] == 10 and len(reranker.rerank.calls) == 2


async def test_with_no_reranker_in_the_cluster_a_search_fetches_k_and_never_asks_the_reranker() -> None:
    reranker = _Handle(rerank=lambda q, docs, project: ([1.0] * len(docs), "never"))
    index = _Handle(
        search=lambda repo, vector, identity, limit, flt, keywords=None, fusion=None, definitions=None: (
            [hit(i) for i in range(limit)],
            [],
        )
    )
    encoder = _Encoder(lambda text, project: (np.ones(4, dtype=np.float32), IDENTITY, "e"), rerankers=False)
    result = await CodeSearchService(index, encoder, reranker, 10).search_code("q", 3, None, None, None)
    assert index.search.calls[0][3] == 3 and reranker.rerank.calls == [] and result.reranked_by is None
