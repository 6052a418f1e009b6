"""JwtVerifier against a test issuer served over HTTP: what it accepts, the Principal it makes, and every
refusal a resource server owes (time on the injected clock, keys over the production fetcher)."""

from __future__ import annotations

import asyncio
import base64
import json
import pickle
import secrets
from typing import Any

import httpx
import pytest

from cluster.auth import AccessScope, JwtVerifier, Principal
from cluster.auth.tokens import MAX_TOKEN_CHARS
from cluster.errors import ConfigError, TokenRejected
from cluster.settings import AuthMode, AuthSettings, SamespaceSettings
from tests.support.fakes.oidc_issuer import DEFAULT_AUDIENCE, DEFAULT_CLIENT_ID, OidcIssuer, TestClient, running_issuer
from tests.unit.auth.conftest import Clock, verifier_for


async def refusal(verifier: JwtVerifier, token: str) -> str:
    with pytest.raises(TokenRejected) as caught:
        await verifier.verify(token)
    return caught.value.reason


async def test_an_accepted_token_names_its_caller(verifier: JwtVerifier, issuer: OidcIssuer) -> None:
    token = issuer.mint("alice", scopes=("samespace:read", "samespace:index"), groups=("team-a", "team-b"))
    principal = await verifier.verify(token)
    assert principal == Principal(
        kind="oauth",
        subject="alice",
        issuer=issuer.issuer,
        client_id=DEFAULT_CLIENT_ID,
        scopes=frozenset({"samespace:read", "samespace:index"}),
        groups=frozenset({"team-a", "team-b"}),
    )
    assert principal.has(AccessScope.INDEX) and not principal.is_admin
    assert not principal.reader().unrestricted


@pytest.mark.parametrize(
    ("claims", "client_id", "scopes", "groups"),
    [
        ({"client_id": None, "azp": "cursor"}, "cursor", set(), set()),
        ({"client_id": None}, None, set(), set()),
        ({"scope": None, "scp": ["samespace:read", 7, "samespace:admin"]}, DEFAULT_CLIENT_ID, {"read", "admin"}, set()),
        ({"scope": None, "scp": "samespace:read"}, DEFAULT_CLIENT_ID, {"read"}, set()),
        ({"scope": ["samespace:read"], "scp": "samespace:admin"}, DEFAULT_CLIENT_ID, {"read"}, set()),
        ({"groups": "team-a"}, DEFAULT_CLIENT_ID, set(), {"team-a"}),
        ({"groups": ["team a", 3, None, {"x": 1}, "ops"]}, DEFAULT_CLIENT_ID, set(), {"team a", "ops"}),
        ({"groups": 12}, DEFAULT_CLIENT_ID, set(), set()),
    ],
    ids=["azp", "no-client", "scp-list", "scp-string", "scope-claim-wins", "one-group", "mixed-groups", "junk-groups"],
)
async def test_client_scopes_and_groups_come_from_each_claim_shape(
    verifier: JwtVerifier,
    issuer: OidcIssuer,
    claims: dict[str, Any],
    client_id: str | None,
    scopes: set[str],
    groups: set[str],
) -> None:
    token = issuer.mint("bob", scopes=(), extra_claims=claims)
    principal = await verifier.verify(token)
    assert principal.client_id == client_id
    assert principal.scopes == {f"samespace:{scope}" for scope in scopes}
    assert principal.groups == groups


async def test_the_scopes_and_groups_claims_are_settings(issuer: OidcIssuer, clock: Clock) -> None:
    verifier = verifier_for(issuer, clock, scopes_claim="permissions", groups_claim="roles")
    token = issuer.mint(
        "carol",
        scopes=("ignored:scope",),
        groups=("ignored-group",),
        extra_claims={"permissions": ["samespace:admin"], "roles": ["platform"]},
    )
    principal = await verifier.verify(token)
    assert principal.scopes == {"samespace:admin"} and principal.groups == {"platform"}


