"""The reference sidecar's test bench: an in-test master and an in-test OpenAI-compatible upstream.

The master: `WsMaster`, a `websockets` server that checks the fleet token, and `HttpMaster`, a Starlette
app (uvicorn without WebSocket support, so a WebSocket handshake there is answered 404) for the HTTP
fallback. The upstream: `FakeUpstream`, a Starlette app returning fixed, exactly representable vectors
(no model is loaded here). `running` runs a `Sidecar` (one `Agent` per master) against them with a
recording backoff sleep. OpenRouter, for the virtual containers: the project's fake, in process
(`FakeOpenRouter`: `build_fake_app` behind an httpx ASGI transport that records each request).
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import struct
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from http import HTTPStatus
from typing import Any

import httpx
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

from sidecar import Agent, MasterSpec, ServeSpec, Sidecar, SidecarSettings, TransportMode, parse_serve
from sidecar.wire import MAX_RESULT_BYTES
from tests.support.fakes.openrouter_fake import FakeConfig, FakeState, KeyConfig, UpstreamBehaviour, build_fake_app

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
            timeout_graceful_shutdown=0.2,  # a long poll still open at the end is cut, not waited for  # type: ignore[arg-type]
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


# --- the master ------------------------------------------------------------------------------------


ISSUED_ID = "a1b2c3d4e5f6"


class WsMaster:
    """A WebSocket master on 127.0.0.1: checks the token and path, records frames, follows a script.

    script: one behaviour per connection, in order ('serve' once it runs out):
      'close-before-register'  close as soon as the register frame arrives (no 'registered')
      'close-after-register'   answer 'registered', then close
      'serve'                  answer 'registered' and keep the socket open
    """

    def __init__(self, token: str = TOKEN, *, agent_id: str = ISSUED_ID) -> None:
        self.token = token
        self.agent_id = agent_id  # the id this master issues (two masters: two identities)
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
                agent_id = frame.get("agentId") or self.agent_id
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


class HttpMaster:
    """The HTTP fallback endpoints under /pfx/sidecar/ (uvicorn with ws='none': a handshake gets 404)."""

    def __init__(self, token: str = TOKEN, *, agent_id: str = ISSUED_ID) -> None:
        self.token = token
        self.agent_id = agent_id
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
        """Hand `command` (or a `config` frame) out in the next poll answer, or (via='heartbeat') the next
        heartbeat answer."""
        with self._lock:
            (self._heartbeat_commands if via == "heartbeat" else self._commands).append(command)

    def forget(self) -> None:
        """As after a master restart: the next heartbeat or poll answers 409 unknown agent."""
        self.known.clear()

    def count(self, endpoint: str) -> int:
        return sum(1 for e, _, _ in self.requests if e == endpoint)

    async def result(self, command_id: str, timeout_s: float = 5.0) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            return next((r for r in self.results if r.get("id") == command_id), None)

        return await wait_until(found, timeout_s, f"result {command_id}")

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
            answer = {"type": "registered", "ok": True, "agentId": self.agent_id, "credential": self.credential}
            return JSONResponse(answer)
        if (request.headers.get("x-sidecar-agent"), request.headers.get("x-sidecar-credential")) != (
            self.agent_id,
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


# --- the agent -------------------------------------------------------------------------------------


class RecordingSleep:
    """Records each backoff delay and waits only a moment."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(round(seconds, 6))
        await asyncio.sleep(0.01)


def make_settings(
    master_url: str | None,
    serves: list[str],
    *,
    masters: list[tuple[str, str]] | None = None,
    **overrides: Any,
) -> SidecarSettings:
    """Settings for one master (`master_url`, the fleet token TOKEN) or several (`masters`: (url, token));
    `serves` may mix local servers and `openrouter:` virtual containers."""
    pairs = masters if masters is not None else [(master_url or "", TOKEN)]
    specs = [parse_serve(s) for s in serves]
    fields: dict[str, Any] = {
        "masters": tuple(MasterSpec(url=url, fleet_token=SecretStr(token)) for url, token in pairs),
        "agent_url": "sidecar://ws-1",
        "hostname": "ws-1",
        "serves": tuple(s for s in specs if isinstance(s, ServeSpec)),
        "virtual": tuple(s for s in specs if not isinstance(s, ServeSpec)),
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
async def running_sidecar(
    settings: SidecarSettings, *, openrouter: FakeOpenRouter | None = None
) -> AsyncIterator[tuple[Sidecar, RecordingSleep]]:
    """A Sidecar (every master's agent) running in this loop; OpenRouter is `openrouter`'s fake if given."""
    sleep = RecordingSleep()
    sidecar = Sidecar(
        settings,
        sleep=sleep,
        jitter=0.0,
        openrouter_transport=openrouter.transport if openrouter is not None else None,
    )
    task = asyncio.ensure_future(sidecar.run())
    try:
        yield sidecar, sleep
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


@asynccontextmanager
async def running(
    settings: SidecarSettings, *, openrouter: FakeOpenRouter | None = None
) -> AsyncIterator[tuple[Agent, RecordingSleep]]:
    """As running_sidecar, yielding the first master's agent."""
    async with running_sidecar(settings, openrouter=openrouter) as (sidecar, sleep):
        yield sidecar.agents[0], sleep


def embed_serve(upstream: FakeUpstream) -> str:
    return f"code-embedding={upstream.base_url},model=minilm"


# --- OpenRouter (the project's fake, in process) ---------------------------------------------------

OR_KEY_A = "sk-or-v1-CANARY-master-a-7d1e0000000000000000"
OR_KEY_B = "sk-or-v1-CANARY-master-b-3c9f0000000000000000"
OR_MODEL = "sentence-transformers/all-minilm-l6-v2"
OR_RERANK_MODEL = "qwen/qwen3-reranker-8b"
OR_PIN = "fake-same"
OR_BASE_URL = "http://openrouter.test/api/v1"


class FakeOpenRouter:
    """The OpenRouter fake (tests/support/fakes/openrouter_fake) behind an httpx ASGI transport that keeps
    every request it carried. Accepts OR_KEY_A and OR_KEY_B."""

    def __init__(self, **upstreams: UpstreamBehaviour) -> None:
        keys = {OR_KEY_A: KeyConfig(label="key-a"), OR_KEY_B: KeyConfig(label="key-b")}
        self.state = FakeState(config=FakeConfig(keys=keys, upstreams=dict(upstreams)))
        self.requests: list[httpx.Request] = []
        inner = httpx.ASGITransport(app=build_fake_app(self.state))
        outer = self

        class _Recording(httpx.AsyncBaseTransport):
            async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
                outer.requests.append(request)
                return await inner.handle_async_request(request)

        self.transport: httpx.AsyncBaseTransport = _Recording()

    def bodies(self, path: str) -> list[dict[str, Any]]:
        """The JSON bodies sent to `path` ('/embeddings', '/rerank'), oldest first."""
        return [json.loads(r.content) for r in self.requests if r.url.path.endswith(path) and r.content]

    def bearers(self) -> list[str]:
        return [r.headers.get("authorization", "") for r in self.requests]


def or_serve(role: str = "code-embedding", model: str = OR_MODEL, upstream: str | None = OR_PIN) -> str:
    """One --serve value for a virtual container: `code-embedding=openrouter:MODEL[@UPSTREAM]`."""
    return f"{role}=openrouter:{model}" + (f"@{upstream}" if upstream else "")
