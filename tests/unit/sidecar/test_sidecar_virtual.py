"""The sidecar's virtual containers (`--serve ROLE=openrouter:MODEL@UPSTREAM`) over WebSocket against an
in-test master, with the project's OpenRouter fake in process: announced only by the `containers`
command, the key's `config` frame (per container list, a bad payload changing nothing), the permit and
the key each command needs before OpenRouter is called, the pinned request bodies and the answers'
usage, 429 with Retry-After, and the key never leaving the sidecar.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
from pydantic import SecretStr

from sidecar.openrouter import parse_retry_after
from sidecar.wire import ConfigPayload, ContainersResult, key_config_frame
from tests.support.fakes.openrouter_fake import RetryAfterFormat, UpstreamBehaviour
from tests.support.sidecar_agents import (
    OR_BASE_URL,
    OR_KEY_A,
    OR_MODEL,
    OR_PIN,
    OR_RERANK_MODEL,
    FakeOpenRouter,
    FakeUpstream,
    WsMaster,
    decode_row,
    embed_serve,
    make_settings,
    or_serve,
    running,
    running_sidecar,
    wait_until,
)

pytestmark = pytest.mark.timeout(90)

EMBED_NAME = "ws-1-OR-CodeEmbedding"
RERANK_NAME = "ws-1-OR-Reranker"
NO_KEY = "no OpenRouter key from this master: push it with POST /admin/openrouter"


def settings_for(master: WsMaster, serves: list[str]) -> Any:
    return make_settings(master.url, serves, openrouter_base_url=OR_BASE_URL)


async def containers(master: WsMaster, command_id: str) -> dict[str, dict[str, Any]]:
    """The `containers` answer, by container name (validated against the shared wire first)."""
    await master.send({"type": "command", "id": command_id, "action": "containers"})
    result = await master.result(command_id)
    payload = {k: v for k, v in result.items() if k not in ("type", "id")}
    assert ContainersResult.model_validate(payload).model_dump(by_alias=True, mode="json") == payload
    return {row["name"]: row for row in payload["virtualContainers"]}


def embed(command_id: str, *, permit: str | None = "permit-1", role: str = "code-embedding") -> dict[str, Any]:
    frame = {"type": "command", "id": command_id, "action": "virtual-embed", "role": role, "texts": ["def f(): pass"]}
    return frame if permit is None else {**frame, "permit": permit}


async def push_key(master: WsMaster, config_id: str, key: str, names: list[str] | None = None) -> dict[str, Any]:
    await master.send(key_config_frame(config_id, SecretStr(key), names))
    return await master.result(config_id)


async def test_a_virtual_container_is_announced_by_the_containers_command_only(
    master: WsMaster, upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    openrouter = FakeOpenRouter()
    serves = [embed_serve(upstream), or_serve(), or_serve("reranker", OR_RERANK_MODEL, None)]
    async with running(settings_for(master, serves), openrouter=openrouter):
        await wait_until(lambda: len(master.of_type("heartbeat")) >= 2, what="heartbeats")
        rows = await containers(master, "c1")
    assert master.frames[0]["containers"] == ["ss-code-embedding"]  # register: the local one only
    for beat in master.of_type("heartbeat"):
        assert beat["containers"] == ["ss-code-embedding"]
        assert list(beat["statusData"]["containers"]) == ["code-embedding"]
        assert "OR-" not in str(beat) and "openrouter" not in str(beat)
    assert rows == {
        EMBED_NAME: {
            "name": EMBED_NAME,
            "role": "code-embedding",
            "model": OR_MODEL,
            "provider": OR_PIN,
            "dims": None,
            "state": "no-key",
            "keyHeld": False,
            "served": 0,
            "failures": 0,
            "lastError": None,
            "upstreamCalls": 0,
            "permitsUsed": 0,
        },
        RERANK_NAME: {**rows[RERANK_NAME], "role": "reranker", "model": OR_RERANK_MODEL, "provider": None},
    }
    waiting = [r.getMessage() for r in caplog.records if "waits for the OpenRouter key" in r.getMessage()]
    assert waiting == [
        f"{EMBED_NAME} waits for the OpenRouter key from {master.url}: push it with POST /admin/openrouter",
        f"{RERANK_NAME} waits for the OpenRouter key from {master.url}: push it with POST /admin/openrouter",
    ]  # once per registration
    assert openrouter.requests == []


async def test_a_virtual_command_needs_a_permit_and_this_masters_key_before_openrouter(master: WsMaster) -> None:
    openrouter = FakeOpenRouter()
    async with running(settings_for(master, [or_serve()]), openrouter=openrouter):
        await wait_until(lambda: master.of_type("heartbeat"), what="a heartbeat")
        await master.send(embed("e1"))
        assert await master.result("e1") == {"type": "result", "id": "e1", "error": NO_KEY}
        assert (await push_key(master, "k1", OR_KEY_A))["ok"] is True
        await master.send(embed("e2", permit=None))
        await master.send(embed("e3", permit=""))
        rerank = {"type": "command", "id": "e4", "action": "virtual-rerank", "role": "code-embedding", "query": "q"}
        await master.send({**rerank, "documents": ["a"]})
        assert (await master.result("e2"))["error"] == "bad command: permit: Field required"
        assert (await master.result("e3"))["error"].startswith("bad command: permit: String should have at least")
        assert (await master.result("e4"))["error"] == "bad command: permit: Field required"
        await master.send(embed("e5", role="nope"))
        assert "unknown virtual container 'nope'" in (await master.result("e5"))["error"]
        rows = await containers(master, "c1")
    assert openrouter.requests == []  # not one of them reached OpenRouter
    assert rows[EMBED_NAME]["permitsUsed"] == 0 and rows[EMBED_NAME]["upstreamCalls"] == 0
    assert rows[EMBED_NAME]["state"] == "ready" and rows[EMBED_NAME]["keyHeld"] is True


async def test_the_config_frame_sets_the_key_for_the_named_containers_and_a_bad_one_changes_nothing(
    master: WsMaster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with running(settings_for(master, [or_serve(), or_serve("reranker", OR_RERANK_MODEL)])):
        await wait_until(lambda: master.of_type("heartbeat"), what="a heartbeat")
        assert await push_key(master, "k1", OR_KEY_A, [RERANK_NAME]) == {"type": "result", "id": "k1", "ok": True}
        rows = await containers(master, "c1")
        assert (rows[EMBED_NAME]["keyHeld"], rows[RERANK_NAME]["keyHeld"]) == (False, True)
        assert (rows[EMBED_NAME]["state"], rows[RERANK_NAME]["state"]) == ("no-key", "ready")
        await master.send(embed("e1"))
        assert (await master.result("e1"))["error"] == NO_KEY  # the key came for the reranker only
        bad = [
            ({"openrouter": {"apiKey": 42}}, "bad config: openrouter.apiKey: Input should be a valid string"),
            ({"openrouter": {"apiKey": OR_KEY_A, "containers": "all"}}, "bad config: openrouter.containers:"),
            ({"openrouter": {"apiKey": OR_KEY_A, "containers": ["ws-1-OR-Chat"]}}, "unknown virtual container"),
            ({"openrouter": {"apiKey": " "}}, "bad config: openrouter.apiKey: the key is empty"),
            ({"openrouter": "yes"}, "bad config: openrouter:"),
        ]
        for i, (payload, error) in enumerate(bad):
            await master.send({"type": "config", "id": f"b{i}", "payload": payload})
            assert error in (await master.result(f"b{i}"))["error"]
        await master.send({"type": "config", "id": "b9", "payload": "not an object"})
        assert (await master.result("b9"))["error"] == "bad config: payload: expected a JSON object"
        assert await containers(master, "c2") == rows  # nothing changed
        assert (await push_key(master, "k2", OR_KEY_A))["ok"] is True  # no list: every virtual container
        assert all(row["keyHeld"] for row in (await containers(master, "c3")).values())
        await master.send({"type": "config", "id": "k3", "payload": {"openrouter": {"apiKey": None}}})
        assert (await master.result("k3"))["ok"] is True  # a null key withdraws it
        assert not any(row["keyHeld"] for row in (await containers(master, "c4")).values())
    ours = [r.getMessage() for r in caplog.records if r.name.startswith("sidecar")]
    assert f"an OpenRouter key arrived from {master.url} for {RERANK_NAME}" in ours
    assert f"an OpenRouter key arrived from {master.url} for {EMBED_NAME}, {RERANK_NAME}" in ours
    assert f"the OpenRouter key from {master.url} was withdrawn for {EMBED_NAME}, {RERANK_NAME}" in ours
    logged = "\n".join(f"{r.getMessage()} {r.args!r}" for r in caplog.records if r.name.startswith("sidecar"))
    assert OR_KEY_A not in logged and OR_KEY_A not in "\n".join(master.raw_messages)
    assert ConfigPayload.model_validate({"openrouter": {"apiKey": OR_KEY_A}}).openrouter is not None


async def test_virtual_embed_rerank_and_key_info_through_openrouter(master: WsMaster) -> None:
    openrouter = FakeOpenRouter()
    serves = [or_serve(), or_serve("reranker", OR_RERANK_MODEL, OR_PIN)]
    async with running(settings_for(master, serves), openrouter=openrouter):
        await wait_until(lambda: master.of_type("heartbeat"), what="a heartbeat")
        await push_key(master, "k1", OR_KEY_A)
        await master.send({**embed("e1"), "texts": ["def add(a, b):", "ls -la"]})
        embedded = await master.result("e1", timeout_s=60)  # the fake's first call loads its MiniLM
        await master.send(
            {
                "type": "command",
                "id": "r1",
                "action": "virtual-rerank",
                "role": RERANK_NAME,  # the container's name names it too
                "permit": "p-2",
                "query": "list files",
                "documents": ["def add(a, b):", "ls -la /tmp", "# heading"],
                "topN": 2,
            }
        )
        reranked = await master.result("r1", timeout_s=30)
        await master.send({"type": "command", "id": "i1", "action": "virtual-key-info"})
        key_info = await master.result("i1")
        rows = await containers(master, "c1")
    assert openrouter.bodies("/embeddings") == [
        {
            "model": OR_MODEL,
            "input": ["def add(a, b):", "ls -la"],
            "encoding_format": "float",
            "provider": {"order": [OR_PIN], "only": [OR_PIN], "allow_fallbacks": False},
        }
    ]
    assert openrouter.bodies("/rerank") == [
        {
            "model": OR_RERANK_MODEL,
            "query": "list files",
            "documents": ["def add(a, b):", "ls -la /tmp", "# heading"],
            "top_n": 2,
            "provider": {"order": [OR_PIN], "only": [OR_PIN], "allow_fallbacks": False},
        }
    ]
    assert set(openrouter.bearers()) == {f"Bearer {OR_KEY_A}"}
    assert set(embedded) == {"type", "id", "source", "embeddings", "dims", "model", "provider", "usage"}
    assert (embedded["source"], embedded["dims"], embedded["model"], embedded["provider"]) == (
        "openrouter",
        384,
        OR_MODEL,
        OR_PIN,
    )
    assert [len(decode_row(row)) for row in embedded["embeddings"]] == [384, 384]
    usage = embedded["usage"]
    assert set(usage) == {"promptTokens", "completionTokens", "totalTokens", "cost"}
    assert usage["promptTokens"] == usage["totalTokens"] == 5 and usage["cost"] == pytest.approx(5e-8)
    assert reranked["source"] == "openrouter" and reranked["model"] == OR_RERANK_MODEL
    assert len(reranked["results"]) == 2 and reranked["results"][0]["index"] == 1  # top 2, best first
    assert reranked["results"][0]["relevance_score"] > reranked["results"][1]["relevance_score"]
    assert reranked["usage"]["totalTokens"] > 0
    assert key_info["response"]["data"]["label"] == "key-a" and OR_KEY_A not in str(key_info)
    row = rows[EMBED_NAME]
    assert (row["state"], row["served"], row["failures"], row["upstreamCalls"], row["permitsUsed"]) == (
        "ready",
        1,
        0,
        1,
        1,
    )
    assert row["dims"] == 384 and rows[RERANK_NAME]["served"] == 1


@pytest.mark.parametrize(("fmt", "low", "high"), [("seconds", 7.0, 7.0), ("http-date", 5.0, 8.0)])
async def test_a_429_is_an_error_result_with_status_and_retry_after(
    master: WsMaster, fmt: RetryAfterFormat, low: float, high: float
) -> None:
    behaviour = UpstreamBehaviour(fail_429_every=1, retry_after_s=7, retry_after_format=fmt)
    openrouter = FakeOpenRouter(**{OR_PIN: behaviour})
    async with running(settings_for(master, [or_serve()]), openrouter=openrouter):
        await wait_until(lambda: master.of_type("heartbeat"), what="a heartbeat")
        await push_key(master, "k1", OR_KEY_A)
        await master.send(embed("e1"))
        result = await master.result("e1")
        rows = await containers(master, "c1")
    assert set(result) == {"type", "id", "error", "status", "retryAfterS"}
    assert result["status"] == 429 and low <= result["retryAfterS"] <= high
    assert result["error"] == "openrouter 429: Provider returned error: rate limited"
    row = rows[EMBED_NAME]
    assert (row["state"], row["failures"], row["served"], row["upstreamCalls"], row["permitsUsed"]) == (
        "failing",
        1,
        0,
        1,
        1,
    )
    assert row["lastError"] == result["error"]


def test_retry_after_reads_seconds_and_http_dates() -> None:
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert parse_retry_after("7", now=now) == 7.0 and parse_retry_after(" 1.5 ", now=now) == 1.5
    assert parse_retry_after(format_datetime(now + timedelta(seconds=30), usegmt=True), now=now) == 30.0
    assert parse_retry_after(format_datetime(now - timedelta(seconds=30), usegmt=True), now=now) == 0.0
    assert parse_retry_after("-3", now=now) == 0.0
    for unreadable in (None, "", "soon", "nan", "inf"):
        assert parse_retry_after(unreadable, now=now) is None


async def test_other_failures_carry_the_status_and_an_unpinned_embedding_is_never_sent(master: WsMaster) -> None:
    openrouter = FakeOpenRouter(**{OR_PIN: UpstreamBehaviour(fail_5xx_count=5, fail_5xx_status=503)})
    serves = [or_serve(), or_serve("embedding", OR_MODEL, None)]
    async with running(settings_for(master, serves), openrouter=openrouter):
        await wait_until(lambda: master.of_type("heartbeat"), what="a heartbeat")
        await push_key(master, "k1", OR_KEY_A)
        await master.send(embed("e1"))
        failed = await master.result("e1")
        await master.send(embed("e2", role="embedding"))
        unpinned = await master.result("e2")
        rows = await containers(master, "c1")
    assert failed == {
        "type": "result",
        "id": "e1",
        "error": "openrouter 503: Provider returned error (503)",
        "status": 503,
    }
    assert unpinned == {
        "type": "result",
        "id": "e2",
        "error": "ws-1-OR-Embedding names no upstream: embeddings must pin one",
    }
    assert rows["ws-1-OR-Embedding"]["provider"] is None and rows["ws-1-OR-Embedding"]["upstreamCalls"] == 0
    assert len(openrouter.requests) == 1  # the pinned one only


async def test_the_key_never_leaves_the_sidecar(
    master: WsMaster, upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    """A canary key: pushed, used (a 401 and a 429 answer), asked about; then looked for everywhere."""
    caplog.set_level(logging.DEBUG)
    openrouter = FakeOpenRouter(**{OR_PIN: UpstreamBehaviour(fail_429_every=1)})
    canary = "sk-or-v1-CANARY-not-a-known-key-0000000000"
    serves = [embed_serve(upstream), or_serve()]
    async with running_sidecar(settings_for(master, serves), openrouter=openrouter) as (sidecar, _):
        await wait_until(lambda: master.of_type("heartbeat"), what="a heartbeat")
        await push_key(master, "k1", canary)
        await master.send(embed("e1"))
        refused = await master.result("e1")  # the fake does not know the canary: 401
        await master.send({"type": "command", "id": "i1", "action": "virtual-key-info"})
        await master.result("i1")
        await push_key(master, "k2", OR_KEY_A)
        await master.send(embed("e2"))
        await master.result("e2")
        await containers(master, "c1")
        beats = len(master.of_type("heartbeat"))
        await wait_until(lambda: len(master.of_type("heartbeat")) > beats, what="a heartbeat after the keys")
        reprs = [repr(sidecar), repr(sidecar.agents), repr(sidecar.workstation), repr(sidecar.virtual)]
        reprs.append(repr(vars(sidecar.virtual)))
        reprs.append(repr(sidecar.settings))
    assert refused["status"] == 401 and refused["error"] == "openrouter 401: User not found."
    assert f"Bearer {canary}" in openrouter.bearers()  # it was used, as the bearer only
    seen_by_master = "\n".join(master.handshake_headers + master.raw_messages)
    # Every record but the in-test master's own (its websockets server logs the frames it sends).
    ours = [r for r in caplog.records if not r.name.startswith("websockets.server")]
    logged = "\n".join(f"{r.getMessage()} {r.args!r} {r.exc_text or ''}" for r in ours)
    for secret in (canary, OR_KEY_A):
        assert secret not in seen_by_master
        assert secret not in logged
        assert all(secret not in text for text in reprs)
    assert "an OpenRouter key arrived" in logged and "HTTP Request: POST http://openrouter.test" in logged
