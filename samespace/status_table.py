"""`samespace status` for a person: the admin API's answers as tables (pure: no I/O).

    ROLE            POLICY     STATE       SERVING
    code-embedding  aggregate  serving     samespace-embedder-cpu0
    ...
    PROVIDER                 ROLE            KIND   SERVES  GATE                  SERVED  FAILURES  NOTE
    ...
    budget: 2 of 6 permits in flight (ceiling 8, credits, ramping): ...
    SPEND TODAY (2023-11-14, resets 2023-11-15T00:00:00Z) ...
    what stops a role: ... (or: nothing stops a role)

Read from `GET /admin/health` (roles, problems), `GET /admin/providers` (each provider and the gate's
verdict on it) and `GET /admin/budget` (permits, today's spend against the caps), parsed into the
models the admin API dumps them from. A problem is printed whole, on one line: it says what to do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cluster.cloud import BudgetSnapshot, SpendView
from cluster.gate import GateReport, Verdict
from cluster.providers import ProviderView
from cluster.roles import Role

__all__ = ["StatusAnswers", "status_lines", "table"]

NONE = "-"
NOTHING_STOPS = "nothing stops a role"


class RoleHealth(BaseModel):
    """One role in `GET /admin/health`."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    policy: str
    serving: list[str] = Field(default_factory=list)
    state: str
    detail: str | None = None


class Health(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    roles: dict[Role, RoleHealth] = Field(default_factory=dict)
    problems: list[str] = Field(default_factory=list)


class ProviderRow(ProviderView):
    """A provider as `GET /admin/providers` lists it: its view, and the gate's verdict on it (embedding roles)."""

    gate: GateReport | None = None


class BudgetAnswer(BudgetSnapshot):
    """`GET /admin/budget`: the permits, and today's spend against the caps."""

    spend: SpendView


class StatusAnswers(BaseModel):
    """What `samespace status` reads: the three admin answers."""

    model_config = ConfigDict(frozen=True)

    health: Health
    providers: dict[Role, list[ProviderRow]]
    budget: BudgetAnswer

    @classmethod
    def of(cls, health: Any, providers: dict[str, Any], budget: Any) -> StatusAnswers:
        """The answers as the routes send them (`providers` holds the per-role lists beside `roles`, whether
        each role's dispatcher answered, which `health` says too)."""
        views = {role: rows for role, rows in providers.items() if role != "roles"}
        return cls.model_validate({"health": health, "providers": views, "budget": budget})


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: frozenset[int] = frozenset()) -> list[str]:
    """Columns padded to their widest cell, two spaces apart; the columns in `right` right-aligned."""
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        padded = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))]
        return "  ".join(padded).rstrip()

    return [line(headers), *(line(row) for row in rows)]


def _roles(status: StatusAnswers) -> list[str]:
    rows = [
        [role.value, health.policy, health.state, ", ".join(health.serving) or NONE, health.detail or ""]
        for role, health in status.health.roles.items()
    ]
    return table(["ROLE", "POLICY", "STATE", "SERVING", "NOTE"], rows)


def _gate(report: GateReport | None) -> str:
    if report is None:
        return NONE
    if report.verdict is Verdict.VERIFIED and report.min_cosine is not None:
        return f"{report.verdict.value} (cosine {report.min_cosine:.4f})"
    if report.coverage is not None:
        return f"{report.verdict.value} ({report.coverage.value})"
    return report.verdict.value


def _note(row: ProviderRow) -> str:
    info = row.provider
    if not info.eligible:
        return f"ineligible: {info.reason or 'unknown'}"
    if row.gate is not None and row.gate.verdict is not Verdict.VERIFIED:
        return row.gate.detail
    return info.last_error or ""


def _providers(status: StatusAnswers) -> list[str]:
    rows = [
        [
            row.provider.name,
            role.value,
            row.provider.kind.value + (f" ({row.provider.hosted})" if row.provider.hosted != "ray" else ""),
            row.serves,
            _gate(row.gate),
            str(row.provider.served),
            str(row.provider.failures),
            _note(row),
        ]
        for role, role_rows in status.providers.items()
        for row in role_rows
    ]
    headers = ["PROVIDER", "ROLE", "KIND", "SERVES", "GATE", "SERVED", "FAILURES", "NOTE"]
    return table(headers, rows, right=frozenset({5, 6})) if rows else ["no provider answered"]


def _credits(value: float | None) -> str:
    return NONE if value is None else f"{value:.4f}"


def _budget(budget: BudgetAnswer) -> list[str]:
    waiting = sum(count for by_priority in budget.waiting.values() for count in by_priority.values())
    head = [
        (
            f"budget: {budget.in_flight} of {budget.effective} permits in flight (ceiling {budget.ceiling}, "
            f"{budget.source.value}, {budget.state.value}): {budget.reason}"
        ),
        f"        {budget.requests} requests, {budget.rate_limited} rate limited, {waiting} waiting",
    ]
    spend = budget.spend
    rows = [
        [role.value, _credits(view.spent), _credits(view.cap), view.state.value, str(view.calls), str(view.refused)]
        for role, view in spend.roles.items()
    ]
    title = f"spend today ({spend.day}, resets {spend.resets_at}), in credits:"
    spent = table(["ROLE", "SPENT", "CAP", "STATE", "CALLS", "REFUSED"], rows, right=frozenset({1, 2, 4, 5}))
    return [*head, "", title, *(spent if rows else ["nothing spent today"])]


def status_lines(status: StatusAnswers) -> list[str]:
    """Roles, providers with their gate verdicts, the budget and spend, and last what stops a role."""
    problems = status.health.problems
    stops = ["what stops a role:", *(f"  {problem}" for problem in problems)] if problems else [NOTHING_STOPS]
    return [*_roles(status), "", *_providers(status), "", *_budget(status.budget), "", *stops]
