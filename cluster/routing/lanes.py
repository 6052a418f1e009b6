"""The worker lanes of the fan-out pool (DESIGN §4): one per provider.

A `Lane` is who serves and how to call it; a `RateBook` keeps each lane's measured rate across
runs; a `LaneState` is one lane within one run. The rules here say how much a lane may pull
(sized by its own rate, parked when far slower than the best, one probe batch until measured)
and when it is dropped (a standing gate refusal, a role at its spend cap, or too many failures in a row).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from cluster.errors import GateRefused, SamespaceError, SpendCapReached
from cluster.gate.probe import Verdict
from cluster.settings import DEFAULT_RATE_EWMA_ALPHA, FanoutSettings
from cluster.types import Clock

__all__ = [
    "MIN_SAMPLE_S",
    "Lane",
    "LaneKind",
    "LaneState",
    "RateBook",
    "count_failure",
    "next_size",
]

log = logging.getLogger("samespace.fanout")

MIN_SAMPLE_S = 1e-3  # a call the clock timed at 0 s counts as this long (keeps rates finite)

LaneKind = Literal["local", "cloud"]


@dataclass(frozen=True)
class Lane:
    """One provider's worker lane.

    `embed` returns one float row per text. A cloud lane may carry `admit` (asked before each
    pull; False = no permit now, the lane does not pull and asks again shortly) and `release`
    (awaited once after every admitted request, whatever its outcome).
    """

    name: str
    kind: LaneKind
    embed: Callable[[list[str]], Awaitable[np.ndarray]]
    admit: Callable[[], Awaitable[bool]] | None = None
    release: Callable[[], Awaitable[None]] | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("local", "cloud"):
            raise ValueError(f"lane {self.name!r}: kind must be 'local' or 'cloud', got {self.kind!r}")
        if self.release is not None and self.admit is None:
            raise ValueError(f"lane {self.name!r}: release without admit would never be called")


class RateBook:
    """Measured texts/s per lane name (EWMA of per-call samples), kept across calls.

    The dispatcher owns one instance; give lanes stable names that are unique per provider and
    role, or two providers blend into one rate.
    """

    def __init__(self) -> None:
        self._rates: dict[str, float] = {}

    def __contains__(self, lane: object) -> bool:
        return lane in self._rates

    def rate(self, lane: str) -> float:
        """texts/s; 0.0 means never measured (a measured rate is always > 0)."""
        return self._rates.get(lane, 0.0)

    def record(self, lane: str, texts: int, seconds: float, *, alpha: float = DEFAULT_RATE_EWMA_ALPHA) -> float:
        """Fold one call's throughput into the lane's rate and return the new rate."""
        sample = texts / max(seconds, MIN_SAMPLE_S)
        old = self._rates.get(lane)
        new = sample if old is None else (1.0 - alpha) * old + alpha * sample
        self._rates[lane] = new
        return new

    def forget(self, lane: str) -> None:
        self._rates.pop(lane, None)

    def snapshot(self) -> dict[str, float]:
        return dict(self._rates)


@dataclass
class LaneState:
    """One lane within one run: what it has in flight, whether it is paused or dropped, its counters."""

    lane: Lane
    in_flight: int = 0
    consecutive_failures: int = 0
    paused_until: float = float("-inf")  # rate-limit cooldown, or waiting for a permit
    last_dispatch: int | None = None  # pool-wide dispatch count right after this lane's last pull
    dropped: str | None = None
    batches: int = 0
    texts: int = 0
    failures: int = 0
    rate_limited: int = 0


def next_size(
    state: LaneState,
    states: Sequence[LaneState],
    *,
    rates: RateBook,
    settings: FanoutSettings,
    dispatched: int,
    clock: Clock,
) -> int | None:
    """Texts this lane may pull now from a non-empty queue, or None: no capacity, or parked.

    `states` are every lane of the run, `dispatched` the pool-wide count of batches sent so far.
    """
    s = settings
    name = state.lane.name
    if name not in rates:
        return s.probe_batch if state.in_flight == 0 else None
    rate = rates.rate(name)
    best = _best_rate(states, rates, clock())
    if rate < s.min_rate_ratio * best:  # parked: one probe per `reprobe_every` pool-wide batches
        if state.in_flight > 0:
            return None
        if state.last_dispatch is not None and dispatched - state.last_dispatch < s.reprobe_every:
            return None
        return s.probe_batch
    depth = s.depth if rate >= s.slow_depth_ratio * best else 1
    if state.in_flight >= depth:
        return None
    return min(max(round(rate * s.target_batch_s), s.min_batch), s.max_batch)


def count_failure(state: LaneState, exc: BaseException, *, max_consecutive_failures: int, role: str) -> bool:
    """Count a lane's failure; True when this failure drops the lane (it was not dropped before)."""
    state.failures += 1
    state.consecutive_failures += 1
    log.warning(
        "%s: lane %s failed (%d in a row): %s",
        role,
        state.lane.name,
        state.consecutive_failures,
        _describe(exc),
    )
    if state.dropped is not None:
        return False
    if _refused_for_good(exc):
        # DESIGN §4 counts a gate refusal as a failure (counted above); one that stands (an
        # eviction, not a failed spot check) drops the lane now, so its span goes elsewhere.
        state.dropped = f"dropped: {_describe(exc)}"
    elif state.consecutive_failures >= max_consecutive_failures:
        state.dropped = f"dropped after {state.consecutive_failures} consecutive failures; last: {_describe(exc)}"
    if state.dropped is None:
        return False
    log.warning("%s: lane %s %s", role, state.lane.name, state.dropped)
    return True


def _describe(exc: BaseException) -> str:
    """Our own errors by their message; anything else by type and message."""
    return str(exc) if isinstance(exc, SamespaceError) else f"{type(exc).__name__}: {exc}"


def _best_rate(states: Sequence[LaneState], rates: RateBook, now: float) -> float:
    """The best measured rate among lanes serving now (not dropped, not paused)."""
    return max(
        (
            rates.rate(s.lane.name)
            for s in states
            if s.dropped is None and s.paused_until <= now and s.lane.name in rates
        ),
        default=0.0,
    )


def _refused_for_good(exc: BaseException) -> bool:
    """A gate refusal with a standing verdict, or a role at its daily spend cap: the provider may
    not serve again in this run."""
    if isinstance(exc, SpendCapReached):
        return True
    return isinstance(exc, GateRefused) and exc.verdict != Verdict.PROBE_FAILED.value
