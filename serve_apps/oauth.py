"""The HTTP side of the OAuth 2.1 resource server (auth.mode oauth): the protected-resource metadata
(RFC 9728), the bearer challenges (RFC 6750 §3, with RFC 9728's `resource_metadata`), and the scope a
request needs. The token itself is checked by a `cluster.auth.TokenVerifier` (JwtVerifier).

    GET /.well-known/oauth-protected-resource        {"resource", "authorization_servers",
    GET /.well-known/oauth-protected-resource/mcp     "scopes_supported", "bearer_methods_supported",
                                                      "resource_name"}

Refusals, each with a JSON body {"error", "error_description"} that never holds the token:

- no token: 401, `WWW-Authenticate: Bearer resource_metadata="<metadata url>"` (no error code when
  the request carried no token: RFC 6750 §3.1);
- a token the verifier refuses: 401, `Bearer error="invalid_token", error_description="<why>",
  resource_metadata="<metadata url>"`;
- a valid token without the scope the request needs: 403, `Bearer error="insufficient_scope",
  scope="<needed>", resource_metadata="<metadata url>"` (the body names the scope too).

What a request needs: an MCP `tools/call` the tool's scope (`cluster.auth.scope_for_tool`); every other
MCP message, a body that is not JSON (the MCP app answers it with its error), and any other route
samespace:read. To read an MCP body the gate buffers it (capped as the MCP endpoint caps it) and hands
the app a `receive` that replays it unchanged.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp.server.auth.handlers.metadata import ProtectedResourceMetadataHandler
from mcp.server.auth.routes import build_resource_metadata_url, cors_middleware
from mcp.shared.auth import ProtectedResourceMetadata
from pydantic import AnyHttpUrl
from starlette.datastructures import Headers
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope

from cluster.auth import AccessScope, Principal, TokenVerifier, scope_for_tool
from cluster.errors import ConfigError, TokenRejected
from cluster.settings import AuthMode, SamespaceSettings
from serve_apps.auth import bearer_token
from serve_apps.body_limits import body_too_large, buffer_body, replay_body

__all__ = [
    "METADATA_PATH",
    "RESOURCE_NAME",
    "Admission",
    "OAuthGate",
    "metadata_paths",
    "metadata_routes",
    "needed_scopes",
    "oauth_verifier",
    "protected_resource_metadata",
    "resource_metadata_url",
]

log = logging.getLogger("samespace.oauth")

METADATA_PATH = "/.well-known/oauth-protected-resource"
RESOURCE_NAME = "samespace"
MAX_DESCRIPTION_CHARS = 200
TOOLS_CALL = "tools/call"


def oauth_verifier(settings: SamespaceSettings) -> TokenVerifier | None:
    """The access-token verifier of auth.mode oauth (`cluster.auth.JwtVerifier`), None in the other modes.
    Built inside each replica: it holds the issuer's keys and an HTTP client, neither of which pickles."""
    if settings.auth_mode is not AuthMode.OAUTH:
        return None
    from cluster.auth import JwtVerifier

    return JwtVerifier.from_settings(settings)


def resource_metadata_url(resource_url: str) -> str:
    """Where a client finds the metadata of `resource_url`: the path-suffixed well-known URL (RFC 9728 §3.1)."""
    return str(build_resource_metadata_url(AnyHttpUrl(resource_url)))


def protected_resource_metadata(settings: SamespaceSettings) -> ProtectedResourceMetadata:
    """The RFC 9728 document of this server. The issuer is kept exactly as configured (no slash added):
    a client compares it with the authorization server's own metadata."""
    if settings.auth.issuer is None:
        raise ConfigError("auth.issuer", "the protected-resource metadata names the issuer; set auth.issuer")
    return ProtectedResourceMetadata.model_validate(
        {
            "resource": settings.resource_url,
            "authorization_servers": [settings.auth.issuer],
            "scopes_supported": [scope.value for scope in AccessScope],
            "bearer_methods_supported": ["header"],
            "resource_name": RESOURCE_NAME,
        }
    )


def metadata_paths(resource_url: str, *routes: str) -> tuple[str, ...]:
    """The app's paths of the metadata: the root form, the path-suffixed form of `resource_url`, and
    that of each of the app's `routes` (e.g. '/mcp'), without duplicates."""
    suffixed = resource_metadata_url(resource_url).split(METADATA_PATH, 1)[1]
    paths = [METADATA_PATH, METADATA_PATH + suffixed, *(METADATA_PATH + route for route in routes)]
    return tuple(dict.fromkeys(path for path in paths if path))


def metadata_routes(settings: SamespaceSettings, *routes: str) -> list[Route]:
    """The metadata's routes (the MCP SDK's handler, with its CORS for browser clients): serve them
    without a token (`metadata_paths` are open paths of the guard)."""
    handler = ProtectedResourceMetadataHandler(protected_resource_metadata(settings))
    endpoint = cors_middleware(handler.handle, ["GET", "OPTIONS"])
    return [
        Route(path, endpoint=endpoint, methods=["GET", "OPTIONS"])
        for path in metadata_paths(settings.resource_url, *routes)
    ]


