"""The master's sidecar endpoints on real Serve against a hostile client: hostile and random frames,
URL respellings and guessed credentials that would take over a live agent, another agent's outbox,
oversized bodies, and an oversized frame that must not delay another agent's heartbeat.

The fleet actor's registry is read back to prove that nothing hostile ever creates an entry. The
master (the `master` fixture): tests/conftest.py and tests/support/fleet_endpoint.py.
"""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import httpx
import numpy as np
import pytest
import ray
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.support.fleet_endpoint import (
    PREFIX,
    TOKEN,
    Master,
    agent_headers,
    answer_pings,
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


FUZZ: list[tuple[str, str | bytes]] = [
    ("malformed", "{not json"),
    ("array", "[1, 2, 3]"),
    ("no type", '{"agentUrl": "http://fuzz"}'),
    ("unknown type", '{"type": "reboot", "agentUrl": "http://fuzz"}'),
    ("heartbeat before register", json.dumps(heartbeat("http://fuzz-hb"))),
    ("result before register", '{"type": "result", "id": "cmd-1"}'),
    ("register without agent", '{"type": "register", "hostname": "h"}'),
    ("register with a number", '{"type": "register", "agentUrl": 7}'),
    ("huge heartbeat", json.dumps({**heartbeat("http://fuzz-huge"), "pad": "x" * 300_000})),
    ("binary garbage", bytes(range(256)) * 4),
    ("null", "null"),
]


@pytest.mark.parametrize(("what", "raw"), FUZZ, ids=[f[0] for f in FUZZ])
async def test_a_hostile_frame_gets_an_error_frame_and_creates_no_entry(
    master: Master, what: str, raw: str | bytes
) -> None:
    async with connect(master.ws, additional_headers=auth(), max_size=None) as ws:
        await ws.send(raw)
        answer = await recv(ws)
        assert answer["type"] == "error" and answer["message"]
        assert "fuzz" not in answer["message"] and "xxxx" not in answer["message"]  # input never echoed
    assert not [a for a in master.agents() if "fuzz" in a]


async def test_random_frames_never_crash_the_master_or_create_entries(master: Master) -> None:
    rng = random.Random(9)
    keys = ["type", "agentUrl", "id", "containers", "statusData", "activeRequests", "hostname", "error"]
    values: list[Any] = ["heartbeat", "result", "pong", "register", None, -1, 2**70, [], {}, "x" * 50, {"a": [1]}, 1.5]
    before = set(master.agents())
    async with connect(master.ws, additional_headers=auth(), max_size=None) as ws:
        for _ in range(300):
            frame = {rng.choice(keys): rng.choice(values) for _ in range(rng.randint(0, 5))}
            if frame.get("type") == "register" and isinstance(frame.get("agentUrl"), str):
                frame["agentUrl"] = ""  # keep every random register invalid
            await ws.send(json.dumps(frame) if rng.random() < 0.9 else json.dumps(frame)[: rng.randint(0, 20)])
        await ws.send('{"type": "pong"}')
        errors, closed = 0, False
        while True:
            try:
                answer = await recv(ws, seconds=3)
            except TimeoutError:
                break
            except ConnectionClosed:  # the handshake timeout (2 s) closes a socket that never registered
                closed = True
                break
            assert answer["type"] == "error"
            errors += 1
        # Each bad frame is answered with an error (a pong before register too), or the socket is closed.
        assert errors == 301 or (closed and errors > 0)
    async with connect(master.ws, additional_headers=auth(), max_size=None) as big:
        await big.send("x" * (20 * 1024 * 1024))  # past every limit: an error frame or a closed socket
        try:
            answer = await recv(big, seconds=20)
            assert answer["type"] == "error"
        except ConnectionClosed:
            pass
    async with connect(master.ws, additional_headers=auth()) as ws:  # still serving
        await register(ws, "http://127.0.0.1:9105")
    # The only agent this test added is the one it registered by hand: no random frame made an entry.
    assert set(master.agents()) - before == {"http://127.0.0.1:9105"}


# --- identity, binding and limits -------------------------------------------------------------------


async def test_no_spelling_of_a_live_agents_url_takes_it_over(master: Master) -> None:
    """`http://h:p`, `http://h:p/zzz` and `ws://x@h:p` were once one provider; the last took the traffic."""
    owner_url = "http://127.0.0.1:9110"
    async with connect(master.ws, additional_headers=auth()) as owner:
        first = await register(owner, owner_url)
        await owner.send(json.dumps(heartbeat(owner_url)))
        keepalive = asyncio.create_task(answer_pings(owner))
        for spelling in ("ws://127.0.0.1:9110/", "HTTP://127.0.0.1:9110"):  # the same agent URL, respelled
            async with connect(master.ws, additional_headers=auth()) as intruder:
                await intruder.send(json.dumps({"type": "register", "agentUrl": spelling}))
                answer = await recv(intruder)
                assert answer["type"] == "error" and "held by a live agent" in answer["message"]
                assert await closed_within(intruder, 5)
        async with httpx.AsyncClient(base_url=master.http, headers=auth(), timeout=30) as client:
            guessed = {"type": "register", "agentUrl": owner_url, "agentId": first["agentId"], "credential": "guess"}
            assert (await client.post("/sidecar/register", json=guessed)).status_code == 409
            with_userinfo = await client.post(
                "/sidecar/register", json={"type": "register", "agentUrl": "ws://x@127.0.0.1:9110"}
            )
            assert with_userinfo.status_code == 400 and "x@" not in with_userinfo.text
            other = await http_register(client, "http://127.0.0.1:9110/zzz")  # another agent: its own id
            assert other["agentId"] != first["agentId"]
            assert (
                await client.post(
                    "/sidecar/heartbeat", json=heartbeat("http://127.0.0.1:9110/zzz"), headers=agent_headers(other)
                )
            ).status_code == 200
        names = {
            i.name for i in ray.get(master.fleet().providers.remote()) if i.name.startswith("sidecar-127.0.0.1:9110-")
        }
        assert names == {
            f"sidecar-127.0.0.1:9110-{first['agentId']}-code-embedding",
            f"sidecar-127.0.0.1:9110-{other['agentId']}-code-embedding",
        }
        hosts = {h.agent_url: h.agent_id for h in ray.get(master.fleet().hosts.remote())}
        assert hosts[owner_url] == first["agentId"] and "ws://x@127.0.0.1:9110" not in hosts
        assert not keepalive.done()  # the owner's socket was never disturbed
        keepalive.cancel()


async def test_poll_and_result_are_bound_to_the_agent_by_its_credential(master: Master) -> None:
    """Once, any holder of the fleet token could poll another agent's outbox by naming its URL."""
    victim_url, thief_url = "http://127.0.0.1:9120", "http://127.0.0.1:9121"
    async with httpx.AsyncClient(base_url=master.http, headers=auth(), timeout=30) as client:
        victim, thief = await http_register(client, victim_url), await http_register(client, thief_url)
        for url, answer in ((victim_url, victim), (thief_url, thief)):
            assert (
                await client.post("/sidecar/heartbeat", json=heartbeat(url), headers=agent_headers(answer))
            ).status_code == 200
        fleet = master.fleet()
        name = (await master.provider_named("sidecar-127.0.0.1:9120-", eligible=True)).name
        pending = fleet.embed.remote(name, ["secret source text"])
        # A barrier, not a sleep: the actor runs one caller's calls in order, and `embed` posts its
        # command before its first await, so once this later call answers the command is queued.
        await fleet.hosts.remote()

        poll = {"agentUrl": victim_url, "waitS": 0}
        refusals = [
            await client.post("/sidecar/poll", json=poll),  # the victim's URL, no agent headers: the old hole
            await client.post("/sidecar/poll", json=poll, headers={"X-Sidecar-Agent": victim["agentId"]}),
            await client.post(
                "/sidecar/poll", json=poll, headers={**agent_headers(victim), "X-Sidecar-Credential": "guess"}
            ),
            await client.post(
                "/sidecar/poll",
                json=poll,
                headers={**agent_headers(victim), "X-Sidecar-Credential": thief["credential"]},
            ),
            await client.post("/sidecar/poll", json=poll, headers=agent_headers(thief)),  # its own proof, her URL
        ]
        assert [r.status_code for r in refusals] == [409, 403, 403, 403, 403]
        assert refusals and all("secret source text" not in r.text for r in refusals)
        # The thief's own outbox is empty; the victim's command is still waiting for her.
        mine = await client.post(
            "/sidecar/poll", json={"agentUrl": thief_url, "waitS": 0}, headers=agent_headers(thief)
        )
        assert mine.status_code == 200 and work_commands(mine.json()["commands"]) == []
        polled = await client.post(
            "/sidecar/poll", json={"agentUrl": victim_url, "waitS": 5}, headers=agent_headers(victim)
        )
        [command] = work_commands(polled.json()["commands"])
        assert command["texts"] == ["secret source text"]

        forged = {"type": "result", "id": command["id"], "embeddings": [[9.0] * 384]}
        assert (await client.post("/sidecar/result", json=forged, headers=agent_headers(thief))).status_code == 404
        assert (await client.post("/sidecar/result", json=forged)).status_code == 409
        row = [0.25] * 384
        done = await client.post(
            "/sidecar/result",
            json={"type": "result", "id": command["id"], "embeddings": [row]},
            headers=agent_headers(victim),
        )
        assert done.status_code == 200
        assert np.allclose(await pending, [row])


async def test_request_bodies_are_limited_before_they_are_read(master: Master) -> None:
    from cluster.fleet.frames import MAX_FRAME_BYTES, MAX_RESULT_BYTES

    async def stream(size: int, chunk: int = 64 * 1024) -> Any:
        sent = 0
        while sent < size:
            yield b"x" * min(chunk, size - sent)
            sent += chunk

    before = set(master.agents())
    # A declared gigabyte, and no body sent at all: answered 413 from the headers alone.
    host, port = master.http.removeprefix("http://").split("/")[0].split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        (
            f"POST {PREFIX}/sidecar/result HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {TOKEN}\r\n"
            "Content-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n"
        ).encode()
    )
    await writer.drain()
    status_line = await asyncio.wait_for(reader.readline(), 10)
    writer.close()
    assert status_line.split()[1] == b"413", status_line
    async with httpx.AsyncClient(base_url=master.http, headers=auth(), timeout=30) as client:
        declared = await client.post("/sidecar/result", content=b"x" * (MAX_RESULT_BYTES + 1))
        assert declared.status_code == 413
        # Chunked, no Content-Length: the stream is read only up to the limit.
        assert (await client.post("/sidecar/result", content=stream(MAX_RESULT_BYTES + 10))).status_code == 413
        assert (await client.post("/sidecar/heartbeat", content=stream(MAX_FRAME_BYTES + 10))).status_code == 413
        register = await client.post("/sidecar/register", content=b" " * (MAX_FRAME_BYTES + 1))
        assert register.status_code == 413 and "limit" in register.json()["message"]
    assert set(master.agents()) == before


