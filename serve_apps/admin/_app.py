"""The admin app under /admin (same port as MCP): its routes over `AdminApi`, the token check, the ingress.

    serve run serve_apps.admin:build_app      # or via serve_config.yaml

Every route needs `Authorization: Bearer <SAMESPACE_ADMIN__TOKEN>` or, under auth.mode oauth, an OAuth
access token with samespace:admin; checked before anything else (no body is even parsed). A missing or
wrong token is 401: with no detail, or under oauth with the bearer challenge (serve_apps/oauth.py); a
valid access token without samespace:admin is 403 insufficient_scope. The route runs as its caller
(`cluster.auth.acting_as`): the token's principal, or `ADMIN_TOKEN_CALLER` for the admin token. The only
exceptions are the signed git webhook and the operator page's data-free shell, GET /ui and /ui.js
(serve_apps/admin/_page.py), which run as no one (`ANONYMOUS`). Responses and validation errors never
echo input. Every admin action is written to the audit log, which GET /audit reads
(serve_apps/admin/_audit.py).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from ray import serve
from ray.serve import Application

from cluster.admin.push_plan import OpenRouterPush
from cluster.auth import ANONYMOUS, AccessScope, Principal, TokenVerifier, acting_as
from cluster.errors import ConfigError
from cluster.settings import SamespaceSettings, load_settings
from serve_apps.admin._api import AdminApi, BudgetOverride, SpendCaps
from serve_apps.admin._audit import add_audit, replica_audit_log
from serve_apps.admin._indexes import HOOK_ROUTE, add_index_routes
from serve_apps.admin._jobs import JobList, add_job_routes
from serve_apps.admin._page import add_page_routes, is_open
from serve_apps.auth import bearer_matches
from serve_apps.http_guard import HttpGuard
from serve_apps.index_service import IndexService
from serve_apps.oauth import OAuthGate, oauth_verifier

log = logging.getLogger("samespace.admin")

# Whoever holds the admin token: every scope, every index.
ADMIN_TOKEN_CALLER = Principal(kind="token", subject="admin-token", scopes=frozenset(AccessScope))


def _admin_token_matches(authorization: str | None, settings: SamespaceSettings) -> bool:
    """The bearer is the admin token; a token file shortened below the minimum since start fails closed."""
    try:
        expected = settings.admin.expected_token()
    except ConfigError as exc:
        log.warning("admin token refused: %s", exc)
        return False
    return bearer_matches(authorization, expected)


async def _caller(request: Request, settings: SamespaceSettings, oauth: OAuthGate | None) -> Principal | Response:
    """Who calls an admin route (the admin token, or an access token with samespace:admin), or the refusal."""
    authorization = request.headers.get("authorization")
    if _admin_token_matches(authorization, settings):
        return ADMIN_TOKEN_CALLER
    if oauth is None:
        return Response(status_code=401)  # no detail
    caller = await oauth.authenticate(authorization)
    if isinstance(caller, Principal) and not caller.is_admin:
        return oauth.insufficient(AccessScope.ADMIN)
    return caller


def build_admin_asgi(
    api: AdminApi,
    settings: SamespaceSettings,
    indexes: IndexService | None = None,
    jobs: JobList | None = None,
    verifier: TokenVerifier | None = None,
) -> FastAPI:
    """The admin app; with `indexes`, its index routes and the git webhook too (serve_apps/admin/_indexes.py).
    The recent jobs (`jobs`, default Ray's job API: serve_apps/admin/_jobs.py) and the operator page
    (serve_apps/admin/_page.py) always. With `verifier` (auth.mode oauth), access tokens with
    samespace:admin are taken beside the admin token."""
    app = FastAPI(title="samespace admin", docs_url=None, redoc_url=None, openapi_url=None)
    oauth = OAuthGate.for_settings(verifier, settings) if verifier is not None else None
    add_audit(app, replica_audit_log(settings))  # first added, innermost: inside the token check (_audit.py)

    @app.middleware("http")
    async def require_token(request: Request, call_next: Any) -> Response:
        # The webhook is signed instead (a git host sends no bearer token); it checks its signature itself.
        signed = indexes is not None and request.url.path.endswith(HOOK_ROUTE) and request.method == "POST"
        # The operator page's shell and script (GET /ui, GET /ui.js, exactly) are open: a browser cannot send a
        # bearer header on a plain navigation. They hold no data at all; every figure on the page is fetched
        # by the script from the routes below, with the token the user typed into the page.
        shell = is_open(request)
        caller = ANONYMOUS if signed or shell else await _caller(request, settings, oauth)  # before any parsing
        if isinstance(caller, Response):
            return caller
        with acting_as(caller):
            response: Response = await call_next(request)
        return response

    app.add_middleware(HttpGuard, allowed_hosts=settings.serve.allowed_hosts)  # outermost: Host/Origin first

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        # Never echo input (a bad body may carry the key): location, message and type only.
        errors = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")} for e in exc.errors()
        ]
        return JSONResponse(status_code=422, content={"detail": errors})

    _add_status_routes(app, api)
    _add_cloud_routes(app, api)
    if indexes is not None:
        add_index_routes(app, indexes, settings)
    add_job_routes(app, jobs)
    add_page_routes(app)
    return app


def _add_status_routes(app: FastAPI, api: AdminApi) -> None:
    """What serves and why: providers, the gate, health, the sidecar fleet."""

    @app.get("/providers")
    async def providers() -> dict[str, Any]:
        return await api.providers()

    @app.get("/gate")
    async def gate() -> dict[str, Any]:
        return await api.gate(verify=False)

    @app.post("/gate/verify")
    async def gate_verify() -> dict[str, Any]:
        return await api.gate(verify=True)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return await api.health()

    @app.get("/sidecars")
    async def sidecars() -> dict[str, Any]:
        return await api.sidecars()


def _add_cloud_routes(app: FastAPI, api: AdminApi) -> None:
    """The cloud's budget, spend caps and OpenRouter configuration (the key is write-only)."""

    @app.get("/budget")
    async def budget() -> dict[str, Any]:
        return await api.budget()

    @app.put("/budget")
    async def budget_override(body: BudgetOverride) -> dict[str, Any]:
        return await api.budget(body)

    @app.put("/budget/caps")
    async def budget_caps(body: SpendCaps) -> dict[str, Any]:
        return await api.set_caps(body)

    @app.get("/openrouter")
    async def openrouter() -> dict[str, Any]:
        return await api.openrouter()

    @app.post("/openrouter")
    async def openrouter_push(body: OpenRouterPush) -> dict[str, Any]:
        try:
            return await api.push(body)
        except ConfigError as exc:  # a `targets` entry matching nothing: the field and position, never the value
            raise HTTPException(400, str(exc)) from None

    @app.post("/openrouter/repush")
    async def openrouter_repush() -> dict[str, Any]:
        return await api.repush()


@serve.deployment(ray_actor_options={"num_cpus": 0.05})
@serve.ingress()
class AdminIngress:
    def __init__(self, settings: SamespaceSettings) -> None:
        from actors.sync import get_sync_actor

        self._settings = settings
        self._api = AdminApi(settings)
        self._indexes = IndexService(settings, partial(get_sync_actor, settings))

    def __serve_build_asgi_app__(self) -> FastAPI:
        return build_admin_asgi(self._api, self._settings, self._indexes, verifier=oauth_verifier(self._settings))


def build_app(args: dict[str, Any] | None = None) -> Application:
    """Serve app builder (`serve run serve_apps.admin:build_app`, route prefix /admin)."""
    settings = load_settings(**(args or {}))
    return AdminIngress.bind(settings)  # type: ignore[attr-defined]  # .bind comes from @serve.deployment
