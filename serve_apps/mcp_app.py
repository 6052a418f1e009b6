"""MCP server over streamable HTTP on Ray Serve: stateless, JSON responses, 2+ replicas safe.

    serve run serve_apps.mcp_app:build_app          # or: serve deploy serve_config.yaml

Endpoint: http://127.0.0.1:8000/mcp/ ; sidecars dial ws://127.0.0.1:8000/sidecar (serve_apps/sidecar_routes.py);
the admin API answers under http://127.0.0.1:8000/admin/ from the same replicas (serve_apps/admin_app.py).
Every route sits behind serve_apps/http_guard.py (Host/Origin; `serve.token` for /mcp and /rlm/ask).
Everything MCP is built inside each replica
(`__serve_build_asgi_app__`): MCP server objects do not pickle.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

from fastapi import FastAPI
from pydantic import Field
from ray import serve
from ray.actor import ActorHandle
from ray.serve import Application

from cluster.ask.pipeline import AskRequest, AskResult
from cluster.errors import SamespaceError
from cluster.ingest.languages import KNOWN_LANGUAGES
from cluster.ingest.source import SourceLines
from cluster.search.models import Neighbors, RepoOverview
from cluster.settings import SamespaceSettings, load_settings
from serve_apps.admin_app import AdminApi, build_admin_asgi
from serve_apps.ask_service import AskService
from serve_apps.code_search import (
    CodeSearchService,
    FileSearchResult,
    IndexStatus,
    SearchMode,
    SearchResult,
    SymbolSearchResult,
)
from serve_apps.http_guard import HttpGuard
from serve_apps.sidecar_routes import REPLICA_MAX_ONGOING_REQUESTS, SIDECAR_ROUTE, add_sidecar_routes

log = logging.getLogger("samespace.mcp")

MCP_ROUTE = "/mcp"
ASK_ROUTE = "/rlm/ask"
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
    "repo_overview for a repository's shape, and index_status to see which repositories are indexed."
)
RepoArg = Annotated[str | None, Field(description="Only this indexed repo (see index_status); None = every index.")]


def build_mcp_server(service: CodeSearchService, asker: AskService) -> Any:
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
        repo: Annotated[str | None, Field(description="Only this indexed repo (see index_status).")] = None,
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
        return await _tool_call(service.search_code(query, k, repo, path_prefix, language, rerank, mode))

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
        return await _tool_call(service.read_code(repo, path, start_line, end_line))

    @mcp.tool()
    async def index_status(
        repo: Annotated[
            str | None, Field(description="Only indexes whose name matches: a name or a glob ('api*'); None = all.")
        ] = None,
    ) -> IndexStatus:
        """List indexed repositories: the folder each follows, the commit and branch (or ref) of its build,
        how stale it is (files changed, commits behind), encoder space, counts, and builds running."""
        return await service.index_status(repo)

    @mcp.tool()
    async def ask_code(
        question: Annotated[
            str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="A question about the code.")
        ],
        repo: RepoArg = None,
        deep: Annotated[
            bool, Field(description="Let the retrieval model look again before answering (slower, finds more).")
        ] = True,
    ) -> AskResult:
        """Answer a question about the indexed code, citing path:start-end for every claim.

        Returns the answer, its citations, and how it was produced (rounds, tools called, fallbacks
        taken, timings). Never fails for a model being down: it falls back to plain retrieval, then to
        a citations-only answer, and says so.
        """
        return await asker.ask(AskRequest(question=question, repo=repo, deep=deep))

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
        repo: RepoArg = None,
        limit: Annotated[int, Field(ge=1, le=MAX_K)] = 10,
    ) -> SymbolSearchResult:
        """Find functions, classes, methods by name: exact names first, then prefixes, substrings, word overlap."""
        return await _tool_call(service.search_symbols(query, repo, limit))

    @mcp.tool()
    async def search_files(
        query: Annotated[str, Field(min_length=1, max_length=200, description="Part of a path or file name.")],
        repo: RepoArg = None,
        limit: Annotated[int, Field(ge=1, le=MAX_K)] = 8,
    ) -> FileSearchResult:
        """Find indexed files by path, each with the definitions it holds."""
        return await _tool_call(service.search_files(query, repo, limit))

    @mcp.tool()
    async def neighbors(
        path: Annotated[str, Field(min_length=1, description="Repo-relative file path, as in search hits.")],
        line: Annotated[int, Field(ge=1, description="A line of the file (e.g. a hit's start_line).")],
        repo: RepoArg = None,
        count: Annotated[int, Field(ge=1, le=20, description="Chunks on each side.")] = 2,
    ) -> Neighbors:
        """The chunk at path:line and the chunks just above and below it in the same file."""
        return await _tool_call(service.neighbors(repo, path, line, count))

    @mcp.tool()
    async def repo_overview(repo: RepoArg = None) -> RepoOverview:
        """A repository's shape: files, languages, folders, main types, most referenced functions, README."""
        return await _tool_call(service.repo_overview(repo))

    return mcp