async def test_a_hostile_frame_on_one_socket_never_delays_another_agents_heartbeat(master: Master) -> None:
    """Once, an 8 MiB frame was followed by an HTTP heartbeat that hung for over 60 s. The cause:
    every open socket is an ongoing request of the replica, and Serve's default allows 5; further
    HTTP calls queued until a socket closed. Here more sockets than that stay open and answer pings
    while one of them sends oversized frames, and another agent's heartbeat is answered at once."""
    from cluster.fleet.frames import MAX_RESULT_BYTES

    beating_url = "http://127.0.0.1:9130"
    async with httpx.AsyncClient(base_url=master.http, headers=auth(), timeout=20) as client:
        beating = await http_register(client, beating_url)
        sockets: list[Any] = []
        readers: list[asyncio.Task[None]] = []
        errors: list[dict[str, Any]] = []
        try:
            for i in range(8):  # each opened just before it registers (a 2 s handshake), kept alive from then on
                sockets.append(ws := await connect(master.ws, additional_headers=auth(), max_size=None))
                await register(ws, f"http://127.0.0.1:{9131 + i}")
                readers.append(asyncio.create_task(answer_pings(ws, errors)))
            hostile = sockets[0]
            await hostile.send(json.dumps({"type": "result", "id": "cmd-x", "pad": "x" * MAX_RESULT_BYTES}))  # over
            await hostile.send(json.dumps({"type": "heartbeat", "pad": "y" * (MAX_RESULT_BYTES - 100)}))  # under
            response = await asyncio.wait_for(
                client.post("/sidecar/heartbeat", json=heartbeat(beating_url), headers=agent_headers(beating)), 10
            )
            assert response.status_code == 200  # well within 10 s; it hung for over 60 s
            await wait_until_async(lambda: len(errors) >= 2, what="an error frame for each oversized frame")
            assert [e["message"].split(":")[0] for e in errors] == ["frame too large"] * 2
            assert all(not r.done() for r in readers)  # every socket, the hostile one too, is still open
        finally:
            for task in readers:
                task.cancel()
            for ws in sockets:
                await ws.close()
