"""The budget's parts one by one (DESIGN §7): fair queue, AIMD, start window, rate learning, ceiling rules.

Each part takes the time as an argument, so a test states every instant; jitter comes from a seeded
`random.Random`, replayed with the same seed to know each cooldown exactly.
"""

from __future__ import annotations

import random

import pytest

from cluster.cloud.budget.aimd import Aimd
from cluster.cloud.budget.ceiling import credible_rpm, explain, gate_limit, permits_ceiling, window_rpm
from cluster.cloud.budget.learning import MAX_PROBE_WINDOWS, RateLearner
from cluster.cloud.budget.model import (
    CREDIT_PERMITS,
    DEFAULT_PERMITS,
    MAX_PERMITS,
    BudgetLimits,
    BudgetState,
    CeilingSource,
    KeyFacts,
    Priority,
)
from cluster.cloud.budget.queue import FairQueue
from cluster.cloud.budget.window import StartWindow

T0 = 1000.0
SEED = 7
FUNDED = KeyFacts(credits_remaining=100.0)
UNFUNDED = KeyFacts(is_free_tier=True)


# ---- FairQueue ----------------------------------------------------------------------------------


def test_interactive_waiters_go_before_bulk_ones_that_came_first() -> None:
    queue = FairQueue()
    bulk = queue.enqueue("a", Priority.BULK)
    interactive = queue.enqueue("a", Priority.INTERACTIVE)
    assert [queue.pop_next(), queue.pop_next()] == [interactive, bulk]
    assert not queue


def test_projects_take_turns_and_each_project_keeps_its_arrival_order() -> None:
    queue = FairQueue()
    a1, a2, a3 = (queue.enqueue("a", Priority.BULK) for _ in range(3))
    b1 = queue.enqueue("b", Priority.BULK)
    c1 = queue.enqueue("c", Priority.BULK)
    assert [queue.pop_next() for _ in range(5)] == [a1, b1, c1, a2, a3]


def test_a_cancelled_ticket_leaves_the_queue_and_its_empty_project_with_it() -> None:
    queue = FairQueue()
    ticket = queue.enqueue("a", Priority.BULK)
    other = queue.enqueue("b", "interactive")  # type: ignore[arg-type]  # a plain value from across an actor
    assert queue.counts() == {"a": {"bulk": 1}, "b": {"interactive": 1}}
    queue.cancel(ticket)
    queue.cancel(ticket)  # twice, and an unknown ticket: both no-ops
    queue.cancel(999)
    assert queue.counts() == {"b": {"interactive": 1}}
    assert len(queue) == 1
    assert queue.pop_next() == other


def test_popping_an_empty_queue_is_a_lookup_error() -> None:
    with pytest.raises(LookupError, match="no waiter"):
        FairQueue().pop_next()


def test_tickets_count_up_from_one_and_are_never_reused() -> None:
    queue = FairQueue()
    first = queue.enqueue("a", Priority.BULK)
    queue.pop_next()
    assert (first, queue.enqueue("a", Priority.BULK)) == (1, 2)


# ---- Aimd ---------------------------------------------------------------------------------------


def make_aimd(permits: int = 8, *, seed: int = SEED, base_backoff_s: float = 2.0, max_backoff_s: float = 60.0) -> Aimd:
    return Aimd(
        permits=permits,
        now=T0,
        ramp_interval_s=15.0,
        base_backoff_s=base_backoff_s,
        max_backoff_s=max_backoff_s,
        random=random.Random(seed).random,
    )


def test_a_halving_cools_down_for_half_the_base_plus_seeded_jitter() -> None:
    aimd = make_aimd(8)
    jitter = random.Random(SEED).random()
    aimd.halve(T0, 8, latest_seq=3, retry_after_s=None)
    assert aimd.effective == 4
    assert aimd.cooldown_until(T0) == pytest.approx(T0 + 1.0 + jitter * 2.0)
    assert aimd.state(T0, 8) is BudgetState.BACKING_OFF
    assert aimd.cooldown_until(T0 + 3.0) is None  # the longest possible jitter has passed
    assert aimd.state(T0 + 3.0, 8) is BudgetState.RAMPING


def test_retry_after_sets_the_cooldown_with_up_to_half_again_of_jitter() -> None:
    aimd = make_aimd(8)
    jitter = random.Random(SEED).random()
    aimd.halve(T0, 8, latest_seq=1, retry_after_s=10.0)
    assert aimd.cooldown_until(T0) == pytest.approx(T0 + 10.0 + jitter * 5.0)


