"""The compatibility gate's ledger (DESIGN §5): cached verdicts per key, one shared probe per key,
the backoff of failed probes, evictions, and one log line per verdict change. Scripted probes on a
fixed clock, so nothing waits.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

from cluster.gate.ledger import PROBE_BACKOFF_BASE_S, PROBE_BACKOFF_MAX_S, GateLedger
from cluster.gate.probe import Coverage, GateKey, GateReport, Regime, Verdict
from tests.support.gate_probes import WIDTH, FakeClock

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
