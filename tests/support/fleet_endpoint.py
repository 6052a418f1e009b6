"""The master's sidecar endpoints on real Serve, as their end-to-end tests play the sidecar: the
master under test (its settings, HTTP and WebSocket addresses, and the fleet actor's view), the
fleet token, heartbeat frames, and registering, reading and answering on a real socket or over HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import ray
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from tests.support.ray_cluster import McpServer, RayCluster
from tests.support.waiting import wait_until_async

NAMESPACE = "fleet-endpoint"
TOKEN = "fleet-token-for-tests"
PREFIX = "/fe"


@dataclass
class Master:
    settings: Any
    http: str
    ws: str

    def fleet(self) -> Any:
        from actors.fleet import get_fleet_actor

        return get_fleet_actor(self.settings)

    def agents(self) -> list[str]:
        return [h.agent_url for h in ray.get(self.fleet().hosts.remote())]

    async def provider_named(self, prefix: str, eligible: bool = False) -> Any:
        """The fleet's provider whose name starts with `prefix`, once it exists (and is eligible, if asked)."""

        def found() -> Any:
            infos = [i for i in ray.get(self.fleet().providers.remote()) if i.name.startswith(prefix)]
            return next((i for i in infos if i.eligible or not eligible), None)

        return await wait_until_async(found, what=f"a provider {prefix}*" + (" that is eligible" if eligible else ""))


def auth(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def heartbeat(agent: str, running: bool = True, model: str = "all-MiniLM-L6-v2") -> dict[str, Any]:
    container = {
        "name": "ss-code-embedding",
        "status": "running" if running else "stopped",
        "model": model,
        "type": "openai",
        "endpoint": "http://127.0.0.1:9/v1",
        "config": {"model": model, "port": 9},
    }
    return {
        "type": "heartbeat",
        "agentUrl": agent,
        "containers": ["ss-code-embedding"],
        "activeRequests": 0,
        "statusData": {"agentUrl": agent, "hostname": "ws-test", "containers": {"code-embedding": container}},
    }


# The master asks every agent that registers which virtual containers it hosts (DESIGN §4): the raw
# sidecars of these tests host none and leave that question unanswered.
DISCOVERY_ACTION = "containers"


def is_discovery(frame: dict[str, Any]) -> bool:
    return frame.get("type", "command") == "command" and frame.get("action") == DISCOVERY_ACTION


def work_commands(commands: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The commands of an HTTP heartbeat or poll answer, without the master's discovery question."""
    return [command for command in commands if not is_discovery(command)]


async def recv(ws: ClientConnection, seconds: float = 10.0, skip_pings: bool = True) -> dict[str, Any]:
    """The next frame, past pings (unless asked for) and the master's discovery question."""
    while True:
        frame = json.loads(await asyncio.wait_for(ws.recv(), seconds))
        if not ((skip_pings and frame.get("type") == "ping") or is_discovery(frame)):
            return frame


async def register(ws: ClientConnection, agent: str, proof: dict[str, Any] | None = None) -> dict[str, Any]:
    """Register `agent` on `ws` (presenting an earlier answer's id and credential when given) → the answer."""
    frame = {"type": "register", "agentUrl": agent, "hostname": "ws-test", "containers": ["ss-code-embedding"]}
    if proof is not None:
        frame.update(agentId=proof["agentId"], credential=proof["credential"])
    await ws.send(json.dumps(frame))
    answer = await recv(ws)
    assert answer["type"] == "registered" and answer["ok"] is True and answer["agentId"] and answer["credential"], (
        answer
    )
    return answer


def agent_headers(answer: dict[str, Any]) -> dict[str, str]:
    """The HTTP fallback's proof of the agent, from its registered answer."""
    return {"X-Sidecar-Agent": answer["agentId"], "X-Sidecar-Credential": answer["credential"]}


async def http_register(client: httpx.AsyncClient, agent: str) -> dict[str, Any]:
    response = await client.post(
        "/sidecar/register", json={"type": "register", "agentUrl": agent, "hostname": "ws-http"}
    )
    assert response.status_code == 200, response.text
    return response.json()


async def closed_within(ws: ClientConnection, seconds: float, answer_pings: bool = False) -> bool:
    try:
        async with asyncio.timeout(seconds):
            while True:
                frame = json.loads(await ws.recv())
                if answer_pings and frame.get("type") == "ping":
                    await ws.send(json.dumps({"type": "pong"}))
    except ConnectionClosed:
        return True
    except TimeoutError:
        return False


async def answer_pings(ws: ClientConnection, errors: list[dict[str, Any]] | None = None) -> None:
    """Keep a registered socket alive in the background (pongs), recording the error frames it gets."""
    with contextlib.suppress(ConnectionClosed):
        async for message in ws:
            frame = json.loads(message)
            if frame.get("type") == "ping":
                await ws.send(json.dumps({"type": "pong"}))
            elif frame.get("type") == "error" and errors is not None:
                errors.append(frame)


@contextmanager
def serving_master(
    ray_cluster: RayCluster, mcp_server: McpServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Master]:
    """The master's sidecar endpoints on this session's Serve in a namespace of their own, with short
    liveness deadlines and the fleet actor already started; the app and its actors go when it closes."""
    from ray import serve

    from cluster.settings import SamespaceSettings
    from serve_apps.mcp import McpIngress

    settings = SamespaceSettings(
        ray={"namespace": NAMESPACE},
        store={"data_dir": tmp_path_factory.mktemp("fleet-endpoint-data")},
        admin={"config_path": tmp_path_factory.mktemp("fleet-endpoint-config") / "config.json"},
        fleet_token=TOKEN,
        fleet={
            "handshake_timeout_s": 2,
            "ping_interval_s": 1,
            "max_missed_pongs": 3,
            "superseded_grace_s": 1,
            "stale_after_s": 3,
            "command_timeout_s": 10,
        },
    )
    serve.run(McpIngress.options(num_replicas=1).bind(settings), name="fleet-endpoint", route_prefix=PREFIX)
    http = f"http://127.0.0.1:{mcp_server.port}{PREFIX}"
    master = Master(settings, http, http.replace("http://", "ws://") + "/sidecar")
    # The first socket would start the fleet actor, and on a busy machine its start alone can outlast the
    # liveness deadlines the tests measure: start it now, whichever test runs first.
    ray.get(master.fleet().providers.remote(), timeout=300)
    try:
        yield master
    finally:
        serve.delete("fleet-endpoint")
        for entry in [e for e in ray.util.list_named_actors(all_namespaces=True) if e["namespace"] == NAMESPACE]:
            ray.kill(ray.get_actor(entry["name"], namespace=NAMESPACE))