@pytest.mark.parametrize(("past_exp_s", "accepted"), [(-1, True), (59, True), (60, False), (3600, False)])
async def test_an_expired_token_is_refused_beyond_the_clock_skew(
    verifier: JwtVerifier, issuer: OidcIssuer, clock: Clock, past_exp_s: int, accepted: bool
) -> None:
    """The default skew is 60 s: a token holds until 60 s after its exp (excluded)."""
    token = issuer.mint("dave", expires_in=300)
    clock.now += 300 + past_exp_s
    if accepted:
        assert (await verifier.verify(token)).subject == "dave"
    else:
        assert await refusal(verifier, token) == "expired"


async def test_the_clock_skew_is_a_setting(issuer: OidcIssuer, clock: Clock) -> None:
    token = issuer.mint("erin", expires_in=300)
    clock.now += 305
    assert await refusal(verifier_for(issuer, clock, clock_skew_s=0), token) == "expired"
    assert (await verifier_for(issuer, clock, clock_skew_s=10).verify(token)).subject == "erin"


async def test_a_token_for_another_audience_is_refused(verifier: JwtVerifier, issuer: OidcIssuer) -> None:
    assert await refusal(verifier, issuer.mint("f", audience="https://other.example/mcp")) == (
        "issued for another audience"
    )
    assert await refusal(verifier, issuer.mint("f", extra_claims={"aud": None})) == "issued for another audience"
    assert await refusal(verifier, issuer.mint("f", extra_claims={"aud": [7, None]})) == "issued for another audience"
    both = issuer.mint("f", audience=["https://other.example/mcp", DEFAULT_AUDIENCE])
    assert (await verifier.verify(both)).subject == "f"


async def test_a_token_from_another_issuer_is_refused(verifier: JwtVerifier, issuer: OidcIssuer) -> None:
    for other in ("https://evil.example", issuer.issuer + "/", issuer.issuer.upper()):
        assert await refusal(verifier, issuer.mint("g", issuer=other)) == "issued by another issuer"
    assert await refusal(verifier, issuer.mint("g", extra_claims={"iss": None})) == "issued by another issuer"


async def test_a_token_signed_by_a_key_never_published_is_refused(verifier: JwtVerifier, issuer: OidcIssuer) -> None:
    assert await refusal(verifier, issuer.foreign_token("h")) == "invalid signature"  # a published kid
    assert await refusal(verifier, issuer.foreign_token("h", kid="never-published")) == "unknown signing key"
    assert (await verifier.verify(issuer.mint("h"))).subject == "h"  # the genuine one still passes


async def test_alg_none_and_the_hs256_confusion_are_refused_before_any_key_is_fetched(
    verifier: JwtVerifier, issuer: OidcIssuer
) -> None:
    assert await refusal(verifier, issuer.alg_none_token("i")) == "algorithm 'none' is never accepted (unsigned)"
    reason = await refusal(verifier, issuer.hs256_token("i"))
    assert reason == "algorithm 'HS256' is never accepted (a shared secret, not the issuer's key)"
    assert issuer.jwks_fetches == 0
    await verifier.verify(issuer.mint("i"))  # keys cached now: the attacks stay refused
    assert await refusal(verifier, issuer.hs256_token("i")) == reason
    assert await refusal(verifier, issuer.alg_none_token("i")) == "algorithm 'none' is never accepted (unsigned)"


async def test_an_algorithm_outside_the_setting_is_refused_before_any_key_is_fetched(
    issuer: OidcIssuer, clock: Clock
) -> None:
    verifier = verifier_for(issuer, clock, algorithms=["ES256"])
    assert await refusal(verifier, issuer.mint("j")) == "algorithm 'RS256' is not accepted (auth.algorithms)"
    assert issuer.jwks_fetches == 0
    issuer.rotate("EC")
    assert (await verifier.verify(issuer.mint("j"))).subject == "j"


async def test_a_key_with_its_own_alg_signs_with_that_alg_only(verifier: JwtVerifier, issuer: OidcIssuer) -> None:
    """The published key says RS256: a PS256 signature by the same private key is still refused."""
    token = issuer.mint("k", algorithm="PS256")
    assert await refusal(verifier, token) == "the signing key does not allow the token's algorithm"


