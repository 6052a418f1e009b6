"""Permits under the spend caps (DESIGN §7): the key's budget and the roles' daily caps, decided
together at the moment a permit is granted.

`BudgetController` says how many cloud requests may run; `SpendLedger` whether a role may spend
more today. A role's cap is checked when a call queues (a capped role waits for nothing) and again
each time permits are handed out: a waiter whose role reached its cap while it waited (up to
`budget.acquire_timeout_s`) is refused with SpendCapReached instead of being granted. A release
carries its call's charges, booked before its permit is freed, so the permit it frees never goes
to a call of a role those charges just capped.

The bound: from the moment a role's spend reaches its cap, no call of that role is granted until
the cap is raised or the UTC day turns. The only charges of the role that still land are those of
the calls already in flight at that moment: with N of them in flight and M queued, at most N more
charges land and none of the M is granted, so the overshoot is at most what those N calls cost.

A call may name its caller's `subject` (an OAuth subject) and its `call_id` (the MCP tool call it
serves). The subject's daily credits (`quotas.daily_credits`, held by `SubjectSpend`:
cluster/auth/quota.py's `SubjectQuotas`) are checked the same way as a role's cap, when the call
queues and again at each grant (QuotaExceeded instead of a permit), and a release books its charges
to the subject too; the same bound holds per subject. A call's credits are kept by call id
(`CallCredits`, bounded) until its tool call takes them for its audit line.

Pure logic over the two state machines; not thread-safe: one owner (the budget actor).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from cluster.cloud.budget import BudgetController, Outcome, Priority
from cluster.cloud.spend import Charge, SpendLedger, SpendState
from cluster.errors import QuotaExceeded, SpendCapReached
from cluster.roles import Role

__all__ = ["MAX_CALL_CREDITS", "CallCredits", "Grants", "PermitDesk", "SubjectSpend"]

MAX_CALL_CREDITS = 4096  # calls whose credits wait to be taken; the oldest are forgotten past it


class SubjectSpend(Protocol):
    """Each subject's cloud credits today against its quota (cluster/auth/quota.py: SubjectQuotas)."""

    def spend_refusal(self, subject: str) -> QuotaExceeded | None: ...

    def charge(self, subject: str, credits: float) -> bool: ...


class CallCredits:
    """Credits per tool call (call id), until the call takes them; bounded (the oldest forgotten)."""

    def __init__(self, limit: int = MAX_CALL_CREDITS) -> None:
        self._limit = limit
        self._credits: OrderedDict[str, float] = OrderedDict()

    def add(self, call_id: str, credits: float) -> None:
        self._credits[call_id] = self._credits.pop(call_id, 0.0) + credits
        while len(self._credits) > self._limit:
            self._credits.popitem(last=False)

    def take(self, call_id: str) -> float:
        """The call's credits (0 when none were booked, or they were forgotten), forgotten here."""
        return self._credits.pop(call_id, 0.0)


@dataclass(frozen=True)
class Grants:
    """What one round of granting decided: tickets that start now, and waiters refused at their role's
    cap or their subject's daily credits."""

    granted: list[int] = field(default_factory=list)
    refused: dict[int, SpendCapReached | QuotaExceeded] = field(default_factory=dict)


class PermitDesk:
    """The budget actor's logic: tickets queue for the key's permits, each under its role's daily cap
    and its subject's daily credits."""

    def __init__(self, budget: BudgetController, ledger: SpendLedger, subjects: SubjectSpend | None = None) -> None:
        self.budget = budget
        self.ledger = ledger
        self.subjects = subjects
        self.calls = CallCredits()
        self._waiting: dict[Role, set[int]] = {}  # role -> its tickets still queued
        self._role_of: dict[int, Role] = {}
        self._subject_of: dict[int, str] = {}  # queued tickets of a subject

    def enqueue(self, project: str, priority: Priority, role: Role | None = None, subject: str | None = None) -> int:
        """Queue one call; a `role` already at its cap gets SpendCapReached, a `subject` that spent its
        credits today QuotaExceeded, and neither is queued."""
        if role is not None:
            role = Role(role)
            self.ledger.check(role)
        if subject is not None and self.subjects is not None:
            refusal = self.subjects.spend_refusal(subject)
            if refusal is not None:
                raise refusal
        ticket = self.budget.enqueue(project, Priority(priority))
        if role is not None:
            self._waiting.setdefault(role, set()).add(ticket)
            self._role_of[ticket] = role
        if subject is not None and self.subjects is not None:
            self._subject_of[ticket] = subject
        return ticket

    def cancel(self, ticket: int) -> None:
        """A waiter gave up (no-op once granted or refused)."""
        self._forget(ticket)
        self.budget.cancel(ticket)

    def grant(self) -> Grants:
        """Refuse every waiter whose role is at its cap, or whose subject spent its credits, now; then
        grant what the budget admits."""
        refused: dict[int, SpendCapReached | QuotaExceeded] = {}
        for role in list(self._waiting):
            for ticket in sorted(self._waiting[role]):
                refusal = self.ledger.refusal(role)  # None under the cap; else counted, once per refused call
                if refusal is None:
                    break
                self.cancel(ticket)
                refused[ticket] = refusal
        if self.subjects is not None:
            for ticket, subject in list(self._subject_of.items()):
                over = self.subjects.spend_refusal(subject)
                if over is not None:
                    self.cancel(ticket)
                    refused[ticket] = over
        granted = self.budget.grant()
        for ticket in granted:
            self._forget(ticket)
        return Grants(granted=granted, refused=refused)

    def book(self, role: Role, charges: Iterable[Charge]) -> bool:
        """Add charges to the role's spend today; True when they took the role to its cap."""
        role = Role(role)
        before = self.ledger.state(role)
        after = before
        for charge in charges:
            after = self.ledger.charge(role, charge)
        return after is SpendState.CAPPED and before is not SpendState.CAPPED

    def release(
        self,
        ticket: int,
        *,
        latency_s: float,
        outcome: Outcome,
        retry_after_s: float | None = None,
        role: Role | None = None,
        charges: Iterable[Charge] = (),
        subject: str | None = None,
        call_id: str | None = None,
    ) -> bool:
        """A granted call finished: book its charges to `role`, to `subject` and to `call_id` first,
        then free its permit (a ticket the budget does not know, after a restart, still has its charges
        booked). True when the charges took the role to its cap or the subject to its daily credits."""
        charges = list(charges)
        if charges and role is None:
            raise ValueError(f"ticket {ticket}: charges without a role to book them to")
        capped = self.book(role, charges) if role is not None else False
        credits = sum(charge.credits for charge in charges)
        if charges and subject is not None and self.subjects is not None:
            capped = self.subjects.charge(subject, credits) or capped
        if charges and call_id is not None:
            self.calls.add(call_id, credits)
        self.budget.release(ticket, latency_s=latency_s, outcome=outcome, retry_after_s=retry_after_s)
        return capped

    def _forget(self, ticket: int) -> None:
        role = self._role_of.pop(ticket, None)
        if role is not None:
            self._waiting[role].discard(ticket)
        self._subject_of.pop(ticket, None)
