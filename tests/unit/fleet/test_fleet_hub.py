"""The fleet hub answers the sidecar endpoints: which HTTP status and body for which fleet outcome,
what a socket is sent, and one frame cap on both sides of the wire. No Ray: a fake clock and sleep."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import sidecar.wire
import sidecar.ws_transport
from cluster.config.store import ConfigStore
from cluster.fleet import frames
from cluster.fleet.agent_registry import BAD_CREDENTIAL, UNKNOWN_AGENT
from cluster.fleet.hub import CLOSE_SOCKET, FleetHub
from cluster.fleet.identity import credential_digest
from cluster.settings import SamespaceSettings
from serve_apps.mcp._sidecar_routes import BODY_LIMITS, frame_too_large

REPO_ROOT = Path(__file__).resolve().parents[3]
AGENT_URL = "http://ws-7:8098"


async def sleep_forever(seconds: float) -> None:
    """The liveness loop is not driven here: it waits until the hub stops it."""
    await asyncio.Event().wait()


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[FleetHub]:
    settings = SamespaceSettings(admin={"config_path": tmp_path / "cluster.json"})
    fleet_hub = FleetHub(settings, ConfigStore(settings.admin.config_path), clock=lambda: 100.0, sleep=sleep_forever)
    yield fleet_hub
    fleet_hub.stop_liveness()


def frame(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


def register(hub: FleetHub) -> tuple[str, str]:
    status, body = hub.http_register(frame(type="register", agentUrl=AGENT_URL, hostname="ws-7"))
    assert status == 200 and body["type"] == "registered"
    return body["agentId"], credential_digest(body["credential"])


async def test_an_http_call_from_an_unknown_agent_is_409_and_a_wrong_credential_403(hub: FleetHub) -> None:
    beat = frame(type="heartbeat", agentUrl=AGENT_URL)
    assert await hub.http_heartbeat(beat, None, None) == (409, {"type": "error", "message": UNKNOWN_AGENT})
    assert await hub.http_heartbeat(beat, "a-nobody", None) == (409, {"type": "error", "message": UNKNOWN_AGENT})
    agent, digest = register(hub)
    assert await hub.http_poll(frame(waitS=0), agent, "0" * 64) == (403, {"type": "error", "message": BAD_CREDENTIAL})
    unproven = hub.http_result(frame(type="result", id="x"), agent, None)
    assert unproven == (403, {"type": "error", "message": BAD_CREDENTIAL})
    assert await hub.http_heartbeat(beat, agent, digest) == (200, {"ok": True, "commands": []})


async def test_the_wrong_frame_for_a_call_is_400_naming_what_was_expected_or_what_was_wrong(hub: FleetHub) -> None:
    assert hub.http_register(frame(type="pong")) == (400, {"type": "error", "message": "expected a register frame"})
    status, body = hub.http_register(b"{not json")
    assert (status, body) == (400, {"type": "error", "message": "invalid JSON"})
    agent, digest = register(hub)
    wrong = await hub.http_heartbeat(frame(type="pong"), agent, digest)
    assert wrong == (400, {"type": "error", "message": "expected a heartbeat frame"})
    assert hub.http_result(frame(type="heartbeat"), agent, digest)[0] == 400
    assert (await hub.http_poll(b"[]", agent, digest))[0] == 400
    other_url = await hub.http_poll(frame(agentUrl="http://ws-8:8098", waitS=0), agent, digest)
    assert other_url == (403, {"type": "error", "message": "poll: agentUrl is not this agent's"})


async def test_a_result_for_no_pending_command_is_404_and_a_second_register_of_a_live_url_409(hub: FleetHub) -> None:
    agent, digest = register(hub)
    missing = hub.http_result(frame(type="result", id="cmd-1", ok=True), agent, digest)
    assert missing == (404, {"type": "error", "message": "no pending command with that id"})
    status, body = hub.http_register(frame(type="register", agentUrl=AGENT_URL))
    assert status == 409 and body["type"] == "error"


async def test_a_socket_the_fleet_does_not_know_is_told_to_close(hub: FleetHub) -> None:
    assert await hub.ws_next("c-unknown", 0) == [{"type": CLOSE_SOCKET, "reason": "closed by the fleet"}]


def test_the_master_and_the_sidecar_share_one_wire_and_one_frame_cap() -> None:
    assert frames.RegisterFrame is sidecar.wire.RegisterFrame
    assert frames.MAX_RESULT_BYTES == sidecar.wire.MAX_RESULT_BYTES == 8 * 1024 * 1024
    # The master refuses a message over the cap before parsing it; the sidecar takes none larger.
    cap = sidecar.wire.MAX_RESULT_BYTES
    assert frame_too_large("x" * cap) is None and frame_too_large("x" * (cap + 1)) is not None
    assert cap == sidecar.ws_transport.MAX_MESSAGE_BYTES
    assert max(BODY_LIMITS.values()) == cap and min(BODY_LIMITS.values()) == sidecar.wire.MAX_FRAME_BYTES


@pytest.mark.parametrize("module", ["sidecar.wire", "cluster.fleet.frames"])
def test_importing_the_wire_does_not_start_the_sidecar_agent(module: str) -> None:
    code = f"import sys, {module}\nprint(','.join(sorted({{'sidecar.agent', 'websockets'}} & set(sys.modules))))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == ""
