"""The OAuth resource server's HTTP side on the real MCP app, without Ray: the auth modes, the RFC 9728
metadata, the RFC 6750 challenges, the scope each request needs, and the caller a tool sees.

The token verifier is the test's own (token string -> Principal): the guard and the gate are what is
under test here; the JWT checks are tested with cluster/auth/tokens.py.
"""

from __future__ import annotations

import json
import logging
from typing import Any, cast

import pytest
from starlette.testclient import TestClient

from cluster.ask.ask_progress import ProgressCallback
from cluster.ask.pipeline import AskRequest, AskResult, AskTrace
from cluster.auth import AccessScope, Principal, current_principal
from cluster.errors import ConfigError, TokenRejected
from cluster.search import CodeSearchService, IndexStatus
from cluster.settings import SamespaceSettings
from serve_apps.mcp import AskService

BASE = "http://127.0.0.1:8000"
ISSUER = "https://idp.example/realms/team"
METADATA_URL = "http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp"
CHALLENGE = f'Bearer resource_metadata="{METADATA_URL}"'
MCP_HEADERS = {"accept": "application/json, text/event-stream"}
# Tokens: opaque strings the test's verifier maps to callers (canaries: none may appear in an answer or a log).
READER = "reader-token-8d1f0a"
INDEXER = "indexer-token-77c2e1"
NO_SCOPE = "no-scope-token-31b9"
UNKNOWN = "unknown-token-c0ffee"
ALL_TOKENS = (READER, INDEXER, NO_SCOPE, UNKNOWN)


def caller(subject: str, *scopes: AccessScope) -> Principal:
    return Principal(
        kind="oauth", subject=subject, issuer=ISSUER, client_id="claude-code", scopes=frozenset(s.value for s in scopes)
    )


CALLERS = {
    READER: caller("alice", AccessScope.READ),
    INDEXER: caller("bob", AccessScope.READ, AccessScope.INDEX),
    NO_SCOPE: caller("carol"),
}


class TableVerifier:
    """A TokenVerifier over a table; a token it does not hold is refused (the reason may be hostile)."""

    def __init__(self, reason: str = "signature does not verify") -> None:
        self.reason = reason
        self.seen: list[str] = []

    async def verify(self, token: str) -> Principal:
        self.seen.append(token)
        if token in CALLERS:
            return CALLERS[token]
        raise TokenRejected(self.reason.replace("{token}", token))


class RecordingService:
    """The search service's `index_status`, recording who called it."""

    def __init__(self) -> None:
        self.callers: list[Principal] = []

    async def index_status(self, repo: str | None = None) -> IndexStatus:
        self.callers.append(current_principal())
        return IndexStatus(indexes=[], builds=[])


class RecordingAsker:
    """`AskService.ask`, recording who asked."""

    def __init__(self) -> None:
        self.callers: list[Principal] = []

    async def ask(self, request: AskRequest, progress: ProgressCallback | None = None) -> AskResult:
        self.callers.append(current_principal())
        trace = AskTrace(mode="synthesis", deep=True)
        return AskResult(question=request.question, answer="a", citations=[], produced=trace)


def oauth_settings(**auth: Any) -> SamespaceSettings:
    return SamespaceSettings(auth={"mode": "oauth", "issuer": ISSUER, **auth})


def app(
    settings: SamespaceSettings, verifier: TableVerifier | None = None
) -> tuple[TestClient, RecordingService, RecordingAsker]:
    from serve_apps.mcp import build_asgi_app

    service, asker = RecordingService(), RecordingAsker()
    api = build_asgi_app(
        cast(CodeSearchService, service), cast(AskService, asker), settings, verifier=verifier or TableVerifier()
    )
    return TestClient(api, base_url=BASE), service, asker


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def rpc(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}


