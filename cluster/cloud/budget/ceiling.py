"""Where the permit ceiling and the window gate come from, as functions of what the budget knows.

The ceiling is, in order: a manual override → Little's law on a credible rpm (rpm/60 × latency
EWMA) → a funded account (16) → the timid default (4); never above MAX_PERMITS. A funded account
reporting a degenerate rpm (< 60/min) or none at all gets no gate from discovery.
"""

from __future__ import annotations

import math

from cluster.cloud.budget.model import MAX_PERMITS, BudgetLimits, CeilingSource, KeyFacts

__all__ = [
    "credible_rpm",
    "explain",
    "gate_limit",
    "permits_ceiling",
    "permits_from_rate",
    "round_half_up",
    "window_rpm",
]


def round_half_up(x: float) -> int:
    return math.floor(x + 0.5)


def credible_rpm(limits: BudgetLimits, facts: KeyFacts | None) -> float | None:
    """The reported rpm, unless a funded account reports a vestigial one (the $100 account at 1/min)."""
    if facts is None or facts.rpm is None:
        return None
    if facts.funded and facts.rpm < limits.min_plausible_rpm_funded:
        return None
    return facts.rpm


def permits_from_rate(rpm: float, latency_s: float) -> int:
    # Little's law: concurrency = arrival rate × time in system.
    return min(MAX_PERMITS, max(1, round_half_up(rpm / 60.0 * latency_s)))


def permits_ceiling(limits: BudgetLimits, facts: KeyFacts | None, latency_s: float) -> int:
    """Most permits the budget may hold now."""
    if limits.override is not None:
        return limits.override
    funded = facts is not None and facts.funded
    rpm = credible_rpm(limits, facts)
    if rpm is not None:
        from_rate = permits_from_rate(rpm, latency_s)
        return max(from_rate, limits.credit_permits) if funded else from_rate
    return limits.credit_permits if funded else limits.default_permits


def gate_limit(limits: BudgetLimits, facts: KeyFacts | None, learned: int | None) -> int | None:
    """Most request starts allowed in any window_s; None = no gate armed."""
    rpm = credible_rpm(limits, facts)
    if rpm is not None:
        return max(1, math.floor(rpm * limits.window_s / 60.0 + 1e-9))
    return learned


def window_rpm(limits: BudgetLimits, facts: KeyFacts | None, learned: int | None) -> float | None:
    """The rpm the window gate enforces; None = no gate armed."""
    rpm = credible_rpm(limits, facts)
    if rpm is not None:
        return rpm
    if learned is not None:
        return learned * 60.0 / limits.window_s
    return None


def explain(
    limits: BudgetLimits, facts: KeyFacts | None, latency_s: float, ceiling: int, learned_note: str | None
) -> tuple[CeilingSource, str]:
    """Where `ceiling` comes from, and one line saying why; `learned_note` is None while no rate is learned."""
    rpm = credible_rpm(limits, facts)
    learned = f"; {learned_note}" if learned_note is not None and rpm is None else ""
    if limits.override is not None:
        return CeilingSource.MANUAL, f"manual override: {ceiling} permits{learned}"
    if rpm is not None:
        from_rate = permits_from_rate(rpm, latency_s)
        detail = (
            f"key reports {rpm:g} req/min; Little's law at {latency_s:.2f} s mean latency "
            f"gives {from_rate} permits, gated at {rpm:g} req/min"
        )
        if from_rate < ceiling:
            return CeilingSource.CREDITS, f"{detail}; funded account raises it to {ceiling}"
        return CeilingSource.DISCOVERED, detail
    if facts is None:
        unknown = "no key facts discovered yet"
    elif facts.rpm is None:
        unknown = "no rate limit reported"
    else:
        unknown = f"reported {facts.rpm:g} req/min not believed for a funded account"
    if learned_note is not None:
        return CeilingSource.LEARNED, f"{learned_note} ({unknown}); {ceiling} permits"
    if facts is not None and facts.funded:
        return CeilingSource.CREDITS, f"funded account, {unknown}: {ceiling} permits, no window gate"
    return CeilingSource.FALLBACK, f"{unknown}: timid default of {ceiling} permits"
