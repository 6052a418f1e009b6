"""The per-role dispatcher on virtual time, with fake local and cloud providers.

Every fake provider writes rows `[tag, index, 0, 0]`: the tag says who wrote a row, the index
(parsed from the text `t<index>`) says where it belongs. Calls take len(texts)/rate seconds on
an event loop whose clock jumps to the next timer, so runs are deterministic and instant.
Discovery is an async function over a list the test may change between calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from cluster.errors import NoProviderLeft, UpstreamUnavailable
from cluster.providers import ProviderInfo, ProviderKind
from cluster.roles import Policy, Role
from cluster.routing.dispatch import SINGLE_CALL_DISCOVERY_MAX_AGE_S, Dispatcher, LandedBatch, Provider
from cluster.settings import FanoutSettings
from cluster.space import EncoderIdentity
from tests.support.fakes.virtual_time import VirtualClock, run_virtual

WIDTH = 4
N = 200

LOCAL_ID = EncoderIdentity(model="local/code-model", weights_sha256="a" * 64, width=WIDTH, max_seq_length=512)
CLOUD_ID = EncoderIdentity(model="cloud/code-model", weights_sha256="b" * 64, width=WIDTH, max_seq_length=512)
OTHER_CLOUD_ID = EncoderIdentity(model="cloud/other-model", weights_sha256="c" * 64, width=WIDTH, max_seq_length=512)


# -- fake providers -------------------------------------------------------------------------------


def texts_of(n: int) -> list[str]:
    return [f"t{i}" for i in range(n)]


def index_of(text: str) -> int:
    return int(text[1:]) if text.startswith("t") and text[1:].isdigit() else -1


@dataclass
class Fake:
    """One provider. `fail(call_number)` says whether that embed / rerank call raises."""

    name: str
    kind: ProviderKind
    tag: float
    identity: EncoderIdentity | None = None
    role: Role = Role.CODE_EMBEDDING
    rate: float = 100.0
    eligible: bool = True
    reason: str | None = None
    fail: Callable[[int], bool] = lambda number: False
    error: Callable[[], Exception] = lambda: UpstreamUnavailable("fake", "down", 503)
    score_count: Callable[[int], int] = lambda documents: documents
    calls: list[list[str]] = field(default_factory=list)  # every embed call's texts
    returned: list[int] = field(default_factory=list)  # indices of rows it did return
    rerank_calls: list[tuple[str, list[str]]] = field(default_factory=list)

    async def embed(self, texts: list[str]) -> np.ndarray:
        number = len(self.calls)
        self.calls.append(list(texts))
        await asyncio.sleep(len(texts) / self.rate)
        if self.fail(number):
            raise self.error()
        rows = np.zeros((len(texts), WIDTH), dtype=np.float32)
        rows[:, 0] = self.tag
        rows[:, 1] = [index_of(t) for t in texts]
        self.returned.extend(index_of(t) for t in texts)
        return rows

    async def rerank(self, query: str, documents: list[str]) -> list[float]:
        number = len(self.rerank_calls)
        self.rerank_calls.append((query, list(documents)))
        await asyncio.sleep(0.01)
        if self.fail(number):
            raise self.error()
        return [self.tag + i / 100 for i in range(self.score_count(len(documents)))]

    @property
    def texts_served(self) -> int:
        return len(self.returned)

    def provider(self) -> Provider:
        info = ProviderInfo(
            name=self.name,
            kind=self.kind,
            roles=[self.role],
            node_id=f"node-{self.name}",
            host=f"{self.name}.lan",
            model=(self.identity.model if self.identity else "reranker-model"),
            identity=self.identity,
            eligible=self.eligible,
            reason=self.reason,
        )
        if self.role.fans_out:
            return Provider(info=info, embed=self.embed)
        return Provider(info=info, rerank=self.rerank)


def local(name: str = "gpu-a", tag: float = 1.0, **kw: Any) -> Fake:
    kw.setdefault("identity", LOCAL_ID)
    return Fake(name, ProviderKind.LOCAL, tag, **kw)


def cloud(name: str = "pc1-OR-CodeEmbedding", tag: float = 2.0, **kw: Any) -> Fake:
    kw.setdefault("identity", CLOUD_ID)
    return Fake(name, ProviderKind.CLOUD, tag, **kw)


def always(number: int) -> bool:
    return True


class World:
    """The providers discovery reports right now, and how often it was asked."""

    def __init__(self, *fakes: Fake) -> None:
        self.fakes = list(fakes)
        self.discovered = 0

    async def discover(self) -> list[Provider]:
        self.discovered += 1
        return [f.provider() for f in self.fakes]

    def dispatcher(self, clock: VirtualClock, policy: Policy, role: Role = Role.CODE_EMBEDDING) -> Dispatcher:
        return Dispatcher(
            role,
            policy=lambda: policy,
            discover=self.discover,
            fanout=FanoutSettings(),
            width=WIDTH if role.fans_out else None,
            clock=clock,
            sleep=clock.sleep,
        )


def embed_all(world: World, policy: Policy, n: int = N, on_batch: Any = None) -> Any:
    async def main(clock: VirtualClock) -> Any:
        return await world.dispatcher(clock, policy).embed(texts_of(n), on_batch=on_batch)

    return run_virtual(main)


def assert_complete_in_order(outcome: Any, n: int, tags: dict[str, float]) -> None:
    assert outcome.vectors.shape == (n, WIDTH) and outcome.vectors.dtype == np.float32
    np.testing.assert_array_equal(outcome.vectors[:, 1], np.arange(n, dtype=np.float32))
    assert len(outcome.served_by) == n and "" not in outcome.served_by
    expected_tags = np.array([tags[name] for name in outcome.served_by], dtype=np.float32)
    np.testing.assert_array_equal(outcome.vectors[:, 0], expected_tags)  # served_by names the writer


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


# -- the gate's spot checks through the whole dispatch -----------------------------------------------


GATE_WIDTH = 8


def truth(texts: list[str]) -> np.ndarray:
    """The reference space: one fixed unit vector per text."""
    rows = np.stack(
        [
            np.random.default_rng(int.from_bytes(t.encode()[:8].ljust(8, b"\0"), "little") + len(t)).normal(
                size=GATE_WIDTH
            )
            for t in texts
        ]
    )
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


@dataclass
class Encoder:
    """An embedding provider on virtual time. `probe_exact`: the gate's probe texts exact, every other
    text pointing the other way. `reembed_fails`: the first n spot-check re-embeds (as reference) raise."""

    name: str
    kind: ProviderKind
    identity: EncoderIdentity
    rate: float = 50.0
    probe_exact: bool = False
    reembed_fails: int = 0
    calls: list[list[str]] = field(default_factory=list)
    reembeds: list[list[str]] = field(default_factory=list)

    async def embed(self, texts: list[str]) -> np.ndarray:
        from cluster.gate.probe import PROBE_TEXTS

        self.calls.append(list(texts))
        await asyncio.sleep(len(texts) / self.rate)
        rows = truth(texts)
        if self.probe_exact:
            rows = np.stack([row if t in PROBE_TEXTS else -row for t, row in zip(texts, rows, strict=True)])
        return rows

    async def reembed(self, texts: list[str]) -> np.ndarray:
        self.reembeds.append(list(texts))
        await asyncio.sleep(0.01)
        if len(self.reembeds) <= self.reembed_fails:
            raise UpstreamUnavailable(self.name, "busy", 503)
        return truth(texts)

    def provider(self) -> Provider:
        info = ProviderInfo(
            name=self.name,
            kind=self.kind,
            roles=[Role.CODE_EMBEDDING],
            node_id="n",
            host="h",
            model=self.identity.model,
            identity=self.identity,
            eligible=True,
            upstream="pinned" if self.kind is ProviderKind.CLOUD else None,
        )
        return Provider(
            info=info, embed=self.embed, query_embed=self.reembed if self.kind is ProviderKind.LOCAL else None
        )


def gated_run(*encoders: Encoder, n: int = 300) -> tuple[Any, list[LandedBatch], Any]:
    import random

    from cluster.gate.admission import Gatekeeper
    from cluster.gate.ledger import GateLedger

    landed: list[LandedBatch] = []

    async def main(clock: VirtualClock) -> tuple[Any, Gatekeeper]:
        gatekeeper = Gatekeeper(
            GateLedger(clock),
            expected_width=GATE_WIDTH,
            preferred_reference=None,
            clock=clock,
            probe_timeout_s=15.0,
            rng=random.Random(0),
        )

        async def discover() -> list[Provider]:
            return [e.provider() for e in encoders]

        dispatcher = Dispatcher(
            Role.CODE_EMBEDDING,
            policy=lambda: Policy.AGGREGATE,
            discover=discover,
            fanout=FanoutSettings(),
            width=GATE_WIDTH,
            clock=clock,
            sleep=clock.sleep,
            gatekeeper=gatekeeper,
        )
        return await dispatcher.embed(texts_of(n), on_batch=landed.append), gatekeeper

    outcome, gatekeeper = run_virtual(main)
    return outcome, landed, gatekeeper


GATE_LOCAL_ID = LOCAL_ID.model_copy(update={"width": GATE_WIDTH})


def test_a_probe_exact_cloud_provider_is_caught_before_any_of_its_rows_land_and_its_texts_go_elsewhere() -> None:
    from cluster.gate.probe import PROBE_TEXTS, Verdict

    reference = Encoder("gpu-a", ProviderKind.LOCAL, GATE_LOCAL_ID, rate=20)
    cheat = Encoder("pc1-OR-CodeEmbedding", ProviderKind.CLOUD, CLOUD_ID, rate=200, probe_exact=True)
    outcome, landed, gatekeeper = gated_run(reference, cheat)

    assert cheat.calls[0] == list(PROBE_TEXTS) and len(cheat.calls) == 2  # passed the probe; one batch, caught
    assert {batch.provider for batch in landed} == {"gpu-a"}  # not one of its rows was handed on for writing
    assert set(outcome.served_by) == {"gpu-a"}
    np.testing.assert_allclose(outcome.vectors, truth(texts_of(300)), atol=1e-6)  # every text, right, in order
    assert "vector-incompatible" in outcome.dropped[cheat.name]
    (report,) = [r for r in gatekeeper.ledger.reports() if r.key.provider == cheat.name]
    assert report.verdict is Verdict.VECTOR_INCOMPATIBLE and report.detail.startswith("spot check")
    (checked,) = reference.reembeds  # distinct texts re-embedded, through the reference's side door ...
    assert len(set(checked)) == len(checked) == min(4, len(cheat.calls[1]))  # gate.spot_check_texts by default
    assert set(checked) <= set(cheat.calls[1])  # ... texts of the batch itself


def test_a_reference_that_fails_a_re_embed_delays_a_batch_but_the_honest_provider_keeps_its_verdict_and_serves() -> (
    None
):
    from cluster.gate.probe import Verdict

    reference = Encoder("gpu-a", ProviderKind.LOCAL, GATE_LOCAL_ID, rate=20, reembed_fails=1)
    honest = Encoder("pc1-OR-CodeEmbedding", ProviderKind.CLOUD, CLOUD_ID, rate=200)
    outcome, landed, gatekeeper = gated_run(reference, honest)

    (report,) = [r for r in gatekeeper.ledger.reports() if r.key.provider == honest.name]
    assert report.verdict is Verdict.VERIFIED and honest.name not in outcome.dropped
    assert {batch.provider for batch in landed} == {"gpu-a", honest.name}
    np.testing.assert_allclose(outcome.vectors, truth(texts_of(300)), atol=1e-6)
    stats = gatekeeper.spot_stats()
    assert stats.reference_failures == 1 and stats.mismatches == 0
    honest_batches = sum(1 for batch in landed if batch.provider == honest.name)
    assert stats.batches_checked == honest_batches + 1  # one per landed batch, plus the one that waited
    assert len(reference.reembeds) == stats.batches_checked  # one re-embed call a checked batch ...
    assert stats.texts_reembedded == sum(map(len, reference.reembeds))  # ... the cost: its texts


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
