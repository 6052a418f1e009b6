"""Cloud spend per role per UTC day, against the operator's daily caps (DESIGN §7).

Every OpenRouter response carries `usage.cost`, in credits; that is what a call costs. A response
without it is charged from its tokens at the model's listed price and marked as an estimate; one
whose model lists no price is counted as unpriced (0 credits, never hidden). The ledger is pure:
the clock is injected, the day is the UTC date of `clock()`, and its state is a plain model the
budget actor writes to disk, so spend survives a restart and starts again at 00:00 UTC.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from pydantic import Field

from cluster.errors import SpendCapReached
from cluster.roles import Role
from cluster.types import Strict

__all__ = [
    "CallUsage",
    "Charge",
    "ModelPrice",
    "RoleSpend",
    "SpendLedger",
    "SpendRecord",
    "SpendState",
    "SpendView",
    "charge_for",
    "utc_day",
]


class CallUsage(Strict):
    """The `usage` of one upstream response, as the client read it."""

    model: str
    cost: float | None = Field(
        default=None, ge=0, description="usage.cost in credits; None when the response had none."
    )
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)


class ModelPrice(Strict):
    """A model's listed price per token, in credits (GET /models → pricing.prompt / pricing.completion)."""

    prompt: float = Field(default=0.0, ge=0)
    completion: float = Field(default=0.0, ge=0)


class Charge(Strict):
    """What one call is charged: reported by upstream, estimated from tokens, or unpriced (0)."""

    credits: float = Field(ge=0)
    estimated: bool = False
    unpriced: bool = False


def charge_for(usage: CallUsage, price: ModelPrice | None) -> Charge:
    """The response's own cost when it has one; else tokens × the listed price, marked as an estimate."""
    if usage.cost is not None:
        return Charge(credits=usage.cost)
    if price is None:
        return Charge(credits=0.0, estimated=True, unpriced=True)
    credits = usage.prompt_tokens * price.prompt + usage.completion_tokens * price.completion
    return Charge(credits=credits, estimated=True)


def utc_day(now: float) -> str:
    """The UTC date of a Unix time, as the ledger keys its days ('2026-12-02')."""
    return datetime.fromtimestamp(now, UTC).date().isoformat()


class SpendState(StrEnum):
    UNCAPPED = "uncapped"  # no cap for the role
    OK = "ok"  # under its cap
    CAPPED = "capped"  # at or over its cap: no more cloud calls for the role today


class RoleSpend(Strict):
    """One role's spend today."""

    spent: float = Field(default=0.0, ge=0, description="Credits charged today, estimates included.")
    estimated: float = Field(default=0.0, ge=0, description="The part of `spent` estimated from tokens × price.")
    calls: int = Field(default=0, ge=0)
    unpriced_calls: int = Field(default=0, ge=0, description="Calls with no cost and no listed price (0 credits).")
    refused: int = Field(default=0, ge=0, description="Calls refused today because the role was at its cap.")


class SpendRecord(Strict):
    """What the budget actor persists: today's spend per role (caps live in the config store)."""

    day: str
    roles: dict[Role, RoleSpend] = Field(default_factory=dict)


class RoleSpendView(RoleSpend):
    cap: float | None = None
    state: SpendState = SpendState.UNCAPPED


class SpendView(Strict):
    """`GET /admin/budget` → spend: today's spend against the caps, and when the day turns."""

    day: str
    resets_at: str
    roles: dict[Role, RoleSpendView]


class SpendLedger:
    """Today's spend per role against per-role daily caps (credits). Not thread-safe: one owner."""

    def __init__(
        self, caps: Mapping[Role, float], *, clock: Callable[[], float], record: SpendRecord | None = None
    ) -> None:
        self._clock = clock
        self._caps: dict[Role, float] = dict(caps)
        today = utc_day(clock())
        self._record = record if record is not None and record.day == today else SpendRecord(day=today)

    @property
    def record(self) -> SpendRecord:
        """Today's spend (rolled over first), for the caller to persist."""
        self._roll()
        return self._record

    def set_caps(self, caps: Mapping[Role, float]) -> None:
        self._caps = dict(caps)

    def state(self, role: Role) -> SpendState:
        cap = self._caps.get(role)
        if cap is None:
            return SpendState.UNCAPPED
        return SpendState.CAPPED if self.record.roles.get(role, RoleSpend()).spent >= cap else SpendState.OK

    def check(self, role: Role) -> None:
        """Raise SpendCapReached when `role` is at its cap (the refusal is counted)."""
        if self.state(role) is not SpendState.CAPPED:
            return
        spend = self._add(role, refused=1)
        raise SpendCapReached(role.value, self._caps[role], spend.spent, self._resets_at())

    def charge(self, role: Role, charge: Charge) -> SpendState:
        """Add one call's charge to today's spend; returns the role's state after it."""
        self._add(
            role,
            spent=charge.credits,
            calls=1,
            estimated=charge.credits if charge.estimated else 0.0,
            unpriced_calls=int(charge.unpriced),
        )
        return self.state(role)

    def view(self) -> SpendView:
        record = self.record
        roles = {
            role: RoleSpendView(
                **record.roles.get(role, RoleSpend()).model_dump(), cap=self._caps.get(role), state=self.state(role)
            )
            for role in sorted({*record.roles, *self._caps}, key=lambda r: r.value)
        }
        return SpendView(day=record.day, resets_at=self._resets_at(), roles=roles)

    def _add(self, role: Role, **more: float) -> RoleSpend:
        """Today's record with `more` added to the role's counters (the models are immutable)."""
        record = self.record
        spend = record.roles.get(role, RoleSpend())
        spend = spend.model_copy(update={field: getattr(spend, field) + value for field, value in more.items()})
        self._record = record.model_copy(update={"roles": {**record.roles, role: spend}})
        return spend

    def _roll(self) -> None:
        today = utc_day(self._clock())
        if today != self._record.day:
            self._record = SpendRecord(day=today)

    def _resets_at(self) -> str:
        day = datetime.fromisoformat(self._record.day).replace(tzinfo=UTC)
        return (day + timedelta(days=1)).isoformat()
