"""The gate applied to a selection, and the guard on every batch (no Ray, fake providers)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import numpy as np
import pytest

from cluster.errors import GateRefused, WidthMismatch
from cluster.gate import PROBE_TEXTS, GateLedger, Verdict
from cluster.gatekeeper import Gatekeeper, key_of, regime_of
from cluster.providers import ProviderInfo, ProviderKind, select_providers
from cluster.roles import Policy, Role

WIDTH = 8
BASIS = np.random.default_rng(0).normal(size=(64, WIDTH)).astype(np.float32)


def vector_of(text: str) -> np.ndarray:
    row = BASIS[sum(map(ord, text)) % len(BASIS)]
    return row / np.linalg.norm(row)


class FakeEmbed:
    """Embeds like the reference; `noise` perturbs, `width` changes the width; counts calls."""

    def __init__(self, noise: float = 0.0, width: int = WIDTH) -> None:
        self.noise = noise
        self.width = width
        self.calls: list[list[str]] = []

    async def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        rows = np.stack([vector_of(t) for t in texts])
        if self.noise:
            rows = rows + np.random.default_rng(1).normal(scale=self.noise, size=rows.shape).astype(np.float32)
        if self.width != WIDTH:
            rows = np.pad(rows, ((0, 0), (0, self.width - WIDTH)))
        return rows.astype(np.float32)


def info(name: str, kind: ProviderKind, upstream: str | None = None) -> ProviderInfo:
    return ProviderInfo(name=name, kind=kind, roles=[Role.CODE_EMBEDDING], node_id="n", host="h",
                        model="m", upstream=upstream, eligible=True)


LOCAL = info("gpu0", ProviderKind.LOCAL)
CLOUD = info("pc-OR-CodeEmbedding", ProviderKind.CLOUD, upstream="pinned")
UNPINNED = info("pc2-OR-CodeEmbedding", ProviderKind.CLOUD)


def keeper() -> Gatekeeper:
    return Gatekeeper(GateLedger(lambda: 0.0), expected_width=WIDTH, preferred_reference=None,
                      clock=lambda: 0.0, probe_timeout_s=5.0)


def admit(gk: Gatekeeper, policy: Policy, embeds: dict[str, Callable]) -> tuple[list[str], dict[str, str]]:
    providers = [p for p in (LOCAL, CLOUD, UNPINNED) if p.name in embeds]
    selection = select_providers(Role.CODE_EMBEDDING, policy, providers)
    admitted = asyncio.run(gk.admit(selection, embeds))
    pool = admitted.selection.primary + admitted.selection.reserve
    return [p.name for p in pool], admitted.selection.excluded


def test_only_cleared_providers_stay_in_the_pool_and_the_refused_say_why() -> None:
    gk = keeper()
    names, excluded = admit(gk, Policy.AGGREGATE, {
        LOCAL.name: FakeEmbed(), CLOUD.name: FakeEmbed(noise=0.3), UNPINNED.name: FakeEmbed()})
    assert names == [LOCAL.name]
    assert excluded[CLOUD.name].startswith("gate: vector-incompatible")
    assert excluded[UNPINNED.name].startswith("gate: no-provider-pin")


def test_a_never_pinned_provider_is_never_called() -> None:
    unpinned = FakeEmbed()
    admit(keeper(), Policy.AGGREGATE, {LOCAL.name: FakeEmbed(), UNPINNED.name: unpinned})
    assert unpinned.calls == []


def test_the_guard_evicts_a_provider_whose_batch_comes_back_at_the_wrong_width() -> None:
    gk = keeper()
    cloud = FakeEmbed()
    names, _ = admit(gk, Policy.AGGREGATE, {LOCAL.name: FakeEmbed(), CLOUD.name: cloud})
    assert CLOUD.name in names
    guarded = gk.guard(CLOUD, cloud, regime_of(Policy.AGGREGATE), LOCAL)
    cloud.width = WIDTH + 1
    with pytest.raises(WidthMismatch):
        asyncio.run(guarded(["a", "b"]))
    assert gk.ledger.get(key_of(CLOUD, regime_of(Policy.AGGREGATE))).verdict is Verdict.DIMENSION_MISMATCH
    with pytest.raises(GateRefused):  # evicted: refused before any call
        asyncio.run(guarded(["a"]))


def test_a_cloud_batch_carries_one_probe_and_a_drifted_batch_is_never_returned() -> None:
    gk = keeper()
    cloud = FakeEmbed()
    admit(gk, Policy.AGGREGATE, {LOCAL.name: FakeEmbed(), CLOUD.name: cloud})
    guarded = gk.guard(CLOUD, cloud, regime_of(Policy.AGGREGATE), LOCAL)
    rows = asyncio.run(guarded(["x", "y"]))
    assert rows.shape == (2, WIDTH) and cloud.calls[-1][:2] == ["x", "y"] and cloud.calls[-1][2] in PROBE_TEXTS
    cloud.noise = 0.3  # the stack behind the pin changes
    with pytest.raises(GateRefused, match="vector-incompatible"):
        asyncio.run(guarded(["z"]))
    assert not gk.ledger.cleared(key_of(CLOUD, regime_of(Policy.AGGREGATE)))


def test_under_cloud_the_lone_anchor_is_verified_on_width_and_pin_only_and_local_is_not_used() -> None:
    gk = keeper()
    local = FakeEmbed()
    names, excluded = admit(gk, Policy.CLOUD, {LOCAL.name: local, CLOUD.name: FakeEmbed()})
    assert names == [CLOUD.name] and local.calls == []
    report = gk.ledger.get(key_of(CLOUD, regime_of(Policy.CLOUD)))
    assert report.coverage == "width-and-pin-only" and report.min_cosine is None


def test_the_sentinel_evicts_what_drifted_from_stored_vectors() -> None:
    gk = keeper()
    cloud = FakeEmbed()
    admit(gk, Policy.AGGREGATE, {LOCAL.name: FakeEmbed(), CLOUD.name: cloud})
    stored = np.stack([vector_of(t) for t in PROBE_TEXTS])
    cloud.noise = 0.3
    (report,) = asyncio.run(gk.sentinel([(CLOUD, cloud)], regime_of(Policy.AGGREGATE), stored))
    assert report.verdict is Verdict.VECTOR_INCOMPATIBLE and report.detail.startswith("sentinel")
    assert not gk.ledger.cleared(key_of(CLOUD, regime_of(Policy.AGGREGATE)))


def test_there_is_no_setting_that_turns_the_gate_off() -> None:
    from cluster.settings import GateSettings, SamespaceSettings

    assert set(GateSettings.model_fields) == {"reference", "sentinel_period_s", "probe_timeout_s"}
    with pytest.raises(ValueError):
        SamespaceSettings(gate={"enabled": False})


SIDECAR = ProviderInfo(name="a-sidecar-first-by-name", kind=ProviderKind.LOCAL, hosted="sidecar",
                       roles=[Role.CODE_EMBEDDING], node_id="", host="ws1", model="m", eligible=True)


def test_a_sidecar_joins_under_local_never_becomes_the_reference_and_is_watched_on_every_batch() -> None:
    gk = keeper()
    sidecar, perturbed = FakeEmbed(), FakeEmbed(noise=0.3)
    drifting = SIDECAR.model_copy(update={"name": "b-sidecar"})
    selection = select_providers(Role.CODE_EMBEDDING, Policy.LOCAL, [LOCAL, SIDECAR, drifting])
    admitted = asyncio.run(gk.admit(selection, {LOCAL.name: FakeEmbed(), SIDECAR.name: sidecar, drifting.name: perturbed}))
    assert admitted.reference.name == LOCAL.name  # sorts first by name, but a Ray actor is the reference
    assert [p.name for p in admitted.selection.primary] == [SIDECAR.name, LOCAL.name]
    assert admitted.selection.excluded[drifting.name].startswith("gate: vector-incompatible")
    guarded = gk.guard(SIDECAR, sidecar, admitted.regime, LOCAL)
    assert asyncio.run(guarded(["x"])).shape == (1, WIDTH) and sidecar.calls[-1][1] in PROBE_TEXTS
    sidecar.noise = 0.3  # someone swapped the workstation's model
    with pytest.raises(GateRefused, match="vector-incompatible"):
        asyncio.run(guarded(["y"]))
