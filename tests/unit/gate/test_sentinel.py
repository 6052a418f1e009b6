"""The drift sentinel (DESIGN §12): who is re-probed, against what, when, and what a result means."""

from __future__ import annotations

import asyncio
import logging
import random

import numpy as np
import pytest

from cluster.errors import UpstreamUnavailable
from cluster.gate.admission import Embed, Gatekeeper, key_of, regime_of
from cluster.gate.ledger import GateLedger
from cluster.gate.probe import PROBE_TEXTS, STORED_REFERENCE, GateKey, GateReport, Regime, Verdict
from cluster.gate.sentinel import (
    DRIFT_VERDICTS,
    is_drift,
    probe_baseline,
    reference_drifted,
    reprobe,
    sentinel_loop,
    sentinel_round,
    sentinel_targets,
    stored_baseline,
)
from cluster.providers import ProviderInfo, ProviderKind, Selection, select_providers
from cluster.roles import Policy, Role

WIDTH = 8
BASIS = np.random.default_rng(0).normal(size=(64, WIDTH)).astype(np.float32)
AGGREGATE = regime_of(Policy.AGGREGATE)


def vector_of(text: str) -> np.ndarray:
    row = BASIS[sum(map(ord, text)) % len(BASIS)]
    return row / np.linalg.norm(row)


STORED = np.stack([vector_of(t) for t in PROBE_TEXTS]).astype(np.float32)


class FakeEmbed:
    """Embeds like the reference until `noise` perturbs it or `fails` makes it raise; counts calls."""

    def __init__(self) -> None:
        self.noise = 0.0
        self.fails = False
        self.calls = 0

    async def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        if self.fails:
            raise UpstreamUnavailable("fake", "down", 503)
        rows = np.stack([vector_of(t) for t in texts])
        if self.noise:
            rows = rows + np.random.default_rng(1).normal(scale=self.noise, size=rows.shape)
        return rows.astype(np.float32)


def info(name: str, kind: ProviderKind, upstream: str | None = None) -> ProviderInfo:
    return ProviderInfo(
        name=name,
        kind=kind,
        roles=[Role.CODE_EMBEDDING],
        node_id="n",
        host="h",
        model="m",
        upstream=upstream,
        eligible=True,
    )


LOCAL = info("gpu0", ProviderKind.LOCAL)
LOCAL_PEER = info("gpu1", ProviderKind.LOCAL)
CLOUD = info("pc-OR-CodeEmbedding", ProviderKind.CLOUD, upstream="pinned")


def keeper() -> Gatekeeper:
    return Gatekeeper(
        GateLedger(lambda: 0.0),
        expected_width=WIDTH,
        preferred_reference=None,
        clock=lambda: 0.0,
        probe_timeout_s=5.0,
        rng=random.Random(0),
    )


def admitted(gk: Gatekeeper, policy: Policy, embeds: dict[str, Embed]) -> tuple[Selection, ProviderInfo]:
    """The selection the gate cleared, and its reference (as a dispatcher holds them after `select`)."""
    providers = [p for p in (LOCAL, LOCAL_PEER, CLOUD) if p.name in embeds]
    result = asyncio.run(gk.admit(select_providers(Role.CODE_EMBEDDING, policy, providers), embeds))
    return result.selection, result.reference


def round_of(
    gk: Gatekeeper, selection: Selection, reference: ProviderInfo, embeds: dict[str, Embed], stored: np.ndarray | None
) -> list[GateReport]:
    return asyncio.run(sentinel_round(gk, selection, reference, embeds, stored=stored, width=WIDTH, clock=lambda: 7.0))


def report(verdict: Verdict, reference: str | None) -> GateReport:
    return GateReport(
        key=GateKey(provider="p", model="m", upstream="u", regime=Regime.CLOUD_REF),
        verdict=verdict,
        coverage=None,
        reference=reference,
        min_cosine=None,
        mean_cosine=None,
        width=None,
        expected_width=WIDTH,
        checked_at=0.0,
        detail="d",
    )


