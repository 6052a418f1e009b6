"""A key-wide budget on a fake clock with an injected random source, and the moves its unit tests
repeat: queue and grant, a burst of clean requests, a 429.
"""

from __future__ import annotations

from cluster.cloud.budget import BudgetController, BudgetLimits, KeyFacts, Outcome, Priority

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
