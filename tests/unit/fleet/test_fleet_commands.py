"""Commands to sidecars: correlation by id, failure on disconnect, and sidecar providers."""

from __future__ import annotations

import asyncio
import base64
import json

import numpy as np
import pytest

from cluster.errors import MalformedResponse, UpstreamTimeout, UpstreamUnavailable
from cluster.fleet.agent_registry import Fleet
from cluster.fleet.commands import CommandDesk, new_command_id
from cluster.fleet.frames import ResultFrame, parse_frame
from cluster.fleet.sidecar_providers import SidecarCalls, decode_embeddings, sidecar_providers
from cluster.roles import Role
from cluster.settings import FleetSettings


def _result(raw: str) -> ResultFrame:
    frame = parse_frame(raw)
    assert isinstance(frame, ResultFrame)
    return frame


def test_command_ids_have_the_peer_shape_and_differ() -> None:
    ids = {new_command_id() for _ in range(100)}
    assert len(ids) == 100 and all(i.startswith("cmd-") and len(i.split("-")[2]) == 6 for i in ids)


async def test_a_result_completes_only_its_own_command_of_its_own_agent() -> None:
    desk = CommandDesk(new_id=iter(["cmd-1", "cmd-2"]).__next__)
    first = asyncio.ensure_future(desk.send("A", "ws:c1", "p", "embed", {"texts": ["x"]}, 5))
    second = asyncio.ensure_future(desk.send("B", "http:B", "p", "embed", {"texts": ["y"]}, 5))
    await asyncio.sleep(0)
    assert await desk.take("ws:c1", 0) == [{"type": "command", "id": "cmd-1", "action": "embed", "texts": ["x"]}]
    assert desk.agent_of("cmd-2") == "B"
    assert not desk.resolve("A", _result('{"type": "result", "id": "cmd-2", "ok": 1}'))  # B's command
    assert not desk.resolve("A", _result('{"type": "result", "id": "cmd-9"}'))
    assert desk.resolve("A", _result('{"type": "result", "id": "cmd-1", "rows": 1}'))
    assert await first == {"rows": 1}
    assert desk.resolve("B", _result('{"type": "result", "id": "cmd-2", "error": "upstream 503"}'))
    with pytest.raises(UpstreamUnavailable, match="upstream 503"):
        await second


async def test_a_disconnect_fails_every_command_the_agent_holds_and_a_silent_one_times_out() -> None:
    desk = CommandDesk()
    held = [asyncio.ensure_future(desk.send("A", "ws:c1", "p", "embed", {}, 30)) for _ in range(3)]
    other = asyncio.ensure_future(desk.send("B", "ws:c2", "p", "embed", {}, 0.05))
    await asyncio.sleep(0)
    assert desk.in_flight("A") == 3 and desk.fail_agent("A", "sidecar disconnected") == 3
    for future in held:
        with pytest.raises(UpstreamUnavailable, match="disconnected"):
            await future
    with pytest.raises(UpstreamTimeout, match="no result within"):
        await other
    assert await desk.take("ws:c2", 0) == []  # a timed-out command is not delivered late


async def test_a_closed_socket_fails_what_was_sent_on_it_and_nothing_else() -> None:
    desk = CommandDesk()
    old = asyncio.ensure_future(desk.send("A", "ws:c1", "p", "embed", {}, 30))  # a superseded socket
    new = asyncio.ensure_future(desk.send("A", "ws:c2", "p", "embed", {}, 30))
    await asyncio.sleep(0)
    assert desk.fail_outbox("ws:c1", "sidecar disconnected") == 1
    with pytest.raises(UpstreamUnavailable, match="disconnected"):
        await old
    assert not new.done() and desk.in_flight("A") == 1
    [command] = await desk.take("ws:c2", 0)
    desk.resolve("A", _result(json.dumps({"type": "result", "id": command["id"], "ok": 1})))
    assert await new == {"ok": 1}


async def test_take_waits_for_the_first_frame() -> None:
    desk = CommandDesk()
    waiting = asyncio.ensure_future(desk.take("http:A", 5))
    await asyncio.sleep(0.01)
    desk.post("http:A", {"type": "ping"})
    assert await asyncio.wait_for(waiting, 1) == [{"type": "ping"}]


AGENT_ID = "a1b2c3d4e5f6"


def _fleet_with(model: str | None, status: str = "running") -> Fleet:
    now = [0.0]
    fleet = Fleet(lambda: now[0], FleetSettings(stale_after_s=30), new_id=lambda: AGENT_ID)
    fleet.opened("c")
    fleet.on_frame("c", parse_frame('{"type": "register", "agentUrl": "http://ws1:9100", "hostname": "ws1"}'))
    container = {"name": "ss-code-embedding", "status": status, "endpoint": "http://127.0.0.1:8080/v1"}
    if model:
        container["model"] = model
    import json

    fleet.on_frame(
        "c", parse_frame(json.dumps({"type": "heartbeat", "statusData": {"containers": {"code-embedding": container}}}))
    )
    return fleet


