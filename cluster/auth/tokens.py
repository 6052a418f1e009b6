"""OAuth access tokens (JWT, RFC 9068) checked the way a resource server must: `JwtVerifier`.

In order, before anything of the token is trusted:
1. the unverified header: its `alg` must be asymmetric and in `auth.algorithms` (`none` and HS* are
   refused before any key is looked up), no `crit` extension;
2. the key: the issuer's published key named by `kid` (`cluster/auth/jwks.py`: cached, refetched once
   for an unknown kid, fail closed); a key with its own `alg` signs with that one only;
3. the signature (PyJWT, no hand-written crypto);
4. the claims, against the injected clock with `auth.clock_skew_s` of leeway: `iss` exactly the issuer,
   `aud` holding the audience (RFC 8707), `exp` present and ahead, `nbf` and `iat` not ahead, `sub` present.

A refusal is `TokenRejected(reason)`: the reason is one of a few fixed phrases; it never quotes the
token or a claim's value.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import jwt
from jwt.types import Options

from cluster.auth.jwks import FetchJson, SigningKeys, http_json_fetcher
from cluster.auth.principal import Principal
from cluster.errors import ConfigError, TokenRejected
from cluster.settings import ASYMMETRIC_ALGORITHMS, AuthSettings, SamespaceSettings

__all__ = ["MAX_TOKEN_CHARS", "JwtVerifier"]

MAX_TOKEN_CHARS = 32 * 1024  # longer than any issuer's access token (Entra's with 200 groups is ~10 KB)
# JWS algorithm names a refusal may quote (RFC 7518, RFC 8037, RFC 8812): a header's `alg` is the
# attacker's text, so any other value is described, not quoted.
_NAMED_ALGORITHMS = frozenset({"none", "HS256", "HS384", "HS512", "ES256K", "Ed25519", "Ed448", *ASYMMETRIC_ALGORITHMS})
# Signature only: PyJWT would check exp/nbf/iat against time.time(); every claim is checked below
# against the injected clock instead.
_SIGNATURE_ONLY: Options = {
    "verify_signature": True,
    "verify_exp": False,
    "verify_nbf": False,
    "verify_iat": False,
    "verify_aud": False,
    "verify_iss": False,
    "verify_sub": False,
    "verify_jti": False,
    "enforce_minimum_key_length": True,
}


class JwtVerifier:
    """A `cluster.auth.TokenVerifier` for JWT access tokens of `auth.issuer`, for `audience`."""

    def __init__(
        self,
        auth: AuthSettings,
        *,
        audience: str,
        fetch_json: FetchJson,
        clock: Callable[[], float],
    ) -> None:
        if auth.issuer is None:
            raise ConfigError("auth.issuer", "required to verify OAuth access tokens (auth.mode oauth)")
        self._auth = auth
        self._issuer = auth.issuer
        self._audience = audience
        self._clock = clock
        self._keys = SigningKeys(auth, fetch_json=fetch_json, clock=clock)

    @classmethod
    def from_settings(cls, settings: SamespaceSettings) -> JwtVerifier:
        """The verifier of a running server: keys over HTTP (auth.fetch_timeout_s), the wall clock."""
        auth = settings.auth
        return cls(
            auth,
            audience=settings.audience,
            fetch_json=http_json_fetcher(auth.fetch_timeout_s),
            clock=time.time,
        )

    def __repr__(self) -> str:
        return f"JwtVerifier(issuer={self._issuer!r}, audience={self._audience!r})"

    async def verify(self, token: str) -> Principal:
        """The caller `token` was issued to; TokenRejected saying why when it is not accepted."""
        if not isinstance(token, str) or not token:
            raise TokenRejected("malformed token")
        if len(token) > MAX_TOKEN_CHARS:
            raise TokenRejected(f"token over {MAX_TOKEN_CHARS} characters")
        algorithm, kid = self._checked_header(token)
        keys = await self._keys.key_for(kid, algorithm)
        claims = _signed_claims(token, keys, algorithm)
        self._check_claims(claims)
        return self._principal(claims)

    def _checked_header(self, token: str) -> tuple[str, str | None]:
        """The token's `alg` (accepted) and `kid`, read before any key is looked up."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise TokenRejected("malformed token") from None
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or not algorithm:
            raise TokenRejected("malformed token (no alg)")
        named = repr(algorithm) if algorithm in _NAMED_ALGORITHMS else "(unknown)"
        if algorithm.lower() == "none":
            raise TokenRejected(f"algorithm {named} is never accepted (unsigned)")
        if algorithm.upper().startswith("HS"):
            raise TokenRejected(f"algorithm {named} is never accepted (a shared secret, not the issuer's key)")
        if algorithm not in self._auth.algorithms:
            raise TokenRejected(f"algorithm {named} is not accepted (auth.algorithms)")
        if "crit" in header or "b64" in header:
            raise TokenRejected("unsupported critical header parameter")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise TokenRejected("malformed token (kid)")
        return algorithm, kid

    def _check_claims(self, claims: dict[str, Any]) -> None:
        now = self._clock()
        skew = self._auth.clock_skew_s
        if claims.get("iss") != self._issuer:
            raise TokenRejected("issued by another issuer")
        audience = claims.get("aud")
        audiences = [audience] if isinstance(audience, str) else audience if isinstance(audience, list) else []
        if self._audience not in [a for a in audiences if isinstance(a, str)]:
            raise TokenRejected("issued for another audience")
        expires = _instant(claims, "exp")
        if expires is None:
            raise TokenRejected("no expiry (exp)")
        if now >= expires + skew:
            raise TokenRejected("expired")
        not_before = _instant(claims, "nbf")
        if not_before is not None and not_before - skew > now:
            raise TokenRejected("not valid yet (nbf)")
        issued = _instant(claims, "iat")
        if issued is not None and issued - skew > now:
            raise TokenRejected("issued in the future (iat)")
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject.strip():
            raise TokenRejected("no subject (sub)")

    def _principal(self, claims: dict[str, Any]) -> Principal:
        client_id = claims.get("client_id")
        if not isinstance(client_id, str) or not client_id:
            azp = claims.get("azp")
            client_id = azp if isinstance(azp, str) and azp else None
        scopes_claim = self._auth.scopes_claim
        scopes = claims[scopes_claim] if scopes_claim in claims else claims.get("scp")
        return Principal(
            kind="oauth",
            subject=claims["sub"],
            issuer=self._issuer,
            client_id=client_id,
            scopes=frozenset(_words(scopes, split=True)),
            groups=frozenset(_words(claims.get(self._auth.groups_claim), split=False)),
        )


def _signed_claims(token: str, keys: list[jwt.PyJWK], algorithm: str) -> dict[str, Any]:
    """The token's claims once one of `keys` verifies its signature."""
    reason = "invalid signature"
    for key in keys:
        try:
            claims: dict[str, Any] = jwt.decode(token, key=key, algorithms=[algorithm], options=_SIGNATURE_ONLY)
        except jwt.InvalidSignatureError:
            continue
        except jwt.InvalidKeyError:
            reason = "the issuer's signing key is refused (too weak or of the wrong type)"
            continue
        except jwt.PyJWTError:
            raise TokenRejected("malformed token") from None
        return claims
    raise TokenRejected(reason)


def _instant(claims: dict[str, Any], name: str) -> float | None:
    """A NumericDate claim (seconds since the epoch), None when absent; refused when not a number."""
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TokenRejected(f"malformed claim ({name})")
    return float(value)


def _words(value: object, *, split: bool) -> list[str]:
    """A claim's strings: a list's string items, or one string (split on spaces when `split`)."""
    items = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    words: list[str] = []
    for item in items:
        if isinstance(item, str):
            words.extend(item.split() if split else [item] if item else [])
    return words
