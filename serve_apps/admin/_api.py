"""The admin API's service: providers, gate, budget, health, sidecars, the OpenRouter key and its push.

`AdminApi` is the plain class behind the routes of `serve_apps/admin/_app.py`; it reaches the actors
through their named handles. The key is write-only: it goes to the virtual containers (in the cluster,
and on the sidecars that host them, through the fleet actor) and nowhere else.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat
from ray.actor import ActorHandle
from ray.exceptions import ActorUnavailableError, RayActorError

from cluster.admin.key_targets import KeyTargets, any_key_held
from cluster.admin.push_plan import (
    NO_KEY_YET,
    OpenRouterPush,
    PushPlan,
    key_check_needed,
    merged,
    plan_push,
    plan_repush,
)
from cluster.admin.role_status import CallFailure, RoleAnswer, RoleStatus, role_answer
from cluster.cloud.state import ContainerState, disagreements
from cluster.errors import NoProviderLeft, original_error
from cluster.fleet import VirtualHost
from cluster.naming import dispatcher_actor_name
from cluster.providers import ProviderInfo, ProviderView
from cluster.roles import Role
from cluster.settings import SamespaceSettings

log = logging.getLogger("samespace.admin")

# How long a status route waits for one actor. A dispatcher's `providers()` asks every provider
# with a 10 s deadline of its own (actors.discovery.DESCRIBE_TIMEOUT_S), so this leaves room for that.
STATUS_TIMEOUT_S = 30.0
ANSWERED = RoleAnswer(status=RoleStatus.OK)

DispatcherLookup = Callable[[Role], ActorHandle]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)


class BudgetOverride(_Body):
    max_concurrent: int | None = Field(ge=1, le=256)


class SpendCaps(_Body):
    """`PUT /admin/budget/caps`: daily cloud spend caps in credits by role; null removes a role's cap.
    Roles not named keep theirs."""

    caps: dict[Role, NonNegativeFloat | None] = Field(min_length=1)


class AdminApi:
    """Plain service behind the routes; reaches the actors through their named handles.

    Every actor call is awaited, and every blocking step (the config file, Ray's control-plane
    lookups that start or find actors) runs in a worker thread: a handler never stalls the loop.
    A status read from an actor that Ray is restarting, or that is gone, is reported for its role
    (`role_status`), never raised: the route answers 200 for the other roles.

    dispatcher:       the role's dispatcher handle (default: found or started by name)
    status_timeout_s: how long a status read waits for one actor
    """

    def __init__(
        self,
        settings: SamespaceSettings,
        *,
        dispatcher: DispatcherLookup | None = None,
        status_timeout_s: float = STATUS_TIMEOUT_S,
    ) -> None:
        from cluster.config.store import ConfigStore

        self._settings = settings
        self._store = ConfigStore(settings.admin.config_path)
        self._dispatcher = dispatcher or partial(_find_dispatcher, settings)
        self._status_timeout_s = status_timeout_s
        self._push_lock = asyncio.Lock()  # persist-then-apply of one push never interleaves another's

    async def _dispatchers(self, roles: Iterable[Role]) -> dict[Role, Any]:
        return await asyncio.to_thread(lambda: {role: self._dispatcher(role) for role in roles})

    async def _read(
        self, name: str, handle: ActorHandle, method: str, timeout_s: float | None = None
    ) -> tuple[Any, RoleAnswer]:
        """One status read from an actor: its answer, or None with why it did not answer."""
        try:
            value = await asyncio.wait_for(getattr(handle, method).remote(), timeout_s or self._status_timeout_s)
        except (RayActorError, TimeoutError) as exc:  # GetTimeoutError is a TimeoutError too
            from actors.handles import actor_state

            answer = role_answer(name, _failure(exc), actor_state(handle), error=type(exc).__name__, restartable=True)
            log.warning("status read %s: %s", method, answer.detail)
            return None, answer
        return value, ANSWERED

    async def _read_roles(self, roles: Iterable[Role], method: str) -> dict[Role, tuple[Any, RoleAnswer]]:
        """`method` of each role's dispatcher, read concurrently."""
        roles = list(roles)
        dispatchers = await self._dispatchers(roles)
        reads = await asyncio.gather(
            *(self._read(dispatcher_actor_name(role), dispatchers[role], method) for role in roles)
        )
        return dict(zip(roles, reads, strict=True))

    async def _views(self) -> dict[Role, tuple[list[ProviderView] | None, RoleAnswer]]:
        """Per role, every provider as its dispatcher reports it now (the providers asked, not cached)."""
        return await self._read_roles(Role, "providers")

    async def providers(self) -> dict[str, Any]:
        """Per role its providers with the gate's verdict on each, and under `roles` whether its
        dispatcher answered (`ok`, `restarting`, `unavailable`: then the role lists none)."""
        views, reports = await asyncio.gather(self._views(), self._read_roles(Role, "gate_reports"))
        out: dict[str, Any] = {}
        answers: dict[str, Any] = {}
        for role in Role:
            (role_views, viewed), (role_reports, reported) = views[role], reports[role]
            by_provider = {r.key.provider: r for r in role_reports or [] if r.key.regime}
            out[role.value] = [
                {
                    **view.model_dump(mode="json"),
                    "gate": by_provider[view.provider.name].model_dump(mode="json")
                    if view.provider.name in by_provider
                    else None,
                }
                for view in role_views or []
            ]
            answers[role.value] = (viewed if viewed.status is not RoleStatus.OK else reported).model_dump(mode="json")
        return {**out, "roles": answers}

    async def gate(self, verify: bool) -> dict[str, Any]:
        roles = (Role.CODE_EMBEDDING, Role.EMBEDDING)
        refused: dict[str, str] = {}
        if verify:  # an action, not a status read: a dispatcher that cannot run it fails the call
            dispatchers = await self._dispatchers(roles)
            for role in roles:
                try:
                    await dispatchers[role].sentinel.remote()
                except NoProviderLeft as exc:  # verified, and nothing may serve: the reports say why
                    refused[role.value] = str(original_error(exc))
        reports = await self._read_roles(roles, "gate_reports")
        out: dict[str, Any] = {
            role.value: [r.model_dump(mode="json") for r in reports[role][0] or []] for role in roles
        }
        if verify:
            out["no_provider"] = refused
        return {**out, "roles": {role.value: reports[role][1].model_dump(mode="json") for role in roles}}

    async def budget(self, override: BudgetOverride | None = None) -> dict[str, Any]:
        from actors.budget import get_budget_actor

        budget = await asyncio.to_thread(get_budget_actor, self._settings)
        if override is not None:
            snapshot = await budget.set_override.remote(override.max_concurrent)
            await asyncio.to_thread(
                self._store.update, lambda c: c.model_copy(update={"budget_override": override.max_concurrent})
            )
        else:
            snapshot = await budget.snapshot.remote()
        spend = await budget.spend.remote()
        return {**snapshot.model_dump(mode="json"), "spend": spend.model_dump(mode="json")}

    async def set_caps(self, body: SpendCaps) -> dict[str, Any]:
        """Persist the caps in the config store, then put them in force in the budget actor."""
        from actors.budget import get_budget_actor
        from cluster.config.store import PersistedConfig, overlay

        def merge(config: PersistedConfig) -> PersistedConfig:
            return config.model_copy(update={"spend_caps": {**config.spend_caps, **body.caps}})

        caps = overlay(self._settings, await asyncio.to_thread(self._store.update, merge)).budget.daily_caps
        budget = await asyncio.to_thread(get_budget_actor, self._settings)
        spend = await budget.set_caps.remote(caps)
        return {"spend": spend.model_dump(mode="json")}

    async def health(self) -> dict[str, Any]:
        """Ray answers, the store answers, per role the policy in force and who serves now, and
        `problems`: what stops a role from serving, in words (empty when nothing does). A role whose
        dispatcher does not answer has the state `restarting` or `unavailable`, and a `detail`."""
        from actors import get_index_actor
        from cluster.cloud.key_readiness import local_only_roles, missing_key_message
        from cluster.config.store import overlay
        from cluster.naming import INDEX_ACTOR_NAME

        index = await asyncio.to_thread(get_index_actor, self._settings)
        (names, indexed), views, stored = await asyncio.gather(
            self._read(INDEX_ACTOR_NAME, index, "names"), self._views(), asyncio.to_thread(self._store.read)
        )
        effective = overlay(self._settings, stored)
        roles: dict[str, Any] = {}
        for role in Role:
            role_views, answer = views[role]
            if role_views is None:
                roles[role.value] = {
                    "policy": effective.policy(role).value,
                    "serving": [],
                    "state": answer.status.value,
                    "detail": answer.detail,
                }
                continue
            serving = [v.provider.name for v in role_views if v.serves != "no"]
            policy = role_views[0].policy_in_force if role_views else effective.policy(role)
            roles[role.value] = {"policy": policy.value, "serving": serving, "state": "serving" if serving else "none"}
        answered = {role: role_views for role, (role_views, _) in views.items() if role_views is not None}
        local_only = local_only_roles(self._settings)
        missing = missing_key_message(answered, key_pushed_before=stored.key_pushed, local_only=local_only)
        problems = [missing] if missing else []
        store: dict[str, Any] = {"indexes": names or []}
        if names is None:
            store.update(state=indexed.status.value, detail=indexed.detail)
        return {"ray": "ok", "store": store, "roles": roles, "problems": problems}

    async def sidecars(self) -> dict[str, Any]:
        """The fleet: each host, when it was last seen, its transport, and per role the provider it
        is, whether it serves, and the gate's verdict on it (embedding roles)."""
        from actors.fleet import find_fleet_actor
        from cluster.fleet.agent_registry import Fleet, HostView
        from cluster.fleet.sidecar_providers import sidecar_providers
        from cluster.naming import sidecar_provider_name

        fleet = await asyncio.to_thread(find_fleet_actor, self._settings)
        hosts: list[HostView]
        infos: list[ProviderInfo]
        if fleet is not None:
            hosts, infos = await asyncio.gather(fleet.hosts.remote(), fleet.providers.remote())
        else:  # no sidecar reached this cluster since it started: the registry as persisted
            stored = await asyncio.to_thread(self._store.read)
            hosts = Fleet(time.monotonic, known=stored.sidecars).hosts()
            infos, _ = sidecar_providers(hosts, self._settings.embedding.width)
        reports = await self._read_roles((Role.CODE_EMBEDDING, Role.EMBEDDING), "gate_reports")
        verdicts: dict[str, Any] = {}
        for role_reports, _ in reports.values():
            for report in role_reports or []:
                verdicts[report.key.provider] = {"verdict": report.verdict.value, "detail": report.detail}
        by_name = {info.name: info for info in infos}
        out = []
        for host in hosts:
            roles = {}
            for role, capability in host.capabilities.items():
                info = by_name.get(sidecar_provider_name(host.agent_url, host.agent_id, role))
                roles[role.value] = {
                    **capability.model_dump(mode="json", exclude={"role"}),
                    "provider": info.name if info else None,
                    "eligible": info.eligible if info else False,
                    "reason": info.reason if info else None,
                    "served": info.served if info else 0,
                    "gate": verdicts.get(info.name) if info else None,
                }
            out.append(
                {
                    "agent_url": host.agent_url,
                    "hostname": host.hostname,
                    "transport": host.transport,
                    "fresh": host.fresh,
                    "last_seen_s_ago": host.seen_s_ago,
                    "active_requests": host.active_requests,
                    "roles": roles,
                }
            )
        return {
            "sidecars": out,
            "gate": {role.value: answer.model_dump(mode="json") for role, (_, answer) in reports.items()},
        }

    async def _container_states(self) -> tuple[list[ContainerState], list[str]]:
        """What every virtual container holds, asked now; and, in words, those that did not answer."""
        from actors.discovery import DESCRIBE_TIMEOUT_S
        from actors.registry import ensure_cloud_containers

        containers = await asyncio.to_thread(ensure_cloud_containers, self._settings)
        reads = await asyncio.gather(*(self._read(c.name, c.handle, "state", DESCRIBE_TIMEOUT_S) for c in containers))
        states = [state for state, _ in reads if isinstance(state, ContainerState)]
        silent = [
            f"{answer.detail}: {answer.status.value}" for _, answer in reads if answer.status is not RoleStatus.OK
        ]
        return states, silent

    async def openrouter(self) -> dict[str, Any]:
        """What is in force: the durable config over the settings, what each virtual container holds
        (asked now), and every way they differ. Never the key, only whether one is held."""
        from cluster.config.store import overlay

        stored, (states, silent), hosts = await asyncio.gather(
            asyncio.to_thread(self._store.read), self._container_states(), self._sidecar_hosts()
        )
        effective = overlay(self._settings, stored)
        return {
            "key_pushed": stored.key_pushed,
            "last_pushed_at": stored.last_pushed_at,
            "budget_override": stored.budget_override,
            "base_url": effective.cloud.base_url,
            "roles": {
                role.value: route.model_dump(mode="json") for role, route in sorted(effective.cloud.routes.items())
            },
            "policies": {role.value: effective.policy(role).value for role in Role},
            "pushed": stored.model_dump(mode="json", include={"base_url", "roles", "policies"}),
            "containers": [state.model_dump(mode="json") for state in sorted(states, key=lambda s: s.name)],
            "sidecar_containers": [
                {"name": view.name, "role": view.role.value, "agent_url": host.agent_url, "key_held": view.key_held}
                for host in hosts
                for view in host.containers
            ],
            "disagreements": silent + disagreements(effective, states),
        }

    async def push(self, body: OpenRouterPush) -> dict[str, Any]:
        """Persist what is safe, then put all of it in force (`actors.config_push.put_in_force`). A
        container that restarts meanwhile reads the same values from the store. A key goes to every
        virtual container, in the cluster and on the sidecars, or to those `targets` names: a target
        matching nothing is a ConfigError (400) before anything is persisted or sent."""
        async with self._push_lock:
            stored = await asyncio.to_thread(self._store.read)
            targets = await self._key_targets(body)
            if key_check_needed(body, stored):
                states, _ = await self._container_states()
                # a key from the nodes' env counts, and one a sidecar's virtual container holds
                if not any_key_held(states, await self._sidecar_hosts()):
                    return {"ok": False, "pushed_to": [], "key_to": [], "issues": [NO_KEY_YET]}
            persisted = await asyncio.to_thread(self._store.update, lambda config: merged(config, body, time.time()))
            return await self._put_in_force(plan_push(self._settings, persisted, body), body, targets)

    async def _sidecar_hosts(self) -> list[VirtualHost]:
        """The reachable sidecars hosting virtual containers (`actors.config_push.sidecar_key_hosts`)."""
        from actors.config_push import sidecar_key_hosts

        return await sidecar_key_hosts(self._settings)

    async def _in_cluster_names(self) -> list[str]:
        from actors.registry import ensure_cloud_containers

        return [c.name for c in await asyncio.to_thread(ensure_cloud_containers, self._settings)]

    async def _key_targets(self, body: OpenRouterPush) -> KeyTargets | None:
        """Where the push's key goes (None: no key in it); ConfigError for a target matching nothing."""
        from cluster.admin.key_targets import key_targets

        if body.api_key is None:
            return None
        names, hosts = await asyncio.gather(self._in_cluster_names(), self._sidecar_hosts())
        return key_targets(body.targets, names, hosts)

    async def repush(self) -> dict[str, Any]:
        """Re-send the whole durable config (never a key) to the dispatchers and every virtual container."""
        async with self._push_lock:
            persisted = await asyncio.to_thread(self._store.read)
            return await self._put_in_force(plan_repush(self._settings, persisted), None)

    async def _put_in_force(
        self, plan: PushPlan, body: OpenRouterPush | None, targets: KeyTargets | None = None
    ) -> dict[str, Any]:
        """Send the plan, then ask the containers what they hold: what did not land is an issue.
        `key_to`: the virtual containers (in-cluster and on sidecars) that took the key, by name."""
        from actors.config_push import put_in_force

        key = body.api_key if body is not None else None
        containers, issues, keyed = await put_in_force(self._settings, plan, key, targets)
        in_cluster = {c.name for c in containers}
        on_sidecars = [name for name in keyed if name not in in_cluster]
        issues += plan.missing_containers(len(containers) + len(on_sidecars))
        states, silent = await self._container_states()
        issues += silent + disagreements(plan.effective, states)
        takes_key = targets.takes if targets is not None else None
        pushed_to = plan.pushed_to(((c.name, c.role) for c in containers), takes_key) + on_sidecars
        return {"ok": not issues, "pushed_to": pushed_to, "key_to": keyed, "issues": issues}


def _find_dispatcher(settings: SamespaceSettings, role: Role) -> ActorHandle:
    from actors.dispatcher import get_dispatcher

    return get_dispatcher(settings, role)


def _failure(exc: BaseException) -> CallFailure:
    """Ray's error for a status read, named: unreachable for now, dead, or too slow."""
    if isinstance(exc, ActorUnavailableError):
        return CallFailure.UNREACHABLE
    if isinstance(exc, RayActorError):
        return CallFailure.DIED
    return CallFailure.TIMED_OUT
