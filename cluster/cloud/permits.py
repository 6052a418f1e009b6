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

Pure logic over the two state machines; not thread-safe: one owner (the budget actor).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from cluster.cloud.budget import BudgetController, Outcome, Priority
from cluster.cloud.spend import Charge, SpendLedger, SpendState
from cluster.errors import SpendCapReached
from cluster.roles import Role

__all__ = ["Grants", "PermitDesk"]


@dataclass(frozen=True)
class Grants:
    """What one round of granting decided: tickets that start now, and waiters refused at their cap."""

    granted: list[int] = field(default_factory=list)
    refused: dict[int, SpendCapReached] = field(default_factory=dict)


class PermitDesk:
    """The budget actor's logic: tickets queue for the key's permits, each under its role's daily cap."""

    def __init__(self, budget: BudgetController, ledger: SpendLedger) -> None:
        self.budget = budget
        self.ledger = ledger
        self._waiting: dict[Role, set[int]] = {}  # role -> its tickets still queued
        self._role_of: dict[int, Role] = {}

    def enqueue(self, project: str, priority: Priority, role: Role | None = None) -> int:
        """Queue one call; a `role` already at its cap gets SpendCapReached and is not queued."""
        if role is not None:
            role = Role(role)
            self.ledger.check(role)
        ticket = self.budget.enqueue(project, Priority(priority))
        if role is not None:
            self._waiting.setdefault(role, set()).add(ticket)
            self._role_of[ticket] = role
        return ticket

    def cancel(self, ticket: int) -> None:
        """A waiter gave up (no-op once granted or refused)."""
        self._forget(ticket)
        self.budget.cancel(ticket)

    def grant(self) -> Grants:
        """Refuse every waiter whose role is at its cap now, then grant what the budget admits."""
        refused: dict[int, SpendCapReached] = {}
        for role in list(self._waiting):
            for ticket in sorted(self._waiting[role]):
                refusal = self.ledger.refusal(role)  # None under the cap; else counted, once per refused call
                if refusal is None:
                    break
                self.cancel(ticket)
                refused[ticket] = refusal
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
    ) -> bool:
        """A granted call finished: book its charges to `role` first, then free its permit (a ticket
        the budget does not know, after a restart, still has its charges booked). True when the
        charges took the role to its cap."""
        charges = list(charges)
        if charges and role is None:
            raise ValueError(f"ticket {ticket}: charges without a role to book them to")
        capped = self.book(role, charges) if role is not None else False
        self.budget.release(ticket, latency_s=latency_s, outcome=outcome, retry_after_s=retry_after_s)
        return capped

    def _forget(self, ticket: int) -> None:
        role = self._role_of.pop(ticket, None)
        if role is not None:
            self._waiting[role].discard(ticket)
