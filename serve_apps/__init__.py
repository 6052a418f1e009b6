"""Ray Serve applications, one package per surface, each `__init__` its one door:

    serve_apps.mcp     the MCP replica's app: MCP tools, /rlm/ask, /healthz, sidecar routes, /admin mounted
    serve_apps.admin   the admin API and the operator page (also deployable alone)

and the pieces both share: `http_guard.py` (Host, Origin and the caller in front of every route),
`oauth.py` (the OAuth resource server's HTTP side: RFC 9728 metadata, bearer challenges, scopes),
`auth.py` (reading a bearer, constant-time checks), `body_limits.py` (request bodies read as capped streams),
`index_service.py` (`IndexService`: index management behind the MCP index tools and the admin routes).
"""

from __future__ import annotations

__all__: list[str] = []
