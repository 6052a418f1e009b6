"""The key-wide budget (DESIGN §7): ceiling order, window gate, learned rate, AIMD, fairness.

Everything runs on a fake clock and an injected random source, so every cooldown is exact.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from cluster.cloud.budget import (
    CREDIT_PERMITS,
    DEFAULT_PERMITS,
    INITIAL_LATENCY_S,
    LATENCY_FLOOR_S,
    MAX_PERMITS,
    RAMP_INTERVAL_S,
    BudgetController,
    BudgetLimits,
    BudgetState,
    CeilingSource,
    KeyFacts,
    Outcome,
    Priority,
)

T0 = 1000.0
FUNDED = KeyFacts(credits_remaining=100.0)  # the modern case: no rate limit reported


class FakeClock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def make(clock: FakeClock, facts: KeyFacts | None = None, *, jitter: float = 0.0, **limits: object) -> BudgetController:
    budget = BudgetController(BudgetLimits(**limits), clock=clock, random=lambda: jitter)  # type: ignore[arg-type]
    if facts is not None:
        budget.apply_key_facts(facts)
    return budget


def start(budget: BudgetController, n: int = 1, project: str = "p", priority: Priority = Priority.BULK) -> list[int]:
    """Queue n waiters and grant what the budget admits now."""
    for _ in range(n):
        budget.enqueue(project, priority)
    return budget.grant()


def run_ok(budget: BudgetController, n: int) -> None:
    """n requests that all succeed at once (no time passes), in as many rounds as the permits need."""
    tickets = [budget.enqueue("p", Priority.BULK) for _ in range(n)]
    done: list[int] = []
    while len(done) < n:
        granted = budget.grant()
        assert granted, "run_ok expects the budget to admit everyone without time passing"
        for ticket in granted:
            budget.release(ticket, latency_s=1.0, outcome=Outcome.OK)
        done += granted
    assert done == tickets


def rate_limit(budget: BudgetController, ticket: int, retry_after_s: float | None = None) -> None:
    budget.release(ticket, latency_s=0.2, outcome=Outcome.RATE_LIMITED, retry_after_s=retry_after_s)


# ---- defaults, override, cap ------------------------------------------------------------------


def test_nothing_known_gives_the_timid_default_of_four_permits_and_no_window_gate() -> None:
    budget = make(FakeClock())
    snap = budget.snapshot()
    assert (snap.ceiling, snap.effective, snap.source, snap.state) == (
        DEFAULT_PERMITS,
        DEFAULT_PERMITS,
        CeilingSource.FALLBACK,
        BudgetState.STEADY,
    )
    assert snap.window_rpm is None and snap.last_discovery_at is None
    assert snap.latency_ewma_s == INITIAL_LATENCY_S
    assert len(start(budget, 10)) == 4


def test_429_halves_permits_and_a_clean_interval_adds_one_back() -> None:
    clock = FakeClock()
    budget = make(clock, override=8)
    [ticket] = start(budget)
    rate_limit(budget, ticket)
    assert budget.effective == 4
    clock.advance(15.0)
    assert budget.effective == 5


def test_a_manual_override_wins_over_everything_discovered() -> None:
    clock = FakeClock()
    budget = make(clock, KeyFacts(rpm=6000.0, is_free_tier=True), override=8)
    snap = budget.snapshot()
    assert (snap.ceiling, snap.effective, snap.source) == (8, 8, CeilingSource.MANUAL)
    assert snap.reason == "manual override: 8 permits"
    assert snap.window_rpm == 6000.0  # the key's own rate limit is still a fact


@pytest.mark.parametrize("bad", [0, -1, MAX_PERMITS + 1])
def test_an_override_outside_1_to_256_is_refused_naming_the_field(bad: int) -> None:
    with pytest.raises(ValidationError, match="override"):
        BudgetLimits(override=bad)


def test_limits_refuse_unknown_fields_and_disordered_backoff_bounds() -> None:
    with pytest.raises(ValidationError, match="ceiling"):
        BudgetLimits(ceiling=8)  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="base_backoff_s"):
        BudgetLimits(base_backoff_s=90.0, max_backoff_s=60.0)
    with pytest.raises(ValidationError, match="rpm"):
        KeyFacts(rpm=0.0)


def test_the_ceiling_never_exceeds_the_hard_cap_of_256() -> None:
    budget = make(FakeClock(), KeyFacts(rpm=1_000_000.0, is_free_tier=True))
    assert budget.ceiling == MAX_PERMITS
    assert make(FakeClock(), KeyFacts(rpm=1_000_000.0, credits_remaining=5.0)).ceiling == MAX_PERMITS


# ---- credible rpm and Little's law -------------------------------------------------------------


def test_a_funded_account_reporting_one_request_a_minute_is_sized_from_credits_with_no_window_gate() -> None:
    budget = make(FakeClock(), KeyFacts(rpm=1.0, credits_remaining=100.0), override=None)
    snap = budget.snapshot()
    assert (snap.ceiling, snap.source, snap.window_rpm) == (CREDIT_PERMITS, CeilingSource.CREDITS, None)
    assert "reported 1 req/min not believed" in snap.reason


def test_a_funded_account_with_no_rate_limit_reported_gets_the_credit_permits() -> None:
    snap = make(FakeClock(), FUNDED).snapshot()
    assert (snap.ceiling, snap.source, snap.window_rpm) == (CREDIT_PERMITS, CeilingSource.CREDITS, None)
    assert snap.reason == "funded account, no rate limit reported: 16 permits, no window gate"


@pytest.mark.parametrize("facts", [KeyFacts(), KeyFacts(credits_remaining=0.0), KeyFacts(is_free_tier=True)])
def test_an_unfunded_key_with_no_rate_limit_reported_falls_back_to_four(facts: KeyFacts) -> None:
    snap = make(FakeClock(), facts).snapshot()
    assert (snap.ceiling, snap.source, snap.window_rpm) == (DEFAULT_PERMITS, CeilingSource.FALLBACK, None)


@pytest.mark.parametrize(
    "facts", [KeyFacts(rpm=20.0, is_free_tier=True), KeyFacts(rpm=20.0, credits_remaining=0.0), KeyFacts(rpm=20.0)]
)
def test_a_free_tier_or_unfunded_keys_low_rpm_is_believed_and_arms_the_window(facts: KeyFacts) -> None:
    snap = make(FakeClock(), facts).snapshot()
    assert (snap.source, snap.window_rpm) == (CeilingSource.DISCOVERED, 20.0)
    assert snap.ceiling == 1  # 20/60 × 2 s = 0.67 → 1
    assert snap.reason.startswith("key reports 20 req/min; Little's law at 2.00 s mean latency gives 1 permits")


def test_a_funded_account_with_a_credible_rpm_takes_at_least_the_credit_permits() -> None:
    low = make(FakeClock(), KeyFacts(rpm=120.0, credits_remaining=10.0)).snapshot()
    assert (low.ceiling, low.source, low.window_rpm) == (CREDIT_PERMITS, CeilingSource.CREDITS, 120.0)
    high = make(FakeClock(), KeyFacts(rpm=6000.0, credits_remaining=10.0)).snapshot()
    assert (high.ceiling, high.source) == (200, CeilingSource.DISCOVERED)  # 100/s × 2 s


def test_littles_law_ceiling_moves_with_the_latency_ewma_and_clamps_effective_permits() -> None:
    clock = FakeClock()
    budget = make(clock, KeyFacts(rpm=600.0, is_free_tier=True))
    assert budget.ceiling == 20  # 10/s × 2.0 s
    clock.advance(20 * RAMP_INTERVAL_S)
    assert budget.effective == 20

    def one_request(latency_s: float) -> None:
        [ticket] = start(budget)
        budget.release(ticket, latency_s=latency_s, outcome=Outcome.OK)

    one_request(1.0)  # ewma 2.0×0.8 + 1.0×0.2 = 1.8
    assert (budget.ceiling, budget.effective) == (18, 18)
    one_request(1.0)  # 1.64
    assert (budget.ceiling, budget.effective) == (16, 16)
    one_request(6.0)  # 1.64×0.8 + 6×0.2 = 2.512 → 25.12
    assert budget.snapshot().latency_ewma_s == pytest.approx(2.512)
    assert (budget.ceiling, budget.effective, budget.snapshot().state) == (25, 16, BudgetState.RAMPING)
    clock.advance(RAMP_INTERVAL_S)
    assert budget.effective == 17


def test_the_latency_ewma_never_drops_below_its_floor_and_the_ceiling_never_below_one() -> None:
    budget = make(FakeClock(), KeyFacts(rpm=60.0, is_free_tier=True))
    for _ in range(40):
        [ticket] = start(budget)
        budget.release(ticket, latency_s=0.0, outcome=Outcome.OK)
    assert budget.snapshot().latency_ewma_s == LATENCY_FLOOR_S
    assert budget.ceiling == 1  # 1/s × 0.05 s rounds to 0, clamped to 1


def test_a_lower_ceiling_clamps_effective_and_a_higher_one_is_climbed_by_the_ramp() -> None:
    clock = FakeClock()
    budget = make(clock)
    budget.apply_key_facts(FUNDED)  # before any 429: straight to the discovered ceiling
    snap = budget.snapshot()
    assert (snap.ceiling, snap.effective, snap.state, snap.last_discovery_at) == (16, 16, BudgetState.STEADY, T0)
    [ticket] = start(budget)
    rate_limit(budget, ticket)  # after a 429 a raised ceiling is climbed, one permit per clean 15 s
    assert budget.effective == 8
    budget.apply_key_facts(KeyFacts(credits_remaining=0.0))
    assert (budget.ceiling, budget.effective) == (4, 4)
    budget.apply_key_facts(FUNDED)
    clock.now = T0 + RAMP_INTERVAL_S - 0.1
    assert budget.effective == 4
    clock.now = T0 + RAMP_INTERVAL_S
    assert budget.effective == 5 and budget.snapshot().state is BudgetState.RAMPING


# ---- the window gate ------------------------------------------------------------------------------


def test_a_credible_rpm_blocks_starts_until_the_oldest_leaves_the_window() -> None:
    clock = FakeClock()
    budget = make(clock, KeyFacts(rpm=20.0, is_free_tier=True), override=50)
    assert len(start(budget, 10)) == 10
    clock.advance(30.0)
    assert len(start(budget, 20)) == 10  # 20 starts in the window: full
    assert budget.grant() == []
    assert budget.next_wakeup() == T0 + 60.0
    clock.now = T0 + 59.9
    assert budget.grant() == []
    clock.now = T0 + 60.0
    assert len(budget.grant()) == 10
    assert budget.next_wakeup() is None  # nothing waits


def test_a_compressed_window_scales_the_rate_to_its_length() -> None:
    clock = FakeClock()
    budget = make(clock, KeyFacts(rpm=120.0, is_free_tier=True), override=50, window_s=6.0)
    assert len(start(budget, 20)) == 12  # 120/min over 6 s
    assert budget.next_wakeup() == T0 + 6.0
    assert budget.snapshot().window_rpm == 120.0


def test_a_non_credible_rpm_arms_no_window_gate() -> None:
    budget = make(FakeClock(), KeyFacts(rpm=1.0, credits_remaining=100.0), override=50)
    assert len(start(budget, 50)) == 50


# ---- AIMD ----------------------------------------------------------------------------------------


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


def test_discovery_before_any_429_jumps_to_the_new_ceiling_instead_of_climbing() -> None:
    clock = FakeClock()
    budget = BudgetController(BudgetLimits(), clock=clock, random=lambda: 0.5)
    assert budget.effective == DEFAULT_PERMITS
    budget.apply_key_facts(KeyFacts(rpm=None, credits_remaining=100.0))
    assert budget.ceiling == CREDIT_PERMITS and budget.effective == CREDIT_PERMITS


def test_an_operator_override_sets_the_ceiling_and_clearing_it_restores_discovery() -> None:
    budget = BudgetController(BudgetLimits(), clock=FakeClock(), random=lambda: 0.5)
    budget.set_override(32)
    assert budget.ceiling == 32 and budget.snapshot().source is CeilingSource.MANUAL
    budget.set_override(None)
    assert budget.ceiling == DEFAULT_PERMITS
    with pytest.raises(ValueError, match="override"):
        budget.set_override(300)
    assert budget.ceiling == DEFAULT_PERMITS
