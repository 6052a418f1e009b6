"""The HTTP guard over real Serve: every route refuses a hostile Host or Origin, and
with `serve.token` set the real MCP client works with the token and fails without it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import websockets
from pydantic import SecretStr
from websockets.exceptions import InvalidStatus

from samespace.clients import call_tool, result_text
from tests.support.ray_cluster import McpServer, RayCluster

pytestmark = [pytest.mark.ray, pytest.mark.slow]

TOKEN = "canary-serve-token-e2e-7b3a"
PREFIX = "/guarded"
ADMIN_PREFIX = "/guard-admin"
HOSTILE_HOST = {"Host": "evil.example"}
HOSTILE_ORIGIN = {"Origin": "http://evil.example"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def guarded(ray_cluster: RayCluster, mcp_server: McpServer) -> Iterator[str]:
    """The same MCP app with a serve token, and an admin app, each under its own route prefix."""
    from ray import serve

    from cluster.settings import SamespaceSettings
    from serve_apps.admin import AdminIngress
    from serve_apps.mcp import McpIngress

    base: SamespaceSettings = ray_cluster.settings  # type: ignore[assignment]
    settings = base.model_copy(update={"serve": base.serve.model_copy(update={"token": SecretStr(TOKEN)})})
    serve.run(McpIngress.options(num_replicas=1).bind(settings), name="guarded", route_prefix=PREFIX)
    serve.run(AdminIngress.bind(base), name="guard-admin", route_prefix=ADMIN_PREFIX)
    try:
        yield f"http://127.0.0.1:{mcp_server.port}"
    finally:
        serve.delete("guarded")
        serve.delete("guard-admin")


def post(url: str, headers: dict[str, str], body: Any = INITIALIZE) -> httpx.Response:
    with httpx.Client(timeout=60) as client:
        return client.post(url, json=body, headers={**MCP_HEADERS, **headers})


@pytest.mark.parametrize("path", ["/mcp/", "/rlm/ask", "/healthz"])
def test_every_route_refuses_a_hostile_host_and_origin_as_the_mcp_sdk_does(mcp_server: McpServer, path: str) -> None:
    url = f"http://127.0.0.1:{mcp_server.port}{path}"
    host = post(url, HOSTILE_HOST)
    assert (host.status_code, host.text) == (421, "Invalid Host header")
    origin = post(url, HOSTILE_ORIGIN)
    assert (origin.status_code, origin.text) == (403, "Invalid Origin header")


async def test_without_a_token_good_requests_pass_as_before(mcp_server: McpServer) -> None:
    base = f"http://127.0.0.1:{mcp_server.port}"
    assert post(f"{base}/mcp/", {"Origin": "http://localhost:5173"}).status_code == 200
    assert post(f"{base}/rlm/ask", {}, body={}).status_code == 422  # past the guard, refused by validation
    async with httpx.AsyncClient() as client:
        assert (await client.get(f"{base}/healthz")).json() == {"status": "ok"}
    result = await call_tool(mcp_server.url, "index_status")  # the real client, no token
    assert not result.is_error, result_text(result)


async def test_a_browser_websocket_is_refused_before_accept(mcp_server: McpServer) -> None:
    port = mcp_server.port
    cases = [  # (the name in the URL, so in the one Host header; the path; headers; the answer)
        ("127.0.0.1", "/sidecar", HOSTILE_ORIGIN, 403, b"Invalid Origin header"),
        ("127.0.0.1", "/sidecar", {"Origin": f"http://127.0.0.1:{port}"}, 403, b"Invalid Origin header"),
        ("evil.example", "/mcp/", {}, 421, b"Invalid Host header"),
    ]
    for name, path, headers, status, body in cases:  # Serve forwards the denial response: the HTTP answer
        with pytest.raises(InvalidStatus) as refused:
            async with websockets.connect(
                f"ws://{name}:{port}{path}",
                host="127.0.0.1",
                port=port,
                proxy=None,
                additional_headers=headers,
                open_timeout=30,
            ):
                pass
        assert (refused.value.response.status_code, bytes(refused.value.response.body or b"")) == (status, body)


def test_the_admin_app_refuses_a_hostile_host_before_its_token(guarded: str) -> None:
    url = f"{guarded}{ADMIN_PREFIX}/health"
    assert httpx.get(url, headers=HOSTILE_HOST).status_code == 421
    assert httpx.get(url, headers=HOSTILE_ORIGIN).status_code == 403
    assert httpx.get(url).status_code == 401  # its own token, unchanged


@pytest.mark.parametrize("path", ["/mcp/", "/rlm/ask"])
@pytest.mark.parametrize("authorization", [None, "Bearer wrong", f"Bearer {TOKEN}-not"])
def test_with_a_token_mcp_and_ask_are_401_without_it(guarded: str, path: str, authorization: str | None) -> None:
    response = post(f"{guarded}{PREFIX}{path}", {"Authorization": authorization} if authorization else {})
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert TOKEN not in response.text


def test_with_a_token_healthz_stays_open_and_hostile_requests_still_fail_first(guarded: str) -> None:
    assert httpx.get(f"{guarded}{PREFIX}/healthz").json() == {"status": "ok"}
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert post(f"{guarded}{PREFIX}/rlm/ask", {**auth, **HOSTILE_HOST}).status_code == 421
    assert post(f"{guarded}{PREFIX}/rlm/ask", {**auth, **HOSTILE_ORIGIN}).status_code == 403
    assert post(f"{guarded}{PREFIX}/rlm/ask", auth, body={}).status_code == 422


async def test_the_real_mcp_client_works_with_the_token_and_fails_without_it(guarded: str) -> None:
    from samespace.failures import CommandFailed

    url = f"{guarded}{PREFIX}/mcp/"
    result = await call_tool(url, "index_status", token=SecretStr(TOKEN))
    assert not result.is_error, result_text(result)
    assert result.structured_content is not None and "indexes" in result.structured_content
    for token in [None, SecretStr("wrong")]:  # the SDK's 401, said as one line of what to do
        with pytest.raises(CommandFailed, match=r"refused the token \(401\)") as refused:
            await call_tool(url, "index_status", token=token)
        assert TOKEN not in str(refused.value)
