"""The gate applied to a selection, and the guard on every batch (no Ray, fake providers)."""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from cluster.errors import GateRefused, WidthMismatch
from cluster.gate.admission import Gatekeeper, key_of, regime_of
from cluster.gate.ledger import GateLedger
from cluster.gate.probe import PROBE_TEXTS, Verdict
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
CLOUD = info("pc-OR-CodeEmbedding", ProviderKind.CLOUD, upstream="pinned")
UNPINNED = info("pc2-OR-CodeEmbedding", ProviderKind.CLOUD)


def keeper(seed: int = 0, **spot: Any) -> Gatekeeper:
    return Gatekeeper(
        GateLedger(lambda: 0.0),
        expected_width=WIDTH,
        preferred_reference=None,
        clock=lambda: 0.0,
        probe_timeout_s=5.0,
        rng=random.Random(seed),
        **spot,
    )


def admit(gk: Gatekeeper, policy: Policy, embeds: dict[str, Callable]) -> tuple[list[str], dict[str, str]]:
    providers = [p for p in (LOCAL, CLOUD, UNPINNED) if p.name in embeds]
    selection = select_providers(Role.CODE_EMBEDDING, policy, providers)
    admitted = asyncio.run(gk.admit(selection, embeds))
    pool = admitted.selection.primary + admitted.selection.reserve
    return [p.name for p in pool], admitted.selection.excluded


def test_only_cleared_providers_stay_in_the_pool_and_the_refused_say_why() -> None:
    gk = keeper()
    names, excluded = admit(
        gk, Policy.AGGREGATE, {LOCAL.name: FakeEmbed(), CLOUD.name: FakeEmbed(noise=0.3), UNPINNED.name: FakeEmbed()}
    )
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
    guarded = gk.guard(CLOUD, cloud, regime_of(Policy.AGGREGATE), LOCAL, FakeEmbed())
    cloud.width = WIDTH + 1
    with pytest.raises(WidthMismatch):
        asyncio.run(guarded(["a", "b"]))
    assert gk.ledger.get(key_of(CLOUD, regime_of(Policy.AGGREGATE))).verdict is Verdict.DIMENSION_MISMATCH
    with pytest.raises(GateRefused):  # evicted: refused before any call
        asyncio.run(guarded(["a"]))


def test_a_cloud_batch_carries_no_probe_text_and_a_drifted_batch_is_never_returned() -> None:
    gk = keeper()
    cloud, reference = FakeEmbed(), FakeEmbed()
    admit(gk, Policy.AGGREGATE, {LOCAL.name: FakeEmbed(), CLOUD.name: cloud})
    guarded = gk.guard(CLOUD, cloud, regime_of(Policy.AGGREGATE), LOCAL, reference)
    rows = asyncio.run(guarded(["x", "y"]))
    assert rows.shape == (2, WIDTH) and cloud.calls[-1] == ["x", "y"]  # the batch alone: nothing public rides along
    assert len(reference.calls) == 1 and reference.calls[0][0] in ("x", "y")  # one of its own texts was re-embedded
    cloud.noise = 0.3  # the stack behind the pin changes
    with pytest.raises(GateRefused, match="vector-incompatible"):
        asyncio.run(guarded(["z"]))
    assert not gk.ledger.cleared(key_of(CLOUD, regime_of(Policy.AGGREGATE)))


def test_under_cloud_the_lone_anchor_is_verified_on_width_and_pin_only_and_local_is_not_used() -> None:
    gk = keeper()
    local = FakeEmbed()
    names, _ = admit(gk, Policy.CLOUD, {LOCAL.name: local, CLOUD.name: FakeEmbed()})
    assert names == [CLOUD.name] and local.calls == []
    report = gk.ledger.get(key_of(CLOUD, regime_of(Policy.CLOUD)))
    assert report.coverage == "width-and-pin-only" and report.min_cosine is None


