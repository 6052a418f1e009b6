"""A test identity provider with a real one's shape, over HTTP on 127.0.0.1 (a thread; tests only).

    with running_issuer() as issuer:                       # or running_issuer(path="/realms/team")
        token = issuer.mint("alice", scopes=("samespace:read",), groups=("team-a",), audience=MCP_URL)
        httpx.post(issuer.token_endpoint, data={"grant_type": "client_credentials", "client_id": ...})

Endpoints (under the issuer's path): `/.well-known/openid-configuration`, `/jwks` (the published public
keys, with kid/alg/use), `/token` (the client_credentials grant: form-encoded client_id/client_secret,
or HTTP Basic; `scope`; `resource` becomes the token's `aud`), `/authorize` (advertised, answers 400:
no browser flow here); and RFC 8414's `/.well-known/oauth-authorization-server` with the issuer's path
inserted after it, as Keycloak, Auth0 or Okta publish theirs.

Tokens are signed by the current key (RSA 2048 first; `rotate()` adds an RSA or EC P-256 key and makes
it current, the old one stays published until `retire(kid)`). The attacks a resource server must
refuse: `foreign_token` (a key never published, under a published or a fresh kid), `alg_none_token`,
`hs256_token` (HMAC keyed with the published RSA public key's PEM, the classic confusion). Switches
for the failure cases: `jwks_status`, `jwks_body`, `openid_configuration`, `oauth_metadata`,
`metadata_issuer`, `redirects`. Time is `clock` (pass the verifier's), so `exp`/`nbf`/`iat` follow it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import parse_qs, unquote, urlsplit

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

__all__ = ["DEFAULT_AUDIENCE", "DEFAULT_CLIENT_ID", "OidcIssuer", "TestClient", "running_issuer"]

DEFAULT_AUDIENCE = "http://127.0.0.1:8000/mcp"
DEFAULT_SCOPES = ("samespace:read",)
KeyKind = Literal["RSA", "EC"]
DEFAULT_CLIENT_ID = "samespace-ci"


@dataclass(frozen=True)
class TestClient:
    """A registered OAuth client (client_credentials): its token's subject is its client_id."""

    __test__ = False  # not a pytest test class despite the name

    client_id: str
    client_secret: str
    scopes: tuple[str, ...] = DEFAULT_SCOPES
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Key:
    kid: str
    alg: str
    private: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey

    def public_jwk(self) -> dict[str, Any]:
        if isinstance(self.private, rsa.RSAPrivateKey):
            jwk = RSAAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        else:
            jwk = ECAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        return {**jwk, "kid": self.kid, "alg": self.alg, "use": "sig"}

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )


def new_key(kind: KeyKind = "RSA", kid: str | None = None) -> _Key:
    kid = kid or f"{kind.lower()}-{secrets.token_hex(4)}"
    if kind == "RSA":
        return _Key(kid, "RS256", rsa.generate_private_key(public_exponent=65537, key_size=2048))
    return _Key(kid, "ES256", ec.generate_private_key(ec.SECP256R1()))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


