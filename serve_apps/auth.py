"""Bearer tokens: the one way to read `Authorization: Bearer <token>` (RFC 6750 §2.1: the scheme is
case-insensitive, one or more spaces before the token), and the constant-time check of a shared token
(the serve token, the admin token, the fleet token) used by the guard, the admin API and the sidecar
endpoints."""

from __future__ import annotations

import hmac

from pydantic import SecretStr

__all__ = ["bearer_matches", "bearer_token"]


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization` header in the Bearer scheme, or None (no header, another
    scheme, no token, or a token with whitespace inside)."""
    if not authorization:
        return None
    scheme, sep, rest = authorization.partition(" ")
    token = rest.lstrip(" ").rstrip()
    if not sep or scheme.lower() != "bearer" or not token or any(c.isspace() for c in token):
        return None
    return token


def bearer_matches(authorization: str | None, expected: SecretStr | None) -> bool:
    """Whether an `Authorization` header carries `expected`; never true when no token is configured."""
    token = bearer_token(authorization)
    if expected is None or token is None:
        return False
    return hmac.compare_digest(token.encode(), expected.get_secret_value().encode())
