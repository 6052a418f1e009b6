"""The HTTP guard: Host, Origin and the serve token, on every route, before any route runs."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, cast

import pytest
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.testclient import TestClient, WebSocketDenialResponse
from starlette.types import Message, Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect

from cluster.errors import ConfigError
from cluster.settings import SamespaceSettings, ServeSettings
from serve_apps.http_guard import HttpGuard

TOKEN = "canary-serve-token-5f1d9c"
BASE = "http://127.0.0.1:8000"
HOSTILE_HOST = "evil.example"
HOSTILE_ORIGIN = "http://evil.example"
GUARDED = ["/mcp/", "/rlm/ask"]  # need the token when one is configured
OPEN = ["/healthz"]  # Host/Origin only
ROUTES = GUARDED + OPEN
SIDECAR_POSTS = ["/sidecar/register", "/sidecar/heartbeat"]
LOCAL_WS = {"host": "127.0.0.1:8000"}  # TestClient's sockets otherwise say Host: testserver


class Inner:
    """The app behind the guard: answers 200 on every route and records what reached it."""

    def __init__(self) -> None:
        self.reached: list[str] = []

        async def ok(request: Request) -> Response:
            self.reached.append(request.url.path)
            return PlainTextResponse("ok")

        async def socket(websocket: WebSocket) -> None:
            self.reached.append(websocket.url.path)
            await websocket.accept()
            await websocket.send_text("hello")
            await websocket.close()

        routes: list[Any] = [Route(p, ok, methods=["GET", "POST"]) for p in [*ROUTES, *SIDECAR_POSTS]]
        routes += [WebSocketRoute("/sidecar", socket), WebSocketRoute("/mcp/", socket)]
        self.app = Starlette(routes=routes)


def guarded(
    token: str | None = None, allowed_hosts: list[str] | None = None, root_path: str = ""
) -> tuple[TestClient, Inner]:
    inner = Inner()
    app = HttpGuard(
        inner.app,
        allowed_hosts=allowed_hosts or [],
        token=SecretStr(token) if token else None,
        open_paths=OPEN,
        machine_prefixes=["/sidecar"],
    )
    return TestClient(app, base_url=BASE, root_path=root_path), inner


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize("path", ROUTES)
@pytest.mark.parametrize("token", [None, TOKEN])
def test_a_hostile_host_is_421_on_every_route_before_the_route_runs(path: str, token: str | None) -> None:
    client, inner = guarded(token)
    headers = {"host": HOSTILE_HOST, **(bearer(TOKEN) if token else {})}
    response = client.post(path, headers=headers)
    assert (response.status_code, response.text) == (421, "Invalid Host header")
    assert inner.reached == []


@pytest.mark.parametrize("path", ROUTES)
@pytest.mark.parametrize(
    "origin",
    [HOSTILE_ORIGIN, "null", "http://127.0.0.1.evil.example", "ftp://127.0.0.1:8000", "http://127.0.0.1:8000/x"],
)
def test_a_hostile_origin_is_403_on_every_route(path: str, origin: str) -> None:
    client, inner = guarded(TOKEN)
    response = client.post(path, headers={"origin": origin, **bearer(TOKEN)})
    assert (response.status_code, response.text) == (403, "Invalid Origin header")
    assert inner.reached == []


@pytest.mark.parametrize("path", GUARDED)
@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token", f"Basic {TOKEN}", f"Bearer {TOKEN}x", "Bearer "])
def test_a_missing_or_wrong_token_is_401_with_a_bearer_challenge(path: str, authorization: str | None) -> None:
    client, inner = guarded(TOKEN)
    headers = {"authorization": authorization} if authorization is not None else {}
    response = client.post(path, headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.content == b""
    assert inner.reached == []


@pytest.mark.parametrize("path", ROUTES)
@pytest.mark.parametrize("token", [None, TOKEN])
def test_a_good_request_reaches_every_route(path: str, token: str | None) -> None:
    client, inner = guarded(token)
    headers = {"origin": "http://localhost:3000", **(bearer(token) if token else {})}
    response = client.post(path, headers=headers)
    assert (response.status_code, response.text) == (200, "ok")
    assert inner.reached == [path]


def test_healthz_needs_no_token_but_the_host_guard_still_applies() -> None:
    client, inner = guarded(TOKEN)
    assert client.get("/healthz").status_code == 200
    assert client.get("/healthz", headers={"host": HOSTILE_HOST}).status_code == 421
    assert inner.reached == ["/healthz"]


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "127.0.0.1:8000", "localhost", "LOCALHOST:1", "[::1]", "[::1]:8000", "ws17.lan", "ws17.lan:9"],
)
def test_loopback_and_allowed_names_pass_on_any_port(host: str) -> None:
    client, _ = guarded(allowed_hosts=["ws17.lan"])
    assert client.get("/healthz", headers={"host": host}).status_code == 200


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "127.0.0.1.evil.example",
        "localhost.evil.example:8000",
        "127.0.0.1:8000@evil.example",
        "[::1",
        "127.0.0.2",
        "0.0.0.0:8000",
        "ws17.lan:8001",
        "ws17.lan:*",
        "",
        "ws17.lan.:8000",
    ],
)
def test_look_alike_hosts_and_other_ports_are_421(host: str) -> None:
    client, _ = guarded(allowed_hosts=["ws17.lan:8000"])
    assert client.get("/healthz", headers={"host": host}).status_code == 421


def test_a_request_with_two_host_headers_is_421() -> None:
    inner = Inner()
    sent: list[Message] = []
    scope = http_scope("/healthz", [(b"host", b"127.0.0.1:8000"), (b"host", b"evil.example")])
    run(HttpGuard(inner.app), scope, sent)
    assert sent[0]["status"] == 421 and inner.reached == []


def test_origins_are_http_or_https_of_an_allowed_host() -> None:
    client, _ = guarded(allowed_hosts=["ws17.lan:8000"])
    for origin in ["https://ws17.lan:8000", "http://ws17.lan:8000", "http://127.0.0.1", "https://[::1]:5173"]:
        assert client.get("/healthz", headers={"origin": origin}).status_code == 200, origin
    for origin in ["https://ws17.lan", "http://ws17.lan:8001", "ws://127.0.0.1:8000", "127.0.0.1:8000"]:
        assert client.get("/healthz", headers={"origin": origin}).status_code == 403, origin


def test_the_guard_answers_exactly_as_the_mcp_sdk_did_for_the_same_failures() -> None:
    from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings

    sdk = TransportSecurityMiddleware(
        TransportSecuritySettings(allowed_hosts=["127.0.0.1:*"], allowed_origins=["http://127.0.0.1:*"])
    )
    client, _ = guarded()
    cases = [{"host": HOSTILE_HOST}, {"host": "127.0.0.1:8000", "origin": HOSTILE_ORIGIN}]
    for headers in cases:
        raw = [(k.encode(), v.encode()) for k, v in headers.items()]
        theirs = run_sync(sdk.validate_request(Request(http_scope("/mcp/", raw))))
        assert theirs is not None
        ours = client.post("/mcp/", headers=headers)
        assert (ours.status_code, ours.content) == (theirs.status_code, theirs.body)
        assert ours.headers.get("content-type") == theirs.headers.get("content-type")


def test_a_hostile_websocket_is_refused_before_accept_with_the_same_status() -> None:
    client, inner = guarded(TOKEN)
    for headers, status in [
        ({"host": HOSTILE_HOST}, 421),
        ({"origin": HOSTILE_ORIGIN, **bearer(TOKEN)}, 403),
        ({}, 401),
    ]:
        with (
            pytest.raises(WebSocketDenialResponse) as denied,
            client.websocket_connect("/mcp/", headers={**LOCAL_WS, **headers}),
        ):
            pass
        assert denied.value.status_code == status
    assert inner.reached == []


def test_without_the_denial_extension_a_refused_websocket_is_closed_before_accept() -> None:
    inner = Inner()
    sent: list[Message] = []
    scope = http_scope("/mcp/", [(b"host", HOSTILE_HOST.encode())]) | {"type": "websocket", "extensions": {}}
    run(HttpGuard(inner.app), scope, sent)
    assert sent == [{"type": "websocket.close", "code": 1008, "reason": ""}]
    assert inner.reached == []


def test_sidecar_routes_take_any_host_and_no_serve_token_but_refuse_every_origin() -> None:
    client, inner = guarded(TOKEN)
    with client.websocket_connect("/sidecar", headers={"host": "master.lan:8000"}) as socket:
        assert socket.receive_text() == "hello"
    for path in SIDECAR_POSTS:
        assert client.post(path, headers={"host": "master.lan:8000"}).status_code == 200
    assert inner.reached == ["/sidecar", *SIDECAR_POSTS]
    for origin in [HOSTILE_ORIGIN, "http://127.0.0.1:8000"]:  # a browser, even a local page
        with (
            pytest.raises(WebSocketDenialResponse) as denied,
            client.websocket_connect("/sidecar", headers={**LOCAL_WS, "origin": origin}),
        ):
            pass
        assert denied.value.status_code == 403
        assert client.post("/sidecar/register", headers={"origin": origin}).status_code == 403
    assert inner.reached == ["/sidecar", *SIDECAR_POSTS]


def test_routes_are_matched_below_the_root_path_a_serve_route_prefix_adds() -> None:
    client, inner = guarded(TOKEN, root_path="/guarded")
    assert client.get("/guarded/healthz").status_code == 200
    assert client.post("/guarded/rlm/ask").status_code == 401
    assert client.post("/guarded/sidecar/register").status_code == 200
    assert inner.reached == ["/guarded/healthz", "/guarded/sidecar/register"]


def test_the_token_is_never_echoed_in_a_response_or_a_log(caplog: pytest.LogCaptureFixture) -> None:
    client, _ = guarded(TOKEN)
    caplog.set_level(logging.DEBUG)
    answers = [
        client.post("/mcp/", headers={"authorization": f"Bearer {TOKEN}x"}),
        client.post("/rlm/ask", headers={"authorization": f"Bearer {TOKEN}", "host": HOSTILE_HOST}),
        client.post("/rlm/ask", headers={"authorization": f"Bearer {TOKEN}", "origin": HOSTILE_ORIGIN}),
    ]
    assert [a.status_code for a in answers] == [401, 421, 403]
    assert caplog.records, "refusals are logged"
    for answer in answers:
        assert TOKEN not in answer.text and TOKEN not in str(answer.headers)
    assert TOKEN not in caplog.text


def test_a_malformed_allowed_host_is_refused_when_the_settings_are_built() -> None:
    with pytest.raises(ValueError, match=r"serve\.allowed_hosts"):
        ServeSettings(allowed_hosts=["http://ws17.lan"])
    with pytest.raises(ConfigError):
        HttpGuard(Inner().app, allowed_hosts=["ws17.lan/x"])


def test_the_serve_token_comes_from_the_setting_or_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert ServeSettings().expected_token() is None
    token_file = tmp_path / "serve-token"
    token_file.write_text(f"{TOKEN}\n")
    from_file = ServeSettings(token_file=token_file).expected_token()
    assert from_file is not None and from_file.get_secret_value() == TOKEN
    monkeypatch.setenv("SAMESPACE_SERVE__TOKEN", TOKEN)
    settings = SamespaceSettings()
    assert settings.serve.expected_token() == SecretStr(TOKEN)
    assert TOKEN not in repr(settings) and TOKEN not in str(settings.serve)


# --- the real apps: the guard is wired on the MCP app (every route) and on the admin app ---------------


def mcp_app(settings: SamespaceSettings) -> TestClient:
    from serve_apps.mcp import build_asgi_app

    def no_fleet() -> Any:
        raise AssertionError("the fleet actor must not be reached")

    # The services are never called: a refused request stops at the guard, and the good MCP
    # request below is `initialize`, which the SDK answers itself.
    api = build_asgi_app(cast(Any, None), cast(Any, None), settings, no_fleet)
    return TestClient(api, base_url=BASE)


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
MCP_HEADERS = {"accept": "application/json, text/event-stream"}


@pytest.mark.parametrize("token", [None, TOKEN])
def test_the_mcp_app_guards_mcp_rlm_ask_healthz_and_the_sidecar(token: str | None) -> None:
    settings = SamespaceSettings(serve={"token": token} if token else {})
    auth = bearer(token) if token else {}
    with mcp_app(settings) as client:
        for path in ["/mcp/", "/rlm/ask", "/healthz"]:
            assert client.post(path, headers={"host": HOSTILE_HOST, **auth}).status_code == 421, path
            assert client.post(path, headers={"origin": HOSTILE_ORIGIN, **auth}).status_code == 403, path
        good = client.post("/mcp/", json=INITIALIZE, headers={**MCP_HEADERS, **auth})
        assert good.status_code == 200 and good.json()["result"]["serverInfo"]["name"] == "samespace"
        assert client.post("/rlm/ask", json={}, headers=auth).status_code == 422  # past the guard, to validation
        assert client.get("/healthz").json() == {"status": "ok"}
        if token:
            for path in ["/mcp/", "/rlm/ask"]:
                for headers in [{}, bearer("wrong")]:
                    refused = client.post(path, json=INITIALIZE, headers={**MCP_HEADERS, **headers})
                    assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        with (
            pytest.raises(WebSocketDenialResponse) as denied,  # a browser's socket: the guard
            client.websocket_connect("/sidecar", headers={**LOCAL_WS, "origin": "http://127.0.0.1:8000"}),
        ):
            pass
        assert denied.value.status_code == 403
        with (
            pytest.raises(WebSocketDisconnect) as closed,  # a sidecar's: past the guard, the fleet is closed
            client.websocket_connect("/sidecar", headers={"host": "master.lan:8000"}),
        ):
            pass
        assert not isinstance(closed.value, WebSocketDenialResponse) and closed.value.code == 1008


def test_the_admin_app_checks_the_host_before_its_own_token(tmp_path: Path) -> None:
    from serve_apps.admin import AdminApi, build_admin_asgi

    settings = SamespaceSettings(admin={"token": "admin-token-4821", "config_path": tmp_path / "config.json"})
    client = TestClient(build_admin_asgi(AdminApi(settings), settings), base_url=BASE, root_path="/admin")
    assert client.get("/admin/openrouter", headers={"host": HOSTILE_HOST}).status_code == 421
    assert (
        client.get("/admin/openrouter", headers={"origin": HOSTILE_ORIGIN, **bearer("admin-token-4821")}).status_code
        == 403
    )
    assert client.get("/admin/openrouter").status_code == 401
    assert client.get("/admin/openrouter", headers=bearer("admin-token-4821")).status_code == 200


# --- raw ASGI helpers ----------------------------------------------------------------------------------


def http_scope(path: str, headers: list[tuple[bytes, bytes]]) -> Scope:
    return {
        "type": "http",
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 50000),
    }


def run(app: HttpGuard, scope: Scope, sent: list[Message]) -> None:
    async def receive() -> Message:
        return {"type": "websocket.connect"} if scope["type"] == "websocket" else {"type": "http.request", "body": b""}

    async def send(message: Message) -> None:
        sent.append(message)

    run_sync(app(scope, cast(Receive, receive), cast(Send, send)))


def run_sync(awaitable: Any) -> Any:
    import asyncio

    async def wrap() -> Any:
        return await awaitable

    return asyncio.run(wrap())


# --- the client side: samespace/clients/_mcp.py ----------------------------------------------------------


def test_print_config_names_the_token_variable_and_never_the_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from samespace.clients import mcp_command as main

    monkeypatch.delenv("SAMESPACE_SERVE__TOKEN", raising=False)
    monkeypatch.delenv("SAMESPACE_SERVE__TOKEN_FILE", raising=False)
    assert main(["--print-config"]) == 0
    plain = json.loads(capsys.readouterr().out)["mcpServers"]["samespace"]
    assert plain == {"type": "http", "url": "http://127.0.0.1:8000/mcp/"}

    token_file = tmp_path / "serve-token"
    token_file.write_text(TOKEN)
    monkeypatch.setenv("SAMESPACE_SERVE__TOKEN_FILE", str(token_file))
    assert main(["--print-config"]) == 0
    printed = capsys.readouterr()
    server = json.loads(printed.out)["mcpServers"]["samespace"]
    assert server["headers"] == {"Authorization": "Bearer ${SAMESPACE_SERVE__TOKEN}"}
    assert str(token_file) in printed.err
    assert TOKEN not in printed.out and TOKEN not in printed.err


def test_the_admin_api_in_the_mcp_app_answers_to_its_own_token_and_mcp_to_the_serve_token(tmp_path: Path) -> None:
    from typing import cast

    from cluster.search import CodeSearchService
    from serve_apps.admin import AdminApi, build_admin_asgi
    from serve_apps.mcp import AskService, build_asgi_app

    settings = SamespaceSettings(
        admin={"token": "admin-token-4821", "config_path": tmp_path / "config.json"},
        serve={"token": "serve-token-4821"},
    )
    service, asker = cast(CodeSearchService, object()), cast(AskService, object())  # no tool is called here
    app = build_asgi_app(service, asker, settings, admin=build_admin_asgi(AdminApi(settings), settings))
    client = TestClient(app, base_url=BASE)
    # no serve token needed, nor taken for the admin's own
    assert client.get("/admin/openrouter", headers=bearer("admin-token-4821")).status_code == 200
    assert client.get("/admin/openrouter", headers=bearer("serve-token-4821")).status_code == 401
    assert client.get("/admin/openrouter").status_code == 401
    assert (
        client.get("/admin/openrouter", headers={"host": HOSTILE_HOST, **bearer("admin-token-4821")}).status_code == 421
    )
    assert client.post("/mcp/", headers=bearer("admin-token-4821")).status_code == 401  # MCP needs the serve token
    assert client.get("/healthz").status_code == 200
