"""The MCP replica's app: the MCP tools at /mcp, `POST /rlm/ask`, `/healthz`, the sidecar routes, and the
admin app mounted under /admin, behind one HTTP guard.

    serve run serve_apps.mcp:build_app          # or: serve deploy serve_config.yaml

This `__init__` is the package's one door. Behind it: `_app.py` (the replica's ASGI app and
`McpIngress`), `_tools.py` (the MCP server: every tool, and a tool's failure as a named error),
`_ask.py` (`AskService`: the ask pipeline wired to Ray; an ask as server-sent events),
`_progress_router.py` (one endpoint, JSON or SSE by whether a call asks for progress),
`_resources.py` (the index list, status and files as resources; subscriptions to a status),
`_prompts.py` (the prompts: slash commands built from the tools, with citations),
`_sidecar_routes.py` (the fleet's WebSocket and HTTP fallback).
"""

from __future__ import annotations

from serve_apps.mcp._app import McpIngress, build_app, build_asgi_app
from serve_apps.mcp._ask import AskService, RepoTools

__all__ = ["AskService", "McpIngress", "RepoTools", "build_app", "build_asgi_app"]
