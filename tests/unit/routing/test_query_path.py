"""actors.query_path.QueryPath: a query's vector in one hop to the local embedder the dispatcher names."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from actors.dispatcher import CallerTagged
from actors.query_path import DirectRoute, QueryPath
from cluster.cloud import tagged
from cluster.errors import NoProviderLeft
from cluster.space import EncoderIdentity
from tests.support.fakes.virtual_time import VirtualClock

SPACE = EncoderIdentity(model="m", weights_sha256="w", width=2, normalized=True, max_seq_length=8)


class _Method:
    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.calls: list[tuple[Any, ...]] = []
        self.keywords: list[dict[str, Any]] = []

    def remote(self, *args: Any, **keywords: Any) -> Any:
        self.calls.append(args)
        self.keywords.append(keywords)

        async def run() -> Any:
            return self.fn(*args)

        return run()


class _Actor:
    def __init__(self, **methods: Any) -> None:
        for name, fn in methods.items():
            setattr(self, name, _Method(fn))


def world(route: Any, embedder_fails: bool = False) -> tuple[QueryPath, _Actor, _Actor, VirtualClock]:
    def encode(text: str) -> Any:
        if embedder_fails:
            raise NoProviderLeft("code-embedding", ["the actor died"])
        return np.array([1.0, 0.0], dtype=np.float32), SPACE

    embedder = _Actor(encode_query=encode)
    dispatcher = _Actor(
        direct_query_route=lambda: DirectRoute(encoder=route(embedder), rerankers=False),
        encode_query=lambda text, project: (np.array([0.0, 1.0], dtype=np.float32), SPACE, "via-dispatcher"),
    )
    clock = VirtualClock()
    return QueryPath(dispatcher, clock=clock), dispatcher, embedder, clock  # type: ignore[arg-type]


async def test_a_local_route_is_called_directly_and_the_vector_carries_the_routes_space_and_name() -> None:
    path, dispatcher, embedder, _ = world(lambda embedder: (SPACE, "samespace-embedder-cpu0", embedder))
    vector, space, name = await path.encode_query("find the retry loop", "p")
    assert vector.tolist() == [1.0, 0.0] and (space, name) == (SPACE, "samespace-embedder-cpu0")
    assert embedder.encode_query.calls == [("find the retry loop",)] and dispatcher.encode_query.calls == []


async def test_the_route_is_reused_within_the_discovery_window_and_asked_again_after_it() -> None:
    path, dispatcher, _, clock = world(lambda embedder: (SPACE, "e", embedder))
    for _ in range(3):
        await path.encode_query("q", "p")
    assert len(dispatcher.direct_query_route.calls) == 1
    clock.now += 2.5
    await path.encode_query("q", "p")
    assert len(dispatcher.direct_query_route.calls) == 2


async def test_no_direct_route_means_the_dispatcher_encodes() -> None:
    path, dispatcher, embedder, _ = world(lambda embedder: None)  # e.g. a cloud provider comes first
    _, _, name = await path.encode_query("q", "proj")
    assert name == "via-dispatcher" and dispatcher.encode_query.calls == [("q", "proj")]
    assert embedder.encode_query.calls == []


async def test_a_failed_direct_call_falls_back_to_the_dispatcher_and_the_route_is_asked_again() -> None:
    path, dispatcher, embedder, _ = world(lambda embedder: (SPACE, "e", embedder), embedder_fails=True)
    _, _, name = await path.encode_query("q", "proj")
    assert name == "via-dispatcher" and len(embedder.encode_query.calls) == 1
    await path.encode_query("q", "proj")
    assert len(dispatcher.direct_query_route.calls) == 2  # the failed route was not kept


async def test_the_dispatchers_own_error_reaches_the_caller() -> None:
    path, dispatcher, _, _ = world(lambda embedder: None)

    def refuse(text: str, project: str) -> Any:
        raise NoProviderLeft("code-embedding", ["no eligible provider"])

    dispatcher.encode_query.fn = refuse
    with pytest.raises(NoProviderLeft):
        await path.encode_query("q", "p")


async def test_whether_rerankers_serve_comes_with_the_route_and_is_asked_once_per_window() -> None:
    path, dispatcher, _, clock = world(lambda embedder: None)
    assert await path.rerankers() is False
    await path.encode_query("q", "p")
    assert len(dispatcher.direct_query_route.calls) == 1
    clock.now += 2.5
    assert await path.rerankers() is False and len(dispatcher.direct_query_route.calls) == 2


async def test_the_dispatchers_path_carries_the_callers_subject_and_tool_call() -> None:
    path, dispatcher, _, _ = world(lambda embedder: None)
    await path.encode_query("q", "proj")  # outside a tool call: nothing more than the project
    with tagged("alice", "call-7"):
        await path.encode_query("q", "proj")
    assert dispatcher.encode_query.keywords == [{}, {"subject": "alice", "call_id": "call-7"}]


async def test_a_lazy_dispatchers_cloud_calls_carry_the_caller_and_an_explicit_argument_wins() -> None:
    rerank = _Method(lambda query, documents, project: ([1.0], "reranker"))
    tagged_rerank = CallerTagged(rerank)
    with tagged(None, "call-8"):
        assert await tagged_rerank.remote("q", ["d"], "proj") == ([1.0], "reranker")
        await tagged_rerank.remote("q", ["d"], "proj", call_id="mine")
    assert rerank.keywords == [{"call_id": "call-8"}, {"call_id": "mine"}]
    assert tagged_rerank.fn is rerank.fn  # everything else is the method's own
