"""The reference sidecar's HTTP fallback (register, heartbeat, poll, result under /pfx/sidecar/) against
an in-test HTTP master: falling back from WebSocket, commands from poll and heartbeat answers, the agent
id and credential on every call, re-registering when the master forgets the agent, a wrong fleet token.
"""

from __future__ import annotations

import logging

import pytest

from sidecar import TransportMode
from tests.support.sidecar_agents import (
    ISSUED_ID,
    TOKEN,
    UPSTREAM_MODEL,
    FakeUpstream,
    HttpMaster,
    decode_row,
    embed_serve,
    make_settings,
    row_for,
    running,
    wait_until,
)

pytestmark = pytest.mark.timeout(60)


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
