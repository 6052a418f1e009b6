"""Permits under the daily spend caps (cluster/cloud/permits.py): the cap is checked when a permit is
granted, not only when a call queues, so the overshoot is bounded by the calls already in flight.

The budget runs on a fake monotonic clock and the ledger on a fake wall clock: every step is exact.
"""

from __future__ import annotations

import pickle
from datetime import UTC, datetime

import pytest

from cluster.cloud.budget import BudgetController, BudgetLimits, Outcome, Priority
from cluster.cloud.permits import PermitDesk
from cluster.cloud.spend import Charge, SpendLedger, SpendState
from cluster.errors import SpendCapReached
from cluster.roles import Role

EMBED = Role.CODE_EMBEDDING
CHAT = Role.CODE_ASSISTANT
NOON = datetime(2026, 12, 2, 12, 0, tzinfo=UTC).timestamp()


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def desk(permits: int, caps: dict[Role, float]) -> PermitDesk:
    budget = BudgetController(BudgetLimits(override=permits), clock=FakeClock(1000.0), random=lambda: 0.0)
    return PermitDesk(budget, SpendLedger(caps, clock=FakeClock(NOON)))


def done(d: PermitDesk, ticket: int, role: Role, credits: float) -> bool:
    """A granted call finished having cost `credits`; True when that took its role to the cap."""
    return d.release(ticket, latency_s=1.0, outcome=Outcome.OK, role=role, charges=[Charge(credits=credits)])


@pytest.mark.parametrize(("in_flight", "queued"), [(1, 1), (3, 5), (8, 20)])
def test_once_a_role_reaches_its_cap_only_the_calls_in_flight_land_and_no_waiter_is_granted(
    in_flight: int, queued: int
) -> None:
    d = desk(permits=in_flight + 1, caps={EMBED: 1.0})
    crossing = d.enqueue("p", Priority.BULK, EMBED)
    flying = [d.enqueue("p", Priority.BULK, EMBED) for _ in range(in_flight)]
    waiting = [d.enqueue("p", Priority.BULK, EMBED) for _ in range(queued)]
    assert d.grant().granted == [crossing, *flying]  # N + 1 permits: the rest wait
    assert d.budget.snapshot().waiting == {"p": {"bulk": queued}}

    assert done(d, crossing, EMBED, 1.25)  # this charge crosses the cap, with N others in flight
    grants = d.grant()  # the permit it freed: refused to every waiter, granted to none
    assert grants.granted == [] and sorted(grants.refused) == waiting
    assert all(isinstance(e, SpendCapReached) and e.role == EMBED.value for e in grants.refused.values())
    assert d.budget.snapshot().waiting == {} and d.budget.in_flight == in_flight

    charged_after = 0
    for ticket in flying:  # the in-flight calls still land: the overshoot is what they cost
        done(d, ticket, EMBED, 0.5)
        charged_after += 1
        assert d.grant().granted == []
    spend = d.ledger.view().roles[EMBED]
    assert charged_after == in_flight and spend.calls == 1 + in_flight  # at most N charges after the crossing
    assert spend.spent == pytest.approx(1.25 + 0.5 * in_flight) and spend.refused == queued
    with pytest.raises(SpendCapReached):  # and a new call is refused before it queues
        d.enqueue("p", Priority.BULK, EMBED)
    assert d.budget.snapshot().requests == 1 + in_flight  # nothing else ever started


def test_a_waiter_is_refused_when_another_containers_charge_caps_its_role_while_it_waits() -> None:
    d = desk(permits=2, caps={EMBED: 1.0})
    first, second = (d.enqueue("a", Priority.BULK, EMBED) for _ in range(2))
    assert d.grant().granted == [first, second]
    waiter = d.enqueue("b", Priority.INTERACTIVE, EMBED)
    assert d.grant().granted == []
    assert done(d, first, EMBED, 0.4) is False  # under the cap: its permit goes to the waiter
    assert d.grant().granted == [waiter]
    late = d.enqueue("b", Priority.INTERACTIVE, EMBED)
    assert d.book(EMBED, [Charge(credits=0.7)]) is True  # another PC's container of the role, booked alone
    assert d.grant().refused.keys() == {late}  # refused at once, without waiting for a permit to free
    assert d.budget.snapshot().waiting == {}