def test_each_clean_ramp_interval_adds_one_permit_back_up_to_the_ceiling() -> None:
    aimd = make_aimd(8)
    aimd.halve(T0, 8, latest_seq=1, retry_after_s=None)
    aimd.sync(T0 + 14.9, 8)
    assert aimd.effective == 4
    aimd.sync(T0 + 30.0, 8)
    assert aimd.effective == 6
    aimd.sync(T0 + 600.0, 8)
    assert aimd.effective == 8
    assert aimd.state(T0 + 600.0, 8) is BudgetState.STEADY


def test_a_lower_ceiling_clamps_and_a_raise_to_jumps_up() -> None:
    aimd = make_aimd(8)
    aimd.sync(T0, 3)
    assert aimd.effective == 3
    aimd.raise_to(12)
    assert aimd.effective == 12
    aimd.raise_to(5)  # never lowers
    assert aimd.effective == 12


def test_the_cooldown_base_doubles_per_halving_up_to_its_cap_and_resets_after_a_clean_interval() -> None:
    aimd = make_aimd(256, base_backoff_s=2.0, max_backoff_s=6.0)
    for seq in (1, 2, 3):
        aimd.halve(T0, 256, latest_seq=seq, retry_after_s=None)
    assert aimd.backoff_s == 6.0
    aimd.sync(T0 + 1.0, 1)  # at a ceiling of 1, but the last 429 is only 1 s old
    assert aimd.backoff_s == 6.0
    aimd.sync(T0 + 15.0, 1)
    assert aimd.backoff_s == 2.0


def test_a_429_of_a_request_granted_before_the_halving_is_the_same_event() -> None:
    aimd = make_aimd(8)
    aimd.halve(T0, 8, latest_seq=5, retry_after_s=None)
    assert aimd.answered(5)
    assert not aimd.answered(6)
    until = aimd.cooldown_until(T0)
    assert until is not None
    aimd.honour_retry_after(T0, latest_seq=9, retry_after_s=30.0)
    assert aimd.effective == 4  # no second halving
    assert aimd.cooldown_until(T0) == T0 + 30.0
    assert aimd.answered(9)
    aimd.honour_retry_after(T0, latest_seq=2, retry_after_s=None)  # never moves the mark back
    assert aimd.answered(9)


def test_the_next_permit_is_due_one_ramp_step_per_missing_permit_or_never_above_the_ceiling() -> None:
    aimd = make_aimd(8)
    aimd.halve(T0, 8, latest_seq=1, retry_after_s=None)  # effective 4, ramp mark at T0
    assert aimd.permit_due_at(4, 8) == T0 + 15.0
    assert aimd.permit_due_at(6, 8) == T0 + 45.0
    assert aimd.permit_due_at(8, 8) is None


def test_the_same_seed_gives_the_same_cooldowns() -> None:
    one, two = make_aimd(8, seed=3), make_aimd(8, seed=3)
    for aimd in (one, two):
        aimd.halve(T0, 8, latest_seq=1, retry_after_s=None)
    assert one.cooldown_until(T0) == two.cooldown_until(T0)


# ---- StartWindow --------------------------------------------------------------------------------


def test_the_window_is_full_at_its_limit_and_frees_a_window_after_the_earliest_answers() -> None:
    window = StartWindow(60.0)
    for seq in (1, 2, 3):
        window.record(seq)
    assert window.full(3)
    assert not window.full(4)
    assert not window.full(None)  # no gate armed
    assert window.frees_at(3) is None  # every start is in flight: only an answer can free one
    window.settle(2, T0 + 10.0)
    window.settle(1, T0 + 20.0)  # answered out of order
    assert window.frees_at(3) == T0 + 70.0
    assert window.frees_at(2) == T0 + 80.0
    assert window.frees_at(1) is None  # two must leave and one is still in flight


def test_starts_leave_the_window_exactly_window_s_after_their_answer_never_while_in_flight() -> None:
    window = StartWindow(60.0)
    window.record(1)
    window.record(2)
    window.settle(1, T0)
    window.settle(99, T0)  # unknown (or long gone): ignored
    window.expire(T0 + 59.9)
    assert len(window) == 2
    window.expire(T0 + 60.0)
    assert len(window) == 1
    window.expire(T0 + 10_000.0)
    assert len(window) == 1  # still in flight


# ---- RateLearner --------------------------------------------------------------------------------


def make_learner(window_s: float = 60.0) -> RateLearner:
    return RateLearner(window_s=window_s, probe_step_fraction=0.05, min_plausible_rpm_funded=60.0, now=T0)