def test_there_is_no_setting_that_turns_the_gate_off() -> None:
    from cluster.settings import GateSettings, SamespaceSettings

    assert set(GateSettings.model_fields) == {
        "reference",
        "sentinel_period_s",
        "probe_timeout_s",
        "spot_check_rate",
        "spot_check_texts",
    }
    for off in ({"enabled": False}, {"spot_check_rate": 0}, {"spot_check_texts": 0}):
        [name] = off
        with pytest.raises(ValueError, match=rf"gate\.{name}\n"):
            SamespaceSettings(gate=off)
    assert GateSettings().spot_check_rate == 1.0 and GateSettings().spot_check_texts == 4  # four texts per batch


SIDECAR = ProviderInfo(
    name="a-sidecar-first-by-name",
    kind=ProviderKind.LOCAL,
    hosted="sidecar",
    roles=[Role.CODE_EMBEDDING],
    node_id="",
    host="ws1",
    model="m",
    eligible=True,
)


def test_a_sidecar_joins_under_local_never_becomes_the_reference_and_is_spot_checked_on_every_batch() -> None:
    gk = keeper()
    sidecar, perturbed = FakeEmbed(), FakeEmbed(noise=0.3)
    drifting = SIDECAR.model_copy(update={"name": "b-sidecar"})
    selection = select_providers(Role.CODE_EMBEDDING, Policy.LOCAL, [LOCAL, SIDECAR, drifting])
    admitted = asyncio.run(
        gk.admit(selection, {LOCAL.name: FakeEmbed(), SIDECAR.name: sidecar, drifting.name: perturbed})
    )
    assert admitted.reference.name == LOCAL.name  # sorts first by name, but a Ray actor is the reference
    assert [p.name for p in admitted.selection.primary] == [SIDECAR.name, LOCAL.name]
    assert admitted.selection.excluded[drifting.name].startswith("gate: vector-incompatible")
    reference = FakeEmbed()
    guarded = gk.guard(SIDECAR, sidecar, admitted.regime, LOCAL, reference)
    assert asyncio.run(guarded(["x"])).shape == (1, WIDTH) and sidecar.calls[-1] == ["x"]
    assert reference.calls == [["x"]]  # checked on its own text
    sidecar.noise = 0.3  # someone swapped the workstation's model
    with pytest.raises(GateRefused, match="vector-incompatible"):
        asyncio.run(guarded(["y"]))


# -- spot checks on real texts -----------------------------------------------------------------------


class ProbeExact(FakeEmbed):
    """Answers the gate's public probe texts exactly and every other text wrongly (a vector pointing
    the other way), unless the text is in `honest`."""

    def __init__(self, honest: set[str] | None = None) -> None:
        super().__init__()
        self.honest = honest or set()

    async def __call__(self, texts: list[str]) -> np.ndarray:
        rows = await super().__call__(texts)
        for i, text in enumerate(texts):
            if text not in PROBE_TEXTS and text not in self.honest:
                rows[i] = -rows[i]
        return rows


class FailingReference(FakeEmbed):
    """The reference, failing its first `failures` calls (raising, hanging or answering the wrong shape)."""

    def __init__(self, failures: int, how: str = "raise") -> None:
        super().__init__()
        self.failures = failures
        self.how = how

    async def __call__(self, texts: list[str]) -> np.ndarray:
        if len(self.calls) < self.failures:
            self.calls.append(list(texts))
            if self.how == "hang":
                await asyncio.sleep(60)
            if self.how == "shape":
                return np.zeros((len(texts) + 1, WIDTH), dtype=np.float32)
            raise ConnectionError("reference down")
        return await super().__call__(texts)


BATCH = [f"def handler_{i}(request):\n    return route(request, {i})" for i in range(16)]
REGIME = regime_of(Policy.AGGREGATE)


def admitted_cloud(gk: Gatekeeper, cloud: FakeEmbed) -> None:
    names, _ = admit(gk, Policy.AGGREGATE, {LOCAL.name: FakeEmbed(), CLOUD.name: cloud})
    assert CLOUD.name in names  # it passed the probe: only the spot check can catch it


