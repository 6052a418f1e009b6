"""The BudgetActor: one key-wide cloud budget above every virtual container (DESIGN §7).

A Ray shell (async, singleton, detached, get-if-exists) around cluster.cloud.budget.BudgetController.
It holds every waiter; a permit is one in-flight cloud request. It never holds the key:
discovery reads GET /key and /credits through a virtual container.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import ray
from ray.actor import ActorHandle
from ray.exceptions import RayActorError

from cluster.cloud.budget import BudgetController, BudgetLimits, BudgetSnapshot, KeyFacts, Outcome, Priority
from cluster.cloud.request_tag import current_request_tag
from cluster.errors import BudgetUnavailable, RateLimited
from cluster.naming import BUDGET_ACTOR_NAME
from cluster.settings import SamespaceSettings

log = logging.getLogger("samespace.budget")

T = TypeVar("T")


def budget_limits(settings: SamespaceSettings) -> BudgetLimits:
    return BudgetLimits(override=settings.budget.override, window_s=settings.budget.window_s)


@ray.remote(num_cpus=0, max_restarts=-1)
class BudgetActor:
    def __init__(self, settings: SamespaceSettings) -> None:
        from cluster.config.store import effective_settings

        settings = effective_settings(settings)  # the operator's override survives a restart
        self._settings = settings
        self._controller = BudgetController(budget_limits(settings), clock=time.monotonic, random=random.random)
        self._waiters: dict[int, asyncio.Future[None]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._discovery: asyncio.Task[None] | None = None

    async def acquire(self, project: str, priority: Priority, timeout_s: float) -> int:
        """Wait (bounded) for a permit; returns the ticket to release."""
        self._ensure_discovery()
        ticket = self._controller.enqueue(project, Priority(priority))
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters[ticket] = future
        self._pump()
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout_s)
        except (TimeoutError, asyncio.CancelledError):
            self._waiters.pop(ticket, None)
            if future.done():  # granted as we gave up: hand it straight back
                self._controller.release(ticket, latency_s=0.0, outcome=Outcome.ERROR)
            else:
                self._controller.cancel(ticket)
            self._pump()
            raise BudgetUnavailable(project, timeout_s, self._controller.snapshot().reason) from None
        return ticket

    def release(self, ticket: int, latency_s: float, outcome: Outcome, retry_after_s: float | None = None) -> None:
        self._controller.release(ticket, latency_s=latency_s, outcome=Outcome(outcome), retry_after_s=retry_after_s)
        self._pump()

    def snapshot(self) -> BudgetSnapshot:
        return self._controller.snapshot()

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
        from actors.registry import discover_providers
        from cluster.providers import ProviderKind

        for live in await discover_providers(self._settings):
            if live.handle is None or live.info.kind is not ProviderKind.CLOUD or not live.info.eligible:
                continue
            try:
                facts: KeyFacts = await live.handle.key_facts.remote()
            except Exception as exc:  # noqa: BLE001 - try the next container; the budget stays timid
                log.warning("budget discovery through %s failed: %s", live.info.name, exc)
                continue
            return self.apply_key_facts(facts)
        return self._controller.snapshot()

    # ---- internals ---------------------------------------------------------------------------
    def _pump(self) -> None:
        """Wake every waiter the controller admits now; schedule the next look."""
        for ticket in self._controller.grant():
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

    async def _discovery_loop(self) -> None:
        while True:
            try:
                await self.discover()
            except Exception as exc:  # noqa: BLE001 - logged; the loop outlives one failed round
                log.warning("budget discovery failed: %s", exc)
            await asyncio.sleep(self._settings.budget.discovery_interval_s)


def get_budget_actor(settings: SamespaceSettings) -> ActorHandle:
    return BudgetActor.options(  # type: ignore[attr-defined]  # .options comes from @ray.remote
        name=BUDGET_ACTOR_NAME,
        namespace=settings.ray.namespace,
        lifetime="detached",
        get_if_exists=True,
    ).remote(settings)


async def with_permit(settings: SamespaceSettings, provider: str, call: Callable[[], Awaitable[T]]) -> T:
    """Run one cloud call under a key-wide permit, for the current request's project and priority.

    The permit goes back with the call's latency and outcome. A dead budget actor is recreated
    (timid again) and asked once more; a wait past the bound is a RateLimited for the lane.
    """
    tag = current_request_tag()
    timeout_s = settings.budget.acquire_timeout_s
    ticket: int | None = None
    for attempt in range(2):
        budget = get_budget_actor(settings)
        try:
            ticket = await budget.acquire.remote(tag.project, tag.priority, timeout_s)
            break
        except RayActorError:
            if attempt == 1:
                raise
        except BudgetUnavailable as exc:
            raise RateLimited(provider, str(exc), status=None, retry_after_s=None) from exc
    started = time.monotonic()
    outcome, retry_after = Outcome.ERROR, None
    try:
        result = await call()
        outcome = Outcome.OK
        return result
    except RateLimited as exc:
        outcome, retry_after = Outcome.RATE_LIMITED, exc.retry_after_s
        raise
    finally:
        budget.release.remote(ticket, time.monotonic() - started, outcome, retry_after)


__all__ = ["BudgetActor", "get_budget_actor", "with_permit"]