def start(learner: RateLearner, count: int, at: float, first_seq: int = 1) -> int:
    for seq in range(first_seq, first_seq + count):
        learner.record(at, seq)
    return first_seq + count - 1


def test_the_first_429_learns_the_starts_in_the_window_before_it() -> None:
    learner = make_learner()
    last = start(learner, 100, T0)
    refused = learner.on_rate_limited(T0 + 1.0, T0, last + 1, learn=True, known_unfunded=False)
    assert not refused
    assert learner.learned == 100
    assert learner.note == "learned 100 req/60s from the first 429"


def test_requests_that_were_rejected_themselves_do_not_count_as_allowed() -> None:
    learner = make_learner()
    start(learner, 80, T0)
    learner.on_rate_limited(T0 + 1.0, T0, 70, learn=True, known_unfunded=False)  # 69 before it
    assert learner.learned == 69
    start(learner, 10, T0 + 2.0, first_seq=81)  # granted after that measurement: a new event
    learner.on_rate_limited(T0 + 3.0, T0 + 2.0, 90, learn=True, known_unfunded=False)  # 89 before it, one rejected
    assert learner.learned == 88
    assert learner.note == "learned 88 req/60s at a later 429"


def test_the_429s_of_one_burst_are_one_measurement_whatever_order_they_come_back_in() -> None:
    learner = make_learner()
    start(learner, 80, T0)
    learner.on_rate_limited(T0 + 1.0, T0, 75, learn=True, known_unfunded=False)
    assert learner.learned == 74
    for seq in (71, 80, 72):  # granted before that measurement: the same congestion event
        assert not learner.on_rate_limited(T0 + 1.0, T0, seq, learn=True, known_unfunded=False)
    assert learner.learned == 74 and learner.note == "learned 74 req/60s from the first 429"


def test_a_low_measured_rate_is_believed_only_for_a_key_known_to_be_unfunded() -> None:
    learner = make_learner()
    start(learner, 5, T0)
    learner.on_rate_limited(T0, T0, 6, learn=True, known_unfunded=False)
    assert learner.learned is None
    assert learner.note is None
    learner.on_rate_limited(T0, T0, 7, learn=True, known_unfunded=True)
    assert learner.learned == 5


def test_nothing_is_learned_when_learning_is_off_or_a_rate_is_reported() -> None:
    learner = make_learner()
    start(learner, 100, T0)
    assert not learner.on_rate_limited(T0, T0, 101, learn=False, known_unfunded=True)
    assert learner.learned is None


def saturated_learner() -> tuple[RateLearner, int]:
    """A learner at 100 req/60s whose gate has just filled, with seq 101 the last start."""
    learner = make_learner()
    last = start(learner, 100, T0)
    learner.on_rate_limited(T0, T0, last + 1, learn=True, known_unfunded=False)
    learner.mark_saturated()
    return learner, last + 1


def test_a_clean_saturated_window_probes_one_step_higher() -> None:
    learner, seq = saturated_learner()
    assert learner.probe_pending(reported=False)
    assert learner.probe_due_at() == T0 + 60.0
    learner.step_probe(T0 + 59.0, seq, reported=False)
    assert learner.learned == 100
    learner.step_probe(T0 + 60.0, seq, reported=False)
    assert learner.learned == 105  # max(1, 5% of 100)
    assert learner.note == "probing 105 req/60s after a clean saturated window"
    assert not learner.probe_pending(reported=False)  # the next probe waits for a new saturation


def test_a_reported_rate_stops_the_probes() -> None:
    learner, seq = saturated_learner()
    assert not learner.probe_pending(reported=True)
    learner.step_probe(T0 + 600.0, seq, reported=True)
    assert learner.learned == 100


def refuse_probe(learner: RateLearner, now: float, seq: int) -> int:
    """The key allows 100 starts at `now`; the probe's next one is answered 429."""
    seq = start(learner, 101, now, first_seq=seq + 1)
    assert learner.on_rate_limited(now, now, seq, learn=True, known_unfunded=False)
    return seq


def test_a_429_on_a_probing_request_is_a_refused_probe_and_doubles_the_wait_up_to_the_cap() -> None:
    learner, seq = saturated_learner()
    now = T0
    for expected_windows in (2, 4, 8, 8):
        now += learner.probe_windows * 60.0
        before = learner.learned
        learner.mark_saturated()
        learner.step_probe(now, seq, reported=False)
        assert learner.learned is not None and before is not None and learner.learned > before
        seq = refuse_probe(learner, now, seq)
        assert learner.probe_windows == expected_windows
    assert learner.probe_windows == MAX_PROBE_WINDOWS
    assert learner.learned == 100  # stepped back to what the key allowed
    assert learner.note == "learned 100 req/60s at a 429 (a probe of 105 was refused)"


