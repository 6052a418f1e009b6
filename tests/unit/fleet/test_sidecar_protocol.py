"""The sidecar wire protocol: peer frame shapes, hostile input refused with an error frame, capabilities."""

from __future__ import annotations

import json

import pytest

from cluster.fleet.frames import (
    MAX_FRAME_BYTES,
    MAX_RESULT_BYTES,
    FrameRejected,
    HeartbeatFrame,
    RegisterFrame,
    ResultFrame,
    capabilities,
    command_frame,
    config_frame,
    error_frame,
    parse_frame,
    registered_frame,
)
from cluster.roles import Role

HEARTBEAT = {
    "type": "heartbeat",
    "containers": ["ss-code-embedding", "ss-rlm"],
    "activeRequests": 2,
    "statusData": {
        "agentUrl": "http://ws-7:8098",
        "hostname": "ws-7.local",
        "mode": "gpu",
        "containers": {
            "code-embedding": {
                "name": "ss-code-embedding",
                "status": "running",
                "type": "tei",
                "endpoint": "http://127.0.0.1:8081",
                "config": {"model": "minilm", "port": 8081},
            },
            "rlm": {"name": "ss-rlm", "status": "stopped", "model": "qwen3-8b-rlm", "config": {"port": 8100}},
            "completion": {
                "name": "ss-completion",
                "status": "running",
                "endpoint": "http://127.0.0.1:8000",
                "loadedModels": [{"name": "qwen3-coder", "size": 1, "gpuPercent": 100}],
            },
            "cuda": {"name": "ss-cuda", "status": "running"},
        },
        "gpus": [{"index": 0, "name": "RTX 4090", "memoryMb": 24564}],
        "version": "2.4.0",
    },
}


def test_register_heartbeat_and_result_parse_with_the_peer_wire_shapes() -> None:
    register = parse_frame(
        json.dumps(
            {
                "type": "register",
                "agentUrl": "http://ws-7:8098",
                "hostname": "ws-7",
                "containers": ["ss-code-embedding"],
                "extra": 1,
            }
        )
    )
    assert isinstance(register, RegisterFrame) and register.agent_url == "http://ws-7:8098"
    heartbeat = parse_frame(json.dumps(HEARTBEAT))
    assert isinstance(heartbeat, HeartbeatFrame)
    assert heartbeat.agent == "http://ws-7:8098" and heartbeat.active_requests == 2
    result = parse_frame(json.dumps({"type": "result", "id": "cmd-1", "embeddings": [[0.1]], "model": "m"}))
    assert isinstance(result, ResultFrame) and result.payload() == {"embeddings": [[0.1]], "model": "m"}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{not json", "invalid JSON"),
        (b"\xff\xfe", "invalid JSON"),
        ("[1, 2]", "JSON object"),
        ('{"agentUrl": "x"}', "missing type"),
        ('{"type": "reboot"}', "unknown type"),
        ('{"type": "register"}', "agentUrl"),
        ('{"type": "register", "agentUrl": ""}', "agentUrl"),
        ('{"type": "heartbeat", "activeRequests": -3}', "activeRequests"),
        ('{"type": "result"}', "id"),
        ('{"type": "register", "agentUrl": "x", "containers": "ss-rlm"}', "containers"),
        ('"x' + "a" * MAX_RESULT_BYTES + '"', "too large"),
        ('{"type": "heartbeat", "pad": "' + "a" * MAX_FRAME_BYTES + '"}', "too large"),
        ('{"type": "pong", "pad": "' + "a" * MAX_FRAME_BYTES + '"}', "too large"),
        ("[" * 200_000, "nested too deeply"),
        ('{"type": "register", "agentUrl": "x", "agentId": "' + "a" * 65 + '"}', "agentId"),
    ],
)
def test_hostile_frames_become_an_error_frame_naming_the_problem(raw: str | bytes, message: str) -> None:
    rejected = parse_frame(raw)
    assert isinstance(rejected, FrameRejected) and message in rejected.message
    assert rejected.frame() == {"type": "error", "message": rejected.message}


def test_a_result_may_carry_a_batch_of_vectors_past_the_frame_limit() -> None:
    rows = ["A" * 2000] * 200  # ~400 KB of base64 rows: over the 256 KB frame limit, under the result limit
    raw = json.dumps({"type": "result", "id": "cmd-1", "embeddings": rows, "dims": 384})
    assert len(raw) > MAX_FRAME_BYTES
    result = parse_frame(raw)
    assert isinstance(result, ResultFrame) and len(result.payload()["embeddings"]) == 200


def test_an_error_never_echoes_the_input() -> None:
    secret = "sk-or-v1-" + "ab" * 24
    rejected = parse_frame(json.dumps({"type": "register", "agentUrl": 5, "token": secret}))
    assert isinstance(rejected, FrameRejected) and secret not in rejected.message


def test_outbound_frames_have_the_peer_shapes() -> None:
    assert registered_frame("a1b2c3d4e5f6", "cred") == {
        "type": "registered",
        "ok": True,
        "agentId": "a1b2c3d4e5f6",
        "credential": "cred",
    }
    assert error_frame("heartbeat before register") == {"type": "error", "message": "heartbeat before register"}
    assert command_frame("cmd-1", "embed", {"texts": ["a"]}) == {
        "type": "command",
        "id": "cmd-1",
        "action": "embed",
        "texts": ["a"],
    }
    assert config_frame("cfg-1", {"minOnline": 1}) == {"type": "config", "id": "cfg-1", "payload": {"minOnline": 1}}
    with pytest.raises(ValueError, match=r"payload may not set \['id'\]"):
        command_frame("cmd-2", "embed", {"id": "spoof"})


def test_capabilities_say_which_roles_the_host_serves_right_now() -> None:
    heartbeat = parse_frame(json.dumps(HEARTBEAT))
    assert isinstance(heartbeat, HeartbeatFrame)
    found = capabilities(heartbeat.status_data)
    assert set(found) == {Role.CODE_EMBEDDING, Role.RLM, Role.CODE_ASSISTANT}  # 'cuda' maps to no role
    code = found[Role.CODE_EMBEDDING]
    assert (
        code.available and code.models == ["minilm"] and code.endpoint == "http://127.0.0.1:8081" and code.port == 8081
    )
    assert not found[Role.RLM].available and found[Role.RLM].endpoint is None
    assert found[Role.CODE_ASSISTANT].models == ["qwen3-coder"]
