"""The reference sidecar (sidecar/) against an in-test master and an in-test OpenAI-compatible upstream.

The master: a `websockets` server that checks the fleet token, and a Starlette app (uvicorn without
WebSocket support, so a WebSocket handshake there is answered 404) for the HTTP fallback. The upstream:
a Starlette app returning fixed, exactly representable vectors (no model is loaded here).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request as WsRequest

from samespace.head import free_port
from sidecar import Agent, Backoff, ServeSpec, SettingsError, SidecarSettings, TransportMode, parse_serve
from sidecar.cli import build_parser, load_settings, main
from sidecar.wire import MAX_RESULT_BYTES
from tests.support.fakes.sidecar_process import SidecarProcess, serve_arg

REPO_ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.timeout(60)

TOKEN = "fleet-token-9f1c"
UPSTREAM_CANARY = "sk-upstream-CANARY-5e2a77"
PREFIX = "/pfx"
UPSTREAM_MODEL = "fake-embedder"
LOOPBACK = "127.0.0.1"


async def wait_until(predicate: Callable[[], Any], timeout_s: float = 5.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def row_for(index: int, text: str) -> list[float]:
    """Exactly representable in float32, so base64 rows must decode to these very values."""
    return [index + 0.5, -1.25, 0.0625 * len(text), 3.0]


def decode_row(b64: str) -> list[float]:
    raw = base64.b64decode(b64)
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


# --- servers in threads ----------------------------------------------------------------------------


class ThreadedServer:
    """A Starlette app on uvicorn in a thread, on a pre-bound loopback port."""

    def __init__(self, app: Starlette, *, ws: str = "auto") -> None:
        self._sock = socket.socket()
        self._sock.bind((LOOPBACK, 0))
        self.port = int(self._sock.getsockname()[1])
        self.url = f"http://{LOOPBACK}:{self.port}"
        config = uvicorn.Config(
            app,
            log_level="warning",
            ws=ws,
            lifespan="off",
            access_log=False,
            timeout_graceful_shutdown=1,  # type: ignore[arg-type]
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True)

    def start(self) -> ThreadedServer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise TimeoutError("uvicorn did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()


class FakeUpstream:
    """OpenAI-compatible: /v1/models, /v1/embeddings (rows in reverse order), /v1/rerank, /v1/chat/completions."""

    def __init__(self) -> None:
        self.auth_headers: list[str | None] = []
        self.bodies: list[dict[str, Any]] = []
        self.fail_status: int | None = None
        self.delay_s = 0.0
        self.tei_rerank = False
        self.server = ThreadedServer(
            Starlette(
                routes=[
                    Route("/v1/models", self._models),
                    Route("/v1/embeddings", self._embeddings, methods=["POST"]),
                    Route("/v1/rerank", self._rerank, methods=["POST"]),
                    Route("/v1/chat/completions", self._chat, methods=["POST"]),
                ]
            )
        )
        self.base_url = f"{self.server.url}/v1"

    async def _enter(self, request: Request) -> Response | None:
        self.auth_headers.append(request.headers.get("authorization"))
        if request.method == "POST":
            self.bodies.append(await request.json())
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.fail_status is not None:
            return JSONResponse({"error": {"message": "boom"}}, status_code=self.fail_status)
        return None

    async def _models(self, request: Request) -> Response:
        self.auth_headers.append(request.headers.get("authorization"))
        return JSONResponse({"object": "list", "data": [{"id": UPSTREAM_MODEL, "object": "model"}]})

    async def _embeddings(self, request: Request) -> Response:
        if (failed := await self._enter(request)) is not None:
            return failed
        texts = self.bodies[-1]["input"]
        data = [{"object": "embedding", "index": i, "embedding": row_for(i, t)} for i, t in enumerate(texts)]
        return JSONResponse({"object": "list", "data": data[::-1], "model": UPSTREAM_MODEL})

    async def _rerank(self, request: Request) -> Response:
        if (failed := await self._enter(request)) is not None:
            return failed
        docs = self.bodies[-1]["documents"]
        if self.tei_rerank:
            return JSONResponse([{"index": i, "score": 1.0 / (i + 1)} for i in range(len(docs))])
        return JSONResponse({"results": [{"index": i, "relevance_score": 1.0 / (i + 1)} for i in range(len(docs))]})

    async def _chat(self, request: Request) -> Response:
        if (failed := await self._enter(request)) is not None:
            return failed
        body = self.bodies[-1]
        return JSONResponse({"id": "c1", "model": body.get("model"), "choices": [{"message": {"content": "hi"}}]})


@pytest.fixture
def upstream() -> Any:
    fake = FakeUpstream()
    fake.server.start()
    yield fake
    fake.server.stop()


# --- the master ------------------------------------------------------------------------------------


ISSUED_ID = "a1b2c3d4e5f6"


class WsMaster:
    """A WebSocket master on 127.0.0.1: checks the token and path, records frames, follows a script.

    script: one behaviour per connection, in order ('serve' once it runs out):
      'close-before-register'  close as soon as the register frame arrives (no 'registered')
      'close-after-register'   answer 'registered', then close
      'serve'                  answer 'registered' and keep the socket open
    """

    def __init__(self, token: str = TOKEN) -> None:
        self.token = token
        self.frames: list[dict[str, Any]] = []
        self.raw_messages: list[str] = []
        self.handshake_headers: list[str] = []
        self.script: list[str] = []
        self.connections = 0
        self.current: ServerConnection | None = None
        self._server: Server | None = None
        self.url = ""

    async def start(self) -> WsMaster:
        self._server = await serve(self._handle, LOOPBACK, 0, process_request=self._check, max_size=MAX_RESULT_BYTES)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://{LOOPBACK}:{port}{PREFIX}"
        return self

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    def _check(self, connection: ServerConnection, request: WsRequest) -> Any:
        self.handshake_headers.append(str(request.headers))
        if request.path != f"{PREFIX}/sidecar":
            return connection.respond(HTTPStatus.NOT_FOUND, "not found\n")
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return connection.respond(HTTPStatus.UNAUTHORIZED, "bad token\n")
        return None

    async def _handle(self, ws: ServerConnection) -> None:
        self.connections += 1
        behaviour = self.script.pop(0) if self.script else "serve"
        self.current = ws
        try:
            async for message in ws:
                assert isinstance(message, str)
                self.raw_messages.append(message)
                frame = json.loads(message)
                self.frames.append(frame)
                if frame.get("type") != "register":
                    continue
                if behaviour == "close-before-register":
                    await ws.close(1011, "not now")
                    return
                # As the master does: an id per agent (kept when presented), a new credential each time.
                agent_id = frame.get("agentId") or ISSUED_ID
                await ws.send(
                    json.dumps(
                        {
                            "type": "registered",
                            "ok": True,
                            "agentId": agent_id,
                            "credential": f"cred-ws-{self.connections}",
                        }
                    )
                )
                if behaviour == "close-after-register":
                    await ws.close(1001, "going away")
                    return
        except ConnectionClosed:
            pass

    async def send(self, frame: dict[str, Any]) -> None:
        assert self.current is not None
        await self.current.send(json.dumps(frame))

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [f for f in self.frames if f.get("type") == kind]

    async def result(self, command_id: str, timeout_s: float = 5.0) -> dict[str, Any]:
        return await wait_until(
            lambda: next((f for f in self.of_type("result") if f.get("id") == command_id), None),
            timeout_s,
            f"result {command_id}",
        )


@pytest.fixture
async def master() -> AsyncIterator[WsMaster]:
    m = await WsMaster().start()
    yield m
    await m.stop()


class HttpMaster:
    """The HTTP fallback endpoints under /pfx/sidecar/ (uvicorn with ws='none': a handshake gets 404)."""

    def __init__(self, token: str = TOKEN) -> None:
        self.token = token
        self.requests: list[tuple[str, str, dict[str, Any]]] = []  # (endpoint, raw headers, body)
        self.ws_attempts = 0
        self.known: set[str] = set()
        self.credential = ""
        self.registrations = 0
        self.results: list[dict[str, Any]] = []
        self._commands: list[dict[str, Any]] = []
        self._heartbeat_commands: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        app = Starlette(
            routes=[
                Route(f"{PREFIX}/sidecar", self._ws_path),
                Route(f"{PREFIX}/sidecar/{{endpoint}}", self._endpoint, methods=["POST"]),
            ]
        )
        self.server = ThreadedServer(app, ws="none")
        self.url = f"{self.server.url}{PREFIX}"

    def queue(self, command: dict[str, Any], *, via: str = "poll") -> None:
        """Hand `command` out in the next poll answer, or (via='heartbeat') the next heartbeat answer."""
        with self._lock:
            (self._heartbeat_commands if via == "heartbeat" else self._commands).append(command)

    def forget(self) -> None:
        """As after a master restart: the next heartbeat or poll answers 409 unknown agent."""
        self.known.clear()

    def count(self, endpoint: str) -> int:
        return sum(1 for e, _, _ in self.requests if e == endpoint)

    def _take(self) -> list[dict[str, Any]]:
        with self._lock:
            taken, self._commands = self._commands, []
        return taken

    def _take_for_heartbeat(self) -> list[dict[str, Any]]:
        with self._lock:
            taken, self._heartbeat_commands = self._heartbeat_commands, []
        return taken

    async def _ws_path(self, request: Request) -> Response:
        self.ws_attempts += 1
        return JSONResponse({"detail": "Not Found"}, status_code=404)

    async def _endpoint(self, request: Request) -> Response:
        endpoint = request.path_params["endpoint"]
        body = await request.json()
        self.requests.append((endpoint, str(list(request.headers.items())), body))
        if request.headers.get("authorization") != f"Bearer {self.token}":
            return JSONResponse({"type": "error", "message": "unauthorized"}, status_code=401)
        if endpoint == "register":
            self.known.add(body["agentUrl"])
            self.registrations += 1
            self.credential = f"cred-http-{self.registrations}"
            return JSONResponse({"type": "registered", "ok": True, "agentId": ISSUED_ID, "credential": self.credential})
        if (request.headers.get("x-sidecar-agent"), request.headers.get("x-sidecar-credential")) != (
            ISSUED_ID,
            self.credential,
        ):
            return JSONResponse({"type": "error", "message": "agent credential missing or wrong"}, status_code=403)
        if endpoint == "result":
            self.results.append(body)
            return JSONResponse({"ok": True})
        if body.get("agentUrl") not in self.known:
            return JSONResponse({"type": "error", "message": "unknown agent: register first"}, status_code=409)
        if endpoint == "heartbeat":
            return JSONResponse({"ok": True, "commands": self._take_for_heartbeat()})
        if endpoint == "poll":
            deadline = time.monotonic() + float(body["waitS"])
            while time.monotonic() < deadline:
                if commands := self._take():
                    return JSONResponse({"commands": commands})
                await asyncio.sleep(0.02)
            return JSONResponse({"commands": []})
        return JSONResponse({"type": "error", "message": "no such endpoint"}, status_code=404)


@pytest.fixture
def http_master() -> Any:
    m = HttpMaster()
    m.server.start()
    yield m
    m.server.stop()


# --- the agent -------------------------------------------------------------------------------------


class RecordingSleep:
    """Records each backoff delay and waits only a moment."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(round(seconds, 6))
        await asyncio.sleep(0.01)


