"""Permits under the subjects' daily credits (cluster/cloud/permits.py with cluster/auth/quota.py): a
subject over its credits is refused before it queues and while it waits, as a role at its cap is; a
release books its charges to the subject and to its tool call, whose credits are taken once; the
key-wide budget and the roles' caps still hold above it all."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cluster.auth import SubjectQuotas
from cluster.cloud.budget import BudgetController, BudgetLimits, Outcome, Priority
from cluster.cloud.permits import CallCredits, PermitDesk
from cluster.cloud.spend import Charge, SpendLedger, SpendRecord
from cluster.errors import QuotaExceeded, SpendCapReached
from cluster.roles import Role
from cluster.settings import QuotaSettings

EMBED = Role.CODE_EMBEDDING
NOON = datetime(2026, 12, 2, 12, 0, tzinfo=UTC).timestamp()


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def desk(permits: int, daily_credits: float, caps: dict[Role, float] | None = None) -> PermitDesk:
    budget = BudgetController(BudgetLimits(override=permits), clock=FakeClock(1000.0), random=lambda: 0.0)
    subjects = SubjectQuotas(QuotaSettings(daily_credits=daily_credits), FakeClock(NOON))
    return PermitDesk(budget, SpendLedger(caps or {}, clock=FakeClock(NOON)), subjects)


def done(d: PermitDesk, ticket: int, credits: float, subject: str | None, call_id: str | None = None) -> bool:
    charges = [Charge(credits=credits)]
    return d.release(
        ticket, latency_s=1.0, outcome=Outcome.OK, role=EMBED, charges=charges, subject=subject, call_id=call_id
    )


def test_a_subject_over_its_credits_is_refused_before_it_queues_and_the_others_go_on() -> None:
    d = desk(permits=4, daily_credits=1.0)
    first = d.enqueue("p", Priority.INTERACTIVE, EMBED, "alice")
    assert d.grant().granted == [first]
    assert done(d, first, 1.5, "alice") is True  # this charge took alice over her credits
    with pytest.raises(QuotaExceeded) as refused:
        d.enqueue("p", Priority.INTERACTIVE, EMBED, "alice")
    assert refused.value.subject == "alice" and refused.value.setting == "quotas.daily_credits"
    bob = d.enqueue("p", Priority.INTERACTIVE, EMBED, "bob")
    untagged = d.enqueue("p", Priority.BULK, EMBED)  # a call of no subject (a reindex): not a person's
    assert d.grant().granted == [bob, untagged]
    assert d.ledger.view().roles[EMBED].spent == pytest.approx(1.5)  # the role's spend counts it too


def test_a_waiting_subject_is_refused_when_its_own_call_in_flight_spends_its_credits() -> None:
    d = desk(permits=1, daily_credits=1.0)
    flying = d.enqueue("p", Priority.INTERACTIVE, EMBED, "alice")
    assert d.grant().granted == [flying]
    waiting = d.enqueue("p", Priority.INTERACTIVE, EMBED, "alice")
    other = d.enqueue("p", Priority.INTERACTIVE, EMBED, "bob")
    assert d.grant().granted == []  # one permit, in flight
    done(d, flying, 2.0, "alice")
    grants = d.grant()
    assert list(grants.refused) == [waiting] and isinstance(grants.refused[waiting], QuotaExceeded)
    assert grants.granted == [other]  # the permit alice's call freed goes to bob


def test_the_role_cap_still_holds_above_the_subjects_credits() -> None:
    d = desk(permits=2, daily_credits=100.0, caps={EMBED: 1.0})
    first = d.enqueue("p", Priority.INTERACTIVE, EMBED, "alice")
    d.grant()
    done(d, first, 1.0, "alice")
    with pytest.raises(SpendCapReached):  # alice is far under her credits, the role is at its cap
        d.enqueue("p", Priority.INTERACTIVE, EMBED, "alice")


def test_a_tool_calls_credits_are_booked_by_call_id_and_taken_once() -> None:
    d = desk(permits=2, daily_credits=100.0)
    a, b = (d.enqueue("p", Priority.INTERACTIVE, EMBED, "alice") for _ in range(2))
    d.grant()
    done(d, a, 0.25, "alice", "call-1")
    done(d, b, 0.5, "alice", "call-1")  # two requests of one tool call
    assert d.calls.take("call-1") == pytest.approx(0.75)
    assert d.calls.take("call-1") == 0.0  # taken: forgotten
    assert d.calls.take("call-never") == 0.0


def test_call_credits_are_bounded_the_oldest_forgotten() -> None:
    credits = CallCredits(limit=3)
    for n in range(5):
        credits.add(f"call-{n}", 1.0)
    assert [credits.take(f"call-{n}") for n in range(5)] == [0.0, 0.0, 1.0, 1.0, 1.0]


def test_old_spend_files_load_and_subjects_spend_persists_in_the_record() -> None:
    old = SpendRecord.model_validate_json('{"day": "2026-12-02", "roles": {}}')
    assert old.subjects == {}
    kept = SpendRecord(day="2026-12-02", subjects={"alice": 0.5})
    assert SpendRecord.model_validate_json(kept.model_dump_json()).subjects == {"alice": 0.5}
