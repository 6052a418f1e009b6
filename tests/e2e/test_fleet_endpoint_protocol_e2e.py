"""The master's sidecar endpoints on real Serve: the protocol as a well-behaved sidecar speaks it.

A test client plays the sidecar over a real WebSocket (`websockets`) and real HTTP: the token at the
handshake, register and heartbeat, commands and config frames answered by id, a disconnect failing
what is in flight, liveness (silent, unanswered and superseded sockets closed), and the HTTP fallback
(no entry from a heartbeat, commands carried, a stale agent dropped). The master (the
`master` fixture): tests/conftest.py and tests/support/fleet_endpoint.py.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import numpy as np
import pytest
import ray
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from cluster.errors import UpstreamUnavailable
from tests.support.fleet_endpoint import (
    TOKEN,
    Master,
    agent_headers,
    auth,
    closed_within,
    heartbeat,
    http_register,
    recv,
    register,
    work_commands,
)
from tests.support.waiting import wait_until_async

pytestmark = [pytest.mark.ray, pytest.mark.slow]


async def test_a_wrong_or_missing_token_is_refused_at_the_handshake_and_over_http(master: Master) -> None:
    for headers in ({}, auth("wrong"), {"Authorization": TOKEN}):
        with pytest.raises(InvalidStatus) as refused:
            async with connect(master.ws, additional_headers=headers):
                pass
        assert refused.value.response.status_code == 403
    async with httpx.AsyncClient(base_url=master.http) as client:
        for path in ("register", "heartbeat", "poll", "result"):
            response = await client.post(
                f"/sidecar/{path}", json={"type": "register", "agentUrl": "http://x"}, headers=auth("wrong")
            )
            assert response.status_code == 401 and response.content == b""
    assert "http://x" not in master.agents()


async def test_register_heartbeat_and_a_command_answered_by_id(master: Master) -> None:
    agent = "http://127.0.0.1:9101"
    async with connect(master.ws, additional_headers=auth()) as ws:
        await register(ws, agent)
        await ws.send(json.dumps(heartbeat(agent)))
        fleet = master.fleet()
        await master.provider_named("sidecar-127.0.0.1:9101", eligible=True)
        infos = [i for i in ray.get(fleet.providers.remote()) if i.name.startswith("sidecar-127.0.0.1:9101")]
        assert [(i.roles[0].value, i.hosted, i.eligible, i.model) for i in infos] == [
            ("code-embedding", "sidecar", True, "all-MiniLM-L6-v2")
        ]
        name = infos[0].name

        pending = fleet.embed.remote(name, ["alpha", "beta"])
        command = await recv(ws)
        assert command["type"] == "command" and command["action"] == "embed" and command["texts"] == ["alpha", "beta"]
        assert command["id"].startswith("cmd-") and command["model"] == "all-MiniLM-L6-v2"
        rows = np.arange(2 * 384, dtype="<f4").reshape(2, 384) / 1000
        import base64

        await ws.send(json.dumps({"type": "result", "id": "cmd-not-ours", "embeddings": []}))  # ignored
        await ws.send(
            json.dumps(
                {
                    "type": "result",
                    "id": command["id"],
                    "embeddings": [base64.b64encode(r.tobytes()).decode() for r in rows],
                    "dims": 384,
                }
            )
        )
        assert np.array_equal(await pending, rows)

        failing = fleet.embed.remote(name, ["gamma"])
        command = await recv(ws)
        await ws.send(json.dumps({"type": "result", "id": command["id"], "error": "upstream 503"}))
        with pytest.raises(UpstreamUnavailable, match="upstream 503"):
            await failing
    assert agent in master.agents()


async def test_a_disconnect_fails_the_commands_in_flight_at_once(master: Master) -> None:
    agent = "http://127.0.0.1:9102"
    async with connect(master.ws, additional_headers=auth()) as ws:
        await register(ws, agent)
        await ws.send(json.dumps(heartbeat(agent)))
        fleet = master.fleet()
        name = (await master.provider_named("sidecar-127.0.0.1:9102", eligible=True)).name
        pending = fleet.embed.remote(name, ["delta"])
        assert (await recv(ws))["type"] == "command"
    # UpstreamUnavailable("... disconnected"), not the command timeout's UpstreamTimeout (10 s here).
    with pytest.raises(UpstreamUnavailable, match="disconnected"):
        await pending
    infos = {i.name: i for i in ray.get(fleet.providers.remote())}
    assert infos[name].failures >= 1


async def test_liveness_unregistered_silent_and_superseded_sockets_are_closed(master: Master) -> None:
    async with connect(master.ws, additional_headers=auth()) as silent:  # never registers: handshake timeout 2 s
        assert await closed_within(silent, 8)
    async with connect(master.ws, additional_headers=auth()) as mute:  # registers, then never answers a ping
        await register(mute, "http://127.0.0.1:9103")
        assert await closed_within(mute, 10)
    async with connect(master.ws, additional_headers=auth()) as old:
        first = await register(old, "http://127.0.0.1:9104")
        async with connect(master.ws, additional_headers=auth()) as new:
            again = await register(new, "http://127.0.0.1:9104", proof=first)  # the same agent reconnecting
            assert again["agentId"] == first["agentId"]
            # Both answer their pings: the older one is closed once superseded (grace 1 s), the newer stays.
            old_closed, new_closed = await asyncio.gather(
                closed_within(old, 8, answer_pings=True), closed_within(new, 8, answer_pings=True)
            )
            assert old_closed and not new_closed


async def test_the_http_fallback_never_creates_an_entry_from_a_heartbeat_and_carries_commands(master: Master) -> None:
    agent = "http://127.0.0.1:9201"
    async with httpx.AsyncClient(base_url=master.http, headers=auth(), timeout=30) as client:
        response = await client.post("/sidecar/heartbeat", json=heartbeat(agent))
        assert response.status_code == 409 and "register first" in response.json()["message"]
        assert agent not in master.agents()
        assert (await client.post("/sidecar/poll", json={"agentUrl": agent})).status_code == 409

        assert (
            await client.post("/sidecar/heartbeat", json=heartbeat(agent), headers={"X-Sidecar-Agent": "ab"})
        ).status_code == 409
        registered = await http_register(client, agent)
        client.headers.update(agent_headers(registered))
        response = await client.post("/sidecar/heartbeat", json=heartbeat(agent))
        answer = response.json()
        assert response.status_code == 200 and answer["ok"] is True and work_commands(answer["commands"]) == []
        assert (await client.post("/sidecar/heartbeat", content=b"{nope")).status_code == 400
        hosts = {h.agent_url: h for h in ray.get(master.fleet().hosts.remote())}
        assert hosts[agent].transport == "http" and hosts[agent].fresh

        fleet = master.fleet()
        name = (await master.provider_named("sidecar-127.0.0.1:9201", eligible=True)).name
        pending = fleet.embed.remote(name, ["epsilon"])
        polled = work_commands(
            (await client.post("/sidecar/poll", json={"agentUrl": agent, "waitS": 5})).json()["commands"]
        )
        assert [c["action"] for c in polled] == ["embed"] and polled[0]["texts"] == ["epsilon"]
        stray = await client.post("/sidecar/result", json={"type": "result", "id": "cmd-unknown"})
        assert stray.status_code == 404
        row = [0.5] * 384
        done = await client.post("/sidecar/result", json={"type": "result", "id": polled[0]["id"], "embeddings": [row]})
        assert done.json() == {"ok": True}
        assert np.allclose(await pending, [row])

        # An agent that stops heartbeating leaves the lanes (stale after 3 s) and its commands fail.
        pending = fleet.embed.remote(name, ["zeta"])
        with pytest.raises(UpstreamUnavailable, match="no heartbeat"):
            await pending
        infos = {i.name: i for i in ray.get(fleet.providers.remote())}
        assert not infos[name].eligible and infos[name].reason == "no recent heartbeat"


async def test_a_config_frame_is_correlated_by_id_like_a_command(master: Master) -> None:
    agent = "http://127.0.0.1:9106"
    async with connect(master.ws, additional_headers=auth()) as ws:
        await register(ws, agent)
        await ws.send(json.dumps(heartbeat(agent)))
        await wait_until_async(lambda: agent in master.agents(), what=f"{agent} in the fleet's hosts")
        pending = master.fleet().push_config.remote(agent, {"idleTimeouts": {"code-embedding": 600}})
        frame = await recv(ws)
        assert frame["type"] == "config" and frame["payload"] == {"idleTimeouts": {"code-embedding": 600}}
        await ws.send(json.dumps({"type": "result", "id": frame["id"], "ok": True}))
        assert await pending == {"ok": True}
