"""The per-role dispatcher's single calls on virtual time: the reference space, encode_query's order
and fall-through, the query route, the reranker's fall-back, and when discovery is asked again.
The fakes: tests/support/dispatch_fakes.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from cluster.errors import NoProviderLeft
from cluster.roles import Policy, Role
from cluster.routing.dispatch import SINGLE_CALL_DISCOVERY_MAX_AGE_S
from cluster.space import EncoderIdentity
from tests.support.dispatch_fakes import (
    CLOUD_ID,
    LOCAL_ID,
    OTHER_CLOUD_ID,
    Fake,
    N,
    World,
    always,
    assert_complete_in_order,
    cloud,
    local,
    texts_of,
)
from tests.support.fakes.virtual_time import VirtualClock, run_virtual

# -- reference and query encoding -----------------------------------------------------------------


def test_the_reference_is_the_local_identity_except_under_cloud_where_it_is_the_first_cloud_by_name() -> None:
    world = World(
        cloud("pc2-OR-CodeEmbedding", identity=OTHER_CLOUD_ID),
        local("gpu-b"),
        cloud("pc1-OR-CodeEmbedding", identity=CLOUD_ID),
    )

    async def main(clock: VirtualClock) -> dict[Policy, EncoderIdentity]:
        return {policy: await world.dispatcher(clock, policy).reference() for policy in Policy}

    references = run_virtual(main)
    assert references[Policy.LOCAL] == references[Policy.AGGREGATE] == references[Policy.BACKUP] == LOCAL_ID
    assert references[Policy.CLOUD] == CLOUD_ID  # pc1 sorts before pc2, whatever the discovery order
    assert world.fakes and all(f.calls == [] for f in world.fakes)


def test_encode_query_prefers_the_provider_in_the_reference_space_over_name_order() -> None:
    # "aaa-..." sorts first by name but lives in another space than the local reference
    early_cloud, gpu = cloud("aaa-OR-CodeEmbedding"), local("zzz-gpu")
    world = World(early_cloud, gpu)

    async def main(clock: VirtualClock) -> Any:
        return await world.dispatcher(clock, Policy.AGGREGATE).encode_query("t3")

    vector, identity, name = run_virtual(main)
    assert (identity, name) == (LOCAL_ID, gpu.name)
    np.testing.assert_array_equal(vector, np.array([gpu.tag, 3, 0, 0], dtype=np.float32))
    assert early_cloud.calls == []


def test_encode_query_falls_through_to_the_next_provider_when_the_preferred_one_fails() -> None:
    for policy in (Policy.AGGREGATE, Policy.BACKUP):
        gpu, or_ = local(fail=always), cloud()
        world = World(gpu, or_)

        async def main(clock: VirtualClock, policy: Policy = policy, world: World = world) -> Any:
            return await world.dispatcher(clock, policy).encode_query("t5")

        vector, identity, name = run_virtual(main)
        assert (identity, name) == (CLOUD_ID, or_.name), policy
        np.testing.assert_array_equal(vector, np.array([or_.tag, 5, 0, 0], dtype=np.float32))
        assert len(gpu.calls) == 1 and len(or_.calls) == 1


def test_encode_query_with_every_provider_failing_names_each_in_no_provider_left() -> None:
    gpu, or_ = local(fail=always), cloud(fail=always)
    world = World(gpu, or_)

    async def main(clock: VirtualClock) -> Any:
        return await world.dispatcher(clock, Policy.AGGREGATE).encode_query("t0")

    with pytest.raises(NoProviderLeft) as caught:
        run_virtual(main)
    assert caught.value.reasons == [f"{gpu.name}: UpstreamUnavailable", f"{or_.name}: UpstreamUnavailable"]


def test_under_cloud_encode_query_uses_the_cloud_anchor_first() -> None:
    anchor, other, gpu = (
        cloud("pc1-OR-CodeEmbedding", identity=CLOUD_ID),
        cloud("pc0-OR-CodeEmbedding", tag=3.0, identity=OTHER_CLOUD_ID, eligible=False, reason="no key"),
        local(),
    )
    world = World(other, gpu, anchor)

    async def main(clock: VirtualClock) -> Any:
        return await world.dispatcher(clock, Policy.CLOUD).encode_query("t1")

    _, identity, name = run_virtual(main)
    assert (identity, name) == (CLOUD_ID, anchor.name)
    assert gpu.calls == [] and other.calls == []


# -- single-call roles: the reranker --------------------------------------------------------------


def rerankers(**local_kw: Any) -> tuple[Fake, Fake]:
    gpu = local("gpu-reranker", tag=1.0, identity=None, role=Role.RERANKER, **local_kw)
    or_ = cloud("pc1-OR-Reranker", tag=2.0, identity=None, role=Role.RERANKER)
    return gpu, or_


def rerank_once(world: World, policy: Policy, documents: list[str]) -> tuple[list[float], str]:
    async def main(clock: VirtualClock) -> tuple[list[float], str]:
        return await world.dispatcher(clock, policy, Role.RERANKER).rerank("query", documents)

    return run_virtual(main)


def test_rerank_under_aggregate_acts_as_backup_and_asks_the_local_reranker_first() -> None:
    gpu, or_ = rerankers()
    world = World(or_, gpu)
    scores, name = rerank_once(world, Policy.AGGREGATE, ["d0", "d1", "d2"])
    assert name == gpu.name and scores == pytest.approx([1.0, 1.01, 1.02])
    assert gpu.rerank_calls == [("query", ["d0", "d1", "d2"])] and or_.rerank_calls == []


def test_rerank_falls_back_to_the_cloud_reranker_when_the_local_one_raises() -> None:
    for policy in (Policy.AGGREGATE, Policy.BACKUP):
        gpu, or_ = rerankers(fail=always, error=lambda: RuntimeError("CUDA out of memory"))
        world = World(gpu, or_)
        scores, name = rerank_once(world, policy, ["d0", "d1"])
        assert name == or_.name and scores == pytest.approx([2.0, 2.01]), policy
        assert len(gpu.rerank_calls) == 1 and len(or_.rerank_calls) == 1


def test_rerank_with_the_wrong_number_of_scores_moves_on_to_the_next_provider() -> None:
    gpu, or_ = rerankers(score_count=lambda documents: documents - 1)
    world = World(gpu, or_)
    scores, name = rerank_once(world, Policy.AGGREGATE, ["d0", "d1", "d2"])
    assert name == or_.name and len(scores) == 3
    assert len(gpu.rerank_calls) == 1


def test_rerank_under_local_never_falls_back_to_the_cloud() -> None:
    gpu, or_ = rerankers(fail=always)
    world = World(gpu, or_)
    with pytest.raises(NoProviderLeft) as caught:
        rerank_once(world, Policy.LOCAL, ["d0"])
    assert caught.value.reasons == [f"{gpu.name}: UpstreamUnavailable"]
    assert or_.rerank_calls == []


# -- discovery ------------------------------------------------------------------------------------


def test_bulk_embedding_rediscovers_every_call_and_single_calls_after_the_window() -> None:
    gpu, or_ = local(), cloud(rate=90.0)
    world = World(gpu)

    async def main(clock: VirtualClock) -> tuple[Any, Any, Any]:
        dispatcher = world.dispatcher(clock, Policy.AGGREGATE)
        first = await dispatcher.embed(texts_of(N))
        world.fakes.append(or_)
        second = await dispatcher.embed(texts_of(N))
        world.fakes.remove(gpu)
        await clock.sleep(SINGLE_CALL_DISCOVERY_MAX_AGE_S + 0.5)
        query = await dispatcher.encode_query("t0")
        return first, second, query

    first, second, query = run_virtual(main)
    assert set(first.served_by) == {gpu.name}
    assert or_.name in set(second.served_by)
    assert_complete_in_order(second, N, {gpu.name: gpu.tag, or_.name: or_.tag})
    assert query[2] == or_.name  # the removed provider is gone for the next call too
    assert world.discovered == 3


def test_single_calls_reuse_a_young_discovery_and_rediscover_when_its_providers_fail() -> None:
    gpu = local()
    world = World(gpu)

    async def main(clock: VirtualClock) -> tuple[int, int, str]:
        dispatcher = world.dispatcher(clock, Policy.AGGREGATE)
        await dispatcher.encode_query("t0")
        await dispatcher.encode_query("t1")
        reused = world.discovered
        replacement = local(name="gpu-b")
        world.fakes[:] = [replacement]
        gpu.fail = always  # the cached provider is gone: its calls fail
        _, _, provider = await dispatcher.encode_query("t2")
        return reused, world.discovered, provider

    reused, after, provider = run_virtual(main)
    assert reused == 1 and after == 2 and provider == "gpu-b"


def test_the_query_route_lists_the_providers_in_the_order_encode_query_tries_them_with_their_space() -> None:
    early_cloud, gpu = cloud("aaa-OR-CodeEmbedding"), local("zzz-gpu")
    world = World(early_cloud, gpu)

    async def main(clock: VirtualClock) -> Any:
        dispatcher = world.dispatcher(clock, Policy.AGGREGATE)
        return await dispatcher.query_route(), await dispatcher.encode_query("t3")

    route, (_, identity, name) = run_virtual(main)
    assert [(info.name, space) for info, space in route] == [(gpu.name, LOCAL_ID), (early_cloud.name, CLOUD_ID)]
    assert (route[0][0].name, route[0][1]) == (name, identity)  # the first is the one encode_query used
    assert early_cloud.calls == []  # naming the route encodes nothing


def test_under_cloud_the_query_route_starts_with_the_cloud_anchor() -> None:
    gpu, or_ = local(), cloud()
    world = World(gpu, or_)

    async def main(clock: VirtualClock) -> Any:
        return await world.dispatcher(clock, Policy.CLOUD).query_route()

    route = run_virtual(main)
    assert [info.name for info, _ in route] == [or_.name] and route[0][1] == CLOUD_ID
