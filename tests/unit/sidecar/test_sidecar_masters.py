"""One sidecar, several masters: a session per master with its own identity and fleet token (one over
WebSocket, one over the HTTP fallback), a key pushed by one master serving only that master's
commands (the key's frame over either transport), and a master that is slow or gone never stalling
the other.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import SecretStr

from sidecar import TransportMode
from sidecar.wire import key_config_frame
from tests.support.fakes.openrouter_fake import UpstreamBehaviour
from tests.support.sidecar_agents import (
    OR_BASE_URL,
    OR_KEY_A,
    OR_KEY_B,
    OR_MODEL,
    TOKEN,
    FakeOpenRouter,
    FakeUpstream,
    HttpMaster,
    WsMaster,
    embed_serve,
    make_settings,
    or_serve,
    running_sidecar,
    wait_until,
)

pytestmark = pytest.mark.timeout(90)

TOKEN_B = "fleet-token-of-master-b-51aa"
NO_KEY = "no OpenRouter key from this master: push it with POST /admin/openrouter"


@pytest.fixture
async def masters() -> AsyncIterator[tuple[WsMaster, WsMaster]]:
    a = await WsMaster(TOKEN, agent_id="id-of-a").start()
    b = await WsMaster(TOKEN_B, agent_id="id-of-b").start()
    yield a, b
    await a.stop()
    await b.stop()


def virtual_embed(command_id: str) -> dict[str, Any]:
    return {
        "type": "command",
        "id": command_id,
        "action": "virtual-embed",
        "role": "code-embedding",
        "permit": f"permit-{command_id}",
        "texts": ["def f(): pass"],
    }


async def test_each_master_has_its_own_session_identity_and_token(upstream: FakeUpstream) -> None:
    ws = await WsMaster(TOKEN, agent_id="id-of-ws").start()
    http = HttpMaster(TOKEN_B, agent_id="id-of-http")
    http.server.start()
    settings = make_settings(
        None,
        [embed_serve(upstream), or_serve()],
        masters=[(ws.url, TOKEN), (http.url, TOKEN_B)],
        transport=TransportMode.AUTO,
        ws_retry_s=30.0,
    )
    try:
        async with running_sidecar(settings) as (sidecar, sleep):
            await wait_until(lambda: ws.of_type("heartbeat") and http.count("heartbeat") >= 2, what="both sessions")
            http.queue({"type": "command", "id": "h1", "action": "models", "role": "code-embedding"})
            await ws.send({"type": "command", "id": "w1", "action": "models", "role": "code-embedding"})
            assert "data" in (await http.result("h1"))["response"]
            assert "data" in (await ws.result("w1"))["response"]
            http.queue(key_config_frame("k1", SecretStr(OR_KEY_B)))  # the key's frame over the HTTP fallback
            assert await http.result("k1") == {"type": "result", "id": "k1", "ok": True}
            http.queue({"type": "command", "id": "h2", "action": "containers"})
            await ws.send({"type": "command", "id": "w2", "action": "containers"})
            assert (await http.result("h2"))["virtualContainers"][0]["keyHeld"] is True
            assert (await ws.result("w2"))["virtualContainers"][0]["keyHeld"] is False  # the other master's
            by_master = {agent.master.url: agent for agent in sidecar.agents}
            assert by_master[ws.url].agent_id == "id-of-ws" and by_master[http.url].agent_id == "id-of-http"
            assert [a.registrations for a in sidecar.agents] == [1, 1] and sleep.delays == []
    finally:
        await ws.stop()
        http.server.stop()
    assert f"Bearer {TOKEN}" in ws.handshake_headers[0] and TOKEN_B not in "\n".join(ws.handshake_headers)
    http_headers = "\n".join(headers for _, headers, _ in http.requests)
    assert f"Bearer {TOKEN_B}" in http_headers and TOKEN not in http_headers
    assert all("('x-sidecar-agent', 'id-of-http')" in h for e, h, _ in http.requests if e != "register")
    assert ws.frames[0]["agentUrl"] == http.requests[0][2]["agentUrl"] == "sidecar://ws-1"


async def test_a_key_pushed_by_one_master_serves_only_that_masters_commands(
    masters: tuple[WsMaster, WsMaster],
) -> None:
    a, b = masters
    openrouter = FakeOpenRouter()
    settings = make_settings(
        None, [or_serve()], masters=[(a.url, TOKEN), (b.url, TOKEN_B)], openrouter_base_url=OR_BASE_URL
    )
    async with running_sidecar(settings, openrouter=openrouter):
        await wait_until(lambda: a.of_type("heartbeat") and b.of_type("heartbeat"), what="both registered")
        await a.send(key_config_frame("ka", SecretStr(OR_KEY_A)))
        assert (await a.result("ka"))["ok"] is True
        await b.send(virtual_embed("b1"))
        assert await b.result("b1") == {"type": "result", "id": "b1", "error": NO_KEY}  # A's key is not B's
        await a.send(virtual_embed("a1"))
        assert (await a.result("a1", timeout_s=60))["model"] == OR_MODEL  # the fake's first call loads MiniLM
        await b.send(key_config_frame("kb", SecretStr(OR_KEY_B)))
        await b.result("kb")
        await b.send(virtual_embed("b2"))
        assert (await b.result("b2", timeout_s=30))["source"] == "openrouter"
        for master, command_id in ((a, "ca"), (b, "cb")):
            await master.send({"type": "command", "id": command_id, "action": "containers"})
        rows_a = (await a.result("ca"))["virtualContainers"][0]
        rows_b = (await b.result("cb"))["virtualContainers"][0]
    assert openrouter.bearers() == [f"Bearer {OR_KEY_A}", f"Bearer {OR_KEY_B}"]
    assert (rows_a["served"], rows_a["permitsUsed"], rows_a["upstreamCalls"]) == (1, 1, 1)
    # B's refused command (no key from B yet) used no permit and made no call
    assert (rows_b["served"], rows_b["permitsUsed"], rows_b["upstreamCalls"]) == (1, 1, 1)
    assert rows_a["name"] == rows_b["name"] == "ws-1-OR-CodeEmbedding"


async def test_a_slow_or_stopped_master_never_stalls_the_other(
    masters: tuple[WsMaster, WsMaster], upstream: FakeUpstream
) -> None:
    a, b = masters
    openrouter = FakeOpenRouter(slow=UpstreamBehaviour(latency_s=30))
    settings = make_settings(
        None,
        [embed_serve(upstream), or_serve(upstream="slow")],
        masters=[(a.url, TOKEN), (b.url, TOKEN_B)],
        openrouter_base_url=OR_BASE_URL,
        upstream_timeout_s=3.0,
    )
    async with running_sidecar(settings, openrouter=openrouter) as (sidecar, sleep):
        await wait_until(lambda: a.of_type("heartbeat") and b.of_type("heartbeat"), what="both registered")
        await a.send(key_config_frame("ka", SecretStr(OR_KEY_A)))
        await a.result("ka")
        await a.send(virtual_embed("slow"))  # held by OpenRouter far longer than this test waits for B
        await wait_until(lambda: openrouter.requests, what="A's call in flight")
        started = time.monotonic()
        await b.send({"type": "command", "id": "b1", "action": "embed", "role": "code-embedding", "texts": ["x"]})
        await b.send({"type": "command", "id": "b2", "action": "containers"})
        await b.result("b1")
        await b.result("b2")
        assert time.monotonic() - started < 1.0
        await a.stop()  # master A goes away: its agent reconnects with backoff, on its own
        await wait_until(lambda: len(sleep.delays) >= 3, what="A's reconnect attempts")
        beats = len(b.of_type("heartbeat"))
        for i in range(3):
            await b.send(
                {"type": "command", "id": f"b-after-{i}", "action": "embed", "role": "code-embedding", "texts": ["y"]}
            )
            assert "embeddings" in await b.result(f"b-after-{i}")
        await wait_until(lambda: len(b.of_type("heartbeat")) >= beats + 2, what="B's heartbeats going on")
        agent_a, agent_b = sidecar.agents
        assert (agent_a.registrations, agent_b.registrations) == (1, 1)  # B's session never broke
    assert sleep.delays[:3] == [0.5, 1.0, 2.0]  # A's backoff, growing
    assert not [f for f in b.of_type("result") if f.get("id") == "slow"]