class OidcIssuer:
    """The issuer's state; `running_issuer` serves it. Thread-safe: the server answers on its threads."""

    def __init__(self, base_url: str, *, path: str = "", clock: Callable[[], float] = time.time) -> None:
        self.origin = base_url.rstrip("/")
        self.path = path.rstrip("/")
        self.issuer = self.origin + self.path
        self.clock = clock
        self.default_audience = DEFAULT_AUDIENCE
        self.client = TestClient(DEFAULT_CLIENT_ID, secrets.token_urlsafe(24), scopes=DEFAULT_SCOPES)
        self.clients: dict[str, TestClient] = {self.client.client_id: self.client}
        # failure switches (read per request)
        self.jwks_status = 200
        self.jwks_body: bytes | None = None  # served instead of the key set when set
        self.openid_configuration = True  # False: /.well-known/openid-configuration answers 404
        self.oauth_metadata = True  # False: /.well-known/oauth-authorization-server answers 404
        self.metadata_issuer: str | None = None  # the `issuer` the metadata names (None: the real one)
        self.redirects: dict[str, str] = {}  # path -> Location: GET answers 302 there
        self._lock = threading.Lock()
        self._keys: list[_Key] = [new_key("RSA")]
        self._fetches: dict[str, int] = {}

    # --- endpoints' URLs -------------------------------------------------------------------------
    @property
    def jwks_uri(self) -> str:
        return f"{self.issuer}/jwks"

    @property
    def token_endpoint(self) -> str:
        return f"{self.issuer}/token"

    @property
    def openid_configuration_url(self) -> str:
        return f"{self.issuer}/.well-known/openid-configuration"

    @property
    def oauth_metadata_url(self) -> str:
        return f"{self.origin}/.well-known/oauth-authorization-server{self.path}"

    # --- counters ----------------------------------------------------------------------------------
    @property
    def jwks_fetches(self) -> int:
        """GETs of the key set so far (answered or failed)."""
        return self.fetches("jwks")

    def fetches(self, what: str) -> int:
        """GETs of `jwks`, `openid-configuration` or `oauth-authorization-server` so far."""
        with self._lock:
            return self._fetches.get(what, 0)

    def _count(self, what: str) -> None:
        with self._lock:
            self._fetches[what] = self._fetches.get(what, 0) + 1

    # --- keys ----------------------------------------------------------------------------------------
    @property
    def current_kid(self) -> str:
        with self._lock:
            return self._keys[-1].kid

    @property
    def published_kids(self) -> list[str]:
        with self._lock:
            return [key.kid for key in self._keys]

    def rotate(self, kind: KeyKind = "EC") -> str:
        """A new current signing key (published beside the old ones); its kid."""
        key = new_key(kind)
        with self._lock:
            self._keys.append(key)
        return key.kid

    def retire(self, kid: str) -> None:
        """Stop publishing (and signing with) key `kid`; the last key cannot go."""
        with self._lock:
            kept = [key for key in self._keys if key.kid != kid]
            if len(kept) == len(self._keys) or not kept:
                raise ValueError(f"cannot retire {kid!r} (unknown, or the only key)")
            self._keys = kept

    def jwks(self) -> dict[str, Any]:
        with self._lock:
            return {"keys": [key.public_jwk() for key in self._keys]}

    def _key(self, kid: str | None) -> _Key:
        with self._lock:
            if kid is None:
                return self._keys[-1]
            for key in self._keys:
                if key.kid == kid:
                    return key
        raise KeyError(kid)

    # --- tokens ----------------------------------------------------------------------------------------
    def claims(
        self,
        subject: str,
        *,
        scopes: Sequence[str] = DEFAULT_SCOPES,
        groups: Sequence[str] = (),
        audience: str | Sequence[str] | None = None,
        expires_in: float = 300,
        not_before: float | None = None,
        issuer: str | None = None,
        client_id: str | None = DEFAULT_CLIENT_ID,
        extra_claims: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """An access token's claims (RFC 9068 shape). `not_before`: seconds from now for `nbf`;
        `extra_claims` merge last, and a None value removes that claim (e.g. {"sub": None})."""
        now = int(self.clock())
        claims: dict[str, Any] = {
            "iss": issuer or self.issuer,
            "sub": subject,
            "aud": audience if isinstance(audience, str) else list(audience or [self.default_audience]),
            "exp": now + int(expires_in),
            "iat": now,
            "jti": secrets.token_hex(8),
            "scope": " ".join(scopes),
        }
        if isinstance(claims["aud"], list) and len(claims["aud"]) == 1:
            claims["aud"] = claims["aud"][0]
        if not_before is not None:
            claims["nbf"] = now + int(not_before)
        if groups:
            claims["groups"] = list(groups)
        if client_id is not None:
            claims["client_id"] = client_id
        for name, value in (extra_claims or {}).items():
            if value is None:
                claims.pop(name, None)
            else:
                claims[name] = value
        return claims

    def mint(
        self,
        subject: str,
        *,
        kid: str | None = None,
        with_kid: bool = True,
        algorithm: str | None = None,
        extra_headers: Mapping[str, Any] | None = None,
        **claims: Any,
    ) -> str:
        """A token signed by the current key (or the published key `kid`); claims as `claims()`.
        `with_kid=False` leaves `kid` out of the header; `algorithm` signs with another algorithm of
        the same key (e.g. PS256 with an RS256 key: a key whose `alg` a verifier must hold to);
        `extra_headers` adds to the protected header (e.g. `crit`)."""
        key = self._key(kid)
        headers: dict[str, Any] = {"kid": key.kid, "typ": "at+jwt"} if with_kid else {"typ": "at+jwt"}
        headers.update(extra_headers or {})
        return jwt.encode(self.claims(subject, **claims), key.private, algorithm=algorithm or key.alg, headers=headers)

    def foreign_token(self, subject: str = "mallory", *, kid: str | None = None, **claims: Any) -> str:
        """Claims as `mint`, signed by a key never published; the header names `kid` (default: the
        current published kid, the forger's best guess; pass a fresh one for the unknown-kid case)."""
        key = new_key("RSA", kid=kid or self.current_kid)
        return jwt.encode(self.claims(subject, **claims), key.private, algorithm="RS256", headers={"kid": key.kid})

    def alg_none_token(self, subject: str = "mallory", **claims: Any) -> str:
        """An unsigned token (`alg: none`) naming the current kid."""
        header = {"alg": "none", "typ": "JWT", "kid": self.current_kid}
        body = json.dumps(self.claims(subject, **claims)).encode()
        return f"{_b64(json.dumps(header).encode())}.{_b64(body)}."

    def hs256_token(self, subject: str = "mallory", **claims: Any) -> str:
        """HS256 keyed with the current RSA key's public PEM: a verifier that lets the token pick the
        algorithm would check it with that PEM as the HMAC secret, and accept it."""
        rsa_keys = [key for key in self._snapshot() if isinstance(key.private, rsa.RSAPrivateKey)]
        key = rsa_keys[-1]
        header = {"alg": "HS256", "typ": "JWT", "kid": key.kid}
        signing_input = (
            f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(self.claims(subject, **claims)).encode())}"
        )
        signature = hmac.new(key.public_pem(), signing_input.encode(), hashlib.sha256).digest()
        return f"{signing_input}.{_b64(signature)}"

    def _snapshot(self) -> list[_Key]:
        with self._lock:
            return list(self._keys)

    # --- the documents -------------------------------------------------------------------------------------
    def metadata(self) -> dict[str, Any]:
        """The authorization server's metadata (the same document at both well-known locations)."""
        return {
            "issuer": self.metadata_issuer or self.issuer,
            "jwks_uri": self.jwks_uri,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": self.token_endpoint,
            "scopes_supported": ["openid", "samespace:read", "samespace:index", "samespace:admin"],
            "response_types_supported": ["code"],
            "grant_types_supported": ["client_credentials", "authorization_code"],
            "id_token_signing_alg_values_supported": ["RS256", "ES256"],
            "token_endpoint_auth_methods_supported": ["client_secret_post", "client_secret_basic"],
            "code_challenge_methods_supported": ["S256"],
        }

    def grant(self, form: Mapping[str, str], authorization: str | None) -> tuple[int, dict[str, Any]]:
        """POST /token: (status, body) for a client_credentials request."""
        client_id, secret = form.get("client_id"), form.get("client_secret")
        if authorization and authorization.lower().startswith("basic "):
            decoded = base64.b64decode(authorization[6:]).decode()
            client_id, _, secret = (unquote(part) for part in decoded.partition(":"))
        if form.get("grant_type") != "client_credentials":
            return 400, {"error": "unsupported_grant_type"}
        client = self.clients.get(client_id or "")
        if client is None or not hmac.compare_digest(client.client_secret, secret or ""):
            return 401, {"error": "invalid_client"}
        # The scopes asked that the client holds (RFC 6749 §3.3: the server may grant less than asked, as
        # Keycloak and Auth0 do; a client asks for every scope the resource's metadata lists).
        asked = [scope for scope in form.get("scope", "").split() or client.scopes if scope in client.scopes]
        if not asked:
            return 400, {"error": "invalid_scope"}
        token = self.mint(
            client.client_id,
            scopes=asked,
            groups=client.groups,
            audience=form.get("resource") or None,
            client_id=client.client_id,
        )
        return 200, {"access_token": token, "token_type": "Bearer", "expires_in": 300, "scope": " ".join(asked)}

    def answer_get(self, path: str) -> tuple[int, bytes]:
        """GET `path`: (status, JSON body); a redirect is (302, its Location)."""
        if path in self.redirects:
            return 302, self.redirects[path].encode()
        oidc = f"{self.path}/.well-known/openid-configuration"
        oauth = f"/.well-known/oauth-authorization-server{self.path}"
        if path == f"{self.path}/jwks":
            self._count("jwks")
            if self.jwks_status != 200:
                return self.jwks_status, b'{"error": "unavailable"}'
            return 200, self.jwks_body if self.jwks_body is not None else json.dumps(self.jwks()).encode()
        if path in (oidc, oauth):
            self._count("openid-configuration" if path == oidc else "oauth-authorization-server")
            if not (self.openid_configuration if path == oidc else self.oauth_metadata):
                return 404, b'{"error": "not_found"}'
            return 200, json.dumps(self.metadata()).encode()
        if path == f"{self.path}/authorize":
            return 400, b'{"error": "unsupported_response_type"}'
        return 404, b'{"error": "not_found"}'


