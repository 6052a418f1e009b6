"""The key-wide budget's waiters (DESIGN §7): interactive before bulk, projects round-robin, cancel,
when a waiter could start, releases, the snapshot, and plain strings from across an actor boundary.
"""

from __future__ import annotations

import pytest

from cluster.cloud.budget import (
    RAMP_INTERVAL_S,
    BudgetController,
    BudgetState,
    CeilingSource,
    KeyFacts,
    Outcome,
    Priority,
)
from tests.support.budget_control import T0, FakeClock, make, rate_limit, start

# ---- fairness, cancel, wakeups ------------------------------------------------------------------


def serve_one_at_a_time(budget: BudgetController, rounds: int) -> list[int]:
    served: list[int] = []
    for _ in range(rounds):
        [ticket] = budget.grant()
        served.append(ticket)
        budget.release(ticket, latency_s=1.0, outcome=Outcome.OK)
    return served


def test_interactive_waiters_are_served_before_any_bulk_waiter() -> None:
    budget = make(FakeClock(), override=1)
    bulk_a = [budget.enqueue("A", Priority.BULK) for _ in range(100)]
    interactive_b = [budget.enqueue("B", Priority.INTERACTIVE) for _ in range(3)]
    assert serve_one_at_a_time(budget, 5) == [*interactive_b, *bulk_a[:2]]


def test_projects_are_served_round_robin_however_deep_their_queues() -> None:
    budget = make(FakeClock(), override=1)
    a = [budget.enqueue("A", Priority.BULK) for _ in range(100)]
    b = [budget.enqueue("B", Priority.BULK) for _ in range(2)]
    assert serve_one_at_a_time(budget, 6) == [a[0], b[0], a[1], b[1], a[2], a[3]]
    wide = make(FakeClock(), override=4)
    c = [wide.enqueue("C", Priority.BULK) for _ in range(1000)]
    d = [wide.enqueue("D", Priority.BULK) for _ in range(5)]
    assert wide.grant() == [c[0], d[0], c[1], d[1]]


def test_cancel_drops_a_waiter_and_is_a_no_op_once_granted() -> None:
    budget = make(FakeClock(), override=1)
    [blocker] = start(budget, project="X")
    first, second = budget.enqueue("A", Priority.BULK), budget.enqueue("A", Priority.BULK)
    interactive = budget.enqueue("B", Priority.INTERACTIVE)
    budget.cancel(first)
    budget.cancel(interactive)
    assert budget.snapshot().waiting == {"A": {"bulk": 1}}
    budget.release(blocker, latency_s=1.0, outcome=Outcome.OK)
    assert budget.grant() == [second]
    budget.cancel(second)
    budget.cancel(12345)
    assert (budget.in_flight, budget.snapshot().waiting) == (1, {})


def test_next_wakeup_says_when_a_waiter_could_start() -> None:
    clock = FakeClock()
    budget = make(clock, override=4)
    assert budget.next_wakeup() is None  # nothing waits
    tickets = start(budget, 4)
    budget.enqueue("p", Priority.BULK)
    assert budget.next_wakeup() is None  # every permit is in flight: only a release helps
    rate_limit(budget, tickets[0])  # effective 2, three in flight, cooldown 1 s
    assert budget.next_wakeup() == T0 + 2 * RAMP_INTERVAL_S  # two ramp steps make room for a fourth
    for ticket in tickets[1:]:
        budget.release(ticket, latency_s=1.0, outcome=Outcome.OK)
    assert budget.next_wakeup() == T0 + 1.0  # only the cooldown is left
    clock.now = T0 + 1.0
    assert budget.next_wakeup() == T0 + 1.0  # one can start now


def test_releasing_a_ticket_that_is_not_in_flight_is_an_error() -> None:
    budget = make(FakeClock())
    waiting = budget.enqueue("p", Priority.BULK)
    with pytest.raises(ValueError, match="not in flight"):
        budget.release(waiting, latency_s=1.0, outcome=Outcome.OK)
    [ticket] = budget.grant()
    budget.release(ticket, latency_s=1.0, outcome=Outcome.OK)
    with pytest.raises(ValueError, match="not in flight"):
        budget.release(ticket, latency_s=1.0, outcome=Outcome.OK)


def test_snapshot_reports_queues_counters_and_discovery() -> None:
    clock = FakeClock()
    budget = make(clock, jitter=0.5)
    clock.advance(5.0)
    budget.apply_key_facts(KeyFacts(is_free_tier=True))
    granted = start(budget, 6, project="A")
    start(budget, 2, project="B", priority=Priority.INTERACTIVE)
    rate_limit(budget, granted[-1])  # three started before it: a free-tier key's rate is believed
    snap = budget.snapshot()
    assert snap.waiting == {"A": {"bulk": 2}, "B": {"interactive": 2}}
    assert (snap.ceiling, snap.effective, snap.in_flight) == (4, 2, 3)
    assert (snap.requests, snap.rate_limited, snap.last_discovery_at) == (4, 1, T0 + 5.0)
    assert (snap.state, snap.cooldown_until, snap.source) == (BudgetState.BACKING_OFF, T0 + 7.0, CeilingSource.LEARNED)
    assert snap.reason == "learned 3 req/60s from the first 429 (no rate limit reported); 4 permits"


def test_plain_strings_from_across_an_actor_boundary_are_accepted() -> None:
    budget = make(FakeClock())
    ticket = budget.enqueue("p", "interactive")  # type: ignore[arg-type]
    assert budget.snapshot().waiting == {"p": {"interactive": 1}}
    assert budget.grant() == [ticket]
    budget.release(ticket, latency_s=1.0, outcome="rate-limited")  # type: ignore[arg-type]
    assert budget.snapshot().rate_limited == 1
