"""Cloud spend per role per UTC day, against the operator's daily caps (DESIGN §7).

Every OpenRouter response carries `usage.cost`, in credits; that is what a call costs. A response
without it is charged from its tokens at the model's listed price and marked as an estimate; one
whose price is unknown (the lookup failed, or the catalogue does not list the model) is charged
from its tokens at `UNPRICED_PRICE`, marked as an estimate and counted as unpriced: an unknown price
never makes a call free, so a cap holds. The ledger is pure: the clock is injected, the day is the
UTC date of `clock()`, and its state is a plain model the budget actor writes to disk, so spend
survives a restart and starts again at 00:00 UTC.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from pydantic import Field

from cluster.errors import SpendCapReached
from cluster.roles import Role
from cluster.types import Strict, utc_day

__all__ = [
    "ESTIMATE_BASIS",
    "UNPRICED_PRICE",
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


# What a call whose price is unknown is charged per token: 150 credits per 1M prompt tokens and 600
# per 1M completion tokens, o1-pro's listed price, the top of OpenRouter's catalogue when this was
# written (a frontier chat model lists 1-15 / 4-75, an embedding model 0.01-0.15).
# Why the top of the whole catalogue and not the top price of the route's kind of model: when the
# lookup failed there is no catalogue to read, and a model the catalogue does not list can be any
# kind at any price. An unpriced call is then charged at least what any listed model would charge
# for its tokens, so the cap holds whatever the route costs; an honest cheap model is overcharged
# (an embedding route 10^3-10^4 times over), which errs towards the cap, and shows as `unpriced_calls` and
# `unpriced_credits` with `ESTIMATE_BASIS` in GET /admin/budget.
UNPRICED_PRICE = ModelPrice(prompt=150e-6, completion=600e-6)

ESTIMATE_BASIS = (
    "spent is usage.cost as each response reports it; a response without one is charged its tokens x "
    "the model's listed price (estimated); a call whose price is unknown (the price lookup failed or the "
    f"catalogue lists no price for the model) is charged its tokens x {UNPRICED_PRICE.prompt * 1e6:g} / "
    f"{UNPRICED_PRICE.completion * 1e6:g} credits per 1M prompt / completion tokens, the highest listed "
    "price (unpriced_calls, unpriced_credits; part of estimated)"
)


class Charge(Strict):
    """What one call is charged: reported by upstream, or estimated from tokens at the listed price,
    or (unpriced) at `UNPRICED_PRICE`."""

    credits: float = Field(ge=0)
    estimated: bool = False
    unpriced: bool = False


def charge_for(usage: CallUsage, price: ModelPrice | None) -> Charge:
    """The response's own cost when it has one; else tokens × the listed price, marked as an estimate;
    with no known price, tokens × `UNPRICED_PRICE`, marked as an estimate and as unpriced (never 0)."""
    if usage.cost is not None:
        return Charge(credits=usage.cost)
    listed = price if price is not None else UNPRICED_PRICE
    credits = usage.prompt_tokens * listed.prompt + usage.completion_tokens * listed.completion
    return Charge(credits=credits, estimated=True, unpriced=price is None)


class SpendState(StrEnum):
    UNCAPPED = "uncapped"  # no cap for the role
    OK = "ok"  # under its cap
    CAPPED = "capped"  # at or over its cap: no more cloud calls for the role today


class RoleSpend(Strict):
    """One role's spend today."""

    spent: float = Field(default=0.0, ge=0, description="Credits charged today, estimates included.")
    estimated: float = Field(default=0.0, ge=0, description="The part of `spent` estimated from tokens × price.")
    calls: int = Field(default=0, ge=0)
    unpriced_calls: int = Field(
        default=0, ge=0, description="Calls with no cost and no known price, charged at UNPRICED_PRICE."
    )
    unpriced_credits: float = Field(
        default=0.0, ge=0, description="The part of `estimated` charged at UNPRICED_PRICE (no known price)."
    )
    refused: int = Field(default=0, ge=0, description="Calls refused today because the role was at its cap.")


class SpendRecord(Strict):
    """What the budget actor persists: today's spend per role and per subject (caps live in the config store)."""

    day: str
    roles: dict[Role, RoleSpend] = Field(default_factory=dict)
    subjects: dict[str, float] = Field(
        default_factory=dict, description="Credits each OAuth subject's calls spent that day (quotas.daily_credits)."
    )


class RoleSpendView(RoleSpend):
    cap: float | None = None
    state: SpendState = SpendState.UNCAPPED


class SpendView(Strict):
    """`GET /admin/budget` → spend: today's spend against the caps, and when the day turns."""

    day: str
    resets_at: str
    roles: dict[Role, RoleSpendView]
    basis: str = Field(default=ESTIMATE_BASIS, description="How a call is charged, estimates included.")


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
        refusal = self.refusal(role)
        if refusal is not None:
            raise refusal

    def refusal(self, role: Role) -> SpendCapReached | None:
        """The SpendCapReached a call of `role` gets now (the refusal is counted), or None under its cap."""
        if self.state(role) is not SpendState.CAPPED:
            return None
        spend = self._add(role, refused=1)
        return SpendCapReached(role.value, self._caps[role], spend.spent, self._resets_at())

    def charge(self, role: Role, charge: Charge) -> SpendState:
        """Add one call's charge to today's spend; returns the role's state after it."""
        self._add(
            role,
            spent=charge.credits,
            calls=1,
            estimated=charge.credits if charge.estimated else 0.0,
            unpriced_calls=int(charge.unpriced),
            unpriced_credits=charge.credits if charge.unpriced else 0.0,
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
