"""The BudgetActor: one key-wide cloud budget above every virtual container (DESIGN §7).

A Ray shell (async, singleton, detached, get-if-exists) around cluster.cloud.budget.BudgetController.
It holds every waiter; a permit is one in-flight cloud request. It never holds the key:
discovery reads GET /key and /credits through a virtual container. It also keeps today's cloud
spend per role (cluster/cloud/spend.py): each release carries what its call cost, booked before the
permit is freed, and a role at its daily cap gets SpendCapReached instead of a permit, whether it
asks then or was already waiting (cluster/cloud/permits.py). The ledger is written to
`<store.data_dir>/spend.json` at most once a second (at once when a role reaches its cap).

It also holds the quotas per person (cluster/auth/quota.py, `quotas.*`): `admit_call` counts an OAuth
subject's MCP tool call against its rate, and a call tagged with a subject is refused (QuotaExceeded,
before any request) once that subject's credits today reach its limit; a release books its charges to
the subject and to the tool call (`take_call_credits`). The subjects' spend today is kept in the same
spend file, so it survives a restart of this actor; their rate windows do not (a restart forgets them).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import ray
from ray.actor import ActorHandle
from ray.exceptions import RayActorError, RayError

from actors.discovery import LiveProvider, discover_providers
from actors.handles import get_or_start
from actors.metrics import budget_metrics_loop
from cluster.auth import SubjectQuotas
from cluster.cloud.budget import BudgetController, BudgetLimits, BudgetSnapshot, KeyFacts, Outcome, Priority
from cluster.cloud.permits import PermitDesk
from cluster.cloud.request_tag import RequestTag, current_request_tag
from cluster.cloud.spend import Charge, SpendLedger, SpendView
from cluster.cloud.spend_file import read_spend, spend_path
from cluster.config import effective_settings, write_bytes_atomic
from cluster.errors import BudgetUnavailable, RateLimited
from cluster.naming import BUDGET_ACTOR_NAME
from cluster.providers import ProviderKind
from cluster.roles import Role
from cluster.settings import SamespaceSettings

log = logging.getLogger("samespace.budget")

T = TypeVar("T")

SPEND_WRITE_INTERVAL_S = 1.0


@ray.remote(num_cpus=0, max_restarts=-1)
class BudgetActor:
    def __init__(self, settings: SamespaceSettings) -> None:
        settings = effective_settings(settings)  # the operator's override survives a restart
        self._settings = settings
        limits = BudgetLimits.from_settings(settings.budget)
        self._controller = BudgetController(limits, clock=time.monotonic, random=random.random)
        self._waiters: dict[int, asyncio.Future[None]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._discovery: asyncio.Task[None] | None = None
        self._metrics: asyncio.Task[None] | None = None  # the budget as metrics (actors/metrics.py)
        self._spend_path = spend_path(settings)
        record = read_spend(self._spend_path)
        self._spend = SpendLedger(settings.budget.daily_caps, clock=time.time, record=record)
        self._spend_flush: asyncio.TimerHandle | None = None
        spent, day = (record.subjects, record.day) if record is not None else (None, None)
        self._quotas = SubjectQuotas(settings.quotas, time.time, spent=spent, day=day)
        self._desk = PermitDesk(self._controller, self._spend, self._quotas)

    async def acquire(
        self, project: str, priority: Priority, timeout_s: float, role: Role | None = None, subject: str | None = None
    ) -> int:
        """Wait (bounded) for a permit; returns the ticket to release. A `role` at its daily spend
        cap gets SpendCapReached, a `subject` that spent its daily credits QuotaExceeded, at once or as
        soon as it reaches its limit while waiting."""
        ticket = self._desk.enqueue(project, Priority(priority), role, subject)
        self._ensure_discovery()
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters[ticket] = future
        self._pump()
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout_s)
        except (TimeoutError, asyncio.CancelledError):
            self._waiters.pop(ticket, None)
            if future.done() and future.exception() is None:  # granted as we gave up: hand it straight back
                self._controller.release(ticket, latency_s=0.0, outcome=Outcome.ERROR)
            elif not future.done():
                self._desk.cancel(ticket)
            self._pump()
            raise BudgetUnavailable(project, timeout_s, self._controller.snapshot().reason) from None
        return ticket

    def release(
        self,
        ticket: int,
        latency_s: float,
        outcome: Outcome,
        retry_after_s: float | None = None,
        role: Role | None = None,
        charges: Sequence[Charge] = (),
        subject: str | None = None,
        call_id: str | None = None,
    ) -> None:
        """A call finished: its `charges` are booked to `role`, `subject` and `call_id` first, then its
        permit is freed (and goes to no waiter of a role or subject those charges capped)."""
        capped = False
        try:
            capped = self._desk.release(
                ticket,
                latency_s=latency_s,
                outcome=Outcome(outcome),
                retry_after_s=retry_after_s,
                role=role,
                charges=charges,
                subject=subject,
                call_id=call_id,
            )
        finally:  # an unknown ticket (this actor restarted) still has its charges booked and kept
            if charges:
                self._spend_booked(capped)
            self._pump()

    def snapshot(self) -> BudgetSnapshot:
        return self._controller.snapshot()

    # ---- quotas per person (cluster/auth/quota.py) -------------------------------------------
    async def admit_call(self, subject: str) -> None:
        """Count one MCP tool call of `subject`: QuotaExceeded past `quotas.requests_per_minute`."""
        self._quotas.admit(subject)

    async def take_call_credits(self, call_id: str) -> float:
        """The cloud credits a tool call's requests were charged, forgotten here (0 when none)."""
        return self._desk.calls.take(call_id)

    def subject_spend(self) -> dict[str, float]:
        """Credits each subject's calls spent today."""
        return self._quotas.spent_today()[1]

    def set_override(self, override: int | None) -> BudgetSnapshot:
        self._controller.set_override(override)
        self._pump()
        return self._controller.snapshot()

    def apply_key_facts(self, facts: KeyFacts) -> BudgetSnapshot:
        self._controller.apply_key_facts(facts)
        self._pump()
        return self._controller.snapshot()

    async def discover(self) -> BudgetSnapshot:
        """Read the key's limits through a virtual container (this actor never holds the key)."""
        facts = await key_facts_through(await discover_providers(self._settings))
        return self.apply_key_facts(facts) if facts is not None else self._controller.snapshot()

    # ---- spend (cluster/cloud/spend.py) ------------------------------------------------------
    def spend(self) -> SpendView:
        return self._spend.view()

    def set_caps(self, caps: Mapping[Role, float]) -> SpendView:
        """Replace the daily caps (the admin API persists them in the config store first); waiters of
        a role a lowered cap puts at its cap are refused at once."""
        self._spend.set_caps({Role(role): cap for role, cap in caps.items()})
        self._ensure_metrics()
        self._pump()
        return self._spend.view()

    def _spend_booked(self, capped: bool) -> None:
        """Charges were booked: written at once when they took a role to its cap, else within a second."""
        if capped:
            log.warning("a role's daily cap or a subject's daily credits reached: %s", self._spend.view().roles)
            self._write_spend()
        else:
            self._schedule_spend_write()
        self._ensure_metrics()

    def _schedule_spend_write(self) -> None:
        if self._spend_flush is None:
            loop = asyncio.get_running_loop()
            self._spend_flush = loop.call_later(SPEND_WRITE_INTERVAL_S, self._write_spend)

    def _write_spend(self) -> None:
        if self._spend_flush is not None:
            self._spend_flush.cancel()
            self._spend_flush = None
        try:
            self._spend_path.parent.mkdir(parents=True, exist_ok=True)
            day, subjects = self._quotas.spent_today()
            record = self._spend.record
            record = record.model_copy(update={"subjects": subjects if day == record.day else {}})
            write_bytes_atomic(self._spend_path, record.model_dump_json().encode())
        except OSError as exc:  # the ledger in memory still holds the caps; the next write retries
            log.warning("spend file %s not written: %s", self._spend_path, exc)

    # ---- internals ---------------------------------------------------------------------------
    def _pump(self) -> None:
        """Refuse every waiter whose role is at its spend cap, wake every waiter the budget admits
        now (cluster/cloud/permits.py); schedule the next look."""
        grants = self._desk.grant()
        for ticket, refusal in grants.refused.items():
            waiter = self._waiters.pop(ticket, None)
            if waiter is not None and not waiter.done():
                waiter.set_exception(refusal)
        for ticket in grants.granted:
            future = self._waiters.pop(ticket, None)
            if future is not None and not future.done():
                future.set_result(None)
            else:  # the waiter is gone: return its permit at once
                self._controller.release(ticket, latency_s=0.0, outcome=Outcome.ERROR)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        wake_at = self._controller.next_wakeup()
        if wake_at is not None:
            loop = asyncio.get_running_loop()
            delay = max(0.0, wake_at - time.monotonic())
            self._timer = loop.call_later(delay + 0.001, self._pump)

    def _ensure_discovery(self) -> None:
        if self._discovery is None:
            self._discovery = asyncio.get_running_loop().create_task(self._discovery_loop())
        self._ensure_metrics()

    def _ensure_metrics(self) -> None:
        """The budget and the spend as metrics (actors/metrics.py), from the first permit, charge or cap on."""
        if self._metrics is None:
            metrics = budget_metrics_loop(self._controller.snapshot, self._spend.view)
            self._metrics = asyncio.get_running_loop().create_task(metrics)

    async def _discovery_loop(self) -> None:
        while True:
            try:
                await self.discover()
            except Exception as exc:  # noqa: BLE001 - logged; the loop outlives one failed round
                log.warning("budget discovery failed: %s", exc)
            await asyncio.sleep(self._settings.budget.discovery_interval_s)


