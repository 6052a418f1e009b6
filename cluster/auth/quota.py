"""Quotas per person (`quotas.*`): how many MCP tool calls one subject may make in any 60 s, and how
many cloud credits its calls may spend per UTC day. The key-wide budget and the roles' daily caps
(cluster/cloud) still hold above these; a subject over its quota gets QuotaExceeded naming the
setting and when to retry, and every other subject keeps its share.

Pure logic, the clock injected (Unix seconds: the day is the UTC date of `clock()`); one owner (the
budget actor), not thread-safe. Memory is bounded: a subject whose window has emptied is forgotten,
and at most `max_subjects` subjects are tracked (the least recently seen goes first).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Mapping

from cluster.errors import QuotaExceeded
from cluster.settings import QuotaSettings
from cluster.types import Clock, next_utc_midnight, utc_day

__all__ = ["MAX_SUBJECTS", "RATE_SETTING", "SPEND_SETTING", "WINDOW_S", "SubjectQuotas"]

WINDOW_S = 60.0
RATE_SETTING = "quotas.requests_per_minute"
SPEND_SETTING = "quotas.daily_credits"
MAX_SUBJECTS = 10_000  # subjects tracked at once: far above a team, a bound on memory whatever happens


class SubjectQuotas:
    """Each subject's calls in the last 60 s and its cloud credits today, against `quotas`."""

    def __init__(
        self,
        settings: QuotaSettings,
        clock: Clock,
        *,
        spent: Mapping[str, float] | None = None,
        day: str | None = None,
        max_subjects: int = MAX_SUBJECTS,
    ) -> None:
        """`spent` (credits per subject on `day`) is what a restarted owner read back; another day's is dropped."""
        self._settings = settings
        self._clock = clock
        self._max = max_subjects
        self._calls: OrderedDict[str, deque[float]] = OrderedDict()  # least recently seen first
        self._day = utc_day(clock())
        self._spent: OrderedDict[str, float] = OrderedDict()
        if spent and day == self._day:
            self._spent.update(list(spent.items())[-max_subjects:])

    # ---- the rate --------------------------------------------------------------------------------
    def admit(self, subject: str) -> None:
        """Count one call of `subject`; QuotaExceeded (not counted) when it made its limit of calls in
        the last 60 s, with the time until the oldest of them leaves the window."""
        now = self._clock()
        self._forget_idle(now)
        limit = self._settings.for_subject(subject).requests_per_minute or 0
        window = self._calls.pop(subject, None) or deque()
        while window and window[0] <= now - WINDOW_S:
            window.popleft()
        if limit and len(window) >= limit:
            self._calls[subject] = window
            retry = max(0.0, window[0] + WINDOW_S - now)
            raise QuotaExceeded(subject, "MCP tool calls per minute", limit, RATE_SETTING, retry)
        window.append(now)
        if limit:  # an unlimited subject needs no window
            self._calls[subject] = window
            while len(self._calls) > self._max:
                self._calls.popitem(last=False)

    def calls_in_window(self, subject: str) -> int:
        """Calls of `subject` counted in the last 60 s."""
        now = self._clock()
        return sum(1 for at in self._calls.get(subject, ()) if at > now - WINDOW_S)

    def tracked(self) -> tuple[int, int]:
        """(subjects with calls in their window, subjects with spend today): what memory holds."""
        return len(self._calls), len(self._spent)

    def _forget_idle(self, now: float) -> None:
        """Drop subjects whose newest call left the window (the least recently seen come first)."""
        while self._calls:
            subject, window = next(iter(self._calls.items()))
            if window and window[-1] > now - WINDOW_S:
                break
            del self._calls[subject]

    # ---- the daily spend -------------------------------------------------------------------------
    def spend_refusal(self, subject: str) -> QuotaExceeded | None:
        """The QuotaExceeded a cloud call of `subject` gets now (its credits today reached its limit),
        or None."""
        now = self._clock()
        self._roll(now)
        limit = self._settings.for_subject(subject).daily_credits or 0.0
        if not limit or self._spent.get(subject, 0.0) < limit:
            return None
        return QuotaExceeded(subject, "cloud credits today", limit, SPEND_SETTING, next_utc_midnight(now) - now)

    def check_spend(self, subject: str) -> None:
        """Raise QuotaExceeded when `subject` spent its cloud credits for today."""
        refusal = self.spend_refusal(subject)
        if refusal is not None:
            raise refusal

    def charge(self, subject: str, credits: float) -> bool:
        """Add what a call of `subject` cost to its spend today; True when this took it to its limit."""
        self._roll(self._clock())
        before = self._spent.pop(subject, 0.0)
        after = before + max(0.0, credits)
        self._spent[subject] = after
        while len(self._spent) > self._max:
            self._spent.popitem(last=False)
        limit = self._settings.for_subject(subject).daily_credits or 0.0
        return bool(limit) and before < limit <= after

    def spent_today(self) -> tuple[str, dict[str, float]]:
        """(the UTC day, credits per subject that day): what the owner persists."""
        self._roll(self._clock())
        return self._day, dict(self._spent)

    def _roll(self, now: float) -> None:
        today = utc_day(now)
        if today != self._day:
            self._day = today
            self._spent.clear()