def test_drift_is_a_vector_or_width_mismatch_and_a_failed_probe_is_not_drift() -> None:
    assert {Verdict.VECTOR_INCOMPATIBLE, Verdict.DIMENSION_MISMATCH} == DRIFT_VERDICTS
    assert is_drift(report(Verdict.DIMENSION_MISMATCH, "gpu0"))
    assert not is_drift(report(Verdict.PROBE_FAILED, None))


def test_the_reference_drifted_only_when_a_drifted_report_names_no_reference() -> None:
    anchor_drifted = report(Verdict.VECTOR_INCOMPATIBLE, None)
    provider_drifted = report(Verdict.VECTOR_INCOMPATIBLE, "gpu0")
    anchor_unreachable = report(Verdict.PROBE_FAILED, None)
    assert reference_drifted([provider_drifted, anchor_drifted])
    assert not reference_drifted([provider_drifted, anchor_unreachable])
    assert not reference_drifted([])


def test_an_index_without_stored_probe_vectors_has_no_baseline_and_one_with_them_gives_float32_rows() -> None:
    assert stored_baseline(None) is None
    baseline = stored_baseline(STORED.astype(np.float64).tolist())
    assert baseline is not None and baseline.dtype == np.float32 and baseline.shape == (len(PROBE_TEXTS), WIDTH)
    np.testing.assert_allclose(baseline, STORED, atol=1e-7)


def test_the_baseline_stored_with_an_index_is_the_reference_embedding_every_probe_text() -> None:
    embed = FakeEmbed()
    baseline = asyncio.run(probe_baseline(embed))
    assert embed.calls == 1 and baseline.dtype == np.float32
    np.testing.assert_allclose(baseline, STORED, atol=1e-6)


def test_every_serving_provider_is_a_target_but_a_local_reference_and_one_without_an_embed_call() -> None:
    selection = select_providers(Role.CODE_EMBEDDING, Policy.AGGREGATE, [LOCAL, LOCAL_PEER, CLOUD])
    embeds: dict[str, Embed] = {LOCAL.name: FakeEmbed(), CLOUD.name: FakeEmbed()}
    assert [p.name for p, _ in sentinel_targets(selection, LOCAL, embeds)] == [CLOUD.name]
    anchor_selection = select_providers(Role.CODE_EMBEDDING, Policy.CLOUD, [CLOUD])
    ((target, embed),) = sentinel_targets(anchor_selection, CLOUD, embeds)  # a cloud anchor is re-probed
    assert target == CLOUD and embed is embeds[CLOUD.name]


def test_reprobe_evicts_what_drifted_from_stored_vectors_and_keeps_the_honest_cleared() -> None:
    gk = keeper()
    cloud, peer = FakeEmbed(), FakeEmbed()
    admitted(gk, Policy.AGGREGATE, {LOCAL.name: FakeEmbed(), LOCAL_PEER.name: peer, CLOUD.name: cloud})
    cloud.noise = 0.3
    drifted, honest = asyncio.run(reprobe(gk, [(CLOUD, cloud), (LOCAL_PEER, peer)], AGGREGATE, STORED))
    assert drifted.verdict is Verdict.VECTOR_INCOMPATIBLE and drifted.detail.startswith("sentinel")
    assert not gk.ledger.cleared(key_of(CLOUD, AGGREGATE))
    assert honest.verdict is Verdict.VERIFIED and honest.reference == STORED_REFERENCE
    assert gk.ledger.cleared(key_of(LOCAL_PEER, AGGREGATE))


def test_a_provider_the_sentinel_cannot_reach_is_reported_but_keeps_its_verdict() -> None:
    gk = keeper()
    cloud = FakeEmbed()
    admitted(gk, Policy.AGGREGATE, {LOCAL.name: FakeEmbed(), CLOUD.name: cloud})
    cloud.fails = True
    (unreachable,) = asyncio.run(reprobe(gk, [(CLOUD, cloud)], AGGREGATE, STORED))
    assert unreachable.verdict is Verdict.PROBE_FAILED
    assert gk.ledger.cleared(key_of(CLOUD, AGGREGATE))  # not drift: no eviction