def needed_scopes(body: bytes) -> tuple[AccessScope, ...]:
    """The scopes an MCP request body needs: a `tools/call` its tool's, anything else samespace:read
    (a batch: every message's)."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return (AccessScope.READ,)
    messages = message if isinstance(message, list) else [message]
    scopes = dict.fromkeys(_scope_of(m) for m in messages) or {AccessScope.READ: None}
    return tuple(scopes)


def _scope_of(message: Any) -> AccessScope:
    if not isinstance(message, dict) or message.get("method") != TOOLS_CALL:
        return AccessScope.READ
    params = message.get("params")
    name = params.get("name") if isinstance(params, dict) else None
    return scope_for_tool(name) if isinstance(name, str) else AccessScope.READ


@dataclass(frozen=True)
class Admission:
    """A request the gate let through: its caller, and the `receive` the app reads its body from."""

    principal: Principal
    receive: Receive


class OAuthGate:
    """Bearer access tokens for the guard and the admin app: who the caller is (`authenticate`), and
    whether a request may run (`admit`: the token, then the scope its route or MCP body needs).

    rpc_routes: path prefix -> the body cap of a JSON-RPC endpoint whose POST bodies are read for the
    scope, e.g. {'/mcp': 1 MiB}; every other route needs samespace:read.
    """

    def __init__(
        self, verifier: TokenVerifier, metadata_url: str, *, rpc_routes: Mapping[str, int] | None = None
    ) -> None:
        self._verifier = verifier
        self.metadata_url = metadata_url
        self._origin, self._resource_path = _split_metadata_url(metadata_url)
        self._rpc_routes = dict(rpc_routes or {})

    @classmethod
    def for_settings(
        cls, verifier: TokenVerifier, settings: SamespaceSettings, *, rpc_routes: Mapping[str, int] | None = None
    ) -> OAuthGate:
        return cls(verifier, resource_metadata_url(settings.resource_url), rpc_routes=rpc_routes)

    def metadata_url_below(self, root_path: str) -> str:
        """The metadata URL a client is pointed to from an app served under `root_path` (a Serve route
        prefix or a mount): RFC 9728's path-suffixed URL at the host's root, unless the resource lies
        below `root_path`, where the host's root is another app's: then the same URL below `root_path`
        (`<root_path>/.well-known/oauth-protected-resource/<rest of the resource's path>`), which this app
        serves and the challenge's `resource_metadata` names (a client follows it, RFC 9728 §5.1)."""
        root = root_path.rstrip("/")
        if not root or not self._resource_path.startswith(root + "/"):
            return self.metadata_url
        return f"{self._origin}{root}{METADATA_PATH}{self._resource_path[len(root) :]}"

    async def authenticate(self, authorization: str | None, root_path: str = "") -> Principal | Response:
        """The caller of an `Authorization` header, or the 401 challenge that refuses it."""
        token = bearer_token(authorization)
        if token is None:
            return self.unauthorized(root_path=root_path)
        try:
            return await self._verifier.verify(token)
        except TokenRejected as exc:
            reason = exc.reason if token not in exc.reason else "the token is not valid"
            log.info("access token refused: %s", _printable(reason))
            return self.unauthorized(reason, root_path=root_path)

    def unauthorized(self, reason: str | None = None, *, root_path: str = "") -> Response:
        """401: no token (`reason` None: no error code, RFC 6750 §3.1) or an invalid one."""
        metadata_url = self.metadata_url_below(root_path)
        if reason is None:
            body = {"error": "unauthorized", "error_description": "this resource needs an OAuth access token"}
            return self._refusal(401, body, f'resource_metadata="{metadata_url}"')
        description = _printable(f"access token rejected: {reason}")
        body = {"error": "invalid_token", "error_description": description}
        fields = f'error="invalid_token", error_description="{description}", resource_metadata="{metadata_url}"'
        return self._refusal(401, body, fields)

    def insufficient(self, scope: AccessScope, *, root_path: str = "") -> Response:
        """403: a valid token without `scope`, named in the challenge and the body."""
        body = {
            "error": "insufficient_scope",
            "error_description": f"this request needs the scope {scope.value}",
            "scope": scope.value,
        }
        metadata_url = self.metadata_url_below(root_path)
        fields = f'error="insufficient_scope", scope="{scope.value}", resource_metadata="{metadata_url}"'
        return self._refusal(403, body, fields)

    async def admit(self, scope: Scope, path: str, receive: Receive) -> Admission | Response:
        """Let a request at `path` (below the root path) through as its token's caller, or refuse it.
        The token is checked before a byte of the body is read."""
        root_path = scope.get("root_path", "")
        caller = await self.authenticate(Headers(scope=scope).get("authorization"), root_path)
        if isinstance(caller, Response):
            return caller
        limit = self._rpc_limit(path) if scope["type"] == "http" and scope.get("method") == "POST" else None
        needs: tuple[AccessScope, ...] = (AccessScope.READ,)
        if limit is not None:
            buffered = await buffer_body(scope, receive, limit)
            if buffered is None:
                return body_too_large()
            needs = needed_scopes(b"".join(m.get("body", b"") for m in buffered))
            receive = replay_body(buffered, receive)
        missing = next((needed for needed in needs if not caller.has(needed)), None)
        if missing is not None:
            return self.insufficient(missing, root_path=root_path)
        return Admission(caller, receive)

    def _rpc_limit(self, path: str) -> int | None:
        for prefix, limit in self._rpc_routes.items():
            if path == prefix or path.startswith(prefix + "/"):
                return limit
        return None

    @staticmethod
    def _refusal(status: int, body: dict[str, str], fields: str) -> Response:
        return JSONResponse(body, status_code=status, headers={"WWW-Authenticate": f"Bearer {fields}"})


def _split_metadata_url(metadata_url: str) -> tuple[str, str]:
    """(scheme://host[:port], the resource's path) of a path-suffixed metadata URL."""
    scheme, _, rest = metadata_url.partition("://")
    host, _, path = rest.partition("/")
    suffix = ("/" + path).split(METADATA_PATH, 1)[-1]
    return f"{scheme}://{host}", suffix


def _printable(text: str) -> str:
    """`text` as an RFC 6750 error_description may hold it (printable ASCII, no quote or backslash), shortened."""
    kept = "".join(c for c in text if " " <= c <= "~" and c not in '"\\')
    return kept[:MAX_DESCRIPTION_CHARS]
