"""The key-wide cloud budget (DESIGN §7): how many OpenRouter requests may run, and when.

Pure logic over an injected clock and random source; no asyncio, no Ray. `BudgetActor` wraps one
`BudgetController` and only turns its tickets into awaitables: `enqueue` → `grant` (now, or again at
`next_wakeup()` / after a `release`) → `release` with the outcome.

The permit unit is concurrency (one permit = one in-flight cloud request). The ceiling comes from,
in order: a manual override → Little's law on a credible rpm (rpm/60 × latency EWMA) → a funded
account (16) → the timid default (4); never above MAX_PERMITS. A credible rpm is also enforced as a
sliding window of request starts. A funded account reporting a degenerate rpm (< 60/min) or none at
all gets no gate from discovery.

Learned rate (samespace's own, not the peer's): when no credible rpm is known, a 429 is a
measurement. The requests started in the window before the rejected one (and not rejected
themselves) are the key's rate, and the gate is armed at it. Like a reported rpm, a measured one
below 60/min is believed only for a key known to be unfunded. A clean window with the gate full
probes max(1, 5%) higher; a 429 on a probing request steps back to the measured rate without
halving (our own experiment answered) and doubles the clean stretch the next probe waits for (up
to 8 windows); any other 429 re-learns and halves.

AIMD on top: a 429 halves the effective permits (min 1) and starts a jittered cooldown; 429s of
requests granted before that halving are the same congestion event and do not halve again. Each
clean ramp interval adds one permit back toward the ceiling. Waiters are served interactive before
bulk, round-robin across projects, FIFO within a project.
"""

from __future__ import annotations

import math
import random as _random
from collections import OrderedDict, deque
from collections.abc import Callable
from enum import StrEnum

from pydantic import Field, model_validator

from cluster.types import Clock, Strict

__all__ = [
    "BASE_BACKOFF_S",
    "CREDIT_PERMITS",
    "DEFAULT_PERMITS",
    "DISCOVERY_INTERVAL_S",
    "INITIAL_LATENCY_S",
    "LATENCY_ALPHA",
    "LATENCY_FLOOR_S",
    "MAX_BACKOFF_S",
    "MAX_PERMITS",
    "MIN_PLAUSIBLE_RPM_FUNDED",
    "PROBE_STEP_FRACTION",
    "RAMP_INTERVAL_S",
    "WINDOW_S",
    "BudgetController",
    "BudgetLimits",
    "BudgetSnapshot",
    "BudgetState",
    "CeilingSource",
    "KeyFacts",
    "Outcome",
    "Priority",
]

MAX_PERMITS = 256  # hard cap: an override typo must not drain the account (peer)
DEFAULT_PERMITS = 4  # nothing could be discovered (peer)
CREDIT_PERMITS = 16  # a funded account without a credible rpm (peer)
MIN_PLAUSIBLE_RPM_FUNDED = 60.0  # below this a funded account's rpm is vestigial (peer)
INITIAL_LATENCY_S = 2.0
LATENCY_ALPHA = 0.2
LATENCY_FLOOR_S = 0.05
RAMP_INTERVAL_S = 15.0
BASE_BACKOFF_S = 2.0
MAX_BACKOFF_S = 60.0
WINDOW_S = 60.0
DISCOVERY_INTERVAL_S = 600.0
PROBE_STEP_FRACTION = 0.05  # a learned rate probes up by max(1, 5%) after a clean saturated window
_MAX_PROBE_WINDOWS = 8  # a refused probe doubles the clean stretch the next one waits for, up to this


class Priority(StrEnum):
    INTERACTIVE = "interactive"  # a query someone waits on: always served before bulk
    BULK = "bulk"  # indexing and other background work


class Outcome(StrEnum):
    OK = "ok"
    RATE_LIMITED = "rate-limited"  # HTTP 429 (or a rate-limit-shaped error)
    ERROR = "error"  # any other failure: no latency sample, no halving


class BudgetState(StrEnum):
    STEADY = "steady"  # effective permits are at the ceiling
    RAMPING = "ramping"  # below the ceiling, climbing one permit per clean ramp interval
    BACKING_OFF = "backing-off"  # inside a post-429 cooldown: nothing starts