def make_settings(master_url: str, serves: list[str], **overrides: Any) -> SidecarSettings:
    fields: dict[str, Any] = {
        "master": master_url,
        "agent_url": "sidecar://ws-1",
        "hostname": "ws-1",
        "serves": tuple(parse_serve(s) for s in serves),
        "fleet_token": SecretStr(TOKEN),
        "transport": TransportMode.WS,
        "heartbeat_s": 0.2,
        "poll_wait_s": 0.5,
        "register_timeout_s": 2.0,
        "probe_timeout_s": 0.5,
        "upstream_timeout_s": 5.0,
    }
    fields.update(overrides)
    return SidecarSettings(**fields)


@asynccontextmanager
async def running(settings: SidecarSettings) -> AsyncIterator[tuple[Agent, RecordingSleep]]:
    sleep = RecordingSleep()
    agent = Agent(settings, sleep=sleep, jitter=0.0)
    task = asyncio.ensure_future(agent.run())
    try:
        yield agent, sleep
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def embed_serve(upstream: FakeUpstream) -> str:
    return f"code-embedding={upstream.base_url},model=minilm"


# --- tests: WebSocket ------------------------------------------------------------------------------


async def test_register_then_heartbeats_with_status_of_each_server(master: WsMaster, upstream: FakeUpstream) -> None:
    down = f"http://{LOOPBACK}:{free_port()}/v1"
    serves = [embed_serve(upstream), f"reranker={upstream.base_url}", f"embedding={down},model=e5"]
    async with running(make_settings(master.url, serves)) as (agent, _):
        await wait_until(lambda: len(master.of_type("heartbeat")) >= 2, what="two heartbeats")
        assert master.frames[0] == {
            "type": "register",
            "agentUrl": "sidecar://ws-1",
            "hostname": "ws-1",
            "containers": ["ss-code-embedding", "ss-reranker", "ss-embedding"],
        }
        assert master.frames[1]["type"] == "heartbeat"  # right after registering
        assert agent.registrations == 1
    beat = master.of_type("heartbeat")[-1]
    port = upstream.server.port
    assert beat == {
        "type": "heartbeat",
        "agentUrl": "sidecar://ws-1",
        "containers": ["ss-code-embedding", "ss-reranker", "ss-embedding"],
        "activeRequests": 0,
        "statusData": {
            "agentUrl": "sidecar://ws-1",
            "hostname": "ws-1",
            "version": "0.1.0",
            "containers": {
                "code-embedding": {
                    "name": "ss-code-embedding",
                    "status": "running",
                    "model": "minilm",
                    "type": "openai",
                    "endpoint": upstream.base_url,
                    "config": {"model": "minilm", "port": port},
                    "loadedModels": [{"name": "minilm"}],
                },
                "reranker": {  # no model given: read from GET /models
                    "name": "ss-reranker",
                    "status": "running",
                    "model": UPSTREAM_MODEL,
                    "type": "openai",
                    "endpoint": upstream.base_url,
                    "config": {"model": UPSTREAM_MODEL, "port": port},
                    "loadedModels": [{"name": UPSTREAM_MODEL}],
                },
                "embedding": {
                    "name": "ss-embedding",
                    "status": "unreachable",
                    "model": "e5",
                    "type": "openai",
                    "endpoint": down,
                    "config": {"model": "e5", "port": int(down.split(":")[2].split("/")[0])},
                    "loadedModels": [{"name": "e5"}],
                },
            },
        },
    }