def test_a_provider_exact_on_the_probe_texts_only_passes_the_probe_and_is_evicted_on_its_first_batch() -> None:
    gk = keeper()
    cloud, reference = ProbeExact(), FakeEmbed()
    admitted_cloud(gk, cloud)
    assert gk.ledger.get(key_of(CLOUD, REGIME)).min_cosine >= 0.99
    guarded = gk.guard(CLOUD, cloud, REGIME, LOCAL, reference)
    with pytest.raises(GateRefused, match="vector-incompatible") as refused:
        asyncio.run(guarded(list(BATCH)))
    report = gk.ledger.get(key_of(CLOUD, REGIME))
    assert report.verdict is Verdict.VECTOR_INCOMPATIBLE and report.detail.startswith("spot check:")
    assert report.min_cosine is not None and report.min_cosine < 0  # recorded like any verdict, with its cosine
    assert not any(text in str(refused.value) or text in report.line() for text in BATCH)  # never the texts
    assert len(reference.calls) == 1 and len(reference.calls[0]) == 4 and set(reference.calls[0]) <= set(BATCH)
    assert gk.spot_stats().mismatches == 1
    with pytest.raises(GateRefused):  # evicted: refused before it is even called
        asyncio.run(guarded(list(BATCH)))
    assert len(cloud.calls) == 1 + 1  # the probe, then the one batch


def test_the_checked_texts_are_four_distinct_random_positions_of_every_batch_by_default() -> None:
    gk = keeper(seed=7)
    cloud, reference = FakeEmbed(), FakeEmbed()
    admitted_cloud(gk, cloud)
    guarded = gk.guard(CLOUD, cloud, REGIME, LOCAL, reference)
    for _ in range(64):
        asyncio.run(guarded(list(BATCH)))
    assert len(reference.calls) == 64  # every batch
    assert all(len(call) == len(set(call)) == 4 for call in reference.calls)  # four distinct texts each
    positions = {BATCH.index(text) for call in reference.calls for text in call}
    assert positions == set(range(len(BATCH)))  # spread over the whole batch, not the ends
    assert gk.spot_stats() == gk.spot_stats().model_copy(update={"batches_checked": 64, "texts_reembedded": 256})


def test_a_provider_wrong_on_a_single_text_is_caught_at_that_position() -> None:
    wrong_at = 5
    cloud = ProbeExact(honest=set(BATCH) - {BATCH[wrong_at]})
    caught = 0
    for seed in range(40):
        gk = keeper(seed=seed, spot_check_texts=4)
        admitted_cloud(gk, cloud)
        try:
            asyncio.run(gk.guard(CLOUD, cloud, REGIME, LOCAL, FakeEmbed())(list(BATCH)))
        except GateRefused:
            caught += 1
    # 4 of 16 positions per batch: about one batch in four; a fixed position would give 0 or 40
    assert 3 <= caught <= 25


def test_after_the_first_passed_check_batches_are_checked_at_the_configured_rate() -> None:
    gk = keeper(seed=3, spot_check_rate=0.25, spot_check_texts=2)
    cloud, reference = FakeEmbed(), FakeEmbed()
    admitted_cloud(gk, cloud)
    guarded = gk.guard(CLOUD, cloud, REGIME, LOCAL, reference)
    asyncio.run(guarded(list(BATCH)))
    assert len(reference.calls) == 1 and len(reference.calls[0]) == 2  # the first batch, always
    for _ in range(199):
        asyncio.run(guarded(list(BATCH)))
    stats = gk.spot_stats()
    assert 30 <= stats.batches_checked <= 75  # ≈ 1 + 199 × 0.25
    assert stats.texts_reembedded == 2 * stats.batches_checked == sum(map(len, reference.calls))  # the whole cost


