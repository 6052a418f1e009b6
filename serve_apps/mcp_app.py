"""MCP server over streamable HTTP on Ray Serve: stateless, JSON responses, 2+ replicas safe.

    serve run serve_apps.mcp_app:build_app          # or: serve deploy serve_config.yaml

Endpoint: http://127.0.0.1:8000/mcp/ ; sidecars dial ws://127.0.0.1:8000/sidecar (serve_apps/sidecar_routes.py);
the admin API answers under http://127.0.0.1:8000/admin/ from the same replicas (serve_apps/admin_app.py).
Every route sits behind serve_apps/http_guard.py (Host/Origin; `serve.token` for /mcp and /rlm/ask).
An ask reports its progress: ask_code as MCP progress notifications to a caller with a progress token,
/rlm/ask as server-sent events to a request that accepts `text/event-stream`.
Everything MCP is built inside each replica
(`__serve_build_asgi_app__`): MCP server objects do not pickle.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import StreamingResponse
from mcp.server.mcpserver import Context
from pydantic import Field
from ray import serve
from ray.actor import ActorHandle
from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError, RayError
from ray.serve import Application

from cluster.ask.pipeline import AskRequest, AskResult
from cluster.ask.progress import AskProgress, ProgressCallback
from cluster.config import ConfigStore
from cluster.errors import LimitExceeded, SamespaceError, original_error
from cluster.index import SearchMode
from cluster.ingest.languages import KNOWN_LANGUAGES
from cluster.ingest.source import SourceLines
from cluster.search import CodeSearchService, FileSearchResult, IndexStatus, SearchResult, SymbolSearchResult
from cluster.search.models import Neighbors, RepoOverview
from cluster.settings import SamespaceSettings, load_settings
from cluster.sync import BuildReport
from cluster.types import Strict
from serve_apps.admin_app import AdminApi, build_admin_asgi
from serve_apps.ask_service import AskService, ask_events
from serve_apps.body_limits import parse_body, read_capped_body
from serve_apps.http_guard import HttpGuard
from serve_apps.index_tools import IndexService
from serve_apps.progress_router import ProgressRouter
from serve_apps.sidecar_routes import REPLICA_MAX_ONGOING_REQUESTS, SIDECAR_ROUTE, add_sidecar_routes

log = logging.getLogger("samespace.mcp")

MCP_ROUTE = "/mcp"
ASK_ROUTE = "/rlm/ask"
EVENT_STREAM = "text/event-stream"
ADMIN_ROUTE = "/admin"
HEALTH_ROUTE = "/healthz"
SERVER_NAME = "samespace"
MAX_K = 50
MAX_QUERY_CHARS = 2000

INSTRUCTIONS = (
    "samespace answers questions about indexed code bases. ask_code answers a question with citations "
    "(path:start-end), looking again with a retrieval model when one serves. Use search_code to find code "
    "by meaning (natural language or code), search_symbols to find a definition by name, search_files to "
    "find files by path, neighbors for the chunks around a hit, read_code to read exact lines, "
    "repo_overview for a repository's shape, and index_status to see which repositories are indexed and how "
    "stale each is. index_repository indexes a folder (or a git ref of it) and keeps it fresh, refresh_index "
    "reindexes one now, remove_index drops one."
)
RepoArg = Annotated[
    str | None, Field(description="The indexed repo (see index_status); None: the only one, when there is one.")
]
ScopeArg = Annotated[
    str | None,
    Field(
        description="Which indexes: a repo (see index_status), a glob ('api*'), a group ('@backend', "
        "configured in index.groups), or None for every index."
    ),
]


class RemovedIndex(Strict):
    index: str
    builds: list[str] = Field(description="The build collections dropped (none: it was registered, never built).")


def _wants_progress(ctx: Context) -> bool:
    """Whether the caller asked for progress notifications (its request carries a progress token)."""
    meta = ctx.request_context.meta or {}
    return bool(meta.get("progress_token") or meta.get("progressToken"))


def _ask_progress(ctx: Context) -> ProgressCallback:
    """An ask's steps as the caller's progress notifications: progress = the step (only increases),
    total once the ask is done, the step's message."""

    async def report(event: AskProgress) -> None:
        await ctx.report_progress(event.step, event.total, event.message)

    return report