async def test_ping_pong_config_and_error_frames(master: WsMaster, upstream: FakeUpstream) -> None:
    async with running(make_settings(master.url, [embed_serve(upstream)])):
        await wait_until(lambda: master.of_type("heartbeat"), what="a heartbeat")
        await master.send({"type": "ping"})
        await wait_until(lambda: master.of_type("pong"), what="pong")
        assert master.of_type("pong") == [{"type": "pong"}]
        await master.send({"type": "config", "id": "cfg-1", "payload": {"roles": {"a": 1}, "limits": 2}})
        assert await master.result("cfg-1") == {"type": "result", "id": "cfg-1", "ok": True}
        await master.send({"type": "error", "message": "slow down"})
        await master.send({"type": "ping"})
        await wait_until(lambda: len(master.of_type("pong")) == 2, what="second pong")  # still serving


async def test_embed_command_answers_base64_float32_rows_in_input_order(
    master: WsMaster, upstream: FakeUpstream
) -> None:
    texts = ["def f(): pass", "class A: ...", "x"]
    async with running(make_settings(master.url, [embed_serve(upstream)])):
        await wait_until(lambda: master.of_type("heartbeat"), what="a heartbeat")
        await master.send(
            {
                "type": "command",
                "id": "c1",
                "action": "embed",
                "role": "code-embedding",
                "model": "minilm",
                "texts": texts,
            }
        )
        result = await master.result("c1")
    assert upstream.bodies[-1] == {"model": "minilm", "input": texts}
    assert set(result) == {"type", "id", "embeddings", "dims", "model"}
    assert result["dims"] == 4 and result["model"] == UPSTREAM_MODEL
    assert [decode_row(r) for r in result["embeddings"]] == [row_for(i, t) for i, t in enumerate(texts)]


