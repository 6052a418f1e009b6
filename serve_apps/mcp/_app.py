"""The replica's app: MCP over streamable HTTP on Ray Serve (stateless, JSON responses, 2+ replicas safe),
`POST /rlm/ask`, `/healthz`, the sidecar routes and the admin app under /admin.

    serve run serve_apps.mcp:build_app          # or: serve deploy serve_config.yaml

Endpoint: http://127.0.0.1:8000/mcp/ ; sidecars dial ws://127.0.0.1:8000/sidecar (serve_apps/mcp/_sidecar_routes.py);
the admin API answers under http://127.0.0.1:8000/admin/ from the same replicas (serve_apps/admin/).
Every route sits behind serve_apps/http_guard.py (Host/Origin; by `auth.mode`, no caller check, `serve.token`,
or OAuth access tokens for /mcp and /rlm/ask, each request run as its caller); under auth.mode oauth the
protected-resource metadata answers at /.well-known/oauth-protected-resource[/mcp] (serve_apps/oauth.py).
An ask reports its progress: ask_code as MCP progress notifications to a caller with a progress token,
/rlm/ask as server-sent events to a request that accepts `text/event-stream`. A resource subscription
(`subscriptions/listen`) is one POST whose response is its stream, on any replica (`_resources.py`).
Everything MCP is built inside each replica
(`__serve_build_asgi_app__`): MCP server objects do not pickle.
"""

from __future__ import annotations

import contextlib
import functools
import math
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import StreamingResponse
from mcp.server.transport_security import TransportSecuritySettings
from ray import serve
from ray.actor import ActorHandle
from ray.serve import Application

from cluster.ask.pipeline import AskRequest, AskResult
from cluster.auth import TokenVerifier
from cluster.config import ConfigStore
from cluster.errors import AccessDenied, ConfigError, LimitExceeded, QuotaExceeded, original_error
from cluster.index import IndexAcl
from cluster.search import CodeSearchService
from cluster.settings import AuthMode, SamespaceSettings, load_settings
from serve_apps.admin import AdminApi, build_admin_asgi
from serve_apps.body_limits import parse_body, read_capped_body
from serve_apps.http_guard import HttpGuard
from serve_apps.index_service import IndexService
from serve_apps.mcp._ask import AskService, ask_events
from serve_apps.mcp._calls import ToolCalls, audited_call
from serve_apps.mcp._progress_router import MAX_BODY_BYTES, ProgressRouter
from serve_apps.mcp._resources import ResourceFeed
from serve_apps.mcp._sidecar_routes import REPLICA_MAX_ONGOING_REQUESTS, SIDECAR_ROUTE, add_sidecar_routes
from serve_apps.mcp._tools import build_mcp_server
from serve_apps.oauth import OAuthGate, metadata_paths, metadata_routes, oauth_verifier

MCP_ROUTE = "/mcp"
ASK_ROUTE = "/rlm/ask"
ASK_ACTION = "POST /rlm/ask"  # its audit lines' action
EVENT_STREAM = "text/event-stream"
ADMIN_ROUTE = "/admin"
HEALTH_ROUTE = "/healthz"


def build_asgi_app(
    service: CodeSearchService,
    asker: AskService,
    settings: SamespaceSettings,
    fleet: Callable[[], ActorHandle] | None = None,
    admin: FastAPI | None = None,
    indexes: IndexService | None = None,
    verifier: TokenVerifier | None = None,
) -> FastAPI:
    """The replica's app: /mcp, /rlm/ask, /healthz, the sidecar routes when `fleet` is given, and the
    admin API under /admin when `admin` is given (it checks its own token, not `serve.token`).
    Under auth.mode oauth, `verifier` checks the access tokens (required) and the metadata is served."""
    # Host/Origin are checked once, for every route, by HttpGuard below; the SDK's own check is off.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    # the replica's subscriptions: one bus and one status watch for both servers; each stream hears only
    # of the indexes its caller may read
    feed = ResourceFeed(service, acl=IndexAcl(settings.index.acl, settings.limits))
    # scope, quota and audit of every tool call and of /rlm/ask: the replica's (an app without the Ray
    # asker, in unit tests, checks the scope alone, as build_mcp_server does)
    calls = ToolCalls.for_replica(settings) if isinstance(asker, AskService) else ToolCalls()
    servers = [  # JSON replies; SSE for progress
        build_mcp_server(service, asker, indexes, feed, calls=calls) for _ in range(2)
    ]
    json_app, sse_app = (
        server.streamable_http_app(
            streamable_http_path="/", stateless_http=True, json_response=json, transport_security=security
        )
        for server, json in zip(servers, (True, False), strict=True)
    )
    mcp_asgi = ProgressRouter(json_app, sse_app)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:  # a mounted sub-app's lifespan is not run by FastAPI
            for server in servers:
                await stack.enter_async_context(server.session_manager.run())
            yield

    api = FastAPI(title="samespace MCP", lifespan=lifespan)

    @api.get(HEALTH_ROUTE)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    _add_ask_route(api, asker, settings, calls)

    if fleet is not None:
        add_sidecar_routes(api, settings, fleet)
    api.mount(MCP_ROUTE, mcp_asgi)
    if admin is not None:
        api.mount(ADMIN_ROUTE, admin)
    mode, oauth = settings.auth_mode, None
    if mode is AuthMode.OAUTH:
        if verifier is None:
            raise ConfigError("auth.mode", "oauth needs a token verifier (cluster.auth.JwtVerifier)")
        oauth = OAuthGate.for_settings(verifier, settings, rpc_routes={MCP_ROUTE: MAX_BODY_BYTES})
        api.router.routes.extend(metadata_routes(settings, MCP_ROUTE))
    api.add_middleware(
        HttpGuard,
        allowed_hosts=settings.serve.allowed_hosts,
        token=settings.serve.expected_token() if mode is AuthMode.TOKEN else None,
        oauth=oauth,
        # The metadata's paths need no token in any mode (404 but under oauth).
        open_paths=(HEALTH_ROUTE, *metadata_paths(settings.resource_url, MCP_ROUTE)),
        machine_prefixes=(SIDECAR_ROUTE,),
        own_token_prefixes=(ADMIN_ROUTE,) if admin is not None else (),
    )
    return api


