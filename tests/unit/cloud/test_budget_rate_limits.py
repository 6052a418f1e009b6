"""The key-wide budget's answer to 429s (DESIGN §7): AIMD halving, cooldowns with jitter and
Retry-After, the ramp back to steady, and the rate learned from the first 429 and probed above.

Everything runs on a fake clock and an injected random source, so every cooldown is exact.
"""

from __future__ import annotations

import pytest

from cluster.cloud.budget import (
    INITIAL_LATENCY_S,
    MAX_PERMITS,
    RAMP_INTERVAL_S,
    BudgetState,
    CeilingSource,
    KeyFacts,
    Outcome,
    Priority,
)
from tests.support.budget_control import FUNDED, T0, FakeClock, make, rate_limit, run_ok, start

# ---- AIMD ----------------------------------------------------------------------------------------


def test_429_halves_permits_and_a_clean_interval_adds_one_back() -> None:
    clock = FakeClock()
    budget = make(clock, override=8)
    [ticket] = start(budget)
    rate_limit(budget, ticket)
    assert budget.effective == 4
    clock.advance(15.0)
    assert budget.effective == 5


def test_halving_floors_at_one_permit() -> None:
    clock = FakeClock()
    budget = make(clock, override=3)
    [ticket] = start(budget)
    rate_limit(budget, ticket)
    assert budget.effective == 1
    clock.advance(1.0)  # the 2 s base with zero jitter: now + 1 s
    [ticket] = start(budget)
    rate_limit(budget, ticket)
    assert budget.effective == 1


def test_429s_of_requests_already_in_flight_are_one_congestion_event() -> None:
    clock = FakeClock()
    budget = make(clock, override=8)
    tickets = start(budget, 8)
    rate_limit(budget, tickets[0])
    rate_limit(budget, tickets[1])  # granted before the first 429 was known
    assert budget.effective == 4
    assert budget.snapshot().rate_limited == 2
    for ticket in tickets[2:]:
        budget.release(ticket, latency_s=1.0, outcome=Outcome.OK)
    clock.advance(1.0)
    [fresh] = start(budget)
    rate_limit(budget, fresh)  # a request started after the halving: new evidence
    assert budget.effective == 2


def test_cooldown_without_retry_after_is_full_jitter_around_a_base_doubling_to_60s() -> None:
    clock = FakeClock()
    budget = make(clock, override=MAX_PERMITS, jitter=0.5)  # cooldown = base/2 + 0.5×base = base
    lengths = []
    for _ in range(7):
        [ticket] = start(budget)
        rate_limit(budget, ticket)
        snap = budget.snapshot()
        assert snap.state is BudgetState.BACKING_OFF and snap.cooldown_until is not None
        assert start(budget) == []
        assert budget.next_wakeup() == snap.cooldown_until
        lengths.append(snap.cooldown_until - clock.now)
        clock.now = snap.cooldown_until
        [queued] = budget.grant()
        budget.release(queued, latency_s=1.0, outcome=Outcome.OK)
    assert lengths == [2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]


@pytest.mark.parametrize(("jitter", "until"), [(0.0, T0 + 10.0), (0.5, T0 + 12.5), (0.99, T0 + 14.95)])
def test_retry_after_is_honoured_as_a_minimum_with_half_of_it_as_jitter(jitter: float, until: float) -> None:
    clock = FakeClock()
    budget = make(clock, override=8, jitter=jitter)
    [ticket] = start(budget)
    rate_limit(budget, ticket, retry_after_s=10.0)
    cooldown_until = budget.snapshot().cooldown_until
    assert cooldown_until == pytest.approx(until)
    clock.now = T0 + 9.99
    assert start(budget) == []
    clock.now = cooldown_until
    assert len(budget.grant()) == 1


def test_states_move_from_backing_off_through_ramping_to_steady_and_the_backoff_resets() -> None:
    clock = FakeClock()
    budget = make(clock, override=8, jitter=0.5)
    [ticket] = start(budget)
    rate_limit(budget, ticket)
    assert (budget.snapshot().state, budget.effective) == (BudgetState.BACKING_OFF, 4)
    clock.advance(2.0)
    assert (budget.snapshot().state, budget.effective) == (BudgetState.RAMPING, 4)
    clock.advance(13.0)
    assert budget.effective == 5
    clock.advance(30.0)
    assert budget.effective == 7
    [ticket] = start(budget)  # a 429 before the ceiling: the backoff keeps doubling
    rate_limit(budget, ticket)
    assert budget.snapshot().cooldown_until == clock.now + 4.0
    assert budget.effective == 3
    clock.advance(5 * RAMP_INTERVAL_S)
    snap = budget.snapshot()
    assert (snap.state, snap.effective, snap.reason) == (BudgetState.STEADY, 8, "manual override: 8 permits")
    [ticket] = start(budget)  # at the ceiling again: the backoff is back to 2 s
    rate_limit(budget, ticket)
    assert budget.snapshot().cooldown_until == clock.now + 2.0


def test_an_error_outcome_neither_halves_nor_moves_the_latency_ewma() -> None:
    budget = make(FakeClock(), override=8)
    [ticket] = start(budget)
    budget.release(ticket, latency_s=30.0, outcome=Outcome.ERROR)
    snap = budget.snapshot()
    assert (snap.effective, snap.state, snap.cooldown_until) == (8, BudgetState.STEADY, None)
    assert (snap.latency_ewma_s, snap.rate_limited, snap.in_flight) == (INITIAL_LATENCY_S, 0, 0)


# ---- the learned rate ------------------------------------------------------------------------------