def build_mcp_server(service: CodeSearchService, asker: AskService, indexes: IndexService | None = None) -> Any:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    # WARNING: at INFO the SDK logs every stateless request ("Terminating session") through rich,
    # which cost more CPU than the request itself.
    mcp = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")

    @mcp.tool()
    async def search_code(
        query: Annotated[
            str,
            Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What to find: a description or code."),
        ],
        k: Annotated[int, Field(ge=1, le=MAX_K, description="How many hits to return.")] = 10,
        repo: ScopeArg = None,
        path_prefix: Annotated[
            str | None, Field(description="Only files under this folder or this exact file, e.g. 'src/api'.")
        ] = None,
        language: Annotated[
            str | None, Field(description=f"Only this language, one of: {', '.join(sorted(KNOWN_LANGUAGES))}.")
        ] = None,
        mode: Annotated[
            SearchMode,
            Field(
                description="hybrid (meaning + exact words, fused; best), dense (meaning only), keyword (BM25 only)."
            ),
        ] = "hybrid",
        rerank: Annotated[
            bool, Field(description="Re-score the top candidates with the reranker when one serves.")
        ] = True,
    ) -> SearchResult:
        """Code search over the indexed repositories: by meaning and by exact identifiers, fused.

        Returns the best-matching functions, classes, methods and doc sections with their repo, path,
        line range, symbol, language, score and a snippet. Follow up with read_code for full context.
        """
        return await _tool_call("search_code", service.search_code(query, k, repo, path_prefix, language, rerank, mode))

    @mcp.tool()
    async def read_code(
        repo: Annotated[str, Field(min_length=1, description="Indexed repo name (see index_status).")],
        path: Annotated[str, Field(min_length=1, description="Repo-relative file path, as in search hits.")],
        start_line: Annotated[int, Field(ge=1, description="First line, 1-based.")],
        end_line: Annotated[int, Field(ge=1, description="Last line, inclusive.")],
    ) -> SourceLines:
        """Read exact source lines of a file in an indexed repository (bounded per call)."""
        if end_line < start_line:
            raise ToolError(f"end_line ({end_line}) must be >= start_line ({start_line})")
        return await _tool_call("read_code", service.read_code(repo, path, start_line, end_line))

    @mcp.tool()
    async def index_status(
        repo: Annotated[
            str | None, Field(description="Only indexes whose name matches: a name or a glob ('api*'); None = all.")
        ] = None,
    ) -> IndexStatus:
        """List indexed repositories: the folder each follows, the commit and branch (or ref) of its build,
        how stale it is (files changed, commits behind), encoder space, counts, and builds running."""
        return await _tool_call("index_status", service.index_status(repo))

    @mcp.tool()
    async def ask_code(
        question: Annotated[
            str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="A question about the code.")
        ],
        ctx: Context,
        repo: ScopeArg = None,
        deep: Annotated[
            bool, Field(description="Let the retrieval model look again before answering (slower, finds more).")
        ] = True,
    ) -> AskResult:
        """Answer a question about the indexed code, citing path:start-end for every claim.

        Returns the answer, its citations, and how it was produced (rounds, tools called, fallbacks
        taken, timings). Never fails for a model being down: it falls back to plain retrieval, then to
        a citations-only answer, and says so. With a progress token, reports each step as it happens:
        plan made, round n of N, each tool called, synthesis started, done.
        """
        progress = _ask_progress(ctx) if _wants_progress(ctx) else None
        return await _tool_call("ask_code", asker.ask(AskRequest(question=question, repo=repo, deep=deep), progress))

    @mcp.tool()
    async def search_symbols(
        query: Annotated[
            str,
            Field(
                min_length=1,
                max_length=200,
                description="An identifier (parse_config, TaxTable.lookup) or a few words.",
            ),
        ],
        repo: ScopeArg = None,
        limit: Annotated[int, Field(ge=1, le=MAX_K)] = 10,
    ) -> SymbolSearchResult:
        """Find functions, classes, methods by name: exact names first, then prefixes, substrings, word overlap."""
        return await _tool_call("search_symbols", service.search_symbols(query, repo, limit))

    @mcp.tool()
    async def search_files(
        query: Annotated[str, Field(min_length=1, max_length=200, description="Part of a path or file name.")],
        repo: ScopeArg = None,
        limit: Annotated[int, Field(ge=1, le=MAX_K)] = 8,
    ) -> FileSearchResult:
        """Find indexed files by path, each with the definitions it holds."""
        return await _tool_call("search_files", service.search_files(query, repo, limit))

    @mcp.tool()
    async def neighbors(
        path: Annotated[str, Field(min_length=1, description="Repo-relative file path, as in search hits.")],
        line: Annotated[int, Field(ge=1, description="A line of the file (e.g. a hit's start_line).")],
        repo: RepoArg = None,
        count: Annotated[int, Field(ge=1, le=20, description="Chunks on each side.")] = 2,
    ) -> Neighbors:
        """The chunk at path:line and the chunks just above and below it in the same file."""
        return await _tool_call("neighbors", service.neighbors(repo, path, line, count))

    if indexes is not None:
        _add_index_tools(mcp, indexes)

    @mcp.tool()
    async def repo_overview(repo: RepoArg = None) -> RepoOverview:
        """A repository's shape: files, languages, folders, main types, most referenced functions, README."""
        return await _tool_call("repo_overview", service.repo_overview(repo))

    return mcp