async def test_rerank_chat_and_models_commands(master: WsMaster, upstream: FakeUpstream) -> None:
    serves = [
        embed_serve(upstream),
        f"reranker={upstream.base_url},model=bge",
        f"code-assistant={upstream.base_url},model=qwen",
    ]
    async with running(make_settings(master.url, serves)):
        await wait_until(lambda: master.of_type("heartbeat"), what="a heartbeat")
        rerank = {"type": "command", "action": "rerank", "role": "reranker", "query": "q", "documents": ["a", "b"]}
        await master.send({**rerank, "id": "r1"})
        assert (await master.result("r1"))["results"] == [
            {"index": 0, "relevance_score": 1.0},
            {"index": 1, "relevance_score": 0.5},
        ]
        assert upstream.bodies[-1] == {"model": "bge", "query": "q", "documents": ["a", "b"]}
        upstream.tei_rerank = True  # TEI: a bare list of {index, score}
        await master.send({**rerank, "id": "r2"})
        assert (await master.result("r2"))["results"][1] == {"index": 1, "relevance_score": 0.5}
        request = {"messages": [{"role": "user", "content": "hello"}]}
        await master.send(
            {"type": "command", "id": "h1", "action": "chat", "role": "code-assistant", "request": request}
        )
        chat = await master.result("h1")
        assert chat["response"]["choices"][0]["message"]["content"] == "hi"
        assert upstream.bodies[-1]["model"] == "qwen"  # filled in: the body had none
        await master.send({"type": "command", "id": "m1", "action": "models", "role": "code-assistant"})
        assert (await master.result("m1"))["response"]["data"][0]["id"] == UPSTREAM_MODEL


