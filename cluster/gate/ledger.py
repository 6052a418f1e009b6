"""The gate's ledger (DESIGN §5): the latest verdict per GateKey, and when a failed probe may run again.

A GateKey is (provider, model, pinned upstream, regime): a change of any of them is a new key and
a new probe. Only `probe-failed` is transient; it is retried after a backoff of 30 s doubling to
15 min. Probes of one key are single-flight. The ledger fails closed: a key is cleared only while
its last verdict is `verified`. Pure asyncio over an injected clock.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from cluster.gate.probe import GateKey, GateReport, Verdict, describe_fault
from cluster.types import Clock

__all__ = ["PROBE_BACKOFF_BASE_S", "PROBE_BACKOFF_MAX_S", "GateLedger"]

logger = logging.getLogger("samespace.gate")

PROBE_BACKOFF_BASE_S = 30.0
PROBE_BACKOFF_MAX_S = 900.0


@dataclass
class _Entry:
    report: GateReport | None = None
    failures: int = 0  # consecutive probe-failed since the last success
    retry_at: float | None = None
    generation: int = 0  # bumped on every record, so a probe that raced an evict cannot undo it
    flight: asyncio.Task[GateReport] | None = None


class GateLedger:
    """Latest verdict per key; single-flight probes; backoff for failed probes; fails closed."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._entries: dict[GateKey, _Entry] = {}

    def get(self, key: GateKey) -> GateReport | None:
        entry = self._entries.get(key)
        return entry.report if entry else None

    def cleared(self, key: GateKey) -> bool:
        """True only while the last verdict is verified: refused or never checked is not cleared."""
        report = self.get(key)
        return report is not None and report.verdict is Verdict.VERIFIED

    def next_retry_at(self, key: GateKey) -> float | None:
        """When a failed probe may run again; None when the key is not waiting on a retry."""
        entry = self._entries.get(key)
        return entry.retry_at if entry else None

    def reports(self) -> list[GateReport]:
        """Every key's latest report, sorted by str(key)."""
        found = [e.report for e in self._entries.values() if e.report is not None]
        return sorted(found, key=lambda r: str(r.key))

    async def ensure(self, key: GateKey, run: Callable[[], Awaitable[GateReport]]) -> GateReport:
        """The key's verdict, probing via `run` only when there is none or a failed probe's backoff is over."""
        entry = self._entries.setdefault(key, _Entry())
        cached = entry.report
        if cached is not None:
            if not cached.verdict.transient:
                return cached
            if entry.retry_at is not None and self._clock() < entry.retry_at:
                return cached
        if entry.flight is None:
            entry.flight = asyncio.ensure_future(self._fly(key, entry, run, entry.generation))
        # shield: one waiter being cancelled must not cancel the probe the others await
        return await asyncio.shield(entry.flight)

    def record(self, report: GateReport) -> None:
        """Store an externally computed report (e.g. the drift sentinel's) as the key's latest."""
        self._store(self._entries.setdefault(report.key, _Entry()), report)

    def evict(
        self,
        key: GateKey,
        verdict: Verdict,
        detail: str,
        *,
        min_cosine: float | None = None,
        mean_cosine: float | None = None,
        width: int | None = None,
        expected_width: int | None = None,
    ) -> GateReport:
        """Replace the key's verdict with a refusal seen in service (a batch of the wrong width, drift)."""
        if verdict is Verdict.VERIFIED:
            raise ValueError("evict records a refusal; a verified verdict comes from a probe")
        previous = self.get(key)
        if expected_width is None:
            if previous is None:
                raise ValueError(f"no report for {key} and no expected_width given")
            expected_width = previous.expected_width
        report = GateReport(
            key=key,
            verdict=verdict,
            coverage=None,
            reference=previous.reference if previous else None,
            min_cosine=min_cosine,
            mean_cosine=mean_cosine,
            width=width,
            expected_width=expected_width,
            checked_at=self._clock(),
            detail=detail,
        )
        self.record(report)
        return report

    async def _fly(
        self, key: GateKey, entry: _Entry, run: Callable[[], Awaitable[GateReport]], generation: int
    ) -> GateReport:
        """Run one probe and record it, unless a newer report was recorded since the probe was asked for."""
        try:
            try:
                report = await run()
                if report.key != key:
                    raise ValueError(f"the probe answered for {report.key}, not for {key}")
            except Exception as exc:  # noqa: BLE001 - a probe that raises is a failed probe, never the caller's fault
                previous = entry.report
                report = GateReport(
                    key=key,
                    verdict=Verdict.PROBE_FAILED,
                    coverage=None,
                    reference=previous.reference if previous else None,
                    min_cosine=None,
                    mean_cosine=None,
                    width=None,
                    expected_width=previous.expected_width if previous else 0,
                    checked_at=self._clock(),
                    detail=f"probe raised: {describe_fault(exc)}",
                )
            if entry.generation != generation and entry.report is not None:
                return entry.report  # recorded or evicted while we probed: the newer word stands
            self._store(entry, report)
            return report
        finally:
            entry.flight = None

    def _store(self, entry: _Entry, report: GateReport) -> None:
        previous = entry.report
        entry.report = report
        entry.generation += 1
        if report.verdict.transient:
            entry.failures += 1
            delay = min(PROBE_BACKOFF_BASE_S * 2 ** (entry.failures - 1), PROBE_BACKOFF_MAX_S)
            entry.retry_at = self._clock() + delay
        else:
            entry.failures = 0
            entry.retry_at = None
        if previous is None or previous.verdict is not report.verdict:
            level = logging.INFO if report.verdict is Verdict.VERIFIED else logging.WARNING
            logger.log(level, report.line())
        else:
            logger.debug(report.line())