def _add_index_tools(mcp: Any, indexes: IndexService) -> None:
    @mcp.tool()
    async def index_repository(
        path: Annotated[str, Field(min_length=1, max_length=4096, description="Absolute path of the folder.")],
        ctx: Context,
        name: Annotated[
            str | None, Field(description="Index name; default: the folder's name (and '.<ref>' for a ref).")
        ] = None,
        ref: Annotated[
            str | None,
            Field(description="A branch, tag or commit to index from git's objects (the checkout is untouched)."),
        ] = None,
        full: Annotated[bool, Field(description="Embed everything again (default: only what changed).")] = False,
    ) -> BuildReport:
        """Index a repository folder (inside the server's allowed roots) and keep it fresh: it is
        re-indexed on its own when it changes. A name another folder (or ref) has taken is refused. Returns
        the Ray job id and build id at once; with a progress token, reports files, chunks, rate, ETA and
        phase until the build is done. A second request while the index builds joins that build."""
        report: BuildReport = await _tool_call(
            "index_repository", indexes.index_repository(path, name, ref, full, confined=True)
        )
        return await indexes.follow(report, ctx.report_progress) if _wants_progress(ctx) else report

    @mcp.tool()
    async def refresh_index(
        name: Annotated[str, Field(min_length=1, max_length=63, description="An indexed repo (see index_status).")],
        ctx: Context,
        full: Annotated[bool, Field(description="Embed everything again.")] = False,
    ) -> BuildReport:
        """Re-index an index from the folder (and ref) it follows now (a folder inside the server's allowed
        roots); unchanged chunks keep their vectors."""
        report: BuildReport = await _tool_call("refresh_index", indexes.refresh(name, full, confined=True))
        return await indexes.follow(report, ctx.report_progress) if _wants_progress(ctx) else report

    @mcp.tool()
    async def remove_index(
        name: Annotated[str, Field(min_length=1, max_length=63, description="An indexed repo (see index_status).")],
    ) -> RemovedIndex:
        """Remove an index whose folder lies inside the server's allowed roots: its searchable rows, its
        registration (no more syncing), a build in progress."""
        return RemovedIndex(index=name, builds=await _tool_call("remove_index", indexes.remove(name, confined=True)))


# The tools whose service method is named otherwise (a tool's metrics label is its MCP name).
async def _tool_call(tool: str, call: Any) -> Any:
    """Await a service call; a samespace error becomes the tool's error message (an actor's error by its
    cause: no remote traceback reaches the client). Counted and timed per tool (actors/metrics.py)."""
    from mcp.server.mcpserver.exceptions import ToolError

    from actors.metrics import record_tool

    began, outcome = time.perf_counter(), "failed"
    try:
        result = await call
        outcome = "ok"
        return result
    except (SamespaceError, ToolError) as exc:
        outcome = "error"
        if isinstance(exc, ToolError):
            raise
        raise ToolError(str(original_error(exc))) from exc
    except RayError as exc:  # an actor restarting, gone or too slow: a named error, never a traceback
        raise ToolError(cluster_unavailable(exc)) from exc
    finally:
        record_tool(tool, outcome, time.perf_counter() - began)


