"""The reference sidecar (sidecar/) over WebSocket against an in-test master and upstream: registering,
heartbeats with each server's status, the commands (embed, rerank, chat, models, config, ping) and their
error results, concurrency, keeping the upstream key to the upstream, reconnecting with backoff, and a
wrong fleet token.
"""

from __future__ import annotations

import logging
import time

import pytest
from pydantic import SecretStr

from samespace.head import free_port
from sidecar import Backoff, TransportMode
from tests.support.sidecar_agents import (
    ISSUED_ID,
    LOOPBACK,
    TOKEN,
    UPSTREAM_CANARY,
    UPSTREAM_MODEL,
    FakeUpstream,
    WsMaster,
    decode_row,
    embed_serve,
    make_settings,
    row_for,
    running,
    wait_until,
)

pytestmark = pytest.mark.timeout(60)


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
