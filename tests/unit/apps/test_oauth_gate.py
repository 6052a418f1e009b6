"""The pieces under the OAuth guard, on their own: reading a bearer (RFC 6750 §2.1), the scopes an MCP
body needs, the body handed on unchanged after the gate read it, the metadata's paths."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

import pytest
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import WebSocketRoute
from starlette.testclient import TestClient, WebSocketDenialResponse
from starlette.types import Message, Receive
from starlette.websockets import WebSocket

from cluster.auth import AccessScope, Principal
from cluster.errors import ConfigError, TokenRejected
from serve_apps.auth import bearer_matches, bearer_token
from serve_apps.http_guard import HttpGuard
from serve_apps.oauth import Admission, OAuthGate, metadata_paths, needed_scopes, resource_metadata_url

READER = Principal(kind="oauth", subject="alice", scopes=frozenset({AccessScope.READ.value}))
METADATA = "http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp"


class OneToken:
    async def verify(self, token: str) -> Principal:
        if token == "good":
            return READER
        raise TokenRejected("unknown key")


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc.def-ghi", "abc.def-ghi"),
        ("bearer abc", "abc"),
        ("BEARER abc", "abc"),
        ("Bearer   abc", "abc"),  # 1*SP
        ("Bearer abc ", "abc"),
        ("Bearer", None),
        ("Bearer ", None),
        ("Bearerabc", None),
        ("Basic YWxhZGRpbg==", None),
        ("Bearer a b", None),
        ("", None),
        (None, None),
    ],
)
def test_a_bearer_is_read_one_way_with_the_scheme_in_any_case(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token
    assert bearer_matches(header, SecretStr(token or "never")) is (token is not None)


def test_a_shared_token_never_matches_when_none_is_configured() -> None:
    assert not bearer_matches("Bearer abc", None)
    assert not bearer_matches("Bearer abcd", SecretStr("abc"))


def call(name: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": {}}}


@pytest.mark.parametrize(
    ("body", "scopes"),
    [
        (call("index_repository"), (AccessScope.INDEX,)),
        (call("remove_index"), (AccessScope.INDEX,)),
        (call("search_code"), (AccessScope.READ,)),
        (call(7), (AccessScope.READ,)),  # not a name: the MCP app refuses it
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}, (AccessScope.READ,)),
        ({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}, (AccessScope.READ,)),
        ({"jsonrpc": "2.0", "method": "notifications/initialized"}, (AccessScope.READ,)),
        ([call("search_code"), call("refresh_index")], (AccessScope.READ, AccessScope.INDEX)),
        ([], (AccessScope.READ,)),
        ("tools/call", (AccessScope.READ,)),
    ],
)
def test_an_mcp_body_needs_its_tools_scope_and_everything_else_read(body: Any, scopes: tuple[AccessScope]) -> None:
    assert needed_scopes(json.dumps(body).encode()) == scopes


def test_a_body_that_is_not_json_or_nests_too_deep_needs_read() -> None:
    assert needed_scopes(b"{not json") == (AccessScope.READ,)
    assert needed_scopes(b"[" * 100_000 + b"]" * 100_000) == (AccessScope.READ,)


def admit(gate: OAuthGate, chunks: list[bytes], token: str = "good") -> tuple[Admission | Any, list[Message]]:
    """The gate's verdict on a POST /mcp in `chunks`, and what the app then reads from its `receive`."""
    messages: list[Message] = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)
    ]
    scope = {"type": "http", "method": "POST", "headers": [(b"authorization", f"Bearer {token}".encode())]}

    async def receive() -> Message:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def run() -> tuple[Any, list[Message]]:
        verdict = await gate.admit(scope, "/mcp/", cast(Receive, receive))
        if not isinstance(verdict, Admission):
            return verdict, []
        read = [await verdict.receive() for _ in range(len(chunks) + 1)]
        return verdict, read

    return asyncio.run(run())


