"""A test issuer on 127.0.0.1 and verifiers of its tokens, on one injected clock."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from cluster.auth import JwtVerifier
from cluster.auth.jwks import http_json_fetcher
from cluster.settings import AuthMode, AuthSettings
from tests.support.fakes.oidc_issuer import DEFAULT_AUDIENCE, OidcIssuer, running_issuer

START = 1_800_000_000.0  # 2027-01-15, any fixed instant


class Clock:
    """The verifier's and the issuer's time: moved by the test, never by the wall clock."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def issuer(clock: Clock) -> Iterator[OidcIssuer]:
    with running_issuer(clock=clock) as issuer:
        yield issuer


def verifier_for(issuer: OidcIssuer, clock: Clock, *, audience: str = DEFAULT_AUDIENCE, **auth: Any) -> JwtVerifier:
    """A verifier of `issuer`'s tokens over HTTP (the production fetcher), on `clock`."""
    settings = AuthSettings(mode=AuthMode.OAUTH, issuer=issuer.issuer, **auth)
    return JwtVerifier(settings, audience=audience, fetch_json=http_json_fetcher(2.0), clock=clock)


@pytest.fixture
def verifier(issuer: OidcIssuer, clock: Clock) -> JwtVerifier:
    return verifier_for(issuer, clock)
