"""Bearer-token checks shared by the admin API and the sidecar endpoints (constant-time)."""

from __future__ import annotations

import hmac

from pydantic import SecretStr

BEARER = "Bearer "


def bearer_matches(authorization: str | None, expected: SecretStr | None) -> bool:
    """Whether an `Authorization` header carries `expected`; never true when no token is configured."""
    if expected is None or not authorization or not authorization.startswith(BEARER):
        return False
    return hmac.compare_digest(authorization[len(BEARER) :].encode(), expected.get_secret_value().encode())
