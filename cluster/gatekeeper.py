"""The gate applied to a role's providers: who may serve, and a guard on every batch (SPEC §5, §12).

`admit()` verifies every candidate of a selection against the policy's reference (a local
provider, or under `cloud` a deterministic cloud anchor) through the ledger, and keeps only the
cleared ones. `guard()` wraps a provider's embed call: it refuses once the provider is no longer
cleared, re-checks the width of every batch, and for cloud and sidecar-hosted providers appends one probe text to
every batch and compares its vector with the reference's: a pinned upstream that changes its
serving stack is caught on its next batch, and that batch is never written. `sentinel()`
re-probes serving providers against stored probe vectors (an index's, or the reference's).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import numpy as np

from cluster.errors import GateRefused, NoProviderLeft, WidthMismatch
from cluster.gate import (
    MIN_COSINE,
    Coverage,
    PROBE_TEXTS,
    GateKey,
    GateLedger,
    GateReport,
    ProbeTarget,
    Regime,
    Verdict,
    compare,
    probe,
    reference_report,
)
from cluster.providers import ProviderInfo, ProviderKind, Selection
from cluster.roles import Policy
from cluster.types import Clock

Embed = Callable[[list[str]], Awaitable[np.ndarray]]


def regime_of(policy: Policy) -> Regime:
    return Regime.CLOUD_REF if policy is Policy.CLOUD else Regime.LOCAL_REF


def key_of(info: ProviderInfo, regime: Regime) -> GateKey:
    return GateKey(provider=info.name, model=info.model, upstream=info.upstream, regime=regime)


def reference_candidates(selection: Selection, preferred: str | None) -> list[ProviderInfo]:
    """Possible references in order: local (preferred first, Ray-hosted before sidecar-hosted: a
    workstation that comes and goes never defines an index's space while an actor can) unless the
    policy is `cloud`; then cloud anchors."""
    pool = selection.primary + selection.reserve
    local = sorted(
        (p for p in pool if p.kind is ProviderKind.LOCAL), key=lambda p: (p.name != preferred, p.hosted != "ray", p.name)
    )
    cloud = sorted((p for p in pool if p.kind is ProviderKind.CLOUD), key=lambda p: p.name)
    return cloud if selection.policy is Policy.CLOUD else local


@dataclass(frozen=True)
class Admitted:
    selection: Selection
    reference: ProviderInfo
    regime: Regime


class Gatekeeper:
    def __init__(
        self,
        ledger: GateLedger,
        *,
        expected_width: int,
        preferred_reference: str | None,
        clock: Clock,
        probe_timeout_s: float,
    ) -> None:
        self.ledger = ledger
        self._width = expected_width
        self._preferred = preferred_reference
        self._clock = clock
        self._timeout_s = probe_timeout_s
        self._reference_vectors: dict[str, np.ndarray] = {}  # by str(GateKey) of the reference
        self._probe_turn = itertools.count()

    def target(self, info: ProviderInfo, embed: Embed) -> ProbeTarget:
        return ProbeTarget(
            name=info.name,
            model=info.model,
            upstream=info.upstream,
            needs_pin=info.kind is ProviderKind.CLOUD,
            embed=embed,
        )

    async def admit(self, selection: Selection, embeds: dict[str, Embed]) -> Admitted:
        """Keep only the providers the gate has cleared for this policy's reference."""
        regime = regime_of(selection.policy)
        reference, reference_vectors = await self._choose_reference(selection, embeds, regime)
        reference_target = self.target(reference, embeds[reference.name])
        excluded = dict(selection.excluded)

        async def check(info: ProviderInfo) -> tuple[ProviderInfo, GateReport]:
            key = key_of(info, regime)
            if info.name == reference.name:
                return info, self.ledger.get(key) or self._record_reference(info, embeds[info.name], regime)
            target = self.target(info, embeds[info.name])

            def run() -> Awaitable[GateReport]:
                return probe(
                    target,
                    reference_target,  # labels the report; its stored vectors are used, not re-embedded
                    regime=regime,
                    expected_width=self._width,
                    clock=self._clock,
                    reference_vectors=reference_vectors,
                    timeout_s=self._timeout_s,
                )

            cached = self.ledger.get(key)
            if cached is not None and cached.coverage in (Coverage.WIDTH_AND_PIN_ONLY, Coverage.REFERENCE):
                # It passed as the anchor/reference, which it no longer is: check it for real now.
                report = await run()
                self.ledger.record(report)
                return info, report
            return info, await self.ledger.ensure(key, run)

        candidates = [p for p in selection.primary + selection.reserve if p.name in embeds]
        results = await asyncio.gather(*(check(info) for info in candidates))
        cleared = {info.name for info, report in results if report.verdict is Verdict.VERIFIED}
        for info, report in results:
            if info.name not in cleared:
                excluded[info.name] = f"gate: {report.verdict.value} ({report.detail})"
        admitted = replace_selection(selection, cleared, excluded)
        return Admitted(admitted, reference, regime)

    def guard(self, info: ProviderInfo, embed: Embed, regime: Regime, reference: ProviderInfo) -> Embed:
        """The provider's embed call, refused unless cleared; width and (cloud) drift checked per batch."""
        key = key_of(info, regime)
        reference_vectors = self._reference_vectors.get(str(key_of(reference, regime)))
        # Stacks we do not run are watched on every batch: a cloud upstream, a workstation's server.
        watch_drift = (info.kind is ProviderKind.CLOUD or info.hosted == "sidecar") and reference_vectors is not None

        async def guarded(texts: list[str]) -> np.ndarray:
            report = self.ledger.get(key)
            if report is None or report.verdict is not Verdict.VERIFIED:
                verdict = report.verdict.value if report else "not verified"
                raise GateRefused(info.name, verdict, "not cleared to embed")
            turn = next(self._probe_turn) % len(PROBE_TEXTS) if watch_drift else None
            sent = texts + [PROBE_TEXTS[turn]] if turn is not None else texts
            rows = await embed(sent)
            if rows.ndim != 2 or rows.shape[1] != self._width:
                got = rows.shape[1] if rows.ndim == 2 else 0
                self.ledger.evict(key, Verdict.DIMENSION_MISMATCH, f"a batch came back {got} wide")
                raise WidthMismatch(info.name, self._width, got)
            if turn is not None:
                assert reference_vectors is not None
                cosine, _ = compare(rows[-1:], reference_vectors[turn : turn + 1])
                if cosine < MIN_COSINE:
                    detail = f"drift on a batch: probe cosine {cosine:.4f} < {MIN_COSINE}"
                    self.ledger.evict(key, Verdict.VECTOR_INCOMPATIBLE, detail)
                    raise GateRefused(info.name, Verdict.VECTOR_INCOMPATIBLE.value, detail)
                rows = rows[:-1]
            return rows

        return guarded

    async def sentinel(
        self, providers: Sequence[tuple[ProviderInfo, Embed]], regime: Regime, baseline: np.ndarray
    ) -> list[GateReport]:
        """Re-probe serving providers against stored probe vectors (an index's, or the reference's
        as first recorded); evict every provider that drifted from them."""
        reports = []
        for info, embed in providers:
            report = await probe(
                self.target(info, embed),
                None,
                regime=regime,
                expected_width=self._width,
                clock=self._clock,
                reference_vectors=baseline,
                timeout_s=self._timeout_s,
            )
            if report.verdict in (Verdict.VECTOR_INCOMPATIBLE, Verdict.DIMENSION_MISMATCH):
                report = self.ledger.evict(key_of(info, regime), report.verdict, f"sentinel: {report.detail}")
            reports.append(report)
        return reports

    async def reference_vectors(self, reference: ProviderInfo, embed: Embed, regime: Regime) -> np.ndarray:
        """The reference's probe vectors (embedded once per reference key, kept for the sentinel)."""
        name = str(key_of(reference, regime))
        if name not in self._reference_vectors:
            vectors = await asyncio.wait_for(embed(list(PROBE_TEXTS)), self._timeout_s)
            self._reference_vectors[name] = np.asarray(vectors, dtype=np.float32)
        return self._reference_vectors[name]

    # ---- internals ---------------------------------------------------------------------------
    async def _choose_reference(
        self, selection: Selection, embeds: dict[str, Embed], regime: Regime
    ) -> tuple[ProviderInfo, np.ndarray]:
        """The first candidate that can serve as reference: it embeds the probes (and, as a cloud
        anchor, passes width and pin on its own)."""
        reasons = []
        for info in reference_candidates(selection, self._preferred):
            if info.name not in embeds:
                continue
            key = key_of(info, regime)
            if regime is Regime.CLOUD_REF:
                target = self.target(info, embeds[info.name])
                report = await self.ledger.ensure(
                    key,
                    lambda target=target: probe(  # type: ignore[misc]
                        target, None, regime=regime, expected_width=self._width, clock=self._clock,
                        timeout_s=self._timeout_s,
                    ),
                )
                if report.verdict is not Verdict.VERIFIED:
                    reasons.append(f"{info.name}: {report.verdict.value}")
                    continue
            else:
                self._record_reference(info, embeds[info.name], regime)
            try:
                vectors = await self.reference_vectors(info, embeds[info.name], regime)
            except Exception as exc:  # noqa: BLE001 - a reference that cannot embed is skipped, reported
                reasons.append(f"{info.name}: reference probe failed ({type(exc).__name__})")
                continue
            return info, vectors
        excluded = [f"{name}: {why}" for name, why in sorted(selection.excluded.items())]
        raise NoProviderLeft(selection.role.value, reasons + excluded or [f"no reference provider under {regime.value}"])

    def _record_reference(self, info: ProviderInfo, embed: Embed, regime: Regime) -> GateReport:
        key = key_of(info, regime)
        existing = self.ledger.get(key)
        if existing is not None:
            return existing
        report = reference_report(self.target(info, embed), regime=regime, expected_width=self._width, clock=self._clock)
        self.ledger.record(report)
        return report


def replace_selection(selection: Selection, cleared: set[str], excluded: dict[str, str]) -> Selection:
    return selection.model_copy(
        update={
            "primary": [p for p in selection.primary if p.name in cleared],
            "reserve": [p for p in selection.reserve if p.name in cleared],
            "excluded": excluded,
        }
    )


__all__ = ["Admitted", "Gatekeeper", "key_of", "reference_candidates", "regime_of"]