@pytest.mark.parametrize("header", [{"crit": ["exp"]}, {"crit": []}, {"crit": ["b64"], "b64": False}])
async def test_a_critical_header_extension_is_refused(
    verifier: JwtVerifier, issuer: OidcIssuer, header: dict[str, Any]
) -> None:
    """RFC 7515 §4.1.11: an extension the verifier does not implement must not be ignored."""
    reason = await refusal(verifier, issuer.mint("k2", extra_headers=header))
    assert reason in {"unsupported critical header parameter", "malformed token"}
    assert issuer.jwks_fetches == 0


@pytest.mark.parametrize(
    ("claims", "reason"),
    [
        ({"sub": None}, "no subject (sub)"),
        ({"sub": ""}, "no subject (sub)"),
        ({"sub": 42}, "no subject (sub)"),
        ({"exp": None}, "no expiry (exp)"),
        ({"exp": "tomorrow"}, "malformed claim (exp)"),
        ({"exp": True}, "malformed claim (exp)"),
        ({"nbf": "soon"}, "malformed claim (nbf)"),
    ],
    ids=["no-sub", "empty-sub", "number-sub", "no-exp", "text-exp", "bool-exp", "text-nbf"],
)
async def test_a_token_missing_a_required_claim_is_refused(
    verifier: JwtVerifier, issuer: OidcIssuer, claims: dict[str, Any], reason: str
) -> None:
    assert await refusal(verifier, issuer.mint("l", extra_claims=claims)) == reason


async def test_a_token_not_valid_yet_is_refused_beyond_the_skew(verifier: JwtVerifier, issuer: OidcIssuer) -> None:
    assert await refusal(verifier, issuer.mint("m", not_before=61)) == "not valid yet (nbf)"
    assert (await verifier.verify(issuer.mint("m", not_before=60))).subject == "m"
    future_iat = issuer.mint("m", extra_claims={"iat": int(issuer.clock()) + 120})
    assert await refusal(verifier, future_iat) == "issued in the future (iat)"


async def test_a_token_without_a_kid_is_tried_only_against_a_lone_key(
    verifier: JwtVerifier, issuer: OidcIssuer, clock: Clock
) -> None:
    assert (await verifier.verify(issuer.mint("n", with_kid=False))).subject == "n"
    issuer.rotate("RSA")
    clock.now += 301  # past jwks_cache_s: the next token sees both keys
    reason = await refusal(verifier, issuer.mint("n", with_kid=False))
    assert reason == "no key id (kid), and the issuer publishes more than one key"


@pytest.mark.parametrize(
    "token",
    [
        "",
        "not-a-jwt",
        "a.b",
        "a.b.c",
        "e30.e30.",
        base64.urlsafe_b64encode(b'{"alg":["RS256"]}').decode() + ".e30.x",
        base64.urlsafe_b64encode(b'{"alg":"RS256","kid":7}').decode() + ".e30.x",
    ],
    ids=["empty", "one-part", "two-parts", "bad-base64", "no-alg", "alg-list", "number-kid"],
)
async def test_a_malformed_token_is_refused(verifier: JwtVerifier, token: str) -> None:
    assert (await refusal(verifier, token)).startswith("malformed token")


async def test_an_oversized_token_is_refused_unread(verifier: JwtVerifier, issuer: OidcIssuer) -> None:
    token = issuer.mint("o", extra_claims={"padding": "x" * MAX_TOKEN_CHARS})
    assert await refusal(verifier, token) == f"token over {MAX_TOKEN_CHARS} characters"
    assert issuer.jwks_fetches == 0


def _b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