def test_a_reindex_round_probes_a_local_reference_against_the_index_and_only_reports_it() -> None:
    gk = keeper()
    local, cloud = FakeEmbed(), FakeEmbed()
    embeds: dict[str, Embed] = {LOCAL.name: local, CLOUD.name: cloud}
    selection, reference = admitted(gk, Policy.AGGREGATE, embeds)
    assert reference == LOCAL
    local.noise = 0.3  # the reference's stack changed since the index was built
    cloud_report, reference_report = round_of(gk, selection, reference, embeds, stored=STORED)
    assert cloud_report.key.provider == CLOUD.name and cloud_report.verdict is Verdict.VERIFIED
    assert reference_report.key.provider == LOCAL.name and reference_report.checked_at == 7.0
    assert reference_report.verdict is Verdict.VECTOR_INCOMPATIBLE and reference_report.reference == STORED_REFERENCE
    assert gk.ledger.cleared(key_of(LOCAL, AGGREGATE))  # the reference defines the space: never evicted


def test_a_periodic_round_compares_against_the_reference_as_first_recorded_and_skips_the_local_reference() -> None:
    gk = keeper()
    local, cloud = FakeEmbed(), FakeEmbed()
    embeds: dict[str, Embed] = {LOCAL.name: local, CLOUD.name: cloud}
    selection, reference = admitted(gk, Policy.AGGREGATE, embeds)
    reference_calls = local.calls
    cloud.noise = 0.3
    (only,) = round_of(gk, selection, reference, embeds, stored=None)
    assert only.key.provider == CLOUD.name and only.verdict is Verdict.VECTOR_INCOMPATIBLE
    assert local.calls == reference_calls  # its vectors as first recorded: not embedded again
    assert not gk.ledger.cleared(key_of(CLOUD, AGGREGATE))


def test_a_cloud_anchor_that_drifted_from_its_own_first_vectors_is_evicted_and_counts_as_reference_drift() -> None:
    gk = keeper()
    anchor = FakeEmbed()
    embeds: dict[str, Embed] = {CLOUD.name: anchor}
    selection, reference = admitted(gk, Policy.CLOUD, embeds)
    assert reference == CLOUD
    calm = round_of(gk, selection, reference, embeds, stored=None)
    assert [r.verdict for r in calm] == [Verdict.VERIFIED] and not reference_drifted(calm)
    anchor.noise = 0.3
    reports = round_of(gk, selection, reference, embeds, stored=None)
    assert [r.verdict for r in reports] == [Verdict.VECTOR_INCOMPATIBLE] and reference_drifted(reports)
    assert not gk.ledger.cleared(key_of(CLOUD, regime_of(Policy.CLOUD)))


def test_the_loop_runs_a_round_every_period_and_outlives_a_failed_one(caplog: pytest.LogCaptureFixture) -> None:
    slept: list[float] = []
    rounds: list[int] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) > 3:
            raise asyncio.CancelledError  # the actor cancels the loop's task; here the fourth wait ends it

    async def run_round() -> None:
        rounds.append(len(slept))
        if len(rounds) == 1:
            raise UpstreamUnavailable("gpu0", "restarting", 503)

    with caplog.at_level(logging.WARNING, logger="samespace.gate"), pytest.raises(asyncio.CancelledError):
        asyncio.run(sentinel_loop(run_round, period_s=600.0, sleep=sleep, role="x"))
    assert slept == [600.0] * 4 and rounds == [1, 2, 3]  # a round after each wait, the first one's failure survived
    (failed,) = [r for r in caplog.records if "sentinel round failed" in r.getMessage()]
    assert failed.getMessage().startswith("x: sentinel round failed")
