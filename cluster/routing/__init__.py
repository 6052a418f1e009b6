"""Per-role routing: the fan-out pool of worker lanes and dispatch under the policy in force."""

from __future__ import annotations

from cluster.routing.dispatch import Dispatcher, EmbedOutcome, LandedBatch, Provider

__all__ = [
    "Dispatcher",
    "EmbedOutcome",
    "LandedBatch",
    "Provider",
]
