"""Per-role routing: the fan-out pool of worker lanes and dispatch under the policy in force."""

from __future__ import annotations

from cluster.routing.dispatch import (
    SINGLE_CALL_DISCOVERY_MAX_AGE_S,
    Dispatcher,
    EmbedOutcome,
    LandedBatch,
    Provider,
)

__all__ = [
    "SINGLE_CALL_DISCOVERY_MAX_AGE_S",
    "Dispatcher",
    "EmbedOutcome",
    "LandedBatch",
    "Provider",
]
