"""The budget's vocabulary: its defaults, its configuration, what discovery reads and what it reports."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, model_validator

from cluster.settings import BudgetSettings
from cluster.types import Strict

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
    learn_rate: bool = Field(default=True, description="Learn the key's rate at a 429 when no credible rpm is known.")
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

    @classmethod
    def from_settings(cls, budget: BudgetSettings) -> BudgetLimits:
        """The limits the `budget` settings set (the manual ceiling, the rate window); the rest default."""
        return cls(override=budget.override, window_s=budget.window_s)

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
