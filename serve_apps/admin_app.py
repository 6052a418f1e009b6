"""The admin API under /admin (same port as MCP): providers, gate, budget, health, the OpenRouter key.

    serve run serve_apps.admin_app:build_app      # or via serve_config.yaml

Every route needs `Authorization: Bearer <SAMESPACE_ADMIN__TOKEN>`; a missing or wrong token is
401 with no detail, checked before anything else (no body is even parsed). The key is write-only:
it goes to the virtual containers and nowhere else; responses and validation errors never echo
input.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator
from ray import serve
from ray.serve import Application

from cluster.roles import Policy, Role
from cluster.settings import SamespaceSettings, load_settings
from serve_apps.auth import bearer_matches

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

    @model_validator(mode="after")
    def _embedding_models_are_pinned(self) -> OpenRouterPush:
        for role, push in (self.models or {}).items():
            if role.writes_index and push.provider is None:
                raise ValueError(f"models.{role.value}.provider: an embedding route must name a pinned upstream")
        return self


class BudgetOverride(_Body):
    max_concurrent: int | None = Field(ge=1, le=256)


class AdminApi:
    """Plain service behind the routes; reaches the actors through their named handles."""

    def __init__(self, settings: SamespaceSettings) -> None:
        from cluster.config_store import ConfigStore

        self._settings = settings
        self._store = ConfigStore(settings.admin.config_path)

    async def providers(self) -> dict[str, Any]:
        from actors.dispatcher import get_dispatcher

        out: dict[str, Any] = {}
        for role in Role:
            dispatcher = get_dispatcher(self._settings, role)
            views = await dispatcher.providers.remote()
            reports = {r.key.provider: r for r in await dispatcher.gate_reports.remote() if r.key.regime}
            out[role.value] = [
                {
                    **view.model_dump(mode="json"),
                    "gate": reports[view.provider.name].model_dump(mode="json")
                    if view.provider.name in reports
                    else None,
                }
                for view in views
            ]
        return out

    async def gate(self, verify: bool) -> dict[str, Any]:
        from actors.dispatcher import get_dispatcher

        out: dict[str, Any] = {}
        for role in (Role.CODE_EMBEDDING, Role.EMBEDDING):
            dispatcher = get_dispatcher(self._settings, role)
            if verify:
                await dispatcher.sentinel.remote()
            out[role.value] = [r.model_dump(mode="json") for r in await dispatcher.gate_reports.remote()]
        return out

    async def budget(self, override: BudgetOverride | None = None) -> dict[str, Any]:
        from actors.budget import get_budget_actor

        budget = get_budget_actor(self._settings)
        if override is not None:
            snapshot = await budget.set_override.remote(override.max_concurrent)
            self._store.update(lambda c: c.model_copy(update={"budget_override": override.max_concurrent}))
        else:
            snapshot = await budget.snapshot.remote()
        return snapshot.model_dump(mode="json")

    async def health(self) -> dict[str, Any]:
        """Ray answers, the store answers, and per role: the policy in force and who serves now."""
        from actors import get_index_actor
        from actors.dispatcher import get_dispatcher

        names = await get_index_actor(self._settings).names.remote()
        roles: dict[str, Any] = {}
        for role in Role:
            views = await get_dispatcher(self._settings, role).providers.remote()
            serving = [v.provider.name for v in views if v.serves != "no"]
            policy = views[0].policy_in_force.value if views else self._settings.policy(role).value
            roles[role.value] = {"policy": policy, "serving": serving, "state": "serving" if serving else "none"}
        return {"ray": "ok", "store": {"indexes": names}, "roles": roles}

    async def sidecars(self) -> dict[str, Any]:
        """The fleet: each host, when it was last seen, its transport, and per role the provider it
        is, whether it serves, and the gate's verdict on it (embedding roles)."""
        from actors.dispatcher import get_dispatcher
        from actors.fleet import find_fleet_actor
        from cluster.fleet import Fleet
        from cluster.naming import sidecar_provider_name
        from cluster.sidecar_providers import sidecar_providers

        fleet = find_fleet_actor(self._settings)
        if fleet is not None:
            hosts = await fleet.hosts.remote()
            infos = await fleet.providers.remote()
        else:  # no sidecar reached this cluster since it started: the registry as persisted
            hosts = Fleet(time.monotonic, known=self._store.read().sidecars).hosts()
            infos, _ = sidecar_providers(hosts, self._settings.embedding.width)
        verdicts: dict[str, Any] = {}
        for role in (Role.CODE_EMBEDDING, Role.EMBEDDING):
            for report in await get_dispatcher(self._settings, role).gate_reports.remote():
                verdicts[report.key.provider] = {"verdict": report.verdict.value, "detail": report.detail}
        by_name = {info.name: info for info in infos}
        out = []
        for host in hosts:
            roles = {}
            for role, capability in host.capabilities.items():
                info = by_name.get(sidecar_provider_name(host.agent_url, role))
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

    def openrouter(self) -> dict[str, Any]:
        return self._store.read().model_dump(mode="json")

    async def push(self, body: OpenRouterPush) -> dict[str, Any]:
        from actors.dispatcher import push_policy
        from actors.registry import ensure_virtual_containers
        from cluster.settings import RoleRoute

        stored = self._store.read()
        if body.api_key is None and not stored.key_pushed:
            return {"ok": False, "pushed_to": [], "issues": ["no key has been pushed yet: include api_key"]}
        containers = ensure_virtual_containers(self._settings)
        infos = [await c.describe.remote() for c in containers]
        pushed: list[str] = []
        issues: list[str] = []
        for handle, info in zip(containers, infos, strict=True):
            role = info.roles[0]
            if body.models and role in body.models:
                push = body.models[role]
                route = RoleRoute(model=push.model, upstream=push.provider)
                policy = (body.policies or {}).get(role, self._settings.policy(role))
                await handle.apply.remote(route, policy)
            if body.api_key is not None:
                await handle.set_key.remote(body.api_key)
            pushed.append(info.name)
        for role, policy in (body.policies or {}).items():
            push_policy(self._settings, role, policy)
        if not containers:
            issues.append("no virtual container exists: enable the cloud (cloud.enabled) to push a key")

        def change(config: Any) -> Any:
            from cluster.config_store import PersistedRole

            roles = dict(config.roles)
            for role, push in (body.models or {}).items():
                roles[role] = PersistedRole(model=push.model, upstream=push.provider, dims=push.dims)
            update: dict[str, Any] = {"roles": roles, "policies": {**config.policies, **(body.policies or {})}}
            if body.base_url is not None:
                update["base_url"] = body.base_url
            if body.api_key is not None:
                update.update(key_pushed=True, last_pushed_at=time.time())
            return config.model_validate({**config.model_dump(), **update})

        self._store.update(change)
        return {"ok": not issues, "pushed_to": pushed, "issues": issues}

    async def repush(self) -> dict[str, Any]:
        """Re-send the persisted settings (never a key) to every virtual container."""
        from actors.registry import ensure_virtual_containers
        from cluster.settings import RoleRoute

        stored = self._store.read()
        pushed = []
        for handle in ensure_virtual_containers(self._settings):
            info = await handle.describe.remote()
            role = info.roles[0]
            if role in stored.roles:
                persisted = stored.roles[role]
                policy = stored.policies.get(role, self._settings.policy(role))
                await handle.apply.remote(RoleRoute(model=persisted.model, upstream=persisted.upstream), policy)
                pushed.append(info.name)
        return {"ok": True, "pushed_to": pushed, "issues": []}


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
        return api.openrouter()

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
