"""The issuer's signing keys as the verifier gets them: discovery, the cache, rotation without a fetch
storm, and failing closed when the keys cannot be had (a test issuer over HTTP, the injected clock)."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import pytest

from cluster.auth import JwtVerifier
from cluster.auth.jwks import FetchFailed, http_json_fetcher, metadata_urls, usable_keys
from cluster.errors import TokenRejected
from tests.support.fakes.oidc_issuer import OidcIssuer, running_issuer
from tests.unit.auth.conftest import Clock, verifier_for

UNAVAILABLE = "signing keys unavailable"


async def refusal(verifier: JwtVerifier, token: str) -> str:
    with pytest.raises(TokenRejected) as caught:
        await verifier.verify(token)
    return caught.value.reason


async def test_a_rotated_key_verifies_after_one_refetch(
    verifier: JwtVerifier, issuer: OidcIssuer, clock: Clock
) -> None:
    old_kid = issuer.current_kid
    await verifier.verify(issuer.mint("a"))
    assert issuer.jwks_fetches == 1
    clock.now += 30  # jwks_refresh_min_s: an unknown kid may fetch again
    new_kid = issuer.rotate("EC")
    assert (await verifier.verify(issuer.mint("a"))).subject == "a"  # the new key's token
    assert issuer.jwks_fetches == 2
    assert (await verifier.verify(issuer.mint("a", kid=old_kid))).subject == "a"  # still published
    assert (await verifier.verify(issuer.mint("a", kid=new_kid))).subject == "a"
    assert issuer.jwks_fetches == 2


async def test_a_burst_of_unknown_kids_fetches_once_per_refresh_interval(
    verifier: JwtVerifier, issuer: OidcIssuer, clock: Clock
) -> None:
    await verifier.verify(issuer.mint("b"))
    clock.now += 31  # past jwks_refresh_min_s (30), within jwks_cache_s (300)
    burst = [issuer.foreign_token("b", kid=f"unknown-{i}") for i in range(25)]
    results = await asyncio.gather(*(verifier.verify(token) for token in burst), return_exceptions=True)
    assert {str(result) for result in results} == {"access token rejected: unknown signing key"}
    assert issuer.jwks_fetches == 2  # one refetch for the whole burst
    for token in burst[:5]:  # one after another, still within the interval
        assert await refusal(verifier, token) == "unknown signing key"
    issuer.rotate("RSA")
    clock.now += 29  # the burst's refetch was 29 s ago: even a real new key waits for the interval
    assert await refusal(verifier, issuer.mint("b")) == "unknown signing key"
    assert issuer.jwks_fetches == 2
    clock.now += 1
    assert (await verifier.verify(issuer.mint("b"))).subject == "b"
    assert issuer.jwks_fetches == 3


@pytest.mark.parametrize("refresh_min_s", [30.0, 0.0])
async def test_concurrent_first_tokens_share_one_fetch(issuer: OidcIssuer, clock: Clock, refresh_min_s: float) -> None:
    verifier = verifier_for(issuer, clock, jwks_refresh_min_s=refresh_min_s)
    tokens = [issuer.mint(f"user-{i}") for i in range(20)]
    principals = await asyncio.gather(*(verifier.verify(token) for token in tokens))
    assert [p.subject for p in principals] == [f"user-{i}" for i in range(20)]
    assert issuer.jwks_fetches == 1


async def test_the_key_set_is_fetched_again_when_the_cache_expires(issuer: OidcIssuer, clock: Clock) -> None:
    verifier = verifier_for(issuer, clock, jwks_cache_s=120, jwks_refresh_min_s=10)
    await verifier.verify(issuer.mint("c"))
    clock.now += 119
    await verifier.verify(issuer.mint("c"))
    assert issuer.jwks_fetches == 1
    clock.now += 1
    await verifier.verify(issuer.mint("c"))
    assert issuer.jwks_fetches == 2


async def test_a_retired_key_is_refused_once_the_cache_expires(
    verifier: JwtVerifier, issuer: OidcIssuer, clock: Clock
) -> None:
    old_kid = issuer.current_kid
    issuer.rotate("EC")
    token = issuer.mint("d", kid=old_kid, expires_in=3600)
    await verifier.verify(token)
    issuer.retire(old_kid)
    clock.now += 299
    assert (await verifier.verify(token)).subject == "d"  # cached keys are trusted for jwks_cache_s
    clock.now += 1
    assert await refusal(verifier, token) == "unknown signing key"
    assert issuer.jwks_fetches == 2


async def test_keys_are_found_through_openid_configuration(verifier: JwtVerifier, issuer: OidcIssuer) -> None:
    await verifier.verify(issuer.mint("e"))
    fetched = {what: issuer.fetches(what) for what in ("openid-configuration", "oauth-authorization-server", "jwks")}
    assert fetched == {"openid-configuration": 1, "oauth-authorization-server": 0, "jwks": 1}


@pytest.mark.parametrize("path", ["", "/realms/team"])
async def test_keys_are_found_through_oauth_authorization_server(clock: Clock, path: str) -> None:
    """RFC 8414 when there is no OpenID document; for an issuer with a path, the path-inserted form."""
    with running_issuer(path=path, clock=clock) as issuer:
        issuer.openid_configuration = False
        assert (await verifier_for(issuer, clock).verify(issuer.mint("f"))).issuer == issuer.issuer
        assert issuer.fetches("openid-configuration") == 1 and issuer.fetches("oauth-authorization-server") == 1
        assert issuer.jwks_fetches == 1


async def test_a_configured_jwks_url_skips_discovery(issuer: OidcIssuer, clock: Clock) -> None:
    issuer.openid_configuration = issuer.oauth_metadata = False
    verifier = verifier_for(issuer, clock, jwks_url=issuer.jwks_uri)
    assert (await verifier.verify(issuer.mint("g"))).subject == "g"
    assert issuer.fetches("openid-configuration") == issuer.fetches("oauth-authorization-server") == 0


async def test_metadata_naming_another_issuer_is_refused(verifier: JwtVerifier, issuer: OidcIssuer) -> None:
    issuer.metadata_issuer = "https://evil.example"
    reason = await refusal(verifier, issuer.mint("h"))
    assert reason == f"{UNAVAILABLE} (the issuer's metadata names another issuer)"
    assert issuer.jwks_fetches == 0


async def test_no_metadata_anywhere_fails_closed(verifier: JwtVerifier, issuer: OidcIssuer) -> None:
    issuer.openid_configuration = issuer.oauth_metadata = False
    assert await refusal(verifier, issuer.mint("i")) == UNAVAILABLE
    assert issuer.jwks_fetches == 0


@pytest.mark.parametrize(
    "broken",
    ["503", "not-json", "json-array", "no-keys", "only-secret-keys", "over-a-mebibyte"],
)
async def test_unusable_keys_fail_closed_and_recover_after_the_interval(
    verifier: JwtVerifier, issuer: OidcIssuer, clock: Clock, broken: str
) -> None:
    bodies = {
        "not-json": b"<html>login</html>",
        "json-array": b"[]",
        "no-keys": b'{"keys": []}',
        "only-secret-keys": json.dumps({"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": issuer.current_kid}]}).encode(),
        "over-a-mebibyte": json.dumps({**issuer.jwks(), "padding": "x" * (1024 * 1024)}).encode(),
    }
    if broken == "503":
        issuer.jwks_status = 503
    else:
        issuer.jwks_body = bodies[broken]
    token = issuer.mint("j", expires_in=3600)
    assert await refusal(verifier, token) == UNAVAILABLE
    assert await refusal(verifier, token) == UNAVAILABLE
    assert issuer.jwks_fetches == 1  # a failed fetch is not retried at once
    issuer.jwks_status, issuer.jwks_body = 200, None
    clock.now += 30
    assert (await verifier.verify(token)).subject == "j"


async def test_an_unreachable_issuer_fails_closed_even_with_keys_once_fetched(clock: Clock) -> None:
    with running_issuer(clock=clock) as issuer:
        verifier = verifier_for(issuer, clock)
        token = issuer.mint("k", expires_in=7200)
        await verifier.verify(token)
    clock.now += 299  # the server is gone; the cached keys still hold
    assert (await verifier.verify(token)).subject == "k"
    clock.now += 1
    assert await refusal(verifier, token) == UNAVAILABLE  # expired keys are never used


async def test_a_failed_refetch_keeps_the_trusted_keys(verifier: JwtVerifier, issuer: OidcIssuer, clock: Clock) -> None:
    await verifier.verify(issuer.mint("l"))
    issuer.jwks_status = 500
    clock.now += 60
    assert await refusal(verifier, issuer.foreign_token("l", kid="rotated?")) == "unknown signing key"
    assert issuer.jwks_fetches == 2
    assert (await verifier.verify(issuer.mint("l"))).subject == "l"


async def test_the_fetcher_follows_redirects_only_within_http_and_https(issuer: OidcIssuer, clock: Clock) -> None:
    issuer.redirects["/moved-keys"] = issuer.jwks_uri
    moved = verifier_for(issuer, clock, jwks_url=f"{issuer.origin}/moved-keys")
    assert (await moved.verify(issuer.mint("m"))).subject == "m"
    fetch = http_json_fetcher(2.0)
    for target in ("file:///etc/passwd", "ftp://127.0.0.1/jwks"):
        issuer.redirects["/elsewhere"] = target
        with pytest.raises(FetchFailed, match=r"redirect to a (file|ftp) URL refused"):
            await fetch(f"{issuer.origin}/elsewhere")
    issuer.redirects["/loop"] = f"{issuer.origin}/loop"
    with pytest.raises(FetchFailed, match="more than 3 redirects"):
        await fetch(f"{issuer.origin}/loop")


async def test_the_fetcher_gives_up_on_a_silent_server() -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # connections wait in the backlog, unanswered
        port = silent.getsockname()[1]
        with pytest.raises(FetchFailed, match=r"no answer within 0\.2 s"):
            await http_json_fetcher(0.2)(f"http://127.0.0.1:{port}/jwks")


def test_metadata_locations_follow_oidc_then_rfc_8414() -> None:
    assert metadata_urls("https://id.example") == [
        "https://id.example/.well-known/openid-configuration",
        "https://id.example/.well-known/oauth-authorization-server",
    ]
    assert metadata_urls("https://id.example/realms/team/") == [
        "https://id.example/realms/team/.well-known/openid-configuration",
        "https://id.example/.well-known/oauth-authorization-server/realms/team",
        "https://id.example/.well-known/openid-configuration/realms/team",
    ]


def test_only_public_signing_keys_are_usable(issuer: OidcIssuer) -> None:
    good = issuer.jwks()["keys"][0]
    keys: list[Any] = [
        good,
        {**good, "kid": "enc", "use": "enc"},
        {**good, "kid": "ops", "key_ops": ["encrypt"]},
        {**good, "kid": "private", "d": "AQAB"},
        {"kty": "oct", "kid": "secret", "k": "c2VjcmV0"},
        {"kty": "RSA", "kid": "broken", "n": "!!", "e": "AQAB"},
        {**good, "kid": 7},
        "not-a-key",
    ]
    assert [key["kid"] for key in usable_keys({"keys": keys})] == [good["kid"]]
    assert usable_keys({"keys": "none"}) == [] and usable_keys({}) == []
