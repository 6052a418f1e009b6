"""The gate applied to a role's providers: who may serve, and a guard on every batch (DESIGN §5, §12).

`admit()` verifies every candidate of a selection against the policy's reference (a local
provider, or under `cloud` a deterministic cloud anchor) through the ledger, and keeps only the
cleared ones. `guard()` wraps a provider's embed call: it refuses once the provider is no longer
cleared, re-checks the width of every batch, and spot-checks a non-reference provider on the
batch's own texts: texts at random positions are re-embedded by the reference and
compared under MIN_COSINE before the rows are handed on. A provider that answers the public probe
texts exactly and anything else wrongly is evicted on its first batch, and that batch is never
written. `probe_against()` checks a provider against stored probe vectors alone, for the drift
sentinel (`cluster.gate.sentinel`).

No fixed probe text rides along with the batches any more: it was public, so it proved only that
a provider knew it; drift of an honest stack changes every text, so the spot check catches it too.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import numpy as np
from pydantic import Field

from cluster.errors import GateRefused, MalformedResponse, NoProviderLeft, WidthMismatch
from cluster.gate.ledger import GateLedger
from cluster.gate.probe import (
    MIN_COSINE,
    PROBE_TEXTS,
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
from cluster.providers import ProviderInfo, ProviderKind, Selection
from cluster.roles import Policy
from cluster.settings import SPOT_CHECK_RATE, SPOT_CHECK_TEXTS
from cluster.types import Clock, Strict

log = logging.getLogger("samespace.gate")

Embed = Callable[[list[str]], Awaitable[np.ndarray]]


def regime_of(policy: Policy) -> Regime:
    return Regime.CLOUD_REF if policy is Policy.CLOUD else Regime.LOCAL_REF


def key_of(info: ProviderInfo, regime: Regime) -> GateKey:
    return GateKey(provider=info.name, model=info.model, upstream=info.upstream, regime=regime)


def reference_candidates(selection: Selection, preferred: str | None) -> list[ProviderInfo]:
    """Possible references in order: local (preferred first, Ray-hosted before sidecar-hosted: a
    workstation that comes and goes never defines an index's space while an actor can) unless the
    policy is `cloud`; then cloud anchors, the in-cluster virtual containers before those a sidecar
    hosts, for the same reason."""
    pool = selection.primary + selection.reserve
    local = sorted(
        (p for p in pool if p.kind is ProviderKind.LOCAL),
        key=lambda p: (p.name != preferred, p.hosted != "ray", p.name),
    )
    cloud = sorted((p for p in pool if p.kind is ProviderKind.CLOUD), key=lambda p: (p.hosted != "ray", p.name))
    return cloud if selection.policy is Policy.CLOUD else local


def spot_checked(info: ProviderInfo, reference: ProviderInfo) -> bool:
    """Whether a provider's batches are spot-checked against `reference`.

    Every provider but the reference is, with one exception: a Ray actor of ours that reports the
    reference's own encoder identity (same model, same weights by sha256, same text version) runs
    our code on our weights, so its space is the reference's by construction (and it was probed
    on admission). Checking it would only make a node that leaves with the reference take every
    other lane of the run with it. Cloud lanes and sidecars run stacks we do not: always checked.
    """
    if info.name == reference.name:
        return False
    ours = info.kind is ProviderKind.LOCAL and info.hosted == "ray"
    return not (ours and info.identity is not None and info.identity == reference.identity)


class SpotCheckStats(Strict):
    """The spot checks' running cost and findings, per dispatcher (one role)."""

    batches_checked: int = Field(default=0, description="Batches with texts re-embedded by the reference.")
    texts_reembedded: int = Field(
        default=0, description="The reference's extra work: spot_check_texts texts per checked batch (4 by default)."
    )
    reference_failures: int = Field(default=0, description="Re-embeds that failed: the batch re-queued, no verdict.")
    mismatches: int = Field(default=0, description="Batches below MIN_COSINE: provider evicted, batch discarded.")