async def test_no_refusal_quotes_the_token_or_a_claim_it_carries(
    verifier: JwtVerifier, issuer: OidcIssuer, clock: Clock
) -> None:
    canary = "CANARY" + secrets.token_hex(8)
    claims: dict[str, Any] = {"extra_claims": {"note": canary}}
    tokens = [
        issuer.mint(canary, expires_in=-3600, **claims),
        issuer.mint(canary, audience=canary, **claims),
        issuer.mint(canary, issuer=f"https://{canary}.example", **claims),
        issuer.mint(canary, not_before=3600, **claims),
        issuer.mint(canary, extra_claims={"exp": canary}),
        issuer.foreign_token(canary, **claims),
        issuer.foreign_token(canary, kid=canary, **claims),
        issuer.alg_none_token(canary, **claims),
        issuer.hs256_token(canary, **claims),
        f"{_b64({'alg': canary, 'kid': canary})}.{_b64({'sub': canary})}.sig",
        f"{_b64({'alg': 'RS256', 'kid': canary})}.{canary}.{canary}",
        canary,
    ]
    refusals = []
    for token in tokens:
        with pytest.raises(TokenRejected) as caught:
            await verifier.verify(token)
        refusals.append(caught.value)
    issuer.jwks_status = 503
    clock.now += 3600  # the keys expire, and cannot be fetched again
    with pytest.raises(TokenRejected) as caught:
        await verifier.verify(tokens[0])
    refusals.append(caught.value)
    assert len({error.reason for error in refusals}) >= 9  # they are refused for their own reasons
    for error, token in zip(refusals, [*tokens, tokens[0]], strict=True):
        for text in (str(error), repr(error), repr(error.args), repr(pickle.loads(pickle.dumps(error)))):
            assert canary not in text and token not in text
    assert canary not in repr(verifier)


async def test_a_client_credentials_grant_gets_a_token_the_verifier_accepts(issuer: OidcIssuer, clock: Clock) -> None:
    """A real OAuth client's path: discovery, the token endpoint, then the resource server."""
    resource = "https://samespace.example/mcp"
    issuer.clients["ci-bot"] = TestClient("ci-bot", "s3cret-" + "x" * 20, groups=("bots",))
    async with httpx.AsyncClient() as client:
        metadata = (await client.get(issuer.openid_configuration_url)).json()
        assert metadata["grant_types_supported"][0] == "client_credentials"
        answer = await client.post(
            metadata["token_endpoint"],
            data={"grant_type": "client_credentials", "scope": "samespace:read", "resource": resource},
            auth=("ci-bot", "s3cret-" + "x" * 20),
        )
        refused = await client.post(
            metadata["token_endpoint"],
            data={"grant_type": "client_credentials", "client_id": "ci-bot", "client_secret": "wrong"},
        )
    assert answer.status_code == 200 and answer.json()["token_type"] == "Bearer"
    assert refused.status_code == 401 and refused.json() == {"error": "invalid_client"}
    principal = await verifier_for(issuer, clock, audience=resource).verify(answer.json()["access_token"])
    assert (principal.subject, principal.client_id, principal.groups) == ("ci-bot", "ci-bot", frozenset({"bots"}))
    assert principal.scopes == {"samespace:read"}
    assert await refusal(verifier_for(issuer, clock), answer.json()["access_token"]) == "issued for another audience"


async def test_from_settings_builds_the_production_verifier() -> None:
    """The wall clock and the httpx fetcher: a token minted now, for settings.audience, is accepted."""
    with running_issuer() as issuer:
        settings = SamespaceSettings(auth=AuthSettings(mode=AuthMode.OAUTH, issuer=issuer.issuer))
        verifier = JwtVerifier.from_settings(settings)
        assert settings.audience == "http://127.0.0.1:8000/mcp"
        token = await asyncio.to_thread(issuer.mint, "pat", audience=settings.audience)
        assert (await verifier.verify(token)).subject == "pat"
        assert await refusal(verifier, issuer.mint("pat", expires_in=-120)) == "expired"


def test_a_verifier_needs_an_issuer() -> None:
    with pytest.raises(ConfigError, match=r"auth\.issuer"):
        JwtVerifier(AuthSettings(), audience=DEFAULT_AUDIENCE, fetch_json=_never_fetch, clock=lambda: 0.0)


async def _never_fetch(url: str) -> dict[str, Any]:
    raise AssertionError(f"no fetch expected: {url}")
