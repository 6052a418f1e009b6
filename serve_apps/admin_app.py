"""The admin API under /admin (same port as MCP): providers, gate, budget, health, the OpenRouter key.

    serve run serve_apps.admin_app:build_app      # or via serve_config.yaml

Every route needs `Authorization: Bearer <SAMESPACE_ADMIN__TOKEN>`; a missing or wrong token is
401 with no detail, checked before anything else (no body is even parsed). The key is write-only:
it goes to the virtual containers and nowhere else; responses and validation errors never echo
input.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from ray import serve
from ray.serve import Application

from cluster.cloud.state import ContainerState, disagreements
from cluster.config.store import PersistedConfig, PersistedRole
from cluster.providers import ProviderView
from cluster.roles import Policy, Role
from cluster.settings import CloudSettings, SamespaceSettings, load_settings
from serve_apps.auth import bearer_matches
from serve_apps.http_guard import HttpGuard

log = logging.getLogger("samespace.admin")


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)


class ModelPush(_Body):
    model: str = Field(min_length=1)
    provider: str | None = Field(default=None, min_length=1, description="Pinned upstream (embedding roles).")
    dims: int | None = Field(default=None, ge=1)


class OpenRouterPush(_Body):
    api_key: SecretStr | None = None
    base_url: str | None = Field(default=None, min_length=1)
    models: dict[Role, ModelPush] | None = None
    policies: dict[Role, Policy] | None = None

    @field_validator("base_url")
    @classmethod
    def _base_url_is_plain_http(cls, value: str | None) -> str | None:
        return None if value is None else CloudSettings.check_base_url(value)

    @model_validator(mode="after")
    def _embedding_models_are_pinned(self) -> OpenRouterPush:
        for role, push in (self.models or {}).items():
            if role.writes_index and push.provider is None:
                raise ValueError(f"models.{role.value}.provider: an embedding route must name a pinned upstream")
        return self

    @property
    def only_local_policies(self) -> bool:
        """Only policies, all `local`: the way out of a missing key, never refused for want of one."""
        return (
            self.api_key is None and self.base_url is None and not self.models
            and bool(self.policies) and all(p is Policy.LOCAL for p in (self.policies or {}).values())
        )


class BudgetOverride(_Body):
    max_concurrent: int | None = Field(ge=1, le=256)


class AdminApi:
    """Plain service behind the routes; reaches the actors through their named handles.

    Every actor call is awaited, and every blocking step (the config file, Ray's control-plane
    lookups that start or find actors) runs in a worker thread: a handler never stalls the loop.
    """

    def __init__(self, settings: SamespaceSettings) -> None:
        from cluster.config.store import ConfigStore

        self._settings = settings
        self._store = ConfigStore(settings.admin.config_path)
        self._push_lock = asyncio.Lock()  # persist-then-apply of one push never interleaves another's

    async def _dispatchers(self, roles: Iterable[Role]) -> dict[Role, Any]:
        from actors.dispatcher import get_dispatcher

        return await asyncio.to_thread(lambda: {role: get_dispatcher(self._settings, role) for role in roles})

    async def _views(self) -> dict[Role, list[ProviderView]]:
        """Per role, every provider as its dispatcher reports it now (the providers asked, not cached)."""
        dispatchers = await self._dispatchers(Role)
        views = await asyncio.gather(*(dispatchers[role].providers.remote() for role in Role))
        return dict(zip(Role, views, strict=True))

    async def providers(self) -> dict[str, Any]:
        dispatchers = await self._dispatchers(Role)
        views, reports = await asyncio.gather(
            self._views(), asyncio.gather(*(dispatchers[role].gate_reports.remote() for role in Role))
        )
        out: dict[str, Any] = {}
        for role, role_reports in zip(Role, reports, strict=True):
            by_provider = {r.key.provider: r for r in role_reports if r.key.regime}
            out[role.value] = [
                {
                    **view.model_dump(mode="json"),
                    "gate": by_provider[view.provider.name].model_dump(mode="json")
                    if view.provider.name in by_provider
                    else None,
                }
                for view in views[role]
            ]
        return out

    async def gate(self, verify: bool) -> dict[str, Any]:
        roles = (Role.CODE_EMBEDDING, Role.EMBEDDING)
        dispatchers = await self._dispatchers(roles)
        out: dict[str, Any] = {}
        for role in roles:
            if verify:
                await dispatchers[role].sentinel.remote()
            out[role.value] = [r.model_dump(mode="json") for r in await dispatchers[role].gate_reports.remote()]
        return out

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
        return snapshot.model_dump(mode="json")

    async def health(self) -> dict[str, Any]:
        """Ray answers, the store answers, per role the policy in force and who serves now, and
        `problems`: what stops a role from serving, in words (empty when nothing does)."""
        from actors import get_index_actor
        from cluster.config.store import overlay
        from cluster.cloud.key_readiness import local_only_roles, missing_key_message

        index = await asyncio.to_thread(get_index_actor, self._settings)
        names, views, stored = await asyncio.gather(
            index.names.remote(), self._views(), asyncio.to_thread(self._store.read)
        )
        effective = overlay(self._settings, stored)
        roles: dict[str, Any] = {}
        for role in Role:
            serving = [v.provider.name for v in views[role] if v.serves != "no"]
            policy = views[role][0].policy_in_force if views[role] else effective.policy(role)
            roles[role.value] = {"policy": policy.value, "serving": serving, "state": "serving" if serving else "none"}
        local_only = local_only_roles(self._settings)
        missing = missing_key_message(views, key_pushed_before=stored.key_pushed, local_only=local_only)
        problems = [missing] if missing else []
        return {"ray": "ok", "store": {"indexes": names}, "roles": roles, "problems": problems}

    async def sidecars(self) -> dict[str, Any]:
        """The fleet: each host, when it was last seen, its transport, and per role the provider it
        is, whether it serves, and the gate's verdict on it (embedding roles)."""
        from actors.fleet import find_fleet_actor
        from cluster.fleet.registry import Fleet
        from cluster.naming import sidecar_provider_name
        from cluster.fleet.providers import sidecar_providers

        fleet = await asyncio.to_thread(find_fleet_actor, self._settings)
        if fleet is not None:
            hosts, infos = await asyncio.gather(fleet.hosts.remote(), fleet.providers.remote())
        else:  # no sidecar reached this cluster since it started: the registry as persisted
            stored = await asyncio.to_thread(self._store.read)
            hosts = Fleet(time.monotonic, known=stored.sidecars).hosts()
            infos, _ = sidecar_providers(hosts, self._settings.embedding.width)
        roles_checked = (Role.CODE_EMBEDDING, Role.EMBEDDING)
        dispatchers = await self._dispatchers(roles_checked)
        verdicts: dict[str, Any] = {}
        for role in roles_checked:
            for report in await dispatchers[role].gate_reports.remote():
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
        return {"sidecars": out}

    async def _container_states(self) -> tuple[list[ContainerState], list[str]]:
        """What every virtual container holds, asked now; and those that did not answer."""
        from actors.registry import DESCRIBE_TIMEOUT_S, ensure_cloud_containers

        containers = await asyncio.to_thread(ensure_cloud_containers, self._settings)
        answers = await asyncio.gather(
            *(asyncio.wait_for(c.handle.state.remote(), DESCRIBE_TIMEOUT_S) for c in containers),
            return_exceptions=True,
        )
        states = [a for a in answers if isinstance(a, ContainerState)]
        silent = [
            f"{c.name}: did not answer ({type(a).__name__})"
            for c, a in zip(containers, answers, strict=True)
            if not isinstance(a, ContainerState)
        ]
        return states, silent

    async def openrouter(self) -> dict[str, Any]:
        """What is in force: the durable config over the settings, what each virtual container holds
        (asked now), and every way they differ. Never the key, only whether one is held."""
        from cluster.config.store import overlay

        stored, (states, silent) = await asyncio.gather(asyncio.to_thread(self._store.read), self._container_states())
        effective = overlay(self._settings, stored)
        return {
            "key_pushed": stored.key_pushed,
            "last_pushed_at": stored.last_pushed_at,
            "budget_override": stored.budget_override,
            "base_url": effective.cloud.base_url,
            "roles": {role.value: route.model_dump(mode="json") for role, route in sorted(effective.cloud.routes.items())},
            "policies": {role.value: effective.policy(role).value for role in Role},
            "pushed": stored.model_dump(mode="json", include={"base_url", "roles", "policies"}),
            "containers": [state.model_dump(mode="json") for state in sorted(states, key=lambda s: s.name)],
            "disagreements": silent + disagreements(effective, states),
        }

    async def push(self, body: OpenRouterPush) -> dict[str, Any]:
        """Persist what is safe, then put all of it in force: each role's dispatcher takes its
        policy, every virtual container merges what changed for its role (route, policy, base URL),
        then the key. A container that restarts meanwhile reads the same values from the store."""
        async with self._push_lock:
            stored = await asyncio.to_thread(self._store.read)
            if body.api_key is None and not stored.key_pushed and not body.only_local_policies:
                states, _ = await self._container_states()
                if not any(state.key_held for state in states):  # a key from the nodes' env counts
                    return {"ok": False, "pushed_to": [], "issues": ["no key has been pushed yet: include api_key"]}
            persisted = await asyncio.to_thread(self._store.update, lambda config: _merged(config, body))
            return await self._put_in_force(
                persisted,
                routes=set(body.models or {}),
                policies=set(body.policies or {}),
                base_url=body.base_url is not None,
                key=body.api_key,
                needs_containers=body.api_key is not None or bool(body.models) or body.base_url is not None,
            )

    async def repush(self) -> dict[str, Any]:
        """Re-send the whole durable config (never a key) to the dispatchers and every virtual container."""
        async with self._push_lock:
            persisted = await asyncio.to_thread(self._store.read)
            return await self._put_in_force(
                persisted, routes=set(Role), policies=set(Role), base_url=True, key=None, needs_containers=False
            )

    async def _put_in_force(
        self,
        persisted: PersistedConfig,
        *,
        routes: set[Role],
        policies: set[Role],
        base_url: bool,
        key: SecretStr | None,
        needs_containers: bool,
    ) -> dict[str, Any]:
        from actors.dispatcher import forget_discoveries, push_cloud_config
        from actors.registry import ensure_cloud_containers
        from cluster.config.store import overlay

        effective = overlay(self._settings, persisted)
        in_force_routes = {role: route for role, route in effective.cloud.routes.items() if role in routes}
        in_force_policies = {role: effective.policy(role) for role in policies}
        refs = await asyncio.to_thread(
            lambda: push_cloud_config(
                self._settings,
                routes=in_force_routes,
                policies=in_force_policies,
                base_url=effective.cloud.base_url if base_url else None,
            )
        )
        issues = [f"a push did not land: {type(r).__name__}" for r in await asyncio.gather(*refs, return_exceptions=True)
                  if isinstance(r, BaseException)]
        if in_force_routes:  # only once the routes landed: a discovery now sees the new model and pin
            await asyncio.gather(*await asyncio.to_thread(forget_discoveries, self._settings, list(in_force_routes)))
        containers = await asyncio.to_thread(ensure_cloud_containers, self._settings)
        if key is not None:  # the key last: no request goes out on the old route with it
            answers = await asyncio.gather(*(c.handle.set_key.remote(key) for c in containers), return_exceptions=True)
            issues += [f"{c.name}: the key did not land ({type(a).__name__})"
                       for c, a in zip(containers, answers, strict=True) if isinstance(a, BaseException)]
        touched = key is not None or base_url
        pushed = [c.name for c in containers if touched or c.role in in_force_routes or c.role in in_force_policies]
        if not containers and needs_containers:
            issues.append("no virtual container exists: enable the cloud (cloud.enabled) first")
        states, silent = await self._container_states()
        issues += silent + disagreements(effective, states)
        return {"ok": not issues, "pushed_to": pushed, "issues": issues}