@pytest.mark.parametrize("how", ["raise", "hang", "shape"])
def test_a_reference_that_cannot_re_embed_refuses_the_batch_but_never_evicts_the_provider(how: str) -> None:
    gk = Gatekeeper(
        GateLedger(lambda: 0.0),
        expected_width=WIDTH,
        preferred_reference=None,
        clock=lambda: 0.0,
        probe_timeout_s=0.05,
        rng=random.Random(0),
        spot_check_rate=0.01,
    )
    cloud, reference = FakeEmbed(), FailingReference(failures=1, how=how)
    admitted_cloud(gk, cloud)
    guarded = gk.guard(CLOUD, cloud, REGIME, LOCAL, reference)
    with pytest.raises(GateRefused, match="probe-failed") as refused:
        asyncio.run(guarded(list(BATCH)))
    assert refused.value.verdict == Verdict.PROBE_FAILED.value and "spot check: reference gpu0" in str(refused.value)
    assert gk.ledger.cleared(key_of(CLOUD, REGIME))  # the candidate keeps its verdict
    assert gk.spot_stats().reference_failures == 1
    rows = asyncio.run(guarded(list(BATCH)))  # the retried batch is checked (no check has passed yet) and lands
    assert rows.shape == (len(BATCH), WIDTH) and len(reference.calls) == 2


def test_a_batch_in_flight_when_its_provider_is_evicted_is_never_handed_on() -> None:
    class Gated(FakeEmbed):
        """Wrong on "bad"; its "good" batch lands only after the "bad" one was caught."""

        go: asyncio.Event

        async def __call__(self, texts: list[str]) -> np.ndarray:
            rows = await super().__call__(texts)
            if texts == ["good"]:
                await self.go.wait()
            return -rows if texts == ["bad"] else rows

    gk = keeper()
    cloud = Gated()
    admitted_cloud(gk, cloud)

    async def main() -> list[BaseException | np.ndarray]:
        cloud.go = asyncio.Event()
        guarded = gk.guard(CLOUD, cloud, REGIME, LOCAL, FakeEmbed())
        good = asyncio.ensure_future(guarded(["good"]))
        await asyncio.sleep(0)
        outcomes = await asyncio.gather(guarded(["bad"]), return_exceptions=True)
        cloud.go.set()
        return outcomes + await asyncio.gather(good, return_exceptions=True)

    bad, good = asyncio.run(main())
    assert isinstance(bad, GateRefused) and bad.verdict == "vector-incompatible"
    assert isinstance(good, GateRefused) and good.detail == "not cleared to embed"  # its own check passed: still out


def test_a_zero_row_at_the_checked_position_is_vector_incompatible_without_a_cosine() -> None:
    class Zeros(FakeEmbed):
        async def __call__(self, texts: list[str]) -> np.ndarray:
            rows = await super().__call__(texts)
            return rows if texts == list(PROBE_TEXTS) else np.zeros_like(rows)

    gk = keeper()
    cloud = Zeros()
    admitted_cloud(gk, cloud)
    with pytest.raises(GateRefused, match="zero or non-finite"):
        asyncio.run(gk.guard(CLOUD, cloud, REGIME, LOCAL, FakeEmbed())(["a"]))
    assert gk.ledger.get(key_of(CLOUD, REGIME)).min_cosine is None


def test_every_provider_but_the_reference_is_spot_checked_save_our_own_actors_with_its_identity() -> None:
    from cluster.gate.admission import spot_checked
    from cluster.space import EncoderIdentity

    ours = EncoderIdentity(model="m", weights_sha256="a" * 64, width=WIDTH, max_seq_length=512)
    other = ours.model_copy(update={"weights_sha256": "b" * 64})
    reference = LOCAL.model_copy(update={"identity": ours})
    peer = reference.model_copy(update={"name": "gpu1"})
    assert not spot_checked(reference, reference)
    assert not spot_checked(peer, reference)  # a Ray actor of ours, on the reference's weights
    assert spot_checked(peer.model_copy(update={"identity": other}), reference)
    assert spot_checked(SIDECAR.model_copy(update={"identity": ours}), reference)  # claims it, runs elsewhere
    assert spot_checked(CLOUD.model_copy(update={"identity": ours}), reference)


# -- how often a provider that falsifies m of a batch's B texts is caught ---------------------------