def _handler(issuer: OidcIssuer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 5  # an idle keep-alive connection ends, so no handler thread outlives its client for long

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(HTTPStatus(status))
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            status, body = issuer.answer_get(urlsplit(self.path).path)
            if status == 302:
                self.send_response(HTTPStatus.FOUND)
                self.send_header("Location", body.decode())
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self._send(status, body)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode()
            if urlsplit(self.path).path != f"{issuer.path}/token":
                self._send(404, b'{"error": "not_found"}')
                return
            form = {name: values[0] for name, values in parse_qs(body).items()}
            status, answer = issuer.grant(form, self.headers.get("Authorization"))
            self._send(status, json.dumps(answer).encode())

    return Handler


@contextmanager
def running_issuer(*, path: str = "", clock: Callable[[], float] = time.time) -> Iterator[OidcIssuer]:
    """Serve a fresh issuer on 127.0.0.1 (a free port) for the block; stopped and closed after it."""

    class _Server(ThreadingHTTPServer):
        daemon_threads = True

    server = _Server(("127.0.0.1", 0), BaseHTTPRequestHandler)
    issuer = OidcIssuer(f"http://127.0.0.1:{server.server_address[1]}", path=path, clock=clock)
    server.RequestHandlerClass = _handler(issuer)  # the issuer's URL needs the port: answer once it exists
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield issuer
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