def tool_call(name: str, arguments: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
    if meta:
        params["_meta"] = meta
    return rpc("tools/call", params)


def sse_messages(body: str) -> list[Any]:
    return [json.loads(line[len("data: ") :]) for line in body.splitlines() if line.startswith("data: ")]


# --- discovery: RFC 9728 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"])
def test_the_metadata_answers_without_a_token_at_both_paths_with_the_rfc_9728_fields(path: str) -> None:
    client, _, _ = app(oauth_settings())
    response = client.get(path)
    assert response.status_code == 200 and response.headers["content-type"].startswith("application/json")
    assert response.json() == {
        "resource": "http://127.0.0.1:8000/mcp",
        "authorization_servers": [ISSUER],
        "scopes_supported": ["samespace:read", "samespace:index", "samespace:admin"],
        "bearer_methods_supported": ["header"],
        "resource_name": "samespace",
    }


def test_the_metadata_names_the_configured_resource_and_the_issuer_exactly_as_written() -> None:
    settings = oauth_settings(issuer="https://accounts.google.com", resource_url="https://code.team.example/mcp")
    client, _, _ = app(settings)
    document = client.get("/.well-known/oauth-protected-resource/mcp").json()
    assert document["resource"] == "https://code.team.example/mcp"
    assert document["authorization_servers"] == ["https://accounts.google.com"]  # no slash added
    refused = client.post("/mcp/", json=rpc("tools/list"), headers=MCP_HEADERS)
    expected = 'Bearer resource_metadata="https://code.team.example/.well-known/oauth-protected-resource/mcp"'
    assert refused.headers["www-authenticate"] == expected


def test_the_metadata_still_checks_the_host_and_the_origin() -> None:
    client, _, _ = app(oauth_settings())
    path = "/.well-known/oauth-protected-resource"
    assert client.get(path, headers={"host": "evil.example"}).status_code == 421
    assert client.get(path, headers={"origin": "http://evil.example"}).status_code == 403
    assert client.get(path, headers={"origin": "http://localhost:6274"}).status_code == 200  # a local inspector


@pytest.mark.parametrize("serve", [{}, {"token": "serve-token-4821"}])
def test_without_oauth_there_is_no_metadata_and_no_token_is_asked_for_it(serve: dict[str, str]) -> None:
    from serve_apps.mcp import build_asgi_app

    client = TestClient(build_asgi_app(cast(Any, None), cast(Any, None), SamespaceSettings(serve=serve)), base_url=BASE)
    for path in ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"]:
        assert client.get(path).status_code == 404


def test_oauth_without_a_verifier_is_refused_when_the_app_is_built() -> None:
    from serve_apps.mcp import build_asgi_app

    with pytest.raises(ConfigError, match=r"auth\.mode"):
        build_asgi_app(cast(Any, None), cast(Any, None), oauth_settings())


# --- the challenges: RFC 6750 §3 -----------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/mcp/", "/rlm/ask"])
@pytest.mark.parametrize("authorization", [None, "Basic cmVhZGVy", "Bearer", "Bearer  ", "Token " + READER])
def test_a_request_without_a_token_is_401_with_only_the_metadata_url(path: str, authorization: str | None) -> None:
    verifier = TableVerifier()
    client, service, asker = app(oauth_settings(), verifier)
    headers = {**MCP_HEADERS, **({"authorization": authorization} if authorization else {})}
    response = client.post(path, json=rpc("tools/list"), headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == CHALLENGE  # no error code: no token was sent
    assert response.json() == {
        "error": "unauthorized",
        "error_description": "this resource needs an OAuth access token",
    }
    assert verifier.seen == [] and service.callers == [] and asker.callers == []


@pytest.mark.parametrize("path", ["/mcp/", "/rlm/ask"])
def test_a_token_the_verifier_refuses_is_401_invalid_token_saying_why(path: str) -> None:
    verifier = TableVerifier(reason="the token expired")
    client, _, _ = app(oauth_settings(), verifier)
    response = client.post(path, json=rpc("tools/list"), headers={**MCP_HEADERS, **bearer(UNKNOWN)})
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == (
        'Bearer error="invalid_token", error_description="access token rejected: the token expired", '
        f'resource_metadata="{METADATA_URL}"'
    )
    description = "access token rejected: the token expired"
    assert response.json() == {"error": "invalid_token", "error_description": description}
    assert verifier.seen == [UNKNOWN]


def test_a_refusal_never_echoes_the_token_even_when_the_verifier_names_it(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    client, _, _ = app(oauth_settings(), TableVerifier(reason='malformed: "{token}"\n'))
    answers = [
        client.post("/mcp/", json=rpc("tools/list"), headers={**MCP_HEADERS, **bearer(UNKNOWN)}),
        client.post("/rlm/ask", json={"question": "q"}, headers=bearer(NO_SCOPE)),
        client.post("/mcp/", json=tool_call("index_repository"), headers={**MCP_HEADERS, **bearer(READER)}),
        client.post("/mcp/", json=rpc("ping"), headers={**MCP_HEADERS, **bearer(READER), "host": "evil.example"}),
    ]
    assert [a.status_code for a in answers] == [401, 403, 403, 421]
    assert "access token rejected: the token is not valid" in answers[0].headers["www-authenticate"]
    assert caplog.records, "refusals are logged"
    for answer in answers:
        for token in ALL_TOKENS:
            assert token not in answer.text and token not in str(answer.headers)
    for token in ALL_TOKENS:
        assert token not in caplog.text


def test_a_read_token_calling_an_index_tool_is_403_naming_samespace_index() -> None:
    client, _, _ = app(oauth_settings())
    call = tool_call("index_repository", {"path": "/repos/shop"})
    response = client.post("/mcp/", json=call, headers={**MCP_HEADERS, **bearer(READER)})
    assert response.status_code == 403
    assert response.headers["www-authenticate"] == (
        f'Bearer error="insufficient_scope", scope="samespace:index", resource_metadata="{METADATA_URL}"'
    )
    assert response.json() == {
        "error": "insufficient_scope",
        "error_description": "this request needs the scope samespace:index",
        "scope": "samespace:index",
    }
    for tool in ["refresh_index", "remove_index"]:
        refused = client.post("/mcp/", json=tool_call(tool), headers={**MCP_HEADERS, **bearer(READER)})
        assert refused.status_code == 403 and 'scope="samespace:index"' in refused.headers["www-authenticate"]


def test_an_index_token_passes_the_guard_for_an_index_tool() -> None:
    client, _, _ = app(oauth_settings())  # no index service here: the MCP app itself answers, after the guard
    with client:
        response = client.post(
            "/mcp/", json=tool_call("index_repository", {"path": "/r"}), headers={**MCP_HEADERS, **bearer(INDEXER)}
        )
    assert response.status_code == 200 and "index_repository" in response.text


@pytest.mark.parametrize(
    "message", [rpc("tools/list"), rpc("resources/list"), rpc("prompts/list"), rpc("ping"), tool_call("search_code")]
)
def test_every_other_mcp_message_needs_samespace_read(message: dict[str, Any]) -> None:
    client, _, _ = app(oauth_settings())
    refused = client.post("/mcp/", json=message, headers={**MCP_HEADERS, **bearer(NO_SCOPE)})
    assert refused.status_code == 403 and 'scope="samespace:read"' in refused.headers["www-authenticate"]
    with client:
        assert client.post("/mcp/", json=message, headers={**MCP_HEADERS, **bearer(READER)}).status_code == 200


def test_a_body_that_is_not_json_is_left_to_the_mcp_app_but_still_needs_samespace_read() -> None:
    client, _, _ = app(oauth_settings())
    headers = {**MCP_HEADERS, "content-type": "application/json"}
    assert client.post("/mcp/", content=b"{not json", headers={**headers, **bearer(NO_SCOPE)}).status_code == 403
    with client:
        answer = client.post("/mcp/", content=b"{not json", headers={**headers, **bearer(READER)})
    assert answer.status_code == 400 and answer.json()["error"]["code"] == -32700  # the SDK's parse error


def test_an_mcp_body_over_the_endpoints_cap_is_413_before_the_mcp_app_reads_it() -> None:
    from serve_apps.mcp._progress_router import MAX_BODY_BYTES

    client, service, _ = app(oauth_settings())
    padded = tool_call("index_status", {"repo": "x" * MAX_BODY_BYTES})
    response = client.post("/mcp/", json=padded, headers={**MCP_HEADERS, **bearer(READER)})
    assert response.status_code == 413 and response.json() == {"error": "request body too large"}
    assert service.callers == []
    unauthenticated = client.post("/mcp/", json=padded, headers=MCP_HEADERS)
    assert unauthenticated.status_code == 401  # the token first: no body is read for a stranger


def test_rlm_ask_needs_samespace_read_and_runs_as_the_caller() -> None:
    client, _, asker = app(oauth_settings())
    refused = client.post("/rlm/ask", json={"question": "q"}, headers=bearer(NO_SCOPE))
    assert refused.status_code == 403 and 'scope="samespace:read"' in refused.headers["www-authenticate"]
    assert client.post("/rlm/ask", json={"question": "q"}, headers=bearer(INDEXER)).status_code == 200
    assert client.post("/rlm/ask", json={}, headers=bearer(READER)).status_code == 422  # past the guard
    assert asker.callers == [CALLERS[INDEXER]]


def test_healthz_and_the_sidecar_need_no_access_token() -> None:
    client, _, _ = app(oauth_settings())
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.post("/sidecar/register", headers={"host": "master.lan:8000"}).status_code != 401


# --- the caller, inside the tools ---------------------------------------------------------------------


def test_a_read_token_calls_a_read_tool_and_the_tool_sees_its_caller() -> None:
    client, service, _ = app(oauth_settings())
    with client:
        listed = client.post("/mcp/", json=rpc("tools/list"), headers={**MCP_HEADERS, **bearer(READER)})
        called = client.post("/mcp/", json=tool_call("index_status"), headers={**MCP_HEADERS, **bearer(READER)})
    assert listed.status_code == 200 and "index_status" in {t["name"] for t in listed.json()["result"]["tools"]}
    assert called.status_code == 200 and called.json()["result"]["structuredContent"] == {"indexes": [], "builds": []}
    assert service.callers == [CALLERS[READER]]
    assert current_principal().subject == "anonymous"  # the caller does not leak out of the request


def test_a_tool_answered_as_a_progress_stream_sees_its_caller_too() -> None:
    client, _, asker = app(oauth_settings())
    call = tool_call("ask_code", {"question": "How are fees computed?"}, progressToken="p-1")
    with client:
        response = client.post("/mcp/", json=call, headers={**MCP_HEADERS, **bearer(INDEXER)})
    assert response.headers["content-type"].startswith("text/event-stream")  # the SSE app: a task of its own
    assert any(m.get("id") == 1 and "result" in m for m in sse_messages(response.text))
    assert asker.callers == [CALLERS[INDEXER]]


@pytest.mark.parametrize(
    ("serve", "headers", "kind"),
    [({}, {}, "local"), ({"token": "serve-token-4821"}, bearer("serve-token-4821"), "token")],
)
def test_without_oauth_every_request_runs_as_the_modes_one_caller(
    serve: dict[str, str], headers: dict[str, str], kind: str
) -> None:
    from serve_apps.mcp import build_asgi_app

    service, asker = RecordingService(), RecordingAsker()
    settings = SamespaceSettings(serve=serve)
    api = build_asgi_app(cast(CodeSearchService, service), cast(AskService, asker), settings)
    with TestClient(api, base_url=BASE) as client:
        called = client.post("/mcp/", json=tool_call("index_status"), headers={**MCP_HEADERS, **headers})
        assert called.status_code == 200
        assert client.post("/rlm/ask", json={"question": "q"}, headers=headers).status_code == 200
    assert service.callers == asker.callers == [Principal.shared(kind)]
    assert Principal.shared(kind).has(AccessScope.INDEX) and Principal.shared(kind).reader().unrestricted


def test_an_explicit_auth_mode_none_takes_no_serve_token() -> None:
    from serve_apps.mcp import build_asgi_app

    settings = SamespaceSettings(auth={"mode": "none"}, serve={"token": "serve-token-4821"})
    service = RecordingService()
    with TestClient(build_asgi_app(cast(CodeSearchService, service), cast(Any, None), settings), base_url=BASE) as c:
        assert c.post("/mcp/", json=tool_call("index_status"), headers=MCP_HEADERS).status_code == 200
    assert service.callers == [Principal.shared("local")]
