"""The per-role dispatcher's policies for code-embedding on virtual time: who serves under local,
cloud, aggregate and backup, how failing and ineligible providers are dropped and the reserve takes
over, what on_batch sees, and NoProviderLeft when nobody is left. The fakes: tests/support/dispatch_fakes.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from cluster.errors import NoProviderLeft
from cluster.roles import Policy, Role
from cluster.routing.dispatch import LandedBatch
from tests.support.dispatch_fakes import (
    CLOUD_ID,
    LOCAL_ID,
    N,
    World,
    always,
    assert_complete_in_order,
    cloud,
    embed_all,
    local,
    texts_of,
)
from tests.support.fakes.virtual_time import VirtualClock, run_virtual

# -- the policy matrix for code-embedding ---------------------------------------------------------


def test_under_local_only_the_local_provider_writes_rows_and_the_cloud_is_never_called() -> None:
    gpu, or_ = local(), cloud()
    world = World(gpu, or_)
    outcome = embed_all(world, Policy.LOCAL)
    assert_complete_in_order(outcome, N, {gpu.name: gpu.tag})
    assert set(outcome.served_by) == {gpu.name} and gpu.texts_served == N
    assert or_.calls == []
    assert "policy local" in outcome.dropped[or_.name]
    assert outcome.reference == LOCAL_ID and outcome.identities == {gpu.name: LOCAL_ID}


def test_under_cloud_only_the_cloud_writes_rows_and_the_local_provider_is_never_called() -> None:
    gpu, or_ = local(), cloud()
    world = World(gpu, or_)
    outcome = embed_all(world, Policy.CLOUD)
    assert_complete_in_order(outcome, N, {or_.name: or_.tag})
    assert set(outcome.served_by) == {or_.name} and or_.texts_served == N
    assert gpu.calls == []
    assert "local actors do not serve" in outcome.dropped[gpu.name]
    assert outcome.reference == CLOUD_ID


def test_under_cloud_not_even_the_query_encoder_uses_the_local_provider() -> None:
    gpu, or_ = local(), cloud()
    world = World(gpu, or_)

    async def main(clock: VirtualClock) -> Any:
        return await world.dispatcher(clock, Policy.CLOUD).encode_query("t7")

    vector, identity, name = run_virtual(main)
    assert name == or_.name and identity == CLOUD_ID
    np.testing.assert_array_equal(vector, np.array([or_.tag, 7, 0, 0], dtype=np.float32))
    assert gpu.calls == [] and len(or_.calls) == 1


def test_under_aggregate_local_and_cloud_of_similar_speed_both_serve_one_queue() -> None:
    gpu, or_ = local(rate=100.0), cloud(rate=90.0)
    world = World(gpu, or_)
    outcome = embed_all(world, Policy.AGGREGATE)
    assert_complete_in_order(outcome, N, {gpu.name: gpu.tag, or_.name: or_.tag})
    assert set(outcome.served_by) == {gpu.name, or_.name}
    assert outcome.served_by.count(gpu.name) == gpu.texts_served > 0
    assert outcome.served_by.count(or_.name) == or_.texts_served > 0
    assert gpu.texts_served + or_.texts_served == N  # no text served twice
    assert outcome.batches[gpu.name] == len(gpu.calls) and outcome.batches[or_.name] == len(or_.calls)
    assert outcome.dropped == {}
    assert outcome.identities == {gpu.name: LOCAL_ID, or_.name: CLOUD_ID}


def test_under_backup_only_the_local_provider_serves_while_it_works() -> None:
    gpu, or_ = local(), cloud()
    world = World(gpu, or_)
    outcome = embed_all(world, Policy.BACKUP)
    assert_complete_in_order(outcome, N, {gpu.name: gpu.tag})
    assert set(outcome.served_by) == {gpu.name}
    assert or_.calls == [] and outcome.dropped == {}


# -- failures and fall-back -----------------------------------------------------------------------


def test_under_backup_a_local_provider_failing_every_call_is_dropped_after_two_and_the_reserve_serves_all() -> None:
    gpu, or_ = local(fail=always), cloud()
    world = World(gpu, or_)
    outcome = embed_all(world, Policy.BACKUP)
    assert_complete_in_order(outcome, N, {or_.name: or_.tag})
    assert len(gpu.calls) == 2 and gpu.texts_served == 0
    assert outcome.served_by.count(or_.name) == or_.texts_served == N
    assert "dropped after 2 consecutive failures" in outcome.dropped[gpu.name]


def test_under_backup_the_reserve_serves_exactly_the_texts_the_local_pool_could_not_finish() -> None:
    gpu, or_ = local(fail=lambda number: number >= 2), cloud()
    world = World(gpu, or_)
    landed: list[LandedBatch] = []
    outcome = embed_all(world, Policy.BACKUP, on_batch=landed.append)
    assert_complete_in_order(outcome, N, {gpu.name: gpu.tag, or_.name: or_.tag})
    by_local = sorted(gpu.returned)
    by_cloud = sorted(or_.returned)
    assert 0 < len(by_local) < N and len(by_local) + len(by_cloud) == N
    assert set(by_cloud) == set(range(N)) - set(by_local)  # exactly the leftovers, each once
    assert [i for i, name in enumerate(outcome.served_by) if name == gpu.name] == by_local
    assert [i for i, name in enumerate(outcome.served_by) if name == or_.name] == by_cloud
    assert "dropped after 2 consecutive failures" in outcome.dropped[gpu.name]
    assert outcome.batches == {gpu.name: 2, or_.name: len(or_.calls)}  # the exhausted tier's batches count too
    # on_batch saw the reserve's rows under their original input indices
    cloud_indices = sorted(i for b in landed if b.provider == or_.name for i in b.indices)
    local_indices = sorted(i for b in landed if b.provider == gpu.name for i in b.indices)
    assert cloud_indices == by_cloud and local_indices == by_local


def test_under_aggregate_a_failing_cloud_lane_is_dropped_and_the_local_one_serves_its_batches() -> None:
    gpu, or_ = local(), cloud(fail=always)
    world = World(gpu, or_)
    outcome = embed_all(world, Policy.AGGREGATE)
    assert_complete_in_order(outcome, N, {gpu.name: gpu.tag})
    assert set(outcome.served_by) == {gpu.name} and gpu.texts_served == N
    assert len(or_.calls) == 2 and or_.texts_served == 0
    assert "dropped after 2 consecutive failures" in outcome.dropped[or_.name]
    assert gpu.name not in outcome.dropped


def test_an_ineligible_provider_is_never_called_under_any_policy() -> None:
    for policy in Policy:
        gpu, keyless = local(), cloud(eligible=False, reason="no OpenRouter key")
        world = World(gpu, keyless)
        if policy is Policy.CLOUD:
            with pytest.raises(NoProviderLeft, match="ineligible: no OpenRouter key"):
                embed_all(world, policy)
        else:
            outcome = embed_all(world, policy)
            assert set(outcome.served_by) == {gpu.name}
            assert outcome.dropped[keyless.name] == "ineligible: no OpenRouter key"
        assert keyless.calls == [], policy


def test_on_batch_gets_each_landed_batch_with_its_input_indices_vectors_and_provider_identity() -> None:
    gpu, or_ = local(), cloud(rate=90.0)
    world = World(gpu, or_)
    landed: list[LandedBatch] = []

    async def write(batch: LandedBatch) -> None:
        await asyncio.sleep(0.001)
        landed.append(batch)

    outcome = embed_all(world, Policy.AGGREGATE, on_batch=write)
    assert sorted(i for b in landed for i in b.indices) == list(range(N))  # every row exactly once
    identities = {gpu.name: LOCAL_ID, or_.name: CLOUD_ID}
    tags = {gpu.name: gpu.tag, or_.name: or_.tag}
    for batch in landed:
        assert batch.identity == identities[batch.provider]
        np.testing.assert_array_equal(batch.vectors[:, 1], np.array(batch.indices, dtype=np.float32))
        assert set(batch.vectors[:, 0]) == {tags[batch.provider]}
        np.testing.assert_array_equal(outcome.vectors[batch.indices], batch.vectors)
        assert {outcome.served_by[i] for i in batch.indices} == {batch.provider}
    assert {b.provider for b in landed} == {gpu.name, or_.name}


def test_every_provider_failing_raises_no_provider_left_naming_each_reason() -> None:
    for policy in (Policy.AGGREGATE, Policy.BACKUP):
        gpu, or_ = local(fail=always), cloud(fail=always, error=lambda: RuntimeError("boom"))
        world = World(gpu, or_)
        with pytest.raises(NoProviderLeft) as caught:
            embed_all(world, policy)
        assert caught.value.role == Role.CODE_EMBEDDING.value
        reasons = "\n".join(caught.value.reasons)
        assert f"{gpu.name}: dropped after 2 consecutive failures" in reasons, policy
        assert f"{or_.name}: dropped after 2 consecutive failures" in reasons, policy
        assert "UpstreamUnavailable" in reasons and "RuntimeError: boom" in reasons


def test_no_providers_at_all_raise_no_provider_left_for_every_call() -> None:
    world = World()

    async def main(clock: VirtualClock) -> list[BaseException]:
        dispatcher = world.dispatcher(clock, Policy.AGGREGATE)
        errors: list[BaseException] = []
        for call in (dispatcher.embed(texts_of(3)), dispatcher.encode_query("t0"), dispatcher.reference()):
            try:
                await call
            except NoProviderLeft as exc:
                errors.append(exc)
        reranker = world.dispatcher(clock, Policy.AGGREGATE, Role.RERANKER)
        try:
            await reranker.rerank("q", ["d"])
        except NoProviderLeft as exc:
            errors.append(exc)
        return errors

    errors = run_virtual(main)
    assert len(errors) == 4
    assert errors[-1].role == Role.RERANKER.value  # type: ignore[attr-defined]