async def _tool_call(call: Any) -> Any:
    """Await a service call; a samespace error becomes the tool's error message."""
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        return await call
    except SamespaceError as exc:
        raise ToolError(str(exc)) from exc


def build_asgi_app(
    service: CodeSearchService,
    asker: AskService,
    settings: SamespaceSettings,
    fleet: Callable[[], ActorHandle] | None = None,
    admin: FastAPI | None = None,
) -> FastAPI:
    """The replica's app: /mcp, /rlm/ask, /healthz, the sidecar routes when `fleet` is given, and the
    admin API under /admin when `admin` is given (it checks its own token, not `serve.token`)."""
    from mcp.server.transport_security import TransportSecuritySettings

    mcp = build_mcp_server(service, asker)
    # Host/Origin are checked once, for every route, by HttpGuard below; the SDK's own check is off.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    mcp_asgi = mcp.streamable_http_app(
        streamable_http_path="/", stateless_http=True, json_response=True, transport_security=security
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with mcp.session_manager.run():  # a mounted sub-app's lifespan is not run by FastAPI
            yield

    api = FastAPI(title="samespace MCP", lifespan=lifespan)

    @api.get(HEALTH_ROUTE)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @api.post(ASK_ROUTE)
    async def rlm_ask(request: AskRequest) -> AskResult:
        """The same ask as the MCP tool `ask_code`, over plain HTTP (422 names a bad field)."""
        return await asker.ask(request)

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
        from cluster.roles import Role
        from cluster.search.query_cache import QueryVectorCache

        self._settings = settings
        self._service = CodeSearchService(
            get_index_actor(settings),
            QueryPath(get_dispatcher(settings, Role.CODE_EMBEDDING)),
            LazyDispatcher(settings, Role.RERANKER),
            settings.reranker.candidates,
            QueryVectorCache(
                ttl_s=settings.rlm.query_cache_ttl_s, max_entries=settings.rlm.query_cache_entries, clock=time.monotonic
            ),
            settings.search,
        )
        self._asker = AskService(
            self._service, settings, LazyDispatcher(settings, Role.RLM), LazyDispatcher(settings, Role.CODE_ASSISTANT)
        )
        self._admin = AdminApi(settings)
        self._fleet: ActorHandle | None = None

    def _fleet_actor(self) -> ActorHandle:
        """The fleet actor, started when the first sidecar reaches this replica."""
        from actors.fleet import get_fleet_actor

        if self._fleet is None:
            self._fleet = get_fleet_actor(self._settings)
        return self._fleet

    def __serve_build_asgi_app__(self) -> FastAPI:
        admin = build_admin_asgi(self._admin, self._settings)
        return build_asgi_app(self._service, self._asker, self._settings, self._fleet_actor, admin)


def build_app(args: dict[str, Any] | None = None) -> Application:
    """Serve app builder (`serve run serve_apps.mcp_app:build_app`); args override settings."""
    settings = load_settings(**(args or {}))
    return McpIngress.options(  # type: ignore[attr-defined]  # .options comes from @serve.deployment
        num_replicas=settings.serve.mcp_replicas
    ).bind(settings)