def test_caps_are_per_role_a_capped_roles_permit_goes_to_another_roles_waiter() -> None:
    d = desk(permits=1, caps={EMBED: 1.0})
    embed = d.enqueue("p", Priority.BULK, EMBED)
    assert d.grant().granted == [embed]
    embed_waiter = d.enqueue("p", Priority.INTERACTIVE, EMBED)  # first in line ...
    chat_waiter = d.enqueue("p", Priority.BULK, CHAT)  # ... an uncapped role behind it
    untagged = d.enqueue("p", Priority.BULK)  # and a call that names no role
    done(d, embed, EMBED, 2.0)
    grants = d.grant()
    assert list(grants.refused) == [embed_waiter] and grants.granted == [chat_waiter]
    d.release(chat_waiter, latency_s=1.0, outcome=Outcome.OK, role=CHAT, charges=[Charge(credits=50.0)])
    assert d.grant().granted == [untagged]
    assert d.ledger.state(CHAT) is SpendState.UNCAPPED


def test_a_lowered_cap_refuses_the_roles_waiters_and_a_raised_one_lets_new_calls_queue() -> None:
    d = desk(permits=1, caps={EMBED: 10.0})
    running = d.enqueue("p", Priority.BULK, EMBED)
    d.grant()
    waiter = d.enqueue("p", Priority.BULK, EMBED)
    done(d, running, EMBED, 3.0)
    d.ledger.set_caps({EMBED: 2.0})  # the operator lowers the cap below today's spend
    assert list(d.grant().refused) == [waiter]
    d.ledger.set_caps({EMBED: 5.0})
    again = d.enqueue("p", Priority.BULK, EMBED)
    assert d.grant().granted == [again]


def test_a_cancelled_or_granted_waiter_is_never_refused_later() -> None:
    d = desk(permits=1, caps={EMBED: 1.0})
    running = d.enqueue("p", Priority.BULK, EMBED)
    gave_up = d.enqueue("p", Priority.BULK, EMBED)
    assert d.grant().granted == [running]
    d.cancel(gave_up)
    done(d, running, EMBED, 5.0)
    assert d.grant().refused == {} and d.ledger.view().roles[EMBED].refused == 0  # nobody left to refuse


def test_charges_are_booked_before_the_permit_is_freed_even_for_a_ticket_the_budget_does_not_know() -> None:
    d = desk(permits=1, caps={EMBED: 1.0})
    with pytest.raises(ValueError, match="not in flight"):  # the budget actor restarted since the grant
        done(d, 99, EMBED, 1.5)
    assert d.ledger.state(EMBED) is SpendState.CAPPED  # the charge still counts
    with pytest.raises(ValueError, match="without a role"):
        d.release(99, latency_s=0.0, outcome=Outcome.OK, charges=[Charge(credits=1.0)])


def test_the_refusal_a_waiter_gets_pickles_and_names_the_cap() -> None:
    d = desk(permits=1, caps={EMBED: 1.0})
    running = d.enqueue("p", Priority.BULK, EMBED)
    d.grant()
    waiter = d.enqueue("p", Priority.BULK, EMBED)
    done(d, running, EMBED, 1.0)  # exactly at the cap is at the cap
    refusal = pickle.loads(pickle.dumps(d.grant().refused[waiter]))
    assert (refusal.role, refusal.cap, refusal.spent) == (EMBED.value, 1.0, 1.0)
    assert refusal.resets_at == "2026-12-03T00:00:00+00:00"
