"""The fleet's liveness and registry rules on a fake clock (the WebSocket endpoint only relays)."""

from __future__ import annotations

import json
from typing import Any

from cluster.fleet import Fleet, FleetSettings, HostRecord
from cluster.roles import Role
from cluster.sidecar_protocol import parse_frame
from fakes.virtual_time import VirtualClock

PONG = parse_frame('{"type": "pong"}')

AGENT = "http://ws-7:8098"


def register(agent: str = AGENT, hostname: str = "ws-7") -> Any:
    return parse_frame(json.dumps({"type": "register", "agentUrl": agent, "hostname": hostname}))


def heartbeat(status: str = "running", agent: str | None = None, active: int = 0) -> Any:
    frame: dict[str, Any] = {"type": "heartbeat", "activeRequests": active, "statusData": {
        "agentUrl": AGENT, "hostname": "ws-7",
        "containers": {"code-embedding": {"status": status, "endpoint": "http://127.0.0.1:8081",
                                          "config": {"model": "minilm", "port": 8081}}}}}
    if agent is not None:
        frame["agentUrl"] = agent
    return parse_frame(json.dumps(frame))


def fleet_with(clock: VirtualClock, saved: list[dict[str, HostRecord]] | None = None) -> Fleet:
    return Fleet(clock, FleetSettings(), persist=(saved.append if saved is not None else None))


def test_register_is_answered_registered_and_heartbeats_make_the_host_serve() -> None:
    clock, saved = VirtualClock(), []
    fleet = fleet_with(clock, saved)
    fleet.opened("c1")
    assert fleet.on_frame("c1", register()).frames == [{"type": "registered", "ok": True}]
    assert fleet.serving(Role.CODE_EMBEDDING) == []  # registered, but no running container reported yet
    assert fleet.on_frame("c1", heartbeat(active=3)).frames == []
    (host,) = fleet.serving(Role.CODE_EMBEDDING)
    assert host.transport == "ws" and host.active_requests == 3
    assert host.capabilities[Role.CODE_EMBEDDING].endpoint == "http://127.0.0.1:8081"
    assert len(saved) == 2  # the new agent, then its capabilities


def test_the_registry_is_written_only_when_durable_facts_change() -> None:
    clock, saved = VirtualClock(), []
    fleet = fleet_with(clock, saved)
    fleet.opened("c1")
    fleet.on_frame("c1", register())
    for _ in range(50):
        clock.now += 5
        fleet.on_frame("c1", heartbeat(active=clock.now % 3))  # active requests change; the file does not
    assert len(saved) == 2
    fleet.on_frame("c1", heartbeat(status="exited"))
    assert len(saved) == 3 and fleet.serving(Role.CODE_EMBEDDING) == []


def test_a_host_that_stops_heartbeating_leaves_the_lanes() -> None:
    clock = VirtualClock()
    fleet = fleet_with(clock)
    fleet.opened("c1")
    fleet.on_frame("c1", register())
    fleet.on_frame("c1", heartbeat())
    clock.now += 29
    assert fleet.serving(Role.CODE_EMBEDDING)
    clock.now += 2
    assert fleet.serving(Role.CODE_EMBEDDING) == [] and not fleet.hosts()[0].fresh


def test_frames_before_register_and_bad_frames_get_error_frames_and_no_entry() -> None:
    clock = VirtualClock()
    fleet = fleet_with(clock)
    fleet.opened("c1")
    assert fleet.on_frame("c1", heartbeat()).frames == [{"type": "error", "message": "heartbeat before register"}]
    assert fleet.on_frame("c1", parse_frame("{nope")).frames[0]["type"] == "error"
    assert fleet.on_frame("ghost", register()).close
    assert fleet.hosts() == []


def test_liveness_sweep_closes_silent_sockets_and_missed_pongs_and_superseded_ones_after_grace() -> None:
    clock = VirtualClock()
    fleet = fleet_with(clock)
    fleet.opened("never-registers")
    fleet.opened("old")
    fleet.on_frame("old", register())
    clock.now += 30
    assert fleet.sweep() == [("never-registers", "no register within the handshake timeout")]

    fleet.opened("new")
    fleet.on_frame("new", register())  # the same agent again: the old socket is superseded
    fleet.on_frame("new", PONG)
    clock.now += 30
    fleet.on_frame("new", PONG)
    assert fleet.sweep() == []  # within the 45 s grace
    clock.now += 16
    fleet.on_frame("new", PONG)
    assert fleet.sweep() == [("old", "superseded by a newer socket of the same agent")]
    assert fleet.hosts()[0].transport == "ws"  # the new socket still serves

    fleet.on_frame("new", PONG)  # answers the last ping; from here on it goes silent
    for _ in range(3):
        clock.now += 30
        assert fleet.sweep() == []  # pings sent, no pongs
    clock.now += 30
    assert fleet.sweep() == [("new", "3 pings unanswered")]
    assert fleet.hosts()[0].transport == "none"


def test_the_http_fallback_never_creates_an_entry_but_keeps_a_known_host_alive() -> None:
    clock = VirtualClock()
    fleet = Fleet(clock, known={AGENT: HostRecord(agent_url=AGENT, hostname="ws-7")})
    assert fleet.http_heartbeat(heartbeat(agent="http://stranger:1")) == {"type": "error",
                                                                           "message": "unknown agent: register first"}
    assert fleet.http_heartbeat(heartbeat()) == {"ok": True, "commands": []}
    (host,) = fleet.serving(Role.CODE_EMBEDDING)
    assert host.transport == "http" and len(fleet.hosts()) == 1
    assert fleet.http_heartbeat(parse_frame("[]"))["type"] == "error"