def _merged(config: PersistedConfig, body: OpenRouterPush) -> PersistedConfig:
    """The stored config with a push merged in (never the key: only that and when one was pushed)."""
    roles = dict(config.roles)
    for role, push in (body.models or {}).items():
        roles[role] = PersistedRole(model=push.model, upstream=push.provider, dims=push.dims)
    update: dict[str, Any] = {"roles": roles, "policies": {**config.policies, **(body.policies or {})}}
    if body.base_url is not None:
        update["base_url"] = body.base_url
    if body.api_key is not None:
        update.update(key_pushed=True, last_pushed_at=time.time())
    return PersistedConfig.model_validate({**config.model_dump(), **update})


def _authorized(request: Request, settings: SamespaceSettings) -> bool:
    return bearer_matches(request.headers.get("authorization"), settings.admin.expected_token())


def build_admin_asgi(api: AdminApi, settings: SamespaceSettings) -> FastAPI:
    app = FastAPI(title="samespace admin", docs_url=None, redoc_url=None, openapi_url=None)

    @app.middleware("http")
    async def require_token(request: Request, call_next: Any) -> Response:
        if not _authorized(request, settings):
            return Response(status_code=401)  # no detail, before any parsing
        response: Response = await call_next(request)
        return response

    app.add_middleware(HttpGuard, allowed_hosts=settings.serve.allowed_hosts)  # outermost: Host/Origin first

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        # Never echo input (a bad body may carry the key): location, message and type only.
        errors = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")} for e in exc.errors()]
        return JSONResponse(status_code=422, content={"detail": errors})

    @app.get("/providers")
    async def providers() -> dict[str, Any]:
        return await api.providers()

    @app.get("/gate")
    async def gate() -> dict[str, Any]:
        return await api.gate(verify=False)

    @app.post("/gate/verify")
    async def gate_verify() -> dict[str, Any]:
        return await api.gate(verify=True)

    @app.get("/budget")
    async def budget() -> dict[str, Any]:
        return await api.budget()

    @app.put("/budget")
    async def budget_override(body: BudgetOverride) -> dict[str, Any]:
        return await api.budget(body)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return await api.health()

    @app.get("/sidecars")
    async def sidecars() -> dict[str, Any]:
        return await api.sidecars()

    @app.get("/openrouter")
    async def openrouter() -> dict[str, Any]:
        return await api.openrouter()

    @app.post("/openrouter")
    async def openrouter_push(body: OpenRouterPush) -> dict[str, Any]:
        return await api.push(body)

    @app.post("/openrouter/repush")
    async def openrouter_repush() -> dict[str, Any]:
        return await api.repush()

    return app


@serve.deployment(ray_actor_options={"num_cpus": 0.05})
@serve.ingress()
class AdminIngress:
    def __init__(self, settings: SamespaceSettings) -> None:
        self._settings = settings
        self._api = AdminApi(settings)

    def __serve_build_asgi_app__(self) -> FastAPI:
        return build_admin_asgi(self._api, self._settings)


def build_app(args: dict[str, Any] | None = None) -> Application:
    """Serve app builder (`serve run serve_apps.admin_app:build_app`, route prefix /admin)."""
    return AdminIngress.bind(load_settings(**(args or {})))  # type: ignore[attr-defined]