def test_a_probe_that_held_resets_the_wait_to_one_window() -> None:
    learner, seq = saturated_learner()
    learner.step_probe(T0 + 60.0, seq, reported=False)
    seq = refuse_probe(learner, T0 + 60.0, seq)
    assert (learner.learned, learner.probe_windows) == (100, 2)
    learner.mark_saturated()
    learner.step_probe(T0 + 179.9, seq, reported=False)
    assert learner.learned == 100  # a refused probe waits two windows
    learner.step_probe(T0 + 180.0, seq, reported=False)
    assert (learner.learned, learner.probe_windows) == (105, 2)
    learner.mark_saturated()
    learner.step_probe(T0 + 300.0, seq, reported=False)  # no 429 since the last step: it held
    assert (learner.learned, learner.probe_windows) == (110, 1)


@pytest.mark.parametrize(("expired_at", "learned"), [(T0 + 119.9, 100), (T0 + 120.0, 1)])
def test_history_is_kept_for_two_windows_so_a_slow_429_still_measures(expired_at: float, learned: int) -> None:
    learner = make_learner()
    start(learner, 100, T0)
    learner.expire(expired_at)
    # Started 30 s after the burst, answered 429 90 s later: the burst is inside its window.
    learner.on_rate_limited(T0 + 120.0, T0 + 30.0, 101, learn=True, known_unfunded=True)
    assert learner.learned == learned


# ---- ceiling rules ------------------------------------------------------------------------------


def test_a_funded_account_reporting_a_vestigial_rpm_is_not_believed() -> None:
    limits = BudgetLimits()
    assert credible_rpm(limits, KeyFacts(rpm=1.0, credits_remaining=100.0)) is None
    assert credible_rpm(limits, KeyFacts(rpm=1.0, is_free_tier=True)) == 1.0
    assert credible_rpm(limits, None) is None


def test_the_ceiling_is_override_then_littles_law_then_credits_then_the_timid_default() -> None:
    assert permits_ceiling(BudgetLimits(override=3), FUNDED, 2.0) == 3
    assert permits_ceiling(BudgetLimits(), KeyFacts(rpm=600.0, is_free_tier=True), 2.0) == 20  # 10/s × 2 s
    assert permits_ceiling(BudgetLimits(), KeyFacts(rpm=60.0, credits_remaining=5.0), 2.0) == CREDIT_PERMITS
    assert permits_ceiling(BudgetLimits(), FUNDED, 2.0) == CREDIT_PERMITS
    assert permits_ceiling(BudgetLimits(), None, 2.0) == DEFAULT_PERMITS
    assert permits_ceiling(BudgetLimits(), KeyFacts(rpm=1e9, is_free_tier=True), 2.0) == MAX_PERMITS


def test_the_gate_follows_a_credible_rpm_first_and_a_learned_rate_otherwise() -> None:
    limits = BudgetLimits(window_s=15.0)
    reported = KeyFacts(rpm=90.0, is_free_tier=True)
    assert gate_limit(limits, reported, learned=7) == 22  # floor(90 × 15 / 60)
    assert window_rpm(limits, reported, learned=7) == 90.0
    assert gate_limit(limits, FUNDED, learned=7) == 7
    assert window_rpm(limits, FUNDED, learned=7) == 28.0
    assert gate_limit(limits, FUNDED, learned=None) is None
    assert window_rpm(limits, FUNDED, learned=None) is None


def test_each_ceiling_source_explains_itself() -> None:
    limits = BudgetLimits()
    assert explain(limits, None, 2.0, 4, None) == (
        CeilingSource.FALLBACK,
        "no key facts discovered yet: timid default of 4 permits",
    )
    assert explain(limits, FUNDED, 2.0, 16, None)[0] is CeilingSource.CREDITS
    assert explain(limits, UNFUNDED, 2.0, 4, "learned 9 req/60s from the first 429") == (
        CeilingSource.LEARNED,
        "learned 9 req/60s from the first 429 (no rate limit reported); 4 permits",
    )
    note = "learned 9 req/60s from the first 429"
    assert explain(BudgetLimits(override=5), FUNDED, 2.0, 5, note) == (
        CeilingSource.MANUAL,
        f"manual override: 5 permits; {note}",
    )
    assert explain(limits, KeyFacts(rpm=600.0, is_free_tier=True), 2.0, 20, None)[0] is CeilingSource.DISCOVERED