def test_the_app_reads_the_body_the_gate_read_unchanged_then_the_rest_of_the_stream() -> None:
    gate = OAuthGate(OneToken(), METADATA, rpc_routes={"/mcp": 1000})
    body = json.dumps(call("search_code")).encode()
    verdict, read = admit(gate, [body[:10], body[10:30], body[30:]])
    assert isinstance(verdict, Admission) and verdict.principal == READER
    assert b"".join(m["body"] for m in read[:3]) == body and [m["more_body"] for m in read[:3]] == [True, True, False]
    assert read[3] == {"type": "http.disconnect"}  # then the live stream


def test_the_gate_refuses_a_body_past_its_cap_and_an_index_call_of_a_reader() -> None:
    gate = OAuthGate(OneToken(), METADATA, rpc_routes={"/mcp": 200})
    too_large, _ = admit(gate, [b"x" * 120, b"x" * 120])
    assert too_large.status_code == 413
    index, _ = admit(gate, [json.dumps(call("index_repository")).encode()])
    assert index.status_code == 403
    refused, _ = admit(gate, [b"{}"], token="bad")
    assert refused.status_code == 401


def test_the_metadata_paths_follow_the_resource_url() -> None:
    assert metadata_paths("http://127.0.0.1:8000/mcp", "/mcp") == (
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    )
    assert metadata_paths("https://code.example/mcp/", "/mcp") == (
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp/",
        "/.well-known/oauth-protected-resource/mcp",
    )
    assert (
        resource_metadata_url("http://[::1]:8000/mcp") == "http://[::1]:8000/.well-known/oauth-protected-resource/mcp"
    )


async def test_an_app_under_a_route_prefix_points_clients_to_the_metadata_it_serves_itself() -> None:
    gate = OAuthGate(OneToken(), resource_metadata_url("http://127.0.0.1:8000/team/mcp"))
    rfc = "http://127.0.0.1:8000/.well-known/oauth-protected-resource/team/mcp"
    assert gate.metadata_url_below("") == rfc  # at the host's root: RFC 9728's form
    assert gate.metadata_url_below("/team") == "http://127.0.0.1:8000/team/.well-known/oauth-protected-resource/mcp"
    assert gate.metadata_url_below("/team/admin") == rfc  # the resource is not below that root
    challenge = gate.unauthorized(root_path="/team").headers["www-authenticate"]
    assert challenge == 'Bearer resource_metadata="http://127.0.0.1:8000/team/.well-known/oauth-protected-resource/mcp"'
    refused = await gate.authenticate("Bearer nothing-it-knows", "/team")
    assert isinstance(refused, Response) and "/team/.well-known/oauth-protected-resource/mcp" in str(refused.headers)


def test_the_guard_takes_the_serve_token_or_an_oauth_gate_never_both() -> None:
    with pytest.raises(ConfigError, match=r"auth\.mode"):
        HttpGuard(Starlette(), token=SecretStr("t"), oauth=OAuthGate(OneToken(), METADATA))


def test_a_websocket_without_an_access_token_is_refused_with_the_challenge_before_accept() -> None:
    reached: list[str] = []

    async def socket(websocket: WebSocket) -> None:
        reached.append(websocket.url.path)
        await websocket.accept()
        await websocket.close()

    inner = Starlette(routes=[WebSocketRoute("/mcp/", socket)])
    client = TestClient(HttpGuard(inner, oauth=OAuthGate(OneToken(), METADATA)), base_url="http://127.0.0.1:8000")
    with (
        pytest.raises(WebSocketDenialResponse) as denied,
        client.websocket_connect("/mcp/", headers={"host": "127.0.0.1:8000"}),
    ):
        pass
    assert denied.value.status_code == 401
    assert denied.value.headers["www-authenticate"] == f'Bearer resource_metadata="{METADATA}"'
    with client.websocket_connect("/mcp/", headers={"host": "127.0.0.1:8000", "authorization": "Bearer good"}):
        pass
    assert reached == ["/mcp/"]