async def key_facts_through(found: Sequence[LiveProvider]) -> KeyFacts | None:
    """The key's limits, read through the first eligible virtual container that answers: an
    in-cluster one first, else one a sidecar hosts (through the fleet actor, by its name); None
    when none answers (the budget stays timid)."""
    for live in sorted(found, key=lambda live: live.info.hosted != "ray"):
        if live.handle is None or live.info.kind is not ProviderKind.CLOUD or not live.info.eligible:
            continue
        try:
            if live.info.hosted == "sidecar":
                facts: KeyFacts = await live.handle.key_facts.remote(live.info.name)
            else:
                facts = await live.handle.key_facts.remote()
        except Exception as exc:  # noqa: BLE001 - try the next container
            log.warning("budget discovery through %s failed: %s", live.info.name, exc)
            continue
        return facts
    return None


def get_budget_actor(settings: SamespaceSettings) -> ActorHandle:
    return get_or_start(BudgetActor, settings, BUDGET_ACTOR_NAME, settings)


async def with_permit(
    settings: SamespaceSettings,
    provider: str,
    call: Callable[[int], Awaitable[T]],
    role: Role | None = None,
    settle: Callable[[], Awaitable[list[Charge]]] | None = None,
) -> T:
    """Run one cloud call under a key-wide permit, for the current request's project, priority,
    subject and tool call (cluster/cloud/request_tag.py). `call` is handed the permit's ticket (a
    sidecar's virtual container sends it with the command it runs under).

    The permit goes back with the call's latency and outcome, and with what `settle()` says the
    responses so far cost (booked to `role`, the subject and the tool call before the permit is
    freed; awaited when the call serves a tool call, so the call's credits are there when it asks).
    A dead budget actor is recreated (timid again) and asked once more; a wait past the bound is a
    RateLimited for the lane; a `role` at its daily spend cap, or reaching it while this call waits,
    is SpendCapReached before any request, and a subject over its daily credits QuotaExceeded.
    """
    tag = current_request_tag()
    timeout_s = settings.budget.acquire_timeout_s
    ticket: int | None = None
    for attempt in range(2):
        budget = get_budget_actor(settings)
        try:
            ticket = await budget.acquire.remote(tag.project, tag.priority, timeout_s, role, tag.subject)
            break
        except RayActorError:
            if attempt == 1:
                raise
        except BudgetUnavailable as exc:
            raise RateLimited(provider, str(exc), status=None, retry_after_s=None) from exc
    assert ticket is not None  # acquired, or raised above
    started = time.monotonic()
    outcome, retry_after = Outcome.ERROR, None
    try:
        result = await call(ticket)
        outcome = Outcome.OK
        return result
    except RateLimited as exc:
        outcome, retry_after = Outcome.RATE_LIMITED, exc.retry_after_s
        raise
    finally:
        latency_s = time.monotonic() - started
        charges: list[Charge] = []
        try:
            if settle is not None:
                charges = await settle()
        finally:  # the permit goes back whatever settling did
            released: Any = budget.release.remote(
                ticket, latency_s, outcome, retry_after, role, charges, tag.subject, tag.call_id
            )
            if tag.call_id is not None and charges:
                await _released(released)


def request_tag_of(project: str | None, priority: str | None, subject: str | None, call_id: str | None) -> RequestTag:
    """The tag a cloud call arrives with (across an actor call): what it names, over the task's own."""
    default = current_request_tag()
    return RequestTag(
        project or default.project,
        Priority(priority or default.priority),
        subject or default.subject,
        call_id or default.call_id,
    )


async def _released(released: Awaitable[None]) -> None:
    """Wait for a release to be booked; a budget actor that died meanwhile loses only that call's line."""
    try:
        await released
    except RayError as exc:
        log.warning("a release was not booked: %s", type(exc).__name__)


__all__ = ["BudgetActor", "get_budget_actor", "key_facts_through", "request_tag_of", "with_permit"]