async def test_unknown_action_role_bad_payload_and_upstream_failure_are_error_results(
    master: WsMaster, upstream: FakeUpstream
) -> None:
    async with running(make_settings(master.url, [embed_serve(upstream)])):
        await wait_until(lambda: master.of_type("heartbeat"), what="a heartbeat")
        await master.send({"type": "command", "id": "a", "action": "explode", "role": "code-embedding"})
        await master.send({"type": "command", "id": "b", "action": "embed", "role": "nope", "texts": ["x"]})
        await master.send({"type": "command", "id": "c", "action": "embed", "role": "code-embedding"})
        assert set(await master.result("a")) == {"type", "id", "error"}
        assert "unknown action 'explode'" in (await master.result("a"))["error"]
        assert "unknown role 'nope'" in (await master.result("b"))["error"]
        assert (await master.result("c"))["error"] == "bad command: texts: Field required"
        upstream.fail_status = 500
        await master.send({"type": "command", "id": "d", "action": "embed", "role": "code-embedding", "texts": ["x"]})
        assert await master.result("d") == {"type": "result", "id": "d", "error": "upstream 500"}
        upstream.fail_status = 503
        await master.send({"type": "command", "id": "e", "action": "chat", "role": "code-embedding", "request": {}})
        assert (await master.result("e"))["error"] == "upstream 503"


async def test_commands_run_concurrently_and_heartbeats_count_them(master: WsMaster, upstream: FakeUpstream) -> None:
    upstream.delay_s = 0.8
    async with running(make_settings(master.url, [embed_serve(upstream)], heartbeat_s=0.1)):
        await wait_until(lambda: master.of_type("heartbeat"), what="a heartbeat")
        started = time.monotonic()
        for i in range(3):
            await master.send(
                {"type": "command", "id": f"s{i}", "action": "embed", "role": "code-embedding", "texts": ["x"]}
            )
        for i in range(3):
            await master.result(f"s{i}")
        elapsed = time.monotonic() - started
    assert elapsed < 2.0  # three 0.8 s calls side by side, not one after another
    assert max(f["activeRequests"] for f in master.of_type("heartbeat")) == 3