def test_a_fresh_running_container_is_an_eligible_local_sidecar_provider() -> None:
    infos, routes = sidecar_providers(_fleet_with("minilm").hosts(), 384)
    [info] = infos
    assert info.name == f"sidecar-ws1:9100-{AGENT_ID}-code-embedding" and info.kind.value == "local"
    assert info.hosted == "sidecar"
    assert info.eligible and info.roles == [Role.CODE_EMBEDDING] and info.identity is not None
    assert info.identity.width == 384 and info.identity.model == "sidecar:minilm"
    assert routes[info.name].agent == AGENT_ID and routes[info.name].model == "minilm"


@pytest.mark.parametrize(
    ("model", "status", "reason"), [("m", "stopped", "not running"), (None, "running", "no model reported")]
)
def test_a_provider_that_cannot_serve_says_why(model: str | None, status: str, reason: str) -> None:
    [info], _ = sidecar_providers(_fleet_with(model, status).hosts(), 384)
    assert not info.eligible and reason in (info.reason or "")


def test_a_stale_host_leaves_the_lanes() -> None:
    now = [0.0]
    fleet = Fleet(lambda: now[0], FleetSettings(stale_after_s=30), new_id=lambda: AGENT_ID)
    fleet.opened("c")
    fleet.on_frame("c", parse_frame('{"type": "register", "agentUrl": "http://ws1:9100"}'))
    fleet.on_frame(
        "c",
        parse_frame(
            '{"type": "heartbeat", "statusData": {"containers": {"code-embedding": '
            '{"status": "running", "model": "m"}}}}'
        ),
    )
    now[0] = 31.0
    [info], _ = sidecar_providers(fleet.hosts(), 384)
    assert not info.eligible and info.reason == "no recent heartbeat"
    assert fleet.newly_stale() == [AGENT_ID] and fleet.newly_stale() == []


def test_embeddings_decode_from_base64_float32_or_float_lists_and_bad_ones_are_refused() -> None:
    rows = np.random.default_rng(0).standard_normal((3, 8)).astype("<f4")
    encoded = [base64.b64encode(r.tobytes()).decode() for r in rows]
    assert np.array_equal(decode_embeddings({"embeddings": encoded}, 3, "p"), rows)
    assert np.allclose(decode_embeddings({"embeddings": rows.tolist()}, 3, "p"), rows)
    for bad in (
        {"embeddings": encoded[:2]},
        {"embeddings": ["!!"] * 3},
        {"embeddings": [[1.0], [1.0, 2.0], [1.0]]},
        {"embeddings": [[float("nan")]] * 3},
        {},
    ):
        with pytest.raises(MalformedResponse):
            decode_embeddings(bad, 3, "p")


async def test_sidecar_calls_send_the_commands_the_reference_sidecar_answers() -> None:
    fleet = _fleet_with("minilm")
    _, routes = sidecar_providers(fleet.hosts(), 384)
    sent: list[tuple[str, str, dict]] = []

    async def send(agent: str, provider: str, action: str, payload: dict) -> dict:
        sent.append((agent, action, payload))
        if action == "embed":
            return {"embeddings": [[0.0] * 384 for _ in payload["texts"]]}
        if action == "rerank":
            return {"results": [{"index": 1, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.1}]}
        if action == "chat":
            return {"response": {"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}]}}
        return {"response": {"data": [{"id": "minilm", "max_model_len": 4096}]}}

    calls = SidecarCalls(send, lambda: routes)
    name = next(iter(routes))
    assert (await calls.embed(name, ["a", "b"])).shape == (2, 384)
    assert await calls.rerank(name, "q", ["x", "y"]) == [0.1, 0.9]
    assert (await calls.chat(name, [{"role": "user", "content": "hello"}])).content == "hi"
    assert await calls.context_window(name) == 4096
    assert [a for _, a, _ in sent] == ["embed", "rerank", "chat", "models"]
    assert sent[0][2] == {"role": "code-embedding", "model": "minilm", "texts": ["a", "b"]}
    assert sent[2][2]["request"]["model"] == "minilm"


def test_a_closed_socket_leaves_the_lanes_at_once_not_after_the_staleness_window() -> None:
    fleet = _fleet_with("minilm")
    assert fleet.reachable(AGENT_ID)
    fleet.closed("c")
    [info], _ = sidecar_providers(fleet.hosts(), 384)
    assert not fleet.reachable(AGENT_ID) and not info.eligible and "disconnected" in (info.reason or "")