@dataclass
class _SpotCounts:
    batches_checked: int = 0
    texts_reembedded: int = 0
    reference_failures: int = 0
    mismatches: int = 0


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
        rng: random.Random,
        spot_check_rate: float = SPOT_CHECK_RATE,
        spot_check_texts: int = SPOT_CHECK_TEXTS,
    ) -> None:
        if not 0 < spot_check_rate <= 1 or spot_check_texts < 1:
            raise ValueError(f"spot checks: rate {spot_check_rate} must be in (0, 1], texts {spot_check_texts} >= 1")
        self.ledger = ledger
        self._width = expected_width
        self._preferred = preferred_reference
        self._clock = clock
        self._timeout_s = probe_timeout_s
        self._rng = rng  # picks which batches and which texts are checked: injected, for tests
        self._spot_rate = spot_check_rate
        self._spot_texts = spot_check_texts
        self._reference_vectors: dict[str, np.ndarray] = {}  # by str(GateKey) of the reference
        self._spot_passed: dict[GateKey, GateReport | None] = {}  # the verdict a spot check last passed under
        self._spot_counts = _SpotCounts()

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

    def guard(
        self, info: ProviderInfo, embed: Embed, regime: Regime, reference: ProviderInfo, reference_embed: Embed
    ) -> Embed:
        """The provider's embed call: refused unless cleared, every batch's width re-checked, and a
        non-reference provider's batches spot-checked on their own texts (`spot_checked`).

        A spot check re-embeds `spot_check_texts` texts of the batch, at random positions, through
        `reference_embed` and compares them under MIN_COSINE before the rows are returned (so
        before anything writes them). A mismatch evicts the provider (vector-incompatible) and the
        batch is refused; a reference that cannot re-embed refuses the batch as `probe-failed`
        without touching the provider's verdict (DESIGN §4: either way a failure, re-queued).
        """
        key = key_of(info, regime)
        checked = spot_checked(info, reference)

        async def guarded(texts: list[str]) -> np.ndarray:
            self._require_cleared(info.name, key)
            rows = np.asarray(await embed(texts))
            if rows.ndim != 2 or rows.shape[1] != self._width:
                got = rows.shape[1] if rows.ndim == 2 else 0
                self.ledger.evict(key, Verdict.DIMENSION_MISMATCH, f"a batch came back {got} wide")
                raise WidthMismatch(info.name, self._width, got)
            if rows.shape[0] != len(texts):
                raise MalformedResponse(info.name, f"{rows.shape[0]} rows for {len(texts)} texts")
            positions = self._spot_positions(key, len(texts)) if checked else []
            if positions:
                await self._spot_check(info, key, reference, reference_embed, texts, rows, positions)
            # Evicted while this batch was in flight (another batch's spot check, the sentinel): its
            # rows are as suspect as that batch's, and are never handed on.
            self._require_cleared(info.name, key)
            return rows

        return guarded

    def spot_stats(self) -> SpotCheckStats:
        """What the spot checks have cost and found so far (the cost is the reference's re-embeds)."""
        return SpotCheckStats(**vars(self._spot_counts))

    async def probe_against(self, info: ProviderInfo, embed: Embed, regime: Regime, vectors: np.ndarray) -> GateReport:
        """Probe a provider against stored probe `vectors` alone (the drift sentinel's check); the
        ledger is left as it was: the caller decides what the report means."""
        return await probe(
            self.target(info, embed),
            None,
            regime=regime,
            expected_width=self._width,
            clock=self._clock,
            reference_vectors=vectors,
            timeout_s=self._timeout_s,
        )

    async def reference_vectors(self, reference: ProviderInfo, embed: Embed, regime: Regime) -> np.ndarray:
        """The reference's probe vectors (embedded once per reference key, kept for the sentinel)."""
        name = str(key_of(reference, regime))
        if name not in self._reference_vectors:
            vectors = await asyncio.wait_for(embed(list(PROBE_TEXTS)), self._timeout_s)
            self._reference_vectors[name] = np.asarray(vectors, dtype=np.float32)
        return self._reference_vectors[name]

    # ---- internals ---------------------------------------------------------------------------
    def _require_cleared(self, name: str, key: GateKey) -> None:
        report = self.ledger.get(key)
        if report is None or report.verdict is not Verdict.VERIFIED:
            verdict = report.verdict.value if report else "not verified"
            raise GateRefused(name, verdict, "not cleared to embed")

    def _spot_positions(self, key: GateKey, size: int) -> list[int]:
        """Positions of a batch to check: always until one check has passed under the key's current
        verdict, then with probability `spot_check_rate`; `spot_check_texts` distinct positions drawn
        uniformly (every k-subset equally likely) from the injected rng, all of them when the batch is
        smaller. A batch with m of its B rows falsified is then caught with probability
        1 - C(B-m, k) / C(B, k), and always when m = B."""
        report = self.ledger.get(key)
        passed = self._spot_passed.get(key)
        first = passed is None or passed is not report  # a new verdict starts over
        if not first and self._rng.random() >= self._spot_rate:
            return []
        return sorted(self._rng.sample(range(size), min(self._spot_texts, size)))

    async def _spot_check(
        self,
        info: ProviderInfo,
        key: GateKey,
        reference: ProviderInfo,
        reference_embed: Embed,
        texts: list[str],
        rows: np.ndarray,
        positions: list[int],
    ) -> None:
        counts = self._spot_counts
        counts.batches_checked += 1
        counts.texts_reembedded += len(positions)
        try:
            expected = np.asarray(
                await asyncio.wait_for(reference_embed([texts[i] for i in positions]), self._timeout_s),
                dtype=np.float32,
            )
            if expected.shape != (len(positions), self._width) or not np.all(np.isfinite(expected)):
                raise MalformedResponse(reference.name, f"re-embed came back with shape {expected.shape}")
        except Exception as exc:  # noqa: BLE001 - the reference's fault: the batch waits, the verdict stands
            counts.reference_failures += 1
            why = f"spot check: reference {reference.name} could not re-embed ({type(exc).__name__})"
            log.warning("gate: %s: %s; batch re-queued, verdict kept", info.name, why)
            raise GateRefused(info.name, Verdict.PROBE_FAILED.value, why) from None
        try:
            cosines: tuple[float, float] | None = compare(rows[positions], expected)
        except ValueError:  # a zero or non-finite row where a vector belongs: it has no cosine
            cosines = None
        if cosines is None or cosines[0] < MIN_COSINE:
            counts.mismatches += 1
            found = f"cosine {cosines[0]:.4f} < {MIN_COSINE}" if cosines else "a zero or non-finite row"
            detail = f"spot check: {found} on {len(positions)} of a batch's {len(texts)} texts against {reference.name}"
            self.ledger.evict(
                key,
                Verdict.VECTOR_INCOMPATIBLE,
                detail,
                min_cosine=cosines[0] if cosines else None,
                mean_cosine=cosines[1] if cosines else None,
                width=self._width,
            )
            raise GateRefused(info.name, Verdict.VECTOR_INCOMPATIBLE.value, detail)
        self._spot_passed[key] = self.ledger.get(key)

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
                    lambda target=target: probe(  # type: ignore[misc]  # mypy cannot infer a lambda with a default
                        target,
                        None,
                        regime=regime,
                        expected_width=self._width,
                        clock=self._clock,
                        timeout_s=self._timeout_s,
                    ),
                )
                if report.verdict is not Verdict.VERIFIED:
                    why = f" ({report.detail})" if report.verdict is Verdict.PROBE_FAILED else ""
                    reasons.append(f"{info.name}: {report.verdict.value}{why}")  # e.g. a role at its spend cap
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
        fallback = [f"no reference provider under {regime.value}"]
        raise NoProviderLeft(selection.role.value, reasons + excluded or fallback)

    def _record_reference(self, info: ProviderInfo, embed: Embed, regime: Regime) -> GateReport:
        key = key_of(info, regime)
        existing = self.ledger.get(key)
        if existing is not None:
            return existing
        target = self.target(info, embed)
        report = reference_report(target, regime=regime, expected_width=self._width, clock=self._clock)
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


__all__ = [
    "Admitted",
    "Embed",
    "Gatekeeper",
    "SpotCheckStats",
    "key_of",
    "reference_candidates",
    "regime_of",
    "spot_checked",
]