async def test_upstream_key_reaches_only_the_upstream(
    master: WsMaster, upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    settings = make_settings(master.url, [embed_serve(upstream)], upstream_key=SecretStr(UPSTREAM_CANARY))
    assert UPSTREAM_CANARY not in repr(settings) and TOKEN not in repr(settings)
    async with running(settings) as (agent, _):
        await wait_until(lambda: master.of_type("heartbeat"), what="a heartbeat")
        await master.send({"type": "command", "id": "k1", "action": "embed", "role": "code-embedding", "texts": ["x"]})
        await master.result("k1")
        upstream.fail_status = 500
        await master.send({"type": "command", "id": "k2", "action": "embed", "role": "code-embedding", "texts": ["x"]})
        await master.result("k2")
        assert UPSTREAM_CANARY not in repr(agent.upstreams)
    assert upstream.auth_headers and set(upstream.auth_headers) == {f"Bearer {UPSTREAM_CANARY}"}
    assert f"Bearer {TOKEN}" in master.handshake_headers[0]
    seen_by_master = "\n".join(master.handshake_headers + master.raw_messages)
    assert UPSTREAM_CANARY not in seen_by_master
    assert UPSTREAM_CANARY not in caplog.text
    ours = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("sidecar"))
    assert "command k1 action=embed" in ours  # the DEBUG line per command
    assert TOKEN not in ours and UPSTREAM_CANARY not in ours


async def test_reconnects_with_growing_backoff_reset_after_register(master: WsMaster, upstream: FakeUpstream) -> None:
    master.script = ["close-before-register"] * 3 + ["close-after-register"]
    async with running(make_settings(master.url, [embed_serve(upstream)])) as (agent, sleep):
        await wait_until(lambda: master.connections >= 5 and master.of_type("heartbeat"), what="fifth connection")
        assert sleep.delays == [0.5, 1.0, 2.0, 0.5]
        assert agent.registrations == 2
    assert len(master.of_type("register")) == 5