def _add_ask_route(api: FastAPI, asker: AskService, settings: SamespaceSettings, calls: ToolCalls) -> None:
    """`POST /rlm/ask`: the ask over plain HTTP, held to the caller's scope, rate and audit as a tool call."""

    @api.post(ASK_ROUTE, response_model=AskResult)
    async def rlm_ask(http: Request) -> AskResult | StreamingResponse:
        """The same ask as the MCP tool `ask_code`, over plain HTTP (an `AskRequest` body: 422 names a
        bad field; read as a capped stream, 413 past `limits.max_ask_body_bytes`; 422 for a `repo` over
        the glob caps). With `Accept: text/event-stream`: server-sent events, `progress` as the steps
        happen, then one `result` (or `error`). Like a tool call it is the caller's (`audited_call`: the
        read scope, the caller's rate, one audit line): 403 without the scope, 429 over the rate (an
        `error` event on a stream)."""
        body = await read_capped_body(http, settings.limits.max_ask_body_bytes, "max_ask_body_bytes")
        request = parse_body(AskRequest, body)
        audited = functools.partial(audited_call, ASK_ACTION, calls=calls, scope=request.repo, query=request.question)
        if EVENT_STREAM in http.headers.get("accept", ""):
            headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
            events = ask_events(asker, request, audited)
            return StreamingResponse(events, media_type=EVENT_STREAM, headers=headers)
        try:
            answer: AskResult = await audited(asker.ask(request))
        except LimitExceeded as exc:
            raise HTTPException(422, str(original_error(exc))) from exc
        except AccessDenied as exc:
            raise HTTPException(403, str(original_error(exc))) from exc
        except QuotaExceeded as exc:
            refusal = original_error(exc)
            retry = {"Retry-After": str(math.ceil(refusal.retry_after_s))} if isinstance(refusal, QuotaExceeded) else {}
            raise HTTPException(429, str(refusal), headers=retry) from exc
        return answer


@serve.deployment(ray_actor_options={"num_cpus": 0.1}, max_ongoing_requests=REPLICA_MAX_ONGOING_REQUESTS)
@serve.ingress()
class McpIngress:
    """Thin shell: finds the actors, builds the MCP ASGI app inside the replica, with the admin API
    under /admin (`serve_apps.admin`: one replica process serves both; `AdminIngress` deploys
    the admin API on its own instead)."""

    def __init__(self, settings: SamespaceSettings) -> None:
        from actors import get_index_actor
        from actors.dispatcher import LazyDispatcher, get_dispatcher
        from actors.query_path import QueryPath
        from actors.search_ports import IndexActorPort, RerankerPort
        from cluster.roles import Role
        from cluster.search.query_cache import QueryVectorCache

        self._settings = settings
        self._service = CodeSearchService(
            IndexActorPort(get_index_actor(settings)),
            QueryPath(get_dispatcher(settings, Role.CODE_EMBEDDING)),
            RerankerPort(LazyDispatcher(settings, Role.RERANKER)),
            settings.reranker.candidates,
            QueryVectorCache(
                ttl_s=settings.rlm.query_cache_ttl_s, max_entries=settings.rlm.query_cache_entries, clock=time.monotonic
            ),
            settings.search,
            limits=settings.limits,
        )
        self._asker = AskService(
            self._service, settings, LazyDispatcher(settings, Role.RLM), LazyDispatcher(settings, Role.CODE_ASSISTANT)
        )
        self._admin = AdminApi(settings)
        self._fleet: ActorHandle | None = None
        self._sync: ActorHandle | None = None
        self._indexes = IndexService(settings, self._sync_actor)
        if ConfigStore(settings.admin.config_path).read_indexes():  # registrations survive a restart: sync them
            self._sync_actor()

    def _sync_actor(self) -> ActorHandle:
        """The sync actor, started by the first index request (or at start, when indexes are registered)."""
        from actors.sync import get_sync_actor

        if self._sync is None:
            self._sync = get_sync_actor(self._settings)
        return self._sync

    def _fleet_actor(self) -> ActorHandle:
        """The fleet actor, started when the first sidecar reaches this replica."""
        from actors.fleet import get_fleet_actor

        if self._fleet is None:
            self._fleet = get_fleet_actor(self._settings)
        return self._fleet

    def __serve_build_asgi_app__(self) -> FastAPI:
        verifier = oauth_verifier(self._settings)  # under auth.mode oauth only; one per replica (its key cache)
        admin = build_admin_asgi(self._admin, self._settings, self._indexes, verifier=verifier)
        return build_asgi_app(
            self._service, self._asker, self._settings, self._fleet_actor, admin, self._indexes, verifier
        )


def build_app(args: dict[str, Any] | None = None) -> Application:
    """Serve app builder (`serve run serve_apps.mcp:build_app`); args override settings."""
    settings = load_settings(**(args or {}))
    return McpIngress.options(  # type: ignore[attr-defined]  # .options comes from @serve.deployment
        num_replicas=settings.serve.mcp_replicas
    ).bind(settings)