def test_the_first_429_arms_the_window_at_the_rate_the_key_allowed() -> None:
    clock = FakeClock()
    budget = make(clock, FUNDED)  # 16 permits
    run_ok(budget, 100)
    [ticket] = start(budget)
    rate_limit(budget, ticket)
    snap = budget.snapshot()
    assert (snap.source, snap.window_rpm, snap.effective) == (CeilingSource.LEARNED, 100.0, 8)
    assert snap.reason == "learned 100 req/60s from the first 429 (no rate limit reported); 16 permits"
    budget.enqueue("p", Priority.BULK)
    assert budget.next_wakeup() == T0 + 60.0  # 101 starts in the window: the 101st was over the rate
    clock.now = T0 + 59.9
    assert budget.grant() == []
    clock.now = T0 + 60.0
    assert len(budget.grant()) == 1


def test_a_clean_window_with_the_learned_gate_full_probes_five_percent_higher() -> None:
    clock = FakeClock()
    budget = make(clock, FUNDED)
    run_ok(budget, 100)
    [ticket] = start(budget)
    rate_limit(budget, ticket)
    assert budget.snapshot().window_rpm == 100.0
    clock.advance(60.0)
    run_ok(budget, 100)  # the window fills at the learned rate, a full window after the 429
    snap = budget.snapshot()
    assert snap.window_rpm == 105.0
    assert snap.reason.startswith("probing 105 req/60s after a clean saturated window")


def test_a_clean_window_that_never_fills_the_learned_gate_does_not_probe() -> None:
    clock = FakeClock()
    budget = make(clock, FUNDED)
    run_ok(budget, 100)
    [ticket] = start(budget)
    rate_limit(budget, ticket)
    clock.advance(60.0)
    run_ok(budget, 50)
    clock.advance(120.0)
    assert budget.snapshot().window_rpm == 100.0


def test_a_refused_probe_steps_back_without_halving_and_waits_longer_before_the_next() -> None:
    clock = FakeClock()
    budget = make(clock, FUNDED)
    run_ok(budget, 100)
    [ticket] = start(budget)
    rate_limit(budget, ticket)
    clock.advance(60.0)
    run_ok(budget, 100)
    assert budget.snapshot().window_rpm == 105.0
    effective = budget.effective
    waiters = [budget.enqueue("p", Priority.BULK) for _ in range(6)]
    probe = budget.grant()
    assert probe == waiters[:5]  # the probe's extra room
    rate_limit(budget, probe[0])  # the key refuses the 101st
    rate_limit(budget, probe[1])
    snap = budget.snapshot()
    assert (snap.window_rpm, snap.effective, snap.cooldown_until) == (100.0, effective, None)
    assert snap.reason.startswith("learned 100 req/60s at a 429 (a probe of 105 was refused)")
    for ticket in probe[2:]:
        budget.release(ticket, latency_s=1.0, outcome=Outcome.OK)
    budget.cancel(waiters[5])
    clock.advance(60.0)  # T0 + 120
    run_ok(budget, 100)
    assert budget.snapshot().window_rpm == 100.0  # one clean window is no longer enough
    clock.advance(60.0)  # T0 + 180: two windows since the refusal
    assert budget.snapshot().window_rpm == 105.0


def test_a_later_429_relearns_the_current_count_and_halves() -> None:
    clock = FakeClock()
    budget = make(clock, FUNDED)
    run_ok(budget, 100)
    [ticket] = start(budget)
    rate_limit(budget, ticket)
    clock.advance(60.0)
    run_ok(budget, 80)
    before = budget.effective
    [ticket] = start(budget)
    rate_limit(budget, ticket)
    snap = budget.snapshot()
    assert (snap.window_rpm, snap.effective) == (80.0, before // 2)
    assert snap.reason.startswith("learned 80 req/60s at a later 429")


def test_a_credible_rpm_is_never_overwritten_by_learning() -> None:
    budget = make(FakeClock(), KeyFacts(rpm=600.0, is_free_tier=True))
    run_ok(budget, 10)
    [ticket] = start(budget)
    rate_limit(budget, ticket)
    snap = budget.snapshot()
    assert (snap.source, snap.window_rpm) == (CeilingSource.DISCOVERED, 600.0)


def test_learning_can_be_switched_off() -> None:
    budget = make(FakeClock(), FUNDED, learn_rate=False)
    run_ok(budget, 100)
    [ticket] = start(budget)
    rate_limit(budget, ticket)
    snap = budget.snapshot()
    assert (snap.source, snap.window_rpm, snap.effective) == (CeilingSource.CREDITS, None, 8)


@pytest.mark.parametrize("facts", [FUNDED, None])
def test_a_429_after_too_few_requests_to_be_the_keys_limit_arms_no_gate(facts: KeyFacts | None) -> None:
    budget = make(FakeClock(), facts)
    run_ok(budget, 30)  # 31 req/min would be implausible for a paid key, and nothing says this one is unpaid
    [ticket] = start(budget)
    rate_limit(budget, ticket)
    snap = budget.snapshot()
    assert snap.window_rpm is None and snap.effective == (8 if facts else 2)  # AIMD alone answers it
    assert snap.source is (CeilingSource.CREDITS if facts else CeilingSource.FALLBACK)


def test_a_known_unfunded_key_learns_even_a_low_rate() -> None:
    budget = make(FakeClock(), KeyFacts(is_free_tier=True))
    run_ok(budget, 20)
    [ticket] = start(budget)
    rate_limit(budget, ticket)
    assert budget.snapshot().window_rpm == 20.0
