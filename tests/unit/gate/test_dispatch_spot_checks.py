"""The gate's spot checks through the whole dispatch on virtual time: a probe-exact cloud provider
is caught before any of its rows land, and a reference that fails a re-embed only delays a batch.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cluster.errors import UpstreamUnavailable
from cluster.providers import ProviderInfo, ProviderKind
from cluster.roles import Policy, Role
from cluster.routing.dispatch import Dispatcher, LandedBatch, Provider
from cluster.settings import FanoutSettings
from cluster.space import EncoderIdentity
from tests.support.dispatch_fakes import CLOUD_ID, LOCAL_ID, texts_of
from tests.support.fakes.virtual_time import VirtualClock, run_virtual

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
