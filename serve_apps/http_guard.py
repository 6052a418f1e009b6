"""One guard in front of every HTTP and WebSocket route of the Serve apps.

    api.add_middleware(HttpGuard, allowed_hosts=settings.serve.allowed_hosts,
                       token=settings.serve.expected_token(), open_paths=("/healthz",), machine_prefixes=("/sidecar",))

A pure ASGI middleware, checked before any route runs or any body is read:

- Host (DNS rebinding): loopback (127.0.0.1, localhost, [::1]; any port) or a `serve.allowed_hosts`
  entry, else 421 "Invalid Host header".
- Origin, when present: http or https of an allowed host, else 403 "Invalid Origin header".
  Both answers are the MCP SDK's own (mcp/server/transport_security.py), so a client sees one
  behaviour on every route; the SDK's check is switched off and this is the only one.
- Bearer token, when one is configured: every route but `open_paths` needs
  `Authorization: Bearer <token>`, else 401 with `WWW-Authenticate: Bearer` (constant-time compare).
- Own-token routes (`own_token_prefixes`, the admin API mounted in the MCP app): Host and Origin
  as above, but not the serve token: the mounted app demands its own (the admin token) first.
- Machine routes (`machine_prefixes`, the sidecar endpoints): no browser has business there, so
  any Origin is 403; the Host is not checked, because sidecars dial the master by whatever name
  reaches it and each handshake or request already needs the fleet token, which a rebinding page
  cannot know. They answer to the fleet token only, never the serve token.

A WebSocket is refused before it is accepted: with the same status through the ASGI
WebSocket Denial Response extension where the server offers it, else a close (the client sees 403).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from pydantic import SecretStr
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from cluster.errors import ConfigError
from cluster.settings import ServeSettings
from serve_apps.auth import bearer_matches

__all__ = ["LOOPBACK_HOSTS", "ORIGIN_SCHEMES", "HttpGuard", "route_path"]

log = logging.getLogger("samespace.http_guard")

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
ORIGIN_SCHEMES = ("http", "https")
POLICY_VIOLATION = 1008  # WebSocket close code when the server offers no denial response
DENIAL_EXTENSION = "websocket.http.response"
_LOGGED_CHARS = 80  # a hostile header is logged shortened, never an Authorization header
# The MCP SDK's answers (mcp/server/transport_security.py), byte for byte.
INVALID_HOST = Response("Invalid Host header", status_code=421)
INVALID_ORIGIN = Response("Invalid Origin header", status_code=403)
UNAUTHORIZED = Response(status_code=401, headers={"WWW-Authenticate": "Bearer"})  # no detail


class HttpGuard:
    """ASGI middleware: Host, Origin and (optional) bearer token for every http and websocket scope.

    allowed_hosts: host names besides loopback, 'name' or 'name:*' (any port) or 'name:port'.
    token: when set, every path but `open_paths` and `machine_prefixes` needs it.
    open_paths: exact paths (below the app's root path) that need no token, e.g. '/healthz'.
    own_token_prefixes: path prefixes whose app checks a token of its own, e.g. '/admin'.
    machine_prefixes: route prefixes for machine clients (the sidecar endpoints), see the module doc.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        allowed_hosts: Sequence[str] = (),
        token: SecretStr | None = None,
        open_paths: Collection[str] = (),
        machine_prefixes: Sequence[str] = (),
        own_token_prefixes: Sequence[str] = (),
    ) -> None:
        self.app = app
        self._allowed: dict[str, set[str | None]] = {}
        for entry in (*LOOPBACK_HOSTS, *allowed_hosts):
            split = ServeSettings.split_host(entry)
            if split is None:
                raise ConfigError("serve.allowed_hosts", f"{entry!r} is not a host name, 'name:port' or 'name:*'")
            name, port = split
            self._allowed.setdefault(name, set()).add(None if port == "*" else port)
        self._token = token
        self._open_paths = frozenset(open_paths)
        self._machine_prefixes = tuple(machine_prefixes)
        self._own_token_prefixes = tuple(own_token_prefixes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        log.info(
            "refused %s %s (Host %s, Origin %s): HTTP %d",
            scope["type"],
            _shorten(repr(route_path(scope))),
            _shorten(repr(headers.getlist("host"))),
            _shorten(repr(headers.getlist("origin"))),
            refusal.status_code,
        )
        if scope["type"] == "websocket" and DENIAL_EXTENSION not in (scope.get("extensions") or {}):
            await send({"type": "websocket.close", "code": POLICY_VIOLATION, "reason": ""})
            return
        await refusal(scope, receive, send)

    def _refusal(self, scope: Scope) -> Response | None:
        """The answer that refuses this request, or None when it may pass."""
        headers = Headers(scope=scope)
        path = route_path(scope)
        origins = headers.getlist("origin")
        if _under(path, self._machine_prefixes):
            return INVALID_ORIGIN if origins else None
        hosts = headers.getlist("host")
        if len(hosts) != 1 or not self._host_allowed(hosts[0]):
            return INVALID_HOST
        if origins and (len(origins) != 1 or not self._origin_allowed(origins[0])):
            return INVALID_ORIGIN
        needs_token = (
            self._token is not None and path not in self._open_paths and not _under(path, self._own_token_prefixes)
        )
        if needs_token and not bearer_matches(headers.get("authorization"), self._token):
            return UNAUTHORIZED
        return None

    def _host_allowed(self, host: str) -> bool:
        split = ServeSettings.split_host(host)
        if split is None or split[1] == "*":
            return False
        name, port = split
        ports = self._allowed.get(name)
        return ports is not None and (None in ports or port in ports)

    def _origin_allowed(self, origin: str) -> bool:
        scheme, sep, host = origin.partition("://")
        return bool(sep) and scheme.lower() in ORIGIN_SCHEMES and self._host_allowed(host)


def _under(path: str, prefixes: Sequence[str]) -> bool:
    return any(path == prefix or path.startswith(prefix + "/") for prefix in prefixes)


def route_path(scope: Mapping[str, Any]) -> str:
    """The path below the app's root path (Ray Serve and a FastAPI mount put the prefix in both)."""
    path: str = scope.get("path", "")
    root: str = scope.get("root_path", "")
    if root and (path == root or path.startswith(root + "/")):
        return path[len(root) :] or "/"
    return path


def _shorten(text: str) -> str:
    return text if len(text) <= _LOGGED_CHARS else text[:_LOGGED_CHARS] + "…"
