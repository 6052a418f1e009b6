"""The compatibility gate (DESIGN §5): probe order, verdicts, the ledger and its backoff.

Fake providers return crafted rows; one module fixture loads the packaged MiniLM to show the
real model against itself passes and a perturbed copy at the peer's ~0.976 is refused.
Timeouts and backoff run on virtual time, so nothing waits.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
from pydantic import ValidationError

from cluster.errors import UpstreamUnavailable
from cluster.gate.ledger import PROBE_BACKOFF_BASE_S, PROBE_BACKOFF_MAX_S, GateLedger
from cluster.gate.probe import (
    MIN_COSINE,
    PROBE_TEXTS,
    PROBE_TIMEOUT_S,
    STORED_REFERENCE,
    Coverage,
    GateKey,
    GateReport,
    ProbeTarget,
    Regime,
    Verdict,
    compare,
    probe,
    reference_report,
)
from tests.support.fakes.virtual_time import VirtualClock, run_virtual

WIDTH = 8
N = len(PROBE_TEXTS)


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def unit_rows(seed: int = 0, n: int = N, width: int = WIDTH) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(n, width))
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def with_one_row_at(base: np.ndarray, cosine: float, row: int = 3) -> np.ndarray:
    """A copy of `base` whose row `row` sits at exactly `cosine` from the original; others identical."""
    out = base.astype(np.float64).copy()
    v = out[row]
    u = np.random.default_rng(99).normal(size=v.shape)
    u -= u.dot(v) * v
    u /= np.linalg.norm(u)
    out[row] = cosine * v + np.sqrt(1.0 - cosine**2) * u
    return out.astype(np.float32)


@dataclass
class Fake:
    """A provider that returns fixed rows, or raises, or hangs; it counts its calls."""

    name: str
    rows: np.ndarray | None = None
    error: Exception | None = None
    hang_s: float = 0.0
    upstream: str | None = None
    needs_pin: bool = False
    model: str = "minilm"
    calls: list[list[str]] = field(default_factory=list)

    async def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(texts)
        if self.hang_s:
            await asyncio.sleep(self.hang_s)
        if self.error is not None:
            raise self.error
        assert self.rows is not None
        return self.rows

    @property
    def target(self) -> ProbeTarget:
        return ProbeTarget(self.name, self.model, self.upstream, self.needs_pin, self.embed)


def cloud(name: str = "cloud-a", rows: np.ndarray | None = None, upstream: str | None = "nebius", **kw: object) -> Fake:
    rows = rows if rows is not None else unit_rows()
    return Fake(name, rows=rows, upstream=upstream, needs_pin=True, **kw)  # type: ignore[arg-type]


def local(name: str = "gpu-0", rows: np.ndarray | None = None, **kw: object) -> Fake:
    return Fake(name, rows=rows if rows is not None else unit_rows(), **kw)  # type: ignore[arg-type]


async def run_probe(candidate: Fake, reference: Fake | None, **kw: object) -> GateReport:
    return await probe(
        candidate.target,
        reference.target if reference is not None else None,
        regime=kw.pop("regime", Regime.LOCAL_REF),  # type: ignore[arg-type]
        expected_width=kw.pop("expected_width", WIDTH),  # type: ignore[arg-type]
        clock=kw.pop("clock", FakeClock()),  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )


# --- the probe texts and the enums ------------------------------------------------------------


def test_there_are_ten_distinct_short_probe_texts_covering_code_prose_shell_and_markdown() -> None:
    assert len(PROBE_TEXTS) == 10 and len(set(PROBE_TEXTS)) == 10
    assert all(0 < len(t) < 200 for t in PROBE_TEXTS)
    joined = "\n".join(PROBE_TEXTS)
    for marker in ("def ", "if err != nil", "export class", "pub fn", "SELECT", "public ", "git ", "## ", '{"'):
        assert marker in joined


def test_verdicts_and_regimes_are_spelled_as_in_the_spec_and_only_probe_failed_is_transient() -> None:
    assert [v.value for v in Verdict] == [
        "verified",
        "no-provider-pin",
        "dimension-mismatch",
        "vector-incompatible",
        "probe-failed",
    ]
    assert [r.value for r in Regime] == ["local-ref", "cloud-ref"]
    assert [v for v in Verdict if v.transient] == [Verdict.PROBE_FAILED]
    assert MIN_COSINE == 0.99 and PROBE_TIMEOUT_S == 15.0
    assert (PROBE_BACKOFF_BASE_S, PROBE_BACKOFF_MAX_S) == (30.0, 900.0)


def test_a_gate_key_prints_provider_model_pin_and_regime_with_a_dash_for_no_pin() -> None:
    assert str(GateKey(provider="p", model="m", upstream="nebius", regime=Regime.CLOUD_REF)) == "p|m|nebius|cloud-ref"
    assert str(GateKey(provider="p", model="m", upstream=None, regime=Regime.LOCAL_REF)) == "p|m|-|local-ref"


# --- probe: order of checks and verdicts --------------------------------------------------------


async def test_an_unpinned_cloud_provider_is_refused_before_anything_is_embedded() -> None:
    candidate, reference = cloud(upstream=None), local()
    report = await run_probe(candidate, reference)
    assert report.verdict is Verdict.NO_PROVIDER_PIN
    assert candidate.calls == [] and reference.calls == []
    assert report.coverage is None and report.min_cosine is None


async def test_a_local_provider_needs_no_pin() -> None:
    report = await run_probe(local("gpu-1"), local())
    assert report.verdict is Verdict.VERIFIED and report.key.upstream is None


async def test_a_failing_reference_is_a_failed_probe_and_the_candidate_is_never_called() -> None:
    candidate = cloud()
    reference = local(error=UpstreamUnavailable("gpu-0", "down", 503))
    report = await run_probe(candidate, reference)
    assert report.verdict is Verdict.PROBE_FAILED and report.verdict.transient
    assert candidate.calls == [] and len(reference.calls) == 1
    assert "reference gpu-0" in report.detail


async def test_both_sides_embed_exactly_the_probe_texts_reference_first() -> None:
    order: list[str] = []
    candidate, reference = cloud(), local()

    def tracing(fake: Fake) -> Callable[[list[str]], Awaitable[np.ndarray]]:
        async def embed(texts: list[str]) -> np.ndarray:
            order.append(fake.name)
            return await fake.embed(texts)

        return embed

    await probe(
        ProbeTarget("cloud-a", "minilm", "nebius", True, tracing(candidate)),
        ProbeTarget("gpu-0", "minilm", None, False, tracing(reference)),
        regime=Regime.LOCAL_REF,
        expected_width=WIDTH,
        clock=FakeClock(),
    )
    assert order == ["gpu-0", "cloud-a"]
    assert candidate.calls == [list(PROBE_TEXTS)] == reference.calls


async def test_a_candidate_that_raises_is_a_failed_probe_naming_only_the_error_type() -> None:
    candidate = cloud(error=RuntimeError("echo: " + PROBE_TEXTS[0]))
    report = await run_probe(candidate, local())
    assert report.verdict is Verdict.PROBE_FAILED
    assert report.detail == "candidate failed: RuntimeError"


async def test_a_wrong_width_is_a_dimension_mismatch_even_when_the_rows_are_otherwise_fine() -> None:
    report = await run_probe(cloud(rows=unit_rows(width=WIDTH * 2)), local())
    assert report.verdict is Verdict.DIMENSION_MISMATCH
    assert (report.width, report.expected_width) == (WIDTH * 2, WIDTH)
    assert report.min_cosine is None and report.coverage is None


async def test_width_is_checked_before_the_row_count() -> None:
    report = await run_probe(cloud(rows=unit_rows(n=3, width=WIDTH + 1)), local())
    assert report.verdict is Verdict.DIMENSION_MISMATCH


async def test_a_wrong_row_count_is_a_failed_probe() -> None:
    report = await run_probe(cloud(rows=unit_rows(n=N - 1)), local())
    assert report.verdict is Verdict.PROBE_FAILED and report.width == WIDTH
    assert "9 rows for 10" in report.detail


async def test_identical_vectors_verify_with_cosine_coverage() -> None:
    rows = unit_rows()
    report = await run_probe(cloud(rows=rows * 3.0), local(rows=rows))  # scale does not matter: normalised
    assert report.verdict is Verdict.VERIFIED and report.coverage is Coverage.COSINE
    assert report.min_cosine is not None and report.min_cosine >= 0.999
    assert report.mean_cosine is not None and report.mean_cosine >= 0.999
    assert report.reference == "gpu-0"


async def test_one_pair_at_the_peers_0_976_is_vector_incompatible_though_the_mean_looks_fine() -> None:
    base = unit_rows()
    report = await run_probe(cloud(rows=with_one_row_at(base, 0.976)), local(rows=base))
    assert report.verdict is Verdict.VECTOR_INCOMPATIBLE and report.coverage is None
    assert report.min_cosine == pytest.approx(0.976, abs=1e-5)
    assert report.mean_cosine is not None and report.mean_cosine > 0.997


async def test_a_min_cosine_exactly_at_the_threshold_passes() -> None:
    base = unit_rows()
    report = await run_probe(cloud(rows=with_one_row_at(base, 0.9901)), local(rows=base))
    assert report.verdict is Verdict.VERIFIED


async def test_a_single_cloud_provider_is_verified_on_width_and_pin_only_with_no_cosine() -> None:
    report = await run_probe(cloud(), None, regime=Regime.CLOUD_REF)
    assert report.verdict is Verdict.VERIFIED and report.coverage is Coverage.WIDTH_AND_PIN_ONLY
    assert report.min_cosine is None and report.mean_cosine is None and report.reference is None
    assert "min=- mean=-" in report.line()


async def test_a_single_cloud_provider_still_fails_on_width() -> None:
    report = await run_probe(cloud(rows=unit_rows(width=3)), None, regime=Regime.CLOUD_REF)
    assert report.verdict is Verdict.DIMENSION_MISMATCH


async def test_probing_against_stored_vectors_never_calls_the_reference() -> None:
    base = unit_rows()
    reference = local(rows=unit_rows(seed=5))
    same = await run_probe(cloud(rows=base), reference, reference_vectors=base)
    drifted = await run_probe(cloud(rows=with_one_row_at(base, 0.98)), None, reference_vectors=base)
    assert reference.calls == []
    assert same.verdict is Verdict.VERIFIED and same.reference == "gpu-0"
    assert drifted.verdict is Verdict.VECTOR_INCOMPATIBLE and drifted.reference == STORED_REFERENCE


async def test_stored_vectors_of_the_wrong_shape_are_a_failed_probe_not_a_crash() -> None:
    report = await run_probe(cloud(), None, reference_vectors=unit_rows(width=WIDTH + 1))
    assert report.verdict is Verdict.PROBE_FAILED and "unusable" in report.detail


async def test_non_finite_candidate_rows_are_a_failed_probe() -> None:
    rows = unit_rows()
    rows[2, 0] = np.nan
    report = await run_probe(cloud(rows=rows), local())
    assert report.verdict is Verdict.PROBE_FAILED


def test_a_hanging_candidate_times_out_into_a_failed_probe() -> None:
    async def main(clock: VirtualClock) -> GateReport:
        return await run_probe(cloud(hang_s=600.0), local(), clock=clock)

    report = run_virtual(main)
    assert report.verdict is Verdict.PROBE_FAILED and "timed out after 15s" in report.detail
    assert report.checked_at == pytest.approx(PROBE_TIMEOUT_S)


def test_a_hanging_reference_times_out_into_a_failed_probe_with_the_given_timeout() -> None:
    candidate = cloud()

    async def main(clock: VirtualClock) -> GateReport:
        return await run_probe(candidate, local(hang_s=600.0), clock=clock, timeout_s=2.0)

    report = run_virtual(main)
    assert report.verdict is Verdict.PROBE_FAILED and "reference gpu-0 timed out after 2s" in report.detail
    assert candidate.calls == []


def test_the_reference_report_says_it_defines_the_space() -> None:
    report = reference_report(local().target, regime=Regime.LOCAL_REF, expected_width=WIDTH, clock=FakeClock(5.0))
    assert report.verdict is Verdict.VERIFIED and report.coverage is Coverage.REFERENCE
    assert report.reference is None and report.min_cosine is None and report.checked_at == 5.0
    unpinned_target = cloud(upstream=None).target
    unpinned = reference_report(unpinned_target, regime=Regime.CLOUD_REF, expected_width=WIDTH, clock=FakeClock())
    assert unpinned.verdict is Verdict.NO_PROVIDER_PIN


def test_compare_reports_min_and_mean_and_refuses_mismatched_shapes() -> None:
    base = unit_rows()
    lo, mean = compare(with_one_row_at(base, 0.5), base)
    assert lo == pytest.approx(0.5, abs=1e-5) and mean == pytest.approx((9 + 0.5) / 10, abs=1e-5)
    with pytest.raises(ValueError, match="cannot compare shapes"):
        compare(base[:5], base)


def test_a_report_refuses_a_fake_cosine_or_coverage_on_a_refusal() -> None:
    key = GateKey(provider="p", model="m", upstream=None, regime=Regime.CLOUD_REF)
    common = {"key": key, "reference": None, "width": WIDTH, "expected_width": WIDTH, "checked_at": 0.0, "detail": "x"}
    fake_one = {"min_cosine": 1.0, "mean_cosine": 1.0}
    with pytest.raises(ValidationError):
        GateReport(verdict=Verdict.VERIFIED, coverage=Coverage.WIDTH_AND_PIN_ONLY, **fake_one, **common)  # type: ignore[arg-type]
    no_cosine = {"min_cosine": None, "mean_cosine": None}
    with pytest.raises(ValidationError):
        GateReport(verdict=Verdict.PROBE_FAILED, coverage=Coverage.COSINE, **no_cosine, **common)  # type: ignore[arg-type]


async def test_the_log_line_names_everything_measured_but_no_probe_text_or_key() -> None:
    base = unit_rows()
    report = await run_probe(cloud(rows=with_one_row_at(base, 0.976)), local(rows=base))
    line = report.line()
    assert line.startswith("gate cloud-a minilm@nebius [local-ref] vector-incompatible")
    for part in ("coverage=-", "min=0.976", "width=8/8", "reference=gpu-0"):
        assert part in line
    assert "\n" not in line
    for text in PROBE_TEXTS:
        assert text not in line and text.splitlines()[0] not in line


def test_a_detail_is_kept_to_one_line_without_probe_texts_or_key_like_strings() -> None:
    key = GateKey(provider="p", model="m", upstream=None, regime=Regime.LOCAL_REF)
    report = GateReport(
        key=key,
        verdict=Verdict.PROBE_FAILED,
        coverage=None,
        reference=None,
        min_cosine=None,
        mean_cosine=None,
        width=None,
        expected_width=WIDTH,
        checked_at=0.0,
        detail=f"boom\n{PROBE_TEXTS[4]} with sk-or-v1-abcdef0123456789",
    )
    assert "\n" not in report.line() and PROBE_TEXTS[4] not in report.line() and "sk-or" not in report.line()


# --- the probe on the real packaged model -------------------------------------------------------

SIGMA = 0.0105  # with seed 0, lands the min cosine near the peer's 0.976 (Q4 vs full precision)


@pytest.fixture(scope="module")
def minilm():  # type: ignore[no-untyped-def]
    from cluster.local.encoder import LocalEncoder
    from cluster.settings import EmbeddingSettings

    return LocalEncoder(EmbeddingSettings(cpu_threads=2))


async def test_the_real_model_against_itself_verifies_and_a_perturbed_copy_is_refused(  # type: ignore[no-untyped-def]
    minilm,
) -> None:
    width = minilm.identity.width

    async def real(texts: list[str]) -> np.ndarray:
        return minilm.encode(texts)  # type: ignore[no-any-return]

    async def perturbed(texts: list[str]) -> np.ndarray:
        clean = minilm.encode(texts)
        noisy = clean + np.random.default_rng(0).normal(0.0, SIGMA, clean.shape)
        return (noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).astype(np.float32)

    reference = ProbeTarget("gpu-0", "all-MiniLM-L6-v2", None, False, real)
    same = await probe(
        ProbeTarget("gpu-1", "all-MiniLM-L6-v2", None, False, real),
        reference,
        regime=Regime.LOCAL_REF,
        expected_width=width,
        clock=FakeClock(),
    )
    quantised = await probe(
        ProbeTarget("cloud-q4", "all-MiniLM-L6-v2", "nebius", True, perturbed),
        reference,
        regime=Regime.LOCAL_REF,
        expected_width=width,
        clock=FakeClock(),
    )
    assert same.verdict is Verdict.VERIFIED and same.min_cosine is not None and same.min_cosine >= 0.999
    assert quantised.verdict is Verdict.VECTOR_INCOMPATIBLE
    assert quantised.min_cosine is not None and 0.97 <= quantised.min_cosine <= 0.985


# --- the ledger ---------------------------------------------------------------------------------


def key_of(name: str = "cloud-a", upstream: str | None = "nebius", regime: Regime = Regime.LOCAL_REF) -> GateKey:
    return GateKey(provider=name, model="minilm", upstream=upstream, regime=regime)


class Runs:
    """A scripted probe: hands out verdicts in order and counts how often it ran."""

    def __init__(self, clock: Callable[[], float], *verdicts: Verdict, key: GateKey | None = None) -> None:
        self.clock = clock
        self.verdicts = list(verdicts)
        self.key = key or key_of()
        self.count = 0

    async def __call__(self) -> GateReport:
        self.count += 1
        verdict = self.verdicts.pop(0) if len(self.verdicts) > 1 else self.verdicts[0]
        verified = verdict is Verdict.VERIFIED
        return GateReport(
            key=self.key,
            verdict=verdict,
            coverage=Coverage.COSINE if verified else None,
            reference="gpu-0",
            min_cosine=0.999 if verified else None,
            mean_cosine=0.9995 if verified else None,
            width=WIDTH,
            expected_width=WIDTH,
            checked_at=self.clock(),
            detail="scripted",
        )


async def test_a_key_never_checked_is_not_cleared() -> None:
    ledger = GateLedger(FakeClock())
    assert not ledger.cleared(key_of()) and ledger.get(key_of()) is None and ledger.next_retry_at(key_of()) is None


@pytest.mark.parametrize(
    "verdict", [Verdict.VERIFIED, Verdict.VECTOR_INCOMPATIBLE, Verdict.DIMENSION_MISMATCH, Verdict.NO_PROVIDER_PIN]
)
async def test_a_cached_non_transient_verdict_is_never_probed_again(verdict: Verdict) -> None:
    clock = FakeClock()
    ledger = GateLedger(clock)
    run = Runs(clock, verdict)
    first = await ledger.ensure(key_of(), run)
    clock.now += 10 * PROBE_BACKOFF_MAX_S
    again = await ledger.ensure(key_of(), run)
    assert run.count == 1 and again is first
    assert ledger.cleared(key_of()) is (verdict is Verdict.VERIFIED)
    assert ledger.next_retry_at(key_of()) is None


async def test_a_new_upstream_pin_or_regime_is_a_new_key_and_a_new_probe() -> None:
    clock = FakeClock()
    ledger = GateLedger(clock)
    keys = [key_of(), key_of(upstream="together"), key_of(regime=Regime.CLOUD_REF)]
    runs = [Runs(clock, Verdict.VERIFIED, key=k) for k in keys]
    for k, run in zip(keys, runs, strict=True):
        await ledger.ensure(k, run)
    assert [r.count for r in runs] == [1, 1, 1]
    assert [str(r.key) for r in ledger.reports()] == sorted(str(k) for k in keys)


async def test_concurrent_ensures_of_one_key_share_one_probe() -> None:
    clock = FakeClock()
    ledger = GateLedger(clock)
    release = asyncio.Event()
    count = 0
    scripted = Runs(clock, Verdict.VERIFIED)

    async def slow() -> GateReport:
        nonlocal count
        count += 1
        await release.wait()
        return await scripted()

    waiters = [asyncio.create_task(ledger.ensure(key_of(), slow)) for _ in range(5)]
    await asyncio.sleep(0)
    release.set()
    reports = await asyncio.gather(*waiters)
    assert count == 1 and all(r is reports[0] for r in reports)
    assert ledger.cleared(key_of())


async def test_a_cancelled_waiter_does_not_cancel_the_probe_others_await() -> None:
    clock = FakeClock()
    ledger = GateLedger(clock)
    release = asyncio.Event()
    scripted = Runs(clock, Verdict.VERIFIED)

    async def slow() -> GateReport:
        await release.wait()
        return await scripted()

    first = asyncio.create_task(ledger.ensure(key_of(), slow))
    second = asyncio.create_task(ledger.ensure(key_of(), slow))
    await asyncio.sleep(0)
    first.cancel()
    release.set()
    assert (await second).verdict is Verdict.VERIFIED and scripted.count == 1


async def test_a_run_that_raises_is_recorded_as_a_failed_probe_and_never_propagates() -> None:
    clock = FakeClock()
    ledger = GateLedger(clock)

    async def boom() -> GateReport:
        raise RuntimeError("secret sk-or-v1-0123456789abcdef")

    report = await ledger.ensure(key_of(), boom)
    assert report.verdict is Verdict.PROBE_FAILED and report.detail == "probe raised: RuntimeError"
    assert not ledger.cleared(key_of())
    assert ledger.next_retry_at(key_of()) == clock.now + PROBE_BACKOFF_BASE_S


async def test_failed_probes_back_off_30_60_120_up_to_900_and_a_success_resets_the_backoff() -> None:
    clock = FakeClock()
    ledger = GateLedger(clock)
    run = Runs(clock, *([Verdict.PROBE_FAILED] * 7), Verdict.VERIFIED, Verdict.PROBE_FAILED)
    waits: list[float] = []
    await ledger.ensure(key_of(), run)
    for _ in range(6):
        retry_at = ledger.next_retry_at(key_of())
        assert retry_at is not None
        waits.append(retry_at - clock.now)
        clock.now = retry_at - 1.0  # not yet: the cached failure comes back, nothing runs
        before = run.count
        assert (await ledger.ensure(key_of(), run)).verdict is Verdict.PROBE_FAILED
        assert run.count == before
        clock.now = retry_at
        await ledger.ensure(key_of(), run)
        assert run.count == before + 1
    assert waits == [30.0, 60.0, 120.0, 240.0, 480.0, 900.0]
    retry_at = ledger.next_retry_at(key_of())
    assert retry_at is not None and retry_at - clock.now == PROBE_BACKOFF_MAX_S  # capped
    clock.now = retry_at
    assert (await ledger.ensure(key_of(), run)).verdict is Verdict.VERIFIED
    assert ledger.cleared(key_of()) and ledger.next_retry_at(key_of()) is None

    # a later failure (via evict) starts the count again from 30 s
    ledger.evict(key_of(), Verdict.PROBE_FAILED, "lost the sidecar")
    assert ledger.next_retry_at(key_of()) == clock.now + PROBE_BACKOFF_BASE_S


async def test_evict_replaces_a_verified_verdict_and_the_key_is_no_longer_cleared() -> None:
    clock = FakeClock()
    ledger = GateLedger(clock)
    run = Runs(clock, Verdict.VERIFIED)
    await ledger.ensure(key_of(), run)
    assert ledger.cleared(key_of())
    clock.now += 5
    evicted = ledger.evict(key_of(), Verdict.DIMENSION_MISMATCH, "a batch came back 16 wide", width=16)
    assert not ledger.cleared(key_of()) and ledger.get(key_of()) is evicted
    assert evicted.coverage is None and evicted.min_cosine is None and evicted.width == 16
    assert evicted.expected_width == WIDTH and evicted.checked_at == clock.now
    assert (await ledger.ensure(key_of(), run)) is evicted and run.count == 1  # non-transient: stands


async def test_evict_for_drift_keeps_the_measured_cosines() -> None:
    ledger = GateLedger(FakeClock())
    await ledger.ensure(key_of(), Runs(FakeClock(), Verdict.VERIFIED))
    drift = ledger.evict(key_of(), Verdict.VECTOR_INCOMPATIBLE, "drift", min_cosine=0.97, mean_cosine=0.98)
    assert (drift.min_cosine, drift.mean_cosine) == (0.97, 0.98)
    with pytest.raises(ValueError, match="evict records a refusal"):
        ledger.evict(key_of(), Verdict.VERIFIED, "no")
    with pytest.raises(ValueError, match=r"no report for .* and no expected_width given"):
        ledger.evict(key_of("never-seen"), Verdict.PROBE_FAILED, "no width known")


async def test_a_recorded_report_is_the_latest_and_a_racing_probe_does_not_undo_it() -> None:
    clock = FakeClock()
    ledger = GateLedger(clock)
    release = asyncio.Event()
    scripted = Runs(clock, Verdict.PROBE_FAILED, Verdict.VERIFIED)
    await ledger.ensure(key_of(), scripted)
    clock.now += PROBE_BACKOFF_BASE_S

    async def slow() -> GateReport:
        await release.wait()
        return await scripted()

    flight = asyncio.create_task(ledger.ensure(key_of(), slow))
    await asyncio.sleep(0)
    drift = ledger.evict(key_of(), Verdict.VECTOR_INCOMPATIBLE, "sentinel saw drift")
    release.set()
    assert (await flight) is drift and not ledger.cleared(key_of())

    other = key_of("cloud-b")
    external = await Runs(clock, Verdict.VERIFIED, key=other)()
    ledger.record(external)
    assert ledger.get(other) is external and ledger.cleared(other)


async def test_a_probe_answering_for_another_key_is_a_failed_probe() -> None:
    clock = FakeClock()
    ledger = GateLedger(clock)
    report = await ledger.ensure(key_of(), Runs(clock, Verdict.VERIFIED, key=key_of("someone-else")))
    assert report.verdict is Verdict.PROBE_FAILED and report.key == key_of()


async def test_every_verdict_change_is_one_log_line_and_a_repeat_is_not(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    ledger = GateLedger(clock)
    run = Runs(clock, Verdict.PROBE_FAILED, Verdict.PROBE_FAILED, Verdict.VERIFIED)
    with caplog.at_level(logging.INFO, logger="samespace.gate"):
        for _ in range(3):
            await ledger.ensure(key_of(), run)
            clock.now += PROBE_BACKOFF_MAX_S
        ledger.evict(key_of(), Verdict.VECTOR_INCOMPATIBLE, "drift")
    records = [r for r in caplog.records if r.name == "samespace.gate"]
    assert [(r.levelno, r.getMessage().split()[4]) for r in records] == [
        (logging.WARNING, "probe-failed"),
        (logging.INFO, "verified"),
        (logging.WARNING, "vector-incompatible"),
    ]
    assert all("\n" not in r.getMessage() for r in records)
