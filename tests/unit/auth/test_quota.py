"""Quotas per person (cluster/auth/quota.py) on a fake clock: a sliding 60 s window of calls per subject,
credits per subject per UTC day, each refusal naming its setting and when to retry; one subject over its
quota leaves the others untouched, and memory stays bounded."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime

import pytest

from cluster.auth import SubjectQuotas
from cluster.errors import QuotaExceeded
from cluster.settings import QuotaSettings

NOON = datetime(2026, 12, 2, 12, 0, tzinfo=UTC).timestamp()
MIDNIGHT = datetime(2026, 12, 3, 0, 0, tzinfo=UTC).timestamp()


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def quotas(clock: FakeClock, **settings: object) -> SubjectQuotas:
    return SubjectQuotas(QuotaSettings.model_validate(settings), clock)


def test_a_subject_past_its_rate_is_refused_until_its_oldest_call_leaves_the_window() -> None:
    clock = FakeClock(NOON)
    q = quotas(clock, requests_per_minute=3)
    for _ in range(3):
        q.admit("alice")
        clock.now += 10  # calls at 0, 10, 20 s
    clock.now = NOON + 25
    with pytest.raises(QuotaExceeded) as refused:
        q.admit("alice")
    over = refused.value
    assert (over.subject, over.setting, over.limit) == ("alice", "quotas.requests_per_minute", 3)
    assert over.retry_after_s == pytest.approx(35.0)  # the call at 0 s leaves at 60 s
    assert q.calls_in_window("alice") == 3  # a refused call is not counted
    clock.now = NOON + 60  # the first call left: one more fits, then the window is full again
    q.admit("alice")
    with pytest.raises(QuotaExceeded) as again:
        q.admit("alice")
    assert again.value.retry_after_s == pytest.approx(10.0)


def test_one_subject_over_its_rate_leaves_the_others_their_share() -> None:
    clock = FakeClock(NOON)
    q = quotas(clock, requests_per_minute=2)
    q.admit("alice")
    q.admit("alice")
    with pytest.raises(QuotaExceeded):
        q.admit("alice")
    q.admit("bob")
    q.admit("bob")
    assert q.calls_in_window("bob") == 2


def test_overrides_and_zero_mean_what_the_settings_say() -> None:
    clock = FakeClock(NOON)
    q = quotas(clock, requests_per_minute=1, subjects={"ci-bot": {"requests_per_minute": 0}, "slow": {}})
    for _ in range(50):
        q.admit("ci-bot")  # 0: no limit for it
    q.admit("slow")  # an override without the field keeps the default
    with pytest.raises(QuotaExceeded):
        q.admit("slow")
    unlimited = quotas(clock, requests_per_minute=0)
    for _ in range(50):
        unlimited.admit("anyone")
    assert unlimited.tracked() == (0, 0)  # an unlimited subject holds no window


def test_a_subject_that_spent_its_credits_today_is_refused_until_utc_midnight() -> None:
    clock = FakeClock(NOON)
    q = quotas(clock, daily_credits=1.0, subjects={"rich": {"daily_credits": 10.0}})
    q.check_spend("alice")
    assert q.charge("alice", 0.6) is False
    assert q.spend_refusal("alice") is None
    assert q.charge("alice", 0.5) is True  # this one crossed the limit
    assert q.charge("alice", 0.1) is False  # already over: not a crossing again
    with pytest.raises(QuotaExceeded) as refused:
        q.check_spend("alice")
    assert refused.value.setting == "quotas.daily_credits" and refused.value.limit == 1.0
    assert refused.value.retry_after_s == pytest.approx(MIDNIGHT - NOON)
    q.charge("rich", 5.0)
    q.check_spend("rich")  # its own, higher limit
    q.check_spend("bob")  # the others are untouched
    assert q.spent_today() == ("2026-12-02", {"alice": pytest.approx(1.2), "rich": 5.0})
    clock.now = MIDNIGHT + 1  # a new UTC day: spend starts again
    q.check_spend("alice")
    assert q.spent_today() == ("2026-12-03", {})


def test_a_restarted_owner_keeps_todays_spend_and_drops_another_days() -> None:
    clock = FakeClock(NOON)
    settings = QuotaSettings(daily_credits=1.0)
    today = SubjectQuotas(settings, clock, spent={"alice": 1.0}, day="2026-12-02")
    with pytest.raises(QuotaExceeded):
        today.check_spend("alice")
    yesterday = SubjectQuotas(settings, clock, spent={"alice": 1.0}, day="2026-12-01")
    yesterday.check_spend("alice")


def test_memory_is_bounded_idle_subjects_are_forgotten_and_the_least_recent_go_first() -> None:
    clock = FakeClock(NOON)
    q = SubjectQuotas(QuotaSettings(requests_per_minute=5, daily_credits=100.0), clock, max_subjects=3)
    for subject in ("a", "b", "c", "d"):
        q.admit(subject)
        q.charge(subject, 1.0)
    assert q.tracked() == (3, 3)
    assert q.calls_in_window("a") == 0 and q.calls_in_window("d") == 1  # "a" went first
    clock.now += 61  # everyone idle: the next call forgets them
    q.admit("e")
    assert q.tracked()[0] == 1


def test_the_refusal_pickles_across_actors() -> None:
    clock = FakeClock(NOON)
    q = quotas(clock, requests_per_minute=1)
    q.admit("alice")
    with pytest.raises(QuotaExceeded) as refused:
        q.admit("alice")
    copy = pickle.loads(pickle.dumps(refused.value))
    assert str(copy) == str(refused.value) and "quotas.requests_per_minute" in str(copy)
