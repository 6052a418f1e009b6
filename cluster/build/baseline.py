"""What a build is planned against: the reference encoder, the serving build and whether the
reference drifted from it (DESIGN §12), or, for a new index, a donor of the same folder and space."""

from __future__ import annotations

import time
from collections.abc import Callable

from cluster.build.ports import BuildEncoders, BuildIndex, Emit
from cluster.errors import NoProviderLeft
from cluster.gate import reference_drifted, stored_baseline
from cluster.index import IndexRecord
from cluster.providers import NOT_ANSWERING
from cluster.space import EncoderIdentity
from cluster.types import Clock

STARTUP_POLL_S = 2.0


def await_reference(
    ask: Callable[[], EncoderIdentity],
    timeout_s: float,
    emit: Emit,
    clock: Clock = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> EncoderIdentity:
    """The reference identity, waiting while encoder actors are still starting (a cold cluster: a
    large model takes longer to load than discovery waits for an answer); other refusals fail now."""
    deadline = clock() + timeout_s
    while True:
        try:
            return ask()
        except NoProviderLeft as exc:
            starting = [r for r in exc.reasons if NOT_ANSWERING in r]
            if not starting or clock() >= deadline:
                raise
            emit(f"waiting for encoders to start: {'; '.join(starting)}")
            sleep(STARTUP_POLL_S)


def check_drift(
    index: BuildIndex, encoders: BuildEncoders, name: str, reference: EncoderIdentity, emit: Emit
) -> tuple[IndexRecord | None, bool]:
    """DESIGN §12: before every reindex, re-probe the serving encoders against the serving index's
    stored probe vectors; drifted providers are evicted before they write a row. Returns the
    serving record and whether the reference itself (or the cloud anchor) no longer reproduces
    the index's probe vectors: then none of the index's vectors may be reused."""
    current = index.record(name)
    stored = stored_baseline(current.probe_vectors) if current is not None else None
    if current is None or stored is None:
        return current, False
    reports = encoders.sentinel(stored)
    for report in reports:
        emit(f"sentinel: {report.line()}")
    drifted = reference_drifted(reports)
    if current.identity != reference:
        emit(
            f"the encoder changed since {name!r} was built ({current.identity.space_id} → {reference.space_id}): "
            "this reindex replaces it"
        )
    return current, drifted


def find_donor(
    index: BuildIndex, encoders: BuildEncoders, name: str, folder: str, reference: EncoderIdentity, emit: Emit
) -> tuple[IndexRecord | None, bool]:
    """For a new index: the latest index of the same folder in the same space, whose unchanged
    vectors it may reuse (a branch's index after its base's), and whether the reference drifted from it."""
    donors = [r for r in index.records() if r.name != name and r.followed_folder == folder and r.identity == reference]
    if not donors:
        return None, False
    donor = max(donors, key=lambda r: r.built_at or 0.0)
    emit(f"reusing unchanged vectors of index {donor.name!r} (same folder, same space)")
    return check_drift(index, encoders, donor.name, reference, emit)