def cluster_unavailable(exc: RayError) -> str:
    """What a client reads when an actor behind a tool is restarting, dead or too slow (named by Ray's
    error class; retrying is the cure), or raised something unexpected (named by its class only)."""
    if isinstance(exc, ActorUnavailableError | RayActorError | GetTimeoutError):
        return f"{type(exc).__name__}: a part of the cluster is restarting or unreachable; retry in a few seconds"
    cause = getattr(exc, "cause", None)
    return f"{type(cause or exc).__name__} in a cluster actor (see the server's log)"


def build_asgi_app(
    service: CodeSearchService,
    asker: AskService,
    settings: SamespaceSettings,
    fleet: Callable[[], ActorHandle] | None = None,
    admin: FastAPI | None = None,
    indexes: IndexService | None = None,
) -> FastAPI:
    """The replica's app: /mcp, /rlm/ask, /healthz, the sidecar routes when `fleet` is given, and the
    admin API under /admin when `admin` is given (it checks its own token, not `serve.token`)."""
    from mcp.server.transport_security import TransportSecuritySettings

    # Host/Origin are checked once, for every route, by HttpGuard below; the SDK's own check is off.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    servers = [build_mcp_server(service, asker, indexes) for _ in range(2)]  # JSON replies; SSE for progress
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

    @api.post(ASK_ROUTE, response_model=AskResult)
    async def rlm_ask(http: Request) -> AskResult | StreamingResponse:
        """The same ask as the MCP tool `ask_code`, over plain HTTP (an `AskRequest` body: 422 names a
        bad field; read as a capped stream, 413 past `limits.max_ask_body_bytes`; 422 for a `repo` over
        the glob caps). With `Accept: text/event-stream`: server-sent events, `progress` as the steps
        happen, then one `result` (or `error`)."""
        body = await read_capped_body(http, settings.limits.max_ask_body_bytes, "max_ask_body_bytes")
        request = parse_body(AskRequest, body)
        if EVENT_STREAM in http.headers.get("accept", ""):
            headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
            return StreamingResponse(ask_events(asker, request), media_type=EVENT_STREAM, headers=headers)
        try:
            return await asker.ask(request)
        except LimitExceeded as exc:
            raise HTTPException(422, str(original_error(exc))) from exc

    if fleet is not None:
        add_sidecar_routes(api, settings, fleet)
    api.mount(MCP_ROUTE, mcp_asgi)
    if admin is not None:
        api.mount(ADMIN_ROUTE, admin)
    api.add_middleware(
        HttpGuard,
        allowed_hosts=settings.serve.allowed_hosts,
        token=settings.serve.expected_token(),
        open_paths=(HEALTH_ROUTE,),
        machine_prefixes=(SIDECAR_ROUTE,),
        own_token_prefixes=(ADMIN_ROUTE,) if admin is not None else (),
    )
    return api


@serve.deployment(ray_actor_options={"num_cpus": 0.1}, max_ongoing_requests=REPLICA_MAX_ONGOING_REQUESTS)
@serve.ingress()
class McpIngress:
    """Thin shell: finds the actors, builds the MCP ASGI app inside the replica, with the admin API
    under /admin (`serve_apps.admin_app`: one replica process serves both; `AdminIngress` deploys
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
        admin = build_admin_asgi(self._admin, self._settings, self._indexes)
        return build_asgi_app(self._service, self._asker, self._settings, self._fleet_actor, admin, self._indexes)


def build_app(args: dict[str, Any] | None = None) -> Application:
    """Serve app builder (`serve run serve_apps.mcp_app:build_app`); args override settings."""
    settings = load_settings(**(args or {}))
    return McpIngress.options(  # type: ignore[attr-defined]  # .options comes from @serve.deployment
        num_replicas=settings.serve.mcp_replicas
    ).bind(settings)
