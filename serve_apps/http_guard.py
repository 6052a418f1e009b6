"""One guard in front of every HTTP and WebSocket route of the Serve apps, and the caller each request runs as.

    api.add_middleware(HttpGuard, allowed_hosts=settings.serve.allowed_hosts,
                       token=settings.serve.expected_token(), open_paths=("/healthz",), machine_prefixes=("/sidecar",))

A pure ASGI middleware, checked before any route runs or any body is read:

- Host (DNS rebinding): loopback (127.0.0.1, localhost, [::1]; any port) or a `serve.allowed_hosts`
  entry, else 421 "Invalid Host header".
- Origin, when present: http or https of an allowed host, else 403 "Invalid Origin header".
  Both answers are the MCP SDK's own (mcp/server/transport_security.py), so a client sees one
  behaviour on every route; the SDK's check is switched off and this is the only one.
- The caller, on every route but `open_paths`, own-token and machine routes, by `auth.mode`:
  - none (no `token`, no `oauth`): every request runs as `Principal.shared("local")`;
  - token: `Authorization: Bearer <token>` (constant-time compare), else 401 with
    `WWW-Authenticate: Bearer` and no detail; requests run as `Principal.shared("token")`;
  - oauth (`oauth`, serve_apps/oauth.py): a bearer access token the verifier accepts, with the scope
    the request needs, else its 401 or 403 challenge; requests run as the token's principal.
  The downstream app runs inside `cluster.auth.acting_as(caller)`, so every task it starts (the MCP
  SDK's included) reads the caller with `current_principal()`.
- Own-token routes (`own_token_prefixes`, the admin API mounted in the MCP app): Host and Origin
  as above, but not the caller: the mounted app demands its own (the admin token or an admin-scope
  access token) first, and sets the caller itself.
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

from cluster.auth import Principal, acting_as
from cluster.errors import ConfigError
from cluster.settings import ServeSettings
from serve_apps.auth import bearer_matches
from serve_apps.oauth import Admission, OAuthGate

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
    """ASGI middleware: Host, Origin and the caller for every http and websocket scope.

    allowed_hosts: host names besides loopback, 'name' or 'name:*' (any port) or 'name:port'.
    token: auth.mode token: every path but `open_paths`, own-token and machine routes needs it.
    oauth: auth.mode oauth (not with `token`): those paths need an access token `oauth` admits.
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
        oauth: OAuthGate | None = None,
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
        if token is not None and oauth is not None:
            raise ConfigError("auth.mode", "the guard takes the serve token or OAuth access tokens, not both")
        self._token = token
        self._oauth = oauth
        self._shared = Principal.shared("token" if token is not None else "local")
        self._open_paths = frozenset(open_paths)
        self._machine_prefixes = tuple(machine_prefixes)
        self._own_token_prefixes = tuple(own_token_prefixes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        path = route_path(scope)
        refusal = self._refusal(scope, path)
        caller: Principal | None = None
        if refusal is None and self._needs_caller(path):
            admitted = await self._admit(scope, path, receive)
            if isinstance(admitted, Admission):
                caller, receive = admitted.principal, admitted.receive
            else:
                refusal = admitted
        if refusal is None:
            if caller is None:
                await self.app(scope, receive, send)
                return
            with acting_as(caller):
                await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        log.info(
            "refused %s %s (Host %s, Origin %s): HTTP %d",
            scope["type"],
            _shorten(repr(path)),
            _shorten(repr(headers.getlist("host"))),
            _shorten(repr(headers.getlist("origin"))),
            refusal.status_code,
        )
        if scope["type"] == "websocket" and DENIAL_EXTENSION not in (scope.get("extensions") or {}):
            await send({"type": "websocket.close", "code": POLICY_VIOLATION, "reason": ""})
            return
        await refusal(scope, receive, send)

    def _refusal(self, scope: Scope, path: str) -> Response | None:
        """The answer that refuses this request for its Host or Origin, or None when it may pass."""
        headers = Headers(scope=scope)
        origins = headers.getlist("origin")
        if _under(path, self._machine_prefixes):
            return INVALID_ORIGIN if origins else None
        hosts = headers.getlist("host")
        if len(hosts) != 1 or not self._host_allowed(hosts[0]):
            return INVALID_HOST
        if origins and (len(origins) != 1 or not self._origin_allowed(origins[0])):
            return INVALID_ORIGIN
        return None

    def _needs_caller(self, path: str) -> bool:
        """Whether the guard checks the caller of `path` (and runs it as that caller)."""
        return not (
            path in self._open_paths or _under(path, self._machine_prefixes) or _under(path, self._own_token_prefixes)
        )

    async def _admit(self, scope: Scope, path: str, receive: Receive) -> Admission | Response:
        """The caller of a request by the auth mode, or the answer that refuses it."""
        if self._oauth is not None:
            return await self._oauth.admit(scope, path, receive)
        if self._token is not None and not bearer_matches(Headers(scope=scope).get("authorization"), self._token):
            return UNAUTHORIZED
        return Admission(self._shared, receive)

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