class CeilingSource(StrEnum):
    MANUAL = "manual"
    DISCOVERED = "discovered"  # Little's law on a credible rpm the key reported
    LEARNED = "learned"  # a rate measured at a 429 gates the window
    CREDITS = "credits"
    FALLBACK = "fallback"


class BudgetLimits(Strict):
    """The budget's configuration; every default is the module constant of the same name."""

    override: int | None = Field(
        default=None, ge=1, le=MAX_PERMITS, description="Manual ceiling in permits (1..256); wins over discovery."
    )
    window_s: float = Field(default=WINDOW_S, gt=0, description="Length of the sliding rate window, seconds.")
    learn_rate: bool = Field(
        default=True, description="Learn the key's rate at a 429 when no credible rpm is known."
    )
    default_permits: int = Field(
        default=DEFAULT_PERMITS, ge=1, le=MAX_PERMITS, description="Ceiling when nothing is known."
    )
    credit_permits: int = Field(
        default=CREDIT_PERMITS, ge=1, le=MAX_PERMITS, description="Ceiling of a funded account with no credible rpm."
    )
    min_plausible_rpm_funded: float = Field(
        default=MIN_PLAUSIBLE_RPM_FUNDED, ge=0, description="A funded account's rpm below this is not believed."
    )
    initial_latency_s: float = Field(default=INITIAL_LATENCY_S, gt=0, description="Seed of the latency EWMA.")
    latency_alpha: float = Field(default=LATENCY_ALPHA, gt=0, le=1, description="Weight of a new latency sample.")
    latency_floor_s: float = Field(default=LATENCY_FLOOR_S, gt=0, description="The latency EWMA's lower bound.")
    ramp_interval_s: float = Field(
        default=RAMP_INTERVAL_S, gt=0, description="Each clean interval this long adds one permit back."
    )
    base_backoff_s: float = Field(default=BASE_BACKOFF_S, gt=0, description="First cooldown base after a 429.")
    max_backoff_s: float = Field(default=MAX_BACKOFF_S, gt=0, description="The cooldown base doubles up to this.")
    discovery_interval_s: float = Field(
        default=DISCOVERY_INTERVAL_S, gt=0, description="How often the actor re-reads the key's facts."
    )
    probe_step_fraction: float = Field(
        default=PROBE_STEP_FRACTION, ge=0, le=1, description="A learned rate probes up by max(1, this × rate)."
    )

    @model_validator(mode="after")
    def _backoff_bounds_are_ordered(self) -> BudgetLimits:
        if self.base_backoff_s > self.max_backoff_s:
            raise ValueError(
                f"base_backoff_s ({self.base_backoff_s:g}) must not exceed max_backoff_s ({self.max_backoff_s:g})"
            )
        return self


class KeyFacts(Strict):
    """What discovery read from GET /key and /credits."""

    rpm: float | None = Field(default=None, gt=0, description="Reported requests/minute; None = none reported.")
    is_free_tier: bool = Field(default=False, description="The key has never bought credits.")
    credits_remaining: float | None = Field(default=None, description="Credits left in USD; None = unknown.")

    @property
    def funded(self) -> bool:
        """A paid account with credits left: its low rpm is vestigial, its balance sizes the budget."""
        return not self.is_free_tier and self.credits_remaining is not None and self.credits_remaining > 0


class BudgetSnapshot(Strict):
    """Everything the budget knows, for the admin API and logs."""

    ceiling: int = Field(description="Most permits the budget will ever hold now.")
    effective: int = Field(description="Permits currently allowed (AIMD keeps this ≤ ceiling).")
    in_flight: int = Field(description="Granted and not yet released.")
    waiting: dict[str, dict[str, int]] = Field(description="project -> priority -> waiting tickets.")
    source: CeilingSource
    state: BudgetState
    reason: str = Field(description="One line saying why the ceiling (and the gate) is what it is.")
    rate_limited: int = Field(description="Requests answered 429 so far.")
    requests: int = Field(description="Requests started so far.")
    window_rpm: float | None = Field(description="The rpm the window gate enforces; None = no gate armed.")
    cooldown_until: float | None = Field(description="Clock time the current cooldown ends; None = none active.")
    latency_ewma_s: float
    last_discovery_at: float | None


