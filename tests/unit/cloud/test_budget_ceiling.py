"""The key-wide budget's ceiling (DESIGN §7): the default, the manual override and the hard cap, which
reported rates are believed, Little's law on the latency EWMA, discovery, and the window gate.

Everything runs on a fake clock and an injected random source (tests/support/budget_control.py).
"""

from __future__ import annotations

import random

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
from tests.support.budget_control import FUNDED, T0, FakeClock, make, rate_limit, start

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


def answer(budget: BudgetController, tickets: list[int]) -> None:
    for ticket in tickets:
        budget.release(ticket, latency_s=0.5, outcome=Outcome.OK)


def test_a_credible_rpm_blocks_starts_until_the_oldest_answered_one_is_a_window_past_its_answer() -> None:
    clock = FakeClock()
    budget = make(clock, KeyFacts(rpm=20.0, is_free_tier=True), override=50)
    first = start(budget, 10)
    assert len(first) == 10
    clock.advance(0.5)
    answer(budget, first)  # answered at T0 + 0.5: the key counted them at the latest then
    clock.advance(29.5)
    held = start(budget, 20)
    assert len(held) == 10  # 20 starts in the window: full
    assert budget.grant() == []
    assert budget.next_wakeup() == T0 + 60.5
    clock.now = T0 + 60.4
    assert budget.grant() == []
    clock.now = T0 + 60.5
    later = budget.grant()
    assert len(later) == 10
    assert budget.next_wakeup() is None  # nothing waits
    budget.enqueue("p", Priority.BULK)
    assert budget.grant() == [] and budget.next_wakeup() is None  # the window waits on answers in flight
    answer(budget, held)
    assert budget.next_wakeup() == T0 + 60.5 + 60.0


def test_a_start_in_flight_longer_than_the_window_still_counts() -> None:
    clock = FakeClock()
    budget = make(clock, KeyFacts(rpm=60.0, is_free_tier=True), override=50, window_s=6.0)
    slow = start(budget, 6)
    assert len(slow) == 6
    clock.advance(30.0)  # five windows later, none answered: the key may count them only now
    budget.enqueue("p", Priority.BULK)
    assert budget.grant() == []
    answer(budget, slow[:1])
    assert budget.grant() == [] and budget.next_wakeup() == T0 + 36.0
    clock.now = T0 + 36.0
    assert len(budget.grant()) == 1


def test_a_compressed_window_scales_the_rate_to_its_length() -> None:
    clock = FakeClock()
    budget = make(clock, KeyFacts(rpm=120.0, is_free_tier=True), override=50, window_s=6.0)
    started = start(budget, 20)
    assert len(started) == 12  # 120/min over 6 s
    clock.advance(1.0)
    answer(budget, started)
    assert budget.next_wakeup() == T0 + 7.0
    assert budget.snapshot().window_rpm == 120.0


@pytest.mark.parametrize("seed", range(5))
def test_the_key_never_sees_more_than_its_rate_in_any_window_however_arrivals_jitter(seed: int) -> None:
    """The key stamps a request anywhere between our grant and its answer: a grant made when an old start
    leaves the window must still land a full window after that start reached the key."""
    rng = random.Random(seed)
    clock = FakeClock()
    budget = make(clock, KeyFacts(rpm=60.0, is_free_tier=True), override=16, window_s=5.0)  # 5 per 5 s
    arrivals: list[float] = []
    in_flight: dict[int, float] = {}  # ticket -> when it is answered
    for _ in range(40):
        budget.enqueue("p", Priority.BULK)
    while clock.now < T0 + 60.0:
        for ticket in budget.grant():
            latency = rng.uniform(0.05, 0.6)
            arrivals.append(clock.now + rng.random() * latency)  # the key's own stamp, jittered
            in_flight[ticket] = clock.now + latency
        for ticket in [t for t, at in in_flight.items() if at <= clock.now]:
            del in_flight[ticket]
            budget.release(ticket, latency_s=0.3, outcome=Outcome.OK)
            budget.enqueue("p", Priority.BULK)
        clock.advance(0.01)
    arrivals.sort()
    worst = max(sum(1 for u in arrivals if t - 5.0 < u <= t) for t in arrivals)
    assert worst == 5 and len(arrivals) >= 40  # the limit held, and was used


def test_a_non_credible_rpm_arms_no_window_gate() -> None:
    budget = make(FakeClock(), KeyFacts(rpm=1.0, credits_remaining=100.0), override=50)
    assert len(start(budget, 50)) == 50


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
