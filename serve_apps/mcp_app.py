"""MCP server over streamable HTTP on Ray Serve: stateless, JSON responses, 2+ replicas safe.

    serve run serve_apps.mcp_app:build_app          # or: serve deploy serve_config.yaml

Endpoint: http://127.0.0.1:8000/mcp/ . Everything MCP is built inside each replica
(`__serve_build_asgi_app__`): MCP server objects do not pickle.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import FastAPI
from pydantic import Field
from ray import serve
from ray.serve import Application

from cluster.chunking import KNOWN_LANGUAGES
from cluster.errors import SamespaceError
from cluster.settings import SamespaceSettings, load_settings
from cluster.source import SourceLines
from serve_apps.code_search import CodeSearchService, IndexStatus, SearchResult

log = logging.getLogger("samespace.mcp")

MCP_ROUTE = "/mcp"
SERVER_NAME = "samespace"
MAX_K = 50
MAX_QUERY_CHARS = 2000
LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]

INSTRUCTIONS = (
    "samespace answers questions about indexed code bases. Use search_code to find code by meaning "
    "(natural language or code), read_code to read exact lines around a hit, and index_status to see "
    "which repositories are indexed and whether a reindex is running."
)


def build_mcp_server(service: CodeSearchService) -> Any:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    mcp = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS)

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
    ) -> SearchResult:
        """Semantic code search over the indexed repositories.

        Returns the best-matching functions, classes, methods and doc sections with their repo, path,
        line range, symbol, language, score and a snippet. Follow up with read_code for full context.
        """
        try:
            return await service.search_code(query, k, repo, path_prefix, language)
        except SamespaceError as exc:
            raise ToolError(str(exc)) from exc

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
        try:
            return await service.read_code(repo, path, start_line, end_line)
        except SamespaceError as exc:
            raise ToolError(str(exc)) from exc

    @mcp.tool()
    async def index_status() -> IndexStatus:
        """List indexed repositories: encoder space, point and file counts, last build time, running builds."""
        return await service.index_status()

    return mcp


def build_asgi_app(service: CodeSearchService, settings: SamespaceSettings) -> FastAPI:
    from mcp.server.transport_security import TransportSecuritySettings

    mcp = build_mcp_server(service)
    hosts = LOOPBACK_HOSTS + list(settings.serve.allowed_hosts)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[f"http://{h}" for h in hosts],
    )
    mcp_asgi = mcp.streamable_http_app(
        streamable_http_path="/", stateless_http=True, json_response=True, transport_security=security
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with mcp.session_manager.run():  # a mounted sub-app's lifespan is not run by FastAPI
            yield

    api = FastAPI(title="samespace MCP", lifespan=lifespan)

    @api.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    api.mount(MCP_ROUTE, mcp_asgi)
    return api


@serve.deployment(ray_actor_options={"num_cpus": 0.1})
@serve.ingress()
class McpIngress:
    """Thin shell: finds the actors, builds the MCP ASGI app inside the replica."""

    def __init__(self, settings: SamespaceSettings) -> None:
        from actors import get_index_actor
        from actors.dispatcher import get_dispatcher
        from cluster.roles import Role

        self._settings = settings
        self._service = CodeSearchService(
            get_index_actor(settings),
            get_dispatcher(settings, Role.CODE_EMBEDDING),
            get_dispatcher(settings, Role.RERANKER),
            settings.reranker.candidates,
        )

    def __serve_build_asgi_app__(self) -> FastAPI:
        return build_asgi_app(self._service, self._settings)


def build_app(args: dict[str, Any] | None = None) -> Application:
    """Serve app builder (`serve run serve_apps.mcp_app:build_app`); args override settings."""
    settings = load_settings(**(args or {}))
    return McpIngress.options(num_replicas=settings.serve.mcp_replicas).bind(settings)  # type: ignore[attr-defined]