def _round_half_up(x: float) -> int:
    return math.floor(x + 0.5)


class BudgetController:
    """One key's budget: tickets wait in fair queues, `grant()` admits what the budget allows now."""

    def __init__(self, limits: BudgetLimits, *, clock: Clock, random: Callable[[], float] = _random.random) -> None:
        self._limits = limits
        self._clock = clock
        self._random = random
        now = clock()
        self._facts: KeyFacts | None = None
        self._last_discovery_at: float | None = None
        self._latency_s = limits.initial_latency_s
        self._effective = self._ceiling()
        self._backoff_s = limits.base_backoff_s
        self._cooldown_until: float | None = None
        self._ramp_mark = now  # last 429 or last ramp step; kept at `now` while at the ceiling
        self._last_429_at: float | None = None
        # 429s on requests granted up to this seq are already answered (one halving per congestion event).
        self._answered_seq = 0
        self._learned: int | None = None  # requests per window_s, measured at a 429
        self._learned_note = ""
        self._probe_mark = now  # last 429 or probe step: the clean stretch a probe waits for starts here
        self._probe_windows = 1  # windows a probe waits; doubles per refused probe, up to _MAX_PROBE_WINDOWS
        self._probe_seq: int | None = None  # grant seq when the current probe step began; None = not probing
        self._saturated = False  # the learned gate's window filled since the last 429 / probe
        self._recent: deque[float] = deque()  # start times inside the window (the gate)
        self._history: deque[tuple[float, int]] = deque()  # (start, grant seq) over two windows (learning)
        self._rejected: set[int] = set()  # grant seqs answered 429, still in history
        self._grant_seq = 0
        self._in_flight: dict[int, tuple[float, int]] = {}  # ticket -> (start, grant seq)
        self._queues: dict[Priority, OrderedDict[str, deque[int]]] = {p: OrderedDict() for p in Priority}
        self._waiting_at: dict[int, tuple[Priority, str]] = {}
        self._next_ticket = 1
        self._rate_limited = 0
        self._requests = 0

    # ---- public API -------------------------------------------------------------------------

    @property
    def ceiling(self) -> int:
        self._sync(self._clock())
        return self._ceiling()

    @property
    def effective(self) -> int:
        self._sync(self._clock())
        return self._effective

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def apply_key_facts(self, facts: KeyFacts) -> None:
        """Adopt what discovery read; the ceiling follows (and clamps effective permits if it fell)."""
        now = self._clock()
        self._sync(now)
        self._facts = facts
        self._last_discovery_at = now
        if self._rate_limited == 0:
            # Nothing has pushed back yet: the timid start was for not knowing, not for a 429.
            # Jump to what discovery allows instead of climbing one permit per 15 s.
            self._effective = max(self._effective, self._ceiling())
        self._sync(now)

    def enqueue(self, project: str, priority: Priority) -> int:
        """Queue one waiter; the returned ticket is admitted by a later `grant()`."""
        priority = Priority(priority)  # a plain "bulk" from across an actor boundary works too
        ticket = self._next_ticket
        self._next_ticket += 1
        self._queues[priority].setdefault(project, deque()).append(ticket)
        self._waiting_at[ticket] = (priority, project)
        return ticket

    def cancel(self, ticket: int) -> None:
        """A waiter gave up. No-op if it was already granted (release it instead) or is unknown."""
        where = self._waiting_at.pop(ticket, None)
        if where is None:
            return
        priority, project = where
        queue = self._queues[priority][project]
        queue.remove(ticket)
        if not queue:
            del self._queues[priority][project]

    def grant(self) -> list[int]:
        """Tickets that may start now, in fairness order; each is in flight from this call."""
        now = self._clock()
        self._sync(now)
        if self._cooling(now):
            return []
        limit = self._gate_limit()
        granted: list[int] = []
        while self._waiting_at and len(self._in_flight) < self._effective:
            if limit is not None and len(self._recent) >= limit:
                break
            ticket = self._pop_next()
            self._grant_seq += 1
            self._in_flight[ticket] = (now, self._grant_seq)
            self._recent.append(now)
            self._history.append((now, self._grant_seq))
            self._requests += 1
            granted.append(ticket)
        if limit is not None and len(self._recent) >= limit:
            self._saturated = True
        return granted

    def next_wakeup(self) -> float | None:
        """When `grant()` might next admit a waiter that cannot start now.

        `now` if one can start already; None if nothing waits or only a release can make room.
        """
        now = self._clock()
        self._sync(now)
        if not self._waiting_at:
            return None
        blocks: list[float | None] = []
        if self._cooling(now):
            blocks.append(self._cooldown_until)
        if len(self._in_flight) >= self._effective:
            steps = len(self._in_flight) - self._effective + 1
            reachable = self._effective + steps <= self._ceiling()
            blocks.append(self._ramp_mark + steps * self._limits.ramp_interval_s if reachable else None)
        limit = self._gate_limit()
        if limit is not None and len(self._recent) >= limit:
            frees_at = self._recent[len(self._recent) - limit] + self._limits.window_s
            if self._probe_pending():
                frees_at = min(frees_at, self._probe_due_at())
            blocks.append(frees_at)
        if not blocks:
            return now
        times = [t for t in blocks if t is not None]
        return max(times) if len(times) == len(blocks) else None

    def release(
        self, ticket: int, *, latency_s: float, outcome: Outcome, retry_after_s: float | None = None
    ) -> None:
        """A granted request finished: free its permit and learn from how it went."""
        if ticket not in self._in_flight:
            raise ValueError(f"ticket {ticket} is not in flight (never granted, or already released)")
        if not (latency_s >= 0 and math.isfinite(latency_s)):
            raise ValueError(f"latency_s must be a finite number >= 0, got {latency_s!r}")
        if retry_after_s is not None and not (retry_after_s >= 0 and math.isfinite(retry_after_s)):
            raise ValueError(f"retry_after_s must be a finite number >= 0 or None, got {retry_after_s!r}")
        outcome = Outcome(outcome)
        now = self._clock()
        self._sync(now)
        started_at, seq = self._in_flight.pop(ticket)
        if outcome is Outcome.OK:
            alpha = self._limits.latency_alpha
            self._latency_s = max(self._limits.latency_floor_s, self._latency_s * (1 - alpha) + latency_s * alpha)
        elif outcome is Outcome.RATE_LIMITED:
            self._on_rate_limited(now, started_at, seq, retry_after_s)
        self._sync(now)

    def set_override(self, override: int | None) -> None:
        """A manual ceiling (1..256) from the operator, or None to clear it; validated like the limits."""
        self._limits = BudgetLimits.model_validate({**self._limits.model_dump(), "override": override})
        self._sync(self._clock())

    def snapshot(self) -> BudgetSnapshot:
        now = self._clock()
        self._sync(now)
        waiting: dict[str, dict[str, int]] = {}
        for priority, queues in self._queues.items():
            for project, queue in queues.items():
                waiting.setdefault(project, {})[priority.value] = len(queue)
        ceiling = self._ceiling()
        if self._cooling(now):
            state = BudgetState.BACKING_OFF
        elif self._effective < ceiling:
            state = BudgetState.RAMPING
        else:
            state = BudgetState.STEADY
        source, reason = self._explain(ceiling)
        return BudgetSnapshot(
            ceiling=ceiling,
            effective=self._effective,
            in_flight=len(self._in_flight),
            waiting=waiting,
            source=source,
            state=state,
            reason=reason,
            rate_limited=self._rate_limited,
            requests=self._requests,
            window_rpm=self._window_rpm(),
            cooldown_until=self._cooldown_until if self._cooling(now) else None,
            latency_ewma_s=self._latency_s,
            last_discovery_at=self._last_discovery_at,
        )

    # ---- ceiling and gate ---------------------------------------------------------------------

    def _credible_rpm(self) -> float | None:
        """The reported rpm, unless a funded account reports a vestigial one (the $100 account at 1/min)."""
        facts = self._facts
        if facts is None or facts.rpm is None:
            return None
        if facts.funded and facts.rpm < self._limits.min_plausible_rpm_funded:
            return None
        return facts.rpm

    def _from_rate(self, rpm: float) -> int:
        # Little's law: concurrency = arrival rate × time in system.
        return min(MAX_PERMITS, max(1, _round_half_up(rpm / 60.0 * self._latency_s)))

    def _ceiling(self) -> int:
        limits = self._limits
        if limits.override is not None:
            return limits.override
        funded = self._facts is not None and self._facts.funded
        rpm = self._credible_rpm()
        if rpm is not None:
            from_rate = self._from_rate(rpm)
            return max(from_rate, limits.credit_permits) if funded else from_rate
        return limits.credit_permits if funded else limits.default_permits

    def _gate_limit(self) -> int | None:
        """Most request starts allowed in any window_s; None = no gate armed."""
        rpm = self._credible_rpm()
        if rpm is not None:
            return max(1, math.floor(rpm * self._limits.window_s / 60.0 + 1e-9))
        return self._learned

    def _window_rpm(self) -> float | None:
        rpm = self._credible_rpm()
        if rpm is not None:
            return rpm
        if self._learned is not None:
            return self._learned * 60.0 / self._limits.window_s
        return None

    def _plausible(self, measured: int) -> bool:
        """A rate measured at a 429 is believed like a reported one: below the funded floor only for a
        key known to be unfunded. Otherwise so few requests cannot be the key's limit (an upstream
        hiccup, a burst): arming on it would hold the fan-out to a trickle, so AIMD alone answers it.
        """
        if measured * 60.0 / self._limits.window_s >= self._limits.min_plausible_rpm_funded:
            return True
        return self._facts is not None and not self._facts.funded

    def _probe_pending(self) -> bool:
        return self._learned is not None and self._credible_rpm() is None and self._saturated

    def _probe_due_at(self) -> float:
        return self._probe_mark + self._probe_windows * self._limits.window_s

    def _explain(self, ceiling: int) -> tuple[CeilingSource, str]:
        limits = self._limits
        facts = self._facts
        rpm = self._credible_rpm()
        learned = f"; {self._learned_note}" if self._learned is not None and rpm is None else ""
        if limits.override is not None:
            return CeilingSource.MANUAL, f"manual override: {ceiling} permits{learned}"
        if rpm is not None:
            from_rate = self._from_rate(rpm)
            detail = (
                f"key reports {rpm:g} req/min; Little's law at {self._latency_s:.2f} s mean latency "
                f"gives {from_rate} permits, gated at {rpm:g} req/min"
            )
            if from_rate < ceiling:
                return CeilingSource.CREDITS, f"{detail}; funded account raises it to {ceiling}"
            return CeilingSource.DISCOVERED, detail
        if facts is None:
            unknown = "no key facts discovered yet"
        elif facts.rpm is None:
            unknown = "no rate limit reported"
        else:
            unknown = f"reported {facts.rpm:g} req/min not believed for a funded account"
        if self._learned is not None:
            return CeilingSource.LEARNED, f"{self._learned_note} ({unknown}); {ceiling} permits"
        if facts is not None and facts.funded:
            return CeilingSource.CREDITS, f"funded account, {unknown}: {ceiling} permits, no window gate"
        return CeilingSource.FALLBACK, f"{unknown}: timid default of {ceiling} permits"

    # ---- time-driven transitions ---------------------------------------------------------------

    def _cooling(self, now: float) -> bool:
        return self._cooldown_until is not None and now < self._cooldown_until

    def _sync(self, now: float) -> None:
        """Apply everything that time alone changes: ceiling clamp, ramp, backoff reset, window, probe."""
        limits = self._limits
        ceiling = self._ceiling()
        self._effective = min(self._effective, ceiling)
        # DESIGN §7: every clean ramp interval since the last 429 or ramp adds one permit back.
        while self._effective < ceiling and self._ramp_mark + limits.ramp_interval_s <= now:
            self._effective += 1
            self._ramp_mark += limits.ramp_interval_s
        if self._effective >= ceiling:
            self._ramp_mark = now  # at the ceiling the ramp idles; a raised ceiling starts a fresh interval
            if self._last_429_at is None or self._last_429_at + limits.ramp_interval_s <= now:
                self._backoff_s = limits.base_backoff_s
        while self._recent and self._recent[0] + limits.window_s <= now:
            self._recent.popleft()
        while self._history and self._history[0][0] + 2 * limits.window_s <= now:
            _, seq = self._history.popleft()
            self._rejected.discard(seq)
        learned = self._learned
        if learned is not None and self._probe_pending() and self._probe_due_at() <= now:
            # A clean window at the learned cap probes one step higher.
            if self._probe_seq is not None:
                self._probe_windows = 1  # the previous step held: probe again at full pace
            self._learned = learned + max(1, _round_half_up(learned * limits.probe_step_fraction))
            self._learned_note = f"probing {self._learned} req/{limits.window_s:g}s after a clean saturated window"
            self._probe_mark = now
            self._probe_seq = self._grant_seq
            self._saturated = False

    def _on_rate_limited(self, now: float, started_at: float, seq: int, retry_after_s: float | None) -> None:
        limits = self._limits
        self._rate_limited += 1
        self._rejected.add(seq)
        # The requests started in the window before the rejected one, and not themselves rejected, are
        # what the key allowed: a measured rate.
        window_start = started_at - limits.window_s
        allowed = sum(1 for t, s in self._history if s < seq and t > window_start and s not in self._rejected)
        measured = max(1, allowed)
        learning = limits.learn_rate and self._credible_rpm() is None and self._plausible(measured)
        refused_probe = learning and self._probe_seq is not None and seq > self._probe_seq
        if learning:
            if refused_probe:
                how = f"at a 429 (a probe of {self._learned} was refused)"
                self._probe_windows = min(_MAX_PROBE_WINDOWS, self._probe_windows * 2)
            else:
                how = "from the first 429" if self._learned is None else "at a later 429"
            if self._learned != measured:  # a cascade of 429s at the same rate keeps the first note
                self._learned = measured
                self._learned_note = f"learned {measured} req/{limits.window_s:g}s {how}"
            self._probe_mark = now
            self._probe_seq = None
            self._saturated = False
        if refused_probe or seq <= self._answered_seq:
            # A refused probe is our own experiment answering (the gate has stepped back, no halving);
            # a request granted before the last halving is the same congestion event. Either way only
            # Retry-After is honoured.
            self._answered_seq = max(self._answered_seq, self._grant_seq)
            if retry_after_s is not None:
                self._cooldown_until = max(self._cooldown_until or now, now + retry_after_s)
            return
        # DESIGN §7: a 429 halves the effective permits (min 1) and starts a jittered cooldown.
        self._effective = max(1, min(self._effective, self._ceiling()) // 2)
        if retry_after_s is not None:
            until = now + retry_after_s + self._random() * (retry_after_s / 2)
        else:
            base = self._backoff_s
            until = now + base / 2 + self._random() * base
        self._cooldown_until = max(self._cooldown_until or now, until)
        self._backoff_s = min(limits.max_backoff_s, self._backoff_s * 2)
        self._ramp_mark = now
        self._last_429_at = now
        self._answered_seq = self._grant_seq

    # ---- fairness -------------------------------------------------------------------------------

    def _pop_next(self) -> int:
        """Interactive before bulk; round-robin across projects; FIFO within a project."""
        for priority in (Priority.INTERACTIVE, Priority.BULK):
            queues = self._queues[priority]
            if not queues:
                continue
            project, queue = next(iter(queues.items()))
            ticket = queue.popleft()
            if queue:
                queues.move_to_end(project)
            else:
                del queues[project]
            del self._waiting_at[ticket]
            return ticket
        raise LookupError("no waiter to grant")  # grant() checks first; reaching here is a bug
