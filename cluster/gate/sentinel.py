"""The drift sentinel (DESIGN §12): serving encoders re-probed against stored probe vectors.

A pinned upstream can change its stack behind the same pin, and an honest local stack can drift
after an upgrade; the admission probe saw neither. So the gate's probe texts are embedded again:

- Against what: an index stores its reference's vectors of the probe texts when it is built
  (`IndexRecord.probe_vectors`, from `probe_baseline`). A reindex compares against those; the
  periodic round compares against the reference's vectors as the gatekeeper first recorded them.
- Who: every serving provider with an embed call (`sentinel_targets`), except a local reference,
  which defines the space. It is compared only with an index's stored vectors, and only reported.
  A cloud anchor is compared with its own earlier vectors.
- When: before every reindex (the job asks the role's dispatcher for a round), every
  `gate.sentinel_period_s` while a gated dispatcher serves (`sentinel_loop`), and on demand
  (`POST /admin/gate/verify`).
- What a result means: a provider that drifted (`DRIFT_VERDICTS`) is evicted from the ledger, so
  its next batch is refused before a row is written. A drifted report with no reference name
  (`reference_drifted`) means the index's vectors may not be reused: the reindex embeds everything.

Pure asyncio over the gatekeeper's ledger; the clock and sleep are injected.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence

import numpy as np

from cluster.gate.admission import Embed, Gatekeeper, key_of, regime_of
from cluster.gate.probe import PROBE_TEXTS, GateReport, Regime, Verdict, probe
from cluster.providers import ProviderInfo, ProviderKind, Selection
from cluster.types import Clock

__all__ = [
    "DRIFT_VERDICTS",
    "is_drift",
    "probe_baseline",
    "reference_drifted",
    "reprobe",
    "sentinel_loop",
    "sentinel_round",
    "sentinel_targets",
    "stored_baseline",
]

log = logging.getLogger("samespace.gate")

# What drift looks like: vectors off the stored ones, or a width that changed. A failed probe is
# not drift (the provider's verdict stands until the ledger retries it).
DRIFT_VERDICTS = frozenset({Verdict.VECTOR_INCOMPATIBLE, Verdict.DIMENSION_MISMATCH})


def is_drift(report: GateReport) -> bool:
    return report.verdict in DRIFT_VERDICTS


def reference_drifted(reports: Iterable[GateReport]) -> bool:
    """Whether a round found drift in a report that names no reference: the cloud anchor's (its
    admission report had no counterpart, and an eviction keeps that). Then none of the index's
    vectors may be reused. A local reference's report names the stored vectors, so it never counts."""
    return any(report.reference is None and is_drift(report) for report in reports)


async def probe_baseline(embed: Embed) -> np.ndarray:
    """The reference's vectors of the probe texts, stored with an index for later rounds."""
    return np.asarray(await embed(list(PROBE_TEXTS)), dtype=np.float32)


def stored_baseline(probe_vectors: Sequence[Sequence[float]] | None) -> np.ndarray | None:
    """An index's stored probe vectors as a baseline; None for an index built without them."""
    return None if probe_vectors is None else np.asarray(probe_vectors, dtype=np.float32)


def sentinel_targets(
    selection: Selection, reference: ProviderInfo, embeds: Mapping[str, Embed]
) -> list[tuple[ProviderInfo, Embed]]:
    """Every serving provider with an embed call, in selection order, except a local reference."""
    local_reference = reference.name if reference.kind is ProviderKind.LOCAL else None
    return [
        (info, embeds[info.name])
        for info in selection.primary + selection.reserve
        if info.name != local_reference and info.name in embeds
    ]


async def reprobe(
    gatekeeper: Gatekeeper, providers: Sequence[tuple[ProviderInfo, Embed]], regime: Regime, baseline: np.ndarray
) -> list[GateReport]:
    """Probe each provider against `baseline`, one after another; evict every one that drifted."""
    reports = []
    for info, embed in providers:
        report = await gatekeeper.probe_against(info, embed, regime, baseline)
        if is_drift(report):
            report = gatekeeper.ledger.evict(key_of(info, regime), report.verdict, f"sentinel: {report.detail}")
        reports.append(report)
    return reports


async def sentinel_round(
    gatekeeper: Gatekeeper,
    selection: Selection,
    reference: ProviderInfo,
    embeds: Mapping[str, Embed],
    *,
    stored: np.ndarray | None,
    width: int | None,
    clock: Clock,
) -> list[GateReport]:
    """One round over a role's selection: the targets against `stored` (an index's probe vectors)
    or, without them, against the reference's vectors as first recorded; drifted providers are
    evicted. With `stored`, a local reference is probed against them too and only reported.

    `embeds` are the providers' raw calls (not the gate's guarded ones): the sentinel writes its
    own verdicts. `width` is the index's (None: the baseline's).
    """
    regime = regime_of(selection.policy)
    reference_embed = embeds[reference.name]
    baseline = stored if stored is not None else await gatekeeper.reference_vectors(reference, reference_embed, regime)
    reports = await reprobe(gatekeeper, sentinel_targets(selection, reference, embeds), regime, baseline)
    if stored is not None and reference.kind is ProviderKind.LOCAL:
        reports.append(
            await probe(
                gatekeeper.target(reference, reference_embed),
                None,
                regime=regime,
                expected_width=width or baseline.shape[1],
                clock=clock,
                reference_vectors=stored,
            )
        )
    return reports


async def sentinel_loop(
    run_round: Callable[[], Awaitable[object]], *, period_s: float, sleep: Callable[[float], Awaitable[None]], role: str
) -> None:
    """A round every `period_s` while serving, until cancelled; a failed round is logged and the
    next one still runs."""
    while True:
        await sleep(period_s)
        try:
            await run_round()
        except Exception as exc:  # noqa: BLE001 - the loop must outlive one failed round; logged
            log.warning("%s: sentinel round failed: %s", role, exc)
