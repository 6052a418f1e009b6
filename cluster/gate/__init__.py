"""The compatibility gate: probes, the verdict ledger, admission and batch guards, the drift sentinel."""

from __future__ import annotations

from cluster.gate.admission import Embed, Gatekeeper, SpotCheckStats, reference_candidates
from cluster.gate.ledger import GateLedger
from cluster.gate.probe import GateReport, ProbeTarget, Regime, Verdict, probe
from cluster.gate.sentinel import probe_baseline, reference_drifted, sentinel_loop, sentinel_round, stored_baseline

__all__ = [
    "Embed",
    "GateLedger",
    "GateReport",
    "Gatekeeper",
    "ProbeTarget",
    "Regime",
    "SpotCheckStats",
    "Verdict",
    "probe",
    "probe_baseline",
    "reference_candidates",
    "reference_drifted",
    "sentinel_loop",
    "sentinel_round",
    "stored_baseline",
]