async def test_a_reconnect_presents_the_id_and_credential_the_master_issued(
    master: WsMaster, upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    """The master refuses a second registration of a live agent's URL unless it carries
    that agent's id and credential; the reference sidecar keeps them and presents them again."""
    caplog.set_level(logging.DEBUG)
    master.script = ["close-after-register"]
    async with running(make_settings(master.url, [embed_serve(upstream)])) as (agent, _):
        await wait_until(lambda: master.connections >= 2 and master.of_type("heartbeat"), what="a second connection")
        assert agent.agent_id == ISSUED_ID
    first, second = master.of_type("register")[:2]
    assert "agentId" not in first and "credential" not in first  # nothing to present the first time
    assert second["agentId"] == ISSUED_ID and second["credential"] == "cred-ws-1"
    ours = "\n".join(r.getMessage() for r in caplog.records if r.name.split(".")[0] in ("sidecar", "httpx", "httpcore"))
    assert "registered with the master" in ours and "cred-ws-" not in ours and "cred-ws-" not in repr(agent)


async def test_http_calls_after_register_carry_the_agent_id_and_credential(
    http_master: HttpMaster, upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    settings = make_settings(http_master.url, [embed_serve(upstream)], transport=TransportMode.HTTP)
    async with running(settings) as (_, sleep):
        await wait_until(lambda: http_master.count("heartbeat") >= 2 and http_master.count("poll") >= 1, what="calls")
        http_master.queue({"type": "command", "id": "c1", "action": "models", "role": "code-embedding"})
        await wait_until(lambda: http_master.results, what="a result over HTTP")
        assert sleep.delays == []  # the fake master answers 403 to a call without the right credential
    after_register = [(e, h) for e, h, _ in http_master.requests if e != "register"]
    assert {e for e, _ in after_register} == {"heartbeat", "poll", "result"}
    assert all(
        f"('x-sidecar-agent', '{ISSUED_ID}')" in h and "('x-sidecar-credential', 'cred-http-1')" in h
        for _, h in after_register
    )
    ours = "\n".join(r.getMessage() for r in caplog.records if r.name.split(".")[0] in ("sidecar", "httpx", "httpcore"))
    assert "registered with the master" in ours and "cred-http-1" not in ours


def test_backoff_grows_caps_and_jitters() -> None:
    plain = Backoff(random=lambda: 0.5)
    assert [plain.next_delay() for _ in range(9)] == [0.5, 1, 2, 4, 8, 16, 30, 30, 30]
    plain.reset()
    assert plain.next_delay() == 0.5
    low, high = Backoff(random=lambda: 0.0), Backoff(random=lambda: 0.999999)
    assert low.next_delay() == pytest.approx(0.4) and high.next_delay() == pytest.approx(0.6, rel=1e-4)


@pytest.mark.parametrize("transport", [TransportMode.WS, TransportMode.AUTO])
async def test_wrong_token_never_registers_and_backs_off(
    master: WsMaster, upstream: FakeUpstream, transport: TransportMode
) -> None:
    master.token = "the-real-token"
    async with running(make_settings(master.url, [embed_serve(upstream)], transport=transport)) as (agent, sleep):
        await wait_until(lambda: len(sleep.delays) >= 3, what="three backoffs")
        assert sleep.delays[:3] == [0.5, 1.0, 2.0]
        assert agent.registrations == 0
    assert master.frames == [] and master.connections == 0


# --- tests: the HTTP fallback ----------------------------------------------------------------------


async def test_auto_falls_back_to_http_and_serves_commands(http_master: HttpMaster, upstream: FakeUpstream) -> None:
    settings = make_settings(http_master.url, [embed_serve(upstream)], transport=TransportMode.AUTO, ws_retry_s=1.0)
    async with running(settings) as (agent, sleep):
        await wait_until(lambda: http_master.count("heartbeat") >= 2, what="HTTP heartbeats")
        assert http_master.ws_attempts == 1
        register = http_master.requests[0]
        assert register[0] == "register" and register[2]["type"] == "register"
        assert f"Bearer {TOKEN}" in register[1]
        http_master.queue(
            {"type": "command", "id": "p1", "action": "embed", "role": "code-embedding", "texts": ["a", "bb"]}
        )
        result = await wait_until(lambda: http_master.results, what="a result over HTTP")
        # after ws_retry_s the HTTP session ends, WebSocket is tried again (404), HTTP resumes: no backoff
        await wait_until(lambda: http_master.ws_attempts >= 2 and agent.registrations >= 2, what="WebSocket retry")
        assert sleep.delays == []
    assert result[0]["id"] == "p1" and [decode_row(r) for r in result[0]["embeddings"]] == [
        row_for(0, "a"),
        row_for(1, "bb"),
    ]
    polls = [body for endpoint, _, body in http_master.requests if endpoint == "poll"]
    assert polls and polls[0] == {"agentUrl": "sidecar://ws-1", "waitS": 0.5}
    beat = next(body for endpoint, _, body in http_master.requests if endpoint == "heartbeat")
    assert beat["statusData"]["containers"]["code-embedding"]["status"] == "running"


async def test_http_commands_from_heartbeat_answers_and_unknown_agent_reregisters(
    http_master: HttpMaster, upstream: FakeUpstream
) -> None:
    settings = make_settings(http_master.url, [embed_serve(upstream)], transport=TransportMode.HTTP, poll_wait_s=5.0)
    async with running(settings) as (agent, sleep):
        await wait_until(lambda: http_master.count("heartbeat") >= 1, what="a heartbeat")
        http_master.forget()
        await wait_until(lambda: agent.registrations == 2 and http_master.known, what="re-registration")
        http_master.queue(
            {"type": "command", "id": "q1", "action": "models", "role": "code-embedding"}, via="heartbeat"
        )
        result = await wait_until(lambda: http_master.results, what="a result")
        assert result[0]["response"]["data"][0]["id"] == UPSTREAM_MODEL
        assert http_master.count("register") == 2 and sleep.delays == []


async def test_http_wrong_token_backs_off(http_master: HttpMaster, upstream: FakeUpstream) -> None:
    http_master.token = "the-real-token"
    settings = make_settings(http_master.url, [embed_serve(upstream)], transport=TransportMode.HTTP)
    async with running(settings) as (agent, sleep):
        await wait_until(lambda: len(sleep.delays) >= 2, what="two backoffs")
        assert agent.registrations == 0 and sleep.delays[:2] == [0.5, 1.0]
    assert {endpoint for endpoint, _, _ in http_master.requests} == {"register"}


# --- tests: settings and the command line ---------------------------------------------------------


def test_parse_serve_and_urls() -> None:
    spec = parse_serve("code-embedding=http://127.0.0.1:9201/v1/,model=all-MiniLM-L6-v2")
    assert spec == ServeSpec(role="code-embedding", base_url="http://127.0.0.1:9201/v1", model="all-MiniLM-L6-v2")
    assert spec.container_name == "ss-code-embedding" and spec.port == 9201
    assert parse_serve("rlm=https://gpu.lan/v1").port == 443
    for bad in ["code-embedding", "=http://x", "a=ftp://x", "a=http://x,modle=y", "Bad Role=http://x"]:
        with pytest.raises(SettingsError, match="--serve"):
            parse_serve(bad)
    with pytest.raises(ValueError, match="lowercase slug"):
        ServeSpec(role="code-embedding\n", base_url="http://127.0.0.1:9201/v1")  # `$` matched before a newline
    settings = make_settings("https://master.example:8443/api/", ["a=http://127.0.0.1:1/v1"])
    assert settings.ws_url == "wss://master.example:8443/api/sidecar"
    assert settings.http_url("poll") == "https://master.example:8443/api/sidecar/poll"
    assert make_settings("http://m:80", ["a=http://x/v1"]).ws_url == "ws://m:80/sidecar"


def test_cli_rejects_bad_options_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    env = {"SAMESPACE_FLEET_TOKEN": TOKEN}
    cases = [
        (["--master", "http://m", "--serve", "code-embedding"], env, "--serve"),
        (["--master", "http://m"], env, "--serve"),
        (["--master", "m:80", "--serve", "a=http://x/v1"], env, "--master"),
        (["--master", "http://m", "--serve", "a=http://x/v1", "--serve", "a=http://y/v1"], env, "--serve"),
        (["--master", "http://m", "--serve", "a=http://x/v1", "--heartbeat-s", "0"], env, "--heartbeat-s"),
        (["--master", "http://m", "--serve", "a=http://x/v1"], {}, "SAMESPACE_FLEET_TOKEN"),
    ]
    for argv, environ, option in cases:
        with pytest.raises(SystemExit) as exited:
            main(argv, environ)
        assert exited.value.code == 2
        assert f"error: {option}" in capsys.readouterr().err


def test_cli_defaults() -> None:
    args = build_parser().parse_args(["--master", "http://m:1", "--serve", "a=http://x/v1", "--hostname", "box"])
    settings = load_settings(args, {"SAMESPACE_FLEET_TOKEN": TOKEN, "SIDECAR_UPSTREAM_KEY": "k"})
    assert settings.agent_url == "sidecar://box" and settings.transport is TransportMode.AUTO
    assert (settings.heartbeat_s, settings.poll_wait_s, settings.ws_retry_s) == (5.0, 10.0, 60.0)
    assert settings.upstream_key is not None and settings.upstream_key.get_secret_value() == "k"
    args = build_parser().parse_args(
        ["--master", "http://m:1", "--serve", "a=http://x/v1", "--upstream-key-env", "MY_KEY"]
    )
    assert load_settings(args, {"SAMESPACE_FLEET_TOKEN": TOKEN, "SIDECAR_UPSTREAM_KEY": "k"}).upstream_key is None


def test_sidecar_imports_no_heavy_packages() -> None:
    code = (
        "import sys, sidecar, sidecar.cli, sidecar.agent\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules}\n"
        "               & {'torch', 'ray', 'sentence_transformers', 'cluster', 'numpy'})\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=30, check=True
    )
    assert out.stdout.strip() == ""


async def test_sidecar_process_registers_serves_and_exits_0_on_sigterm(
    master: WsMaster, upstream: FakeUpstream
) -> None:
    process = SidecarProcess(
        master=master.url,
        serves=[serve_arg("code-embedding", upstream.base_url, "minilm")],
        fleet_token=TOKEN,
        upstream_key=UPSTREAM_CANARY,
        hostname="proc-1",
        transport="ws",
        heartbeat_s=0.2,
    )
    try:
        process.start()
        await wait_until(lambda: master.of_type("heartbeat"), timeout_s=20, what="the child's heartbeat")
        await master.send({"type": "command", "id": "x1", "action": "embed", "role": "code-embedding", "texts": ["z"]})
        assert decode_row((await master.result("x1"))["embeddings"][0]) == row_for(0, "z")
        assert master.frames[0]["agentUrl"] == "sidecar://proc-1"
        code = await asyncio.to_thread(process.stop)
        log = process.log()
    finally:
        process.close()
    assert code == 0
    assert "registered with the master" in log and "sidecar stopped" in log
    assert "command x1 action=embed" in log
    assert TOKEN not in log and UPSTREAM_CANARY not in log
    assert upstream.auth_headers[-1] == f"Bearer {UPSTREAM_CANARY}"