WIDE = [f"def handler_{i}(request):\n    return route(request, {i})" for i in range(64)]  # B = 64
DEFAULT_K = 4  # gate.spot_check_texts by default
TRIALS = 2000


def detection(batch_size: int, falsified: int, k: int) -> float:
    """1 - C(B-m, k) / C(B, k): the chance that k distinct uniform positions include a falsified one."""
    return 1 - math.comb(batch_size - falsified, k) / math.comb(batch_size, k)


def caught_share(falsified: list[str], trials: int, **spot: Any) -> float:
    """The share of seeded trials whose first checked batch of WIDE is refused, each trial a fresh
    gatekeeper (its own rng seed) over the verdict the provider earned at admission."""
    template = keeper()
    cloud = ProbeExact(honest=set(WIDE) - set(falsified))
    admitted_cloud(template, cloud)
    verdict = template.ledger.get(key_of(CLOUD, REGIME))

    async def trial(seed: int) -> bool:
        ledger = GateLedger(lambda: 0.0)
        ledger.record(verdict)
        gk = Gatekeeper(
            ledger,
            expected_width=WIDTH,
            preferred_reference=None,
            clock=lambda: 0.0,
            probe_timeout_s=5.0,
            rng=random.Random(seed),
            **spot,
        )
        try:
            await gk.guard(CLOUD, cloud, REGIME, LOCAL, FakeEmbed())(list(WIDE))
        except GateRefused:
            return True
        return False

    async def main() -> int:
        return sum([await trial(seed) for seed in range(trials)])

    return asyncio.run(main()) / trials


@pytest.mark.parametrize(
    ("falsified", "k"),
    [(WIDE[:1], None), (WIDE[:4], None), (WIDE[-4:], None), (WIDE[:16], None), (WIDE[::4], 1)],
    ids=["m1-head", "m4-head", "m4-tail", "m16-head", "m16-spread-k1"],
)
def test_a_provider_falsifying_m_of_b_texts_is_caught_with_the_hypergeometric_frequency(
    falsified: list[str], k: int | None
) -> None:
    spot = {} if k is None else {"spot_check_texts": k}
    expected = detection(len(WIDE), len(falsified), k or DEFAULT_K)
    share = caught_share(falsified, TRIALS, **spot)
    tolerance = 4.5 * math.sqrt(expected * (1 - expected) / TRIALS)  # a seeded draw: exact, 4.5 sigma of slack
    assert abs(share - expected) <= tolerance, (share, expected)


@pytest.mark.parametrize("k", [None, 1])
def test_a_provider_falsifying_every_text_is_caught_by_the_first_check(k: int | None) -> None:
    assert caught_share(list(WIDE), 200, **({} if k is None else {"spot_check_texts": k})) == 1.0


def test_the_checked_positions_are_distinct_uniform_and_drawn_from_the_injected_rng() -> None:
    def positions(seed: int, batches: int) -> list[list[int]]:
        gk, cloud, reference = keeper(seed=seed), FakeEmbed(), FakeEmbed()
        admitted_cloud(gk, cloud)
        guarded = gk.guard(CLOUD, cloud, REGIME, LOCAL, reference)

        async def main() -> None:
            for _ in range(batches):
                await guarded(list(WIDE))

        asyncio.run(main())
        return [[WIDE.index(text) for text in call] for call in reference.calls]

    drawn = positions(seed=11, batches=2000)
    assert all(len(set(p)) == len(p) == DEFAULT_K for p in drawn)
    counts = np.bincount([i for p in drawn for i in p], minlength=len(WIDE))
    mean = 2000 * DEFAULT_K / len(WIDE)  # 125 per position
    sigma = math.sqrt(2000 * (DEFAULT_K / len(WIDE)) * (1 - DEFAULT_K / len(WIDE)))
    assert np.all(np.abs(counts - mean) <= 5 * sigma), counts  # every position, head to tail, equally often
    assert positions(seed=11, batches=50) == drawn[:50]  # the same seed draws the same positions
    assert positions(seed=12, batches=50) != drawn[:50]
