"""The fleet's liveness, registry and identity rules on a fake clock (the WebSocket endpoint only relays)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cluster.fleet.agent_registry import Admitted, Fleet, HostRecord, RegistrationRefused
from cluster.fleet.frames import RegisterFrame, RoleCapability, parse_frame
from cluster.fleet.identity import credential_digest, normalise_agent_url
from cluster.fleet.sidecar_providers import sidecar_providers
from cluster.naming import sidecar_provider_name
from cluster.roles import Role
from cluster.settings import FleetSettings
from tests.support.fakes.virtual_time import VirtualClock

PONG = parse_frame('{"type": "pong"}')

AGENT = "http://ws-7:8098"


def register(
    agent: str = AGENT, hostname: str = "ws-7", agent_id: str | None = None, credential: str | None = None
) -> Any:
    frame: dict[str, Any] = {"type": "register", "agentUrl": agent, "hostname": hostname}
    if agent_id is not None:
        frame.update(agentId=agent_id, credential=credential)
    return parse_frame(json.dumps(frame))


def heartbeat(status: str = "running", agent: str | None = None, active: int = 0) -> Any:
    frame: dict[str, Any] = {
        "type": "heartbeat",
        "activeRequests": active,
        "statusData": {
            "agentUrl": AGENT,
            "hostname": "ws-7",
            "containers": {
                "code-embedding": {
                    "status": status,
                    "endpoint": "http://127.0.0.1:8081",
                    "config": {"model": "minilm", "port": 8081},
                }
            },
        },
    }
    if agent is not None:
        frame["agentUrl"] = agent
    return parse_frame(json.dumps(frame))


def fleet_with(clock: VirtualClock, saved: list[dict[str, HostRecord]] | None = None, **settings: Any) -> Fleet:
    return Fleet(clock, FleetSettings(**settings), persist=(saved.append if saved is not None else None))


def admitted(fleet: Fleet, frame: Any, connection: str | None = None) -> Admitted:
    answer = fleet.admit(frame, connection)
    assert isinstance(answer, Admitted), answer
    return answer


def test_register_is_answered_with_an_id_and_a_credential_and_heartbeats_make_the_host_serve() -> None:
    clock, saved = VirtualClock(), []
    fleet = fleet_with(clock, saved)
    fleet.opened("c1")
    [answer] = fleet.on_frame("c1", register()).frames
    assert answer["type"] == "registered" and answer["ok"] is True
    assert len(answer["agentId"]) == 12 and len(answer["credential"]) >= 40
    assert fleet.serving(Role.CODE_EMBEDDING) == []  # registered, but no running container reported yet
    assert fleet.on_frame("c1", heartbeat(active=3)).frames == []
    (host,) = fleet.serving(Role.CODE_EMBEDDING)
    assert host.transport == "ws" and host.active_requests == 3 and host.agent_id == answer["agentId"]
    assert host.capabilities[Role.CODE_EMBEDDING].endpoint == "http://127.0.0.1:8081"
    assert len(saved) == 2  # the new agent, then its capabilities
    # Only the credential's digest is kept, and never shown.
    record = saved[-1][AGENT]
    assert record.credential_sha256 == credential_digest(answer["credential"])
    assert answer["credential"] not in repr(record) + repr(fleet.hosts()) + record.model_dump_json(
        exclude={"credential_sha256"}
    )


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
    assert fleet.on_frame("c1", parse_frame("[" * 100_000)).frames[0]["message"].startswith("invalid JSON")
    assert fleet.on_frame("ghost", register()).close
    assert fleet.hosts() == []


def test_liveness_sweep_closes_silent_sockets_and_missed_pongs_and_superseded_ones_after_grace() -> None:
    clock = VirtualClock()
    fleet = fleet_with(clock)
    fleet.opened("never-registers")
    fleet.opened("old")
    [first] = fleet.on_frame("old", register()).frames
    clock.now += 30
    assert fleet.sweep() == [("never-registers", "no register within the handshake timeout")]

    fleet.opened("new")
    # The same agent again, proving it is: the old socket is superseded, the id is kept.
    [again] = fleet.on_frame("new", register(agent_id=first["agentId"], credential=first["credential"])).frames
    assert again["agentId"] == first["agentId"] and again["credential"] != first["credential"]
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
    known = HostRecord(
        agent_url=AGENT, agent_id="a1b2c3d4e5f6", credential_sha256=credential_digest("s3cret"), hostname="ws-7"
    )
    fleet = Fleet(clock, known={AGENT: known})
    assert fleet.http_heartbeat("ffffffffffff", heartbeat()) == {
        "type": "error",
        "message": "unknown agent: register first",
    }
    assert fleet.authenticate("a1b2c3d4e5f6", credential_digest("wrong")) is None
    assert fleet.authenticate("a1b2c3d4e5f6", None) is None
    assert fleet.authenticate("a1b2c3d4e5f6", credential_digest("s3cret")) == "a1b2c3d4e5f6"
    assert fleet.http_heartbeat("a1b2c3d4e5f6", heartbeat(agent="http://stranger:1"))["type"] == "error"
    assert fleet.http_heartbeat("a1b2c3d4e5f6", heartbeat()) == {"ok": True, "commands": []}
    (host,) = fleet.serving(Role.CODE_EMBEDDING)
    assert host.transport == "http" and len(fleet.hosts()) == 1
    assert fleet.http_heartbeat("a1b2c3d4e5f6", parse_frame("[]"))["type"] == "error"


# --- identity --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spelling", "normal"),
    [
        ("http://ws17.lan:9100", "http://ws17.lan:9100"),
        ("HTTP://WS17.Lan:9100/", "http://ws17.lan:9100"),
        ("ws://ws17.lan:9100", "http://ws17.lan:9100"),
        ("http://ws17.lan:80/", "http://ws17.lan"),
        ("http://ws17.lan:9100/zzz/", "http://ws17.lan:9100/zzz"),
        ("wss://[FE80::1]:9100", "https://[fe80::1]:9100"),
        ("sidecar://WS-1", "sidecar://ws-1"),
    ],
)
def test_agent_urls_have_one_spelling(spelling: str, normal: str) -> None:
    assert normalise_agent_url(spelling) == normal


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ws://x@ws17.lan:9100", "credentials"),
        ("http://user:pw@ws17.lan:9100", "credentials"),
        ("http://ws17.lan:9100?a=1", "query"),
        ("http://ws17.lan:9100#f", "fragment"),
        ("ftp://ws17.lan", "scheme"),
        ("http://:9100", "host"),
        ("http://ws17.lan:99999", "port"),
    ],
)
def test_agent_urls_with_credentials_or_extras_are_refused_without_echoing_them(url: str, why: str) -> None:
    with pytest.raises(ValueError, match=why) as refused:
        normalise_agent_url(url)
    assert "pw" not in str(refused.value) and "x@" not in str(refused.value)


def test_the_three_spellings_of_one_host_port_never_share_a_provider_or_its_verdict() -> None:
    """`http://ws17.lan:9100`, `…/zzz` and `ws://x@…` once all became `sidecar-ws17.lan:9100-…`, and
    the last one took the traffic and the first one's `verified` verdict without being probed."""
    clock = VirtualClock()
    fleet = fleet_with(clock)
    first = admitted(fleet, register("http://ws17.lan:9100"))
    second = admitted(fleet, register("http://ws17.lan:9100/zzz"))
    refused = fleet.admit(register("ws://x@ws17.lan:9100"))
    assert isinstance(refused, RegistrationRefused) and refused.status == 400 and "x@" not in refused.message
    for agent, url in ((first, "http://ws17.lan:9100"), (second, "http://ws17.lan:9100/zzz")):
        assert fleet.http_heartbeat(agent.agent_id, heartbeat(agent=url))["ok"]
    infos, routes = sidecar_providers(fleet.hosts(), 384)
    names = sorted(info.name for info in infos)
    assert names == sorted(
        [
            sidecar_provider_name("http://ws17.lan:9100", first.agent_id, Role.CODE_EMBEDDING),
            sidecar_provider_name("http://ws17.lan:9100/zzz", second.agent_id, Role.CODE_EMBEDDING),
        ]
    )
    assert len(set(names)) == 2 and {routes[n].agent for n in names} == {first.agent_id, second.agent_id}
    assert {info.identity.weights_sha256 for info in infos if info.identity} == {
        f"agent:{first.agent_id}@http://ws17.lan:9100",
        f"agent:{second.agent_id}@http://ws17.lan:9100/zzz",
    }


def test_a_second_registration_of_a_live_agents_url_is_refused_and_a_stale_one_gets_a_new_id() -> None:
    clock = VirtualClock()
    fleet = fleet_with(clock)
    fleet.opened("c1")
    [owner] = fleet.on_frame("c1", register("http://ws17.lan:9100")).frames
    fleet.on_frame("c1", heartbeat(agent="http://ws17.lan:9100"))
    name = sidecar_provider_name("http://ws17.lan:9100", owner["agentId"], Role.CODE_EMBEDDING)

    # Another spelling of the same URL, no credential, a guessed credential, or the id alone: refused.
    for frame in (
        register("ws://WS17.lan:9100/"),
        register("http://ws17.lan:9100", agent_id=owner["agentId"], credential="guess"),
        register("http://ws17.lan:9100", agent_id="000000000000", credential=owner["credential"]),
    ):
        fleet.opened("intruder")
        reply = fleet.on_frame("intruder", frame)
        assert reply.close and "held by a live agent" in reply.frames[0]["message"]
        fleet.closed("intruder")
        refused = fleet.admit(frame)
        assert isinstance(refused, RegistrationRefused) and refused.status == 409
    assert fleet.agent_of("c1") == owner["agentId"] and fleet.reachable(owner["agentId"])
    assert [h.agent_id for h in fleet.hosts()] == [owner["agentId"]]

    # The owner's socket closes and it stops heartbeating: still live until stale.
    fleet.closed("c1")
    clock.now += 29
    assert isinstance(fleet.admit(register("http://ws17.lan:9100")), RegistrationRefused)
    clock.now += 2
    newcomer = admitted(fleet, register("http://ws17.lan:9100"))
    assert newcomer.agent_id != owner["agentId"] and not newcomer.superseded
    assert fleet.drain_retired() == [owner["agentId"]]
    assert not fleet.knows(owner["agentId"]) and not fleet.reachable(owner["agentId"])
    assert fleet.http_heartbeat(newcomer.agent_id, heartbeat(agent="http://ws17.lan:9100"))["ok"]
    [info], _ = sidecar_providers(fleet.hosts(), 384)
    assert info.name != name  # a new provider: the gate's ledger has no verdict for it, so it is probed afresh
    # The old owner, back with its old credential, cannot take the URL from the fresh newcomer.
    assert isinstance(
        fleet.admit(register("http://ws17.lan:9100", agent_id=owner["agentId"], credential=owner["credential"])),
        RegistrationRefused,
    )


def test_a_socket_whose_agent_was_replaced_is_closed() -> None:
    clock = VirtualClock()
    fleet = fleet_with(clock)
    fleet.opened("old")
    fleet.on_frame("old", register())
    clock.now += 31  # stale, but its socket is still open
    assert isinstance(fleet.admit(register()), RegistrationRefused)  # an open socket keeps the URL
    fleet.sweep(), fleet.sweep(), fleet.sweep()
    assert fleet.sweep() == [("old", "3 pings unanswered")]
    admitted(fleet, register())
    assert fleet.agent_of("old") is None


def test_the_registry_is_capped_and_a_stale_entry_makes_room() -> None:
    clock, saved = VirtualClock(), []
    fleet = fleet_with(clock, saved, max_hosts=3)
    ids = [admitted(fleet, register(f"http://ws{i}:9100")).agent_id for i in range(3)]
    refused = fleet.admit(register("http://ws9:9100"))
    assert isinstance(refused, RegistrationRefused) and refused.status == 503
    assert "registry is full (3 live agents, fleet.max_hosts)" in refused.message
    assert len(fleet.hosts()) == 3 and len(saved[-1]) == 3
    clock.now += 20
    for agent_id in ids[1:]:
        fleet.touch(agent_id)
    clock.now += 15  # ws0 is stale, the others are not
    admitted(fleet, register("http://ws9:9100"))
    assert sorted(h.agent_url for h in fleet.hosts()) == ["http://ws1:9100", "http://ws2:9100", "http://ws9:9100"]
    assert fleet.drain_retired() == [ids[0]]


def test_registry_writes_beyond_the_budget_are_coalesced_and_the_end_state_is_written() -> None:
    clock, saved = VirtualClock(), []
    fleet = fleet_with(clock, saved, registry_writes_per_min=5, max_hosts=1000)
    for i in range(200):  # a burst of new agents: 200 durable changes
        admitted(fleet, register(f"http://ws{i}:9100"))
    assert len(saved) == 5 and fleet.write_pending
    clock.now += 30
    assert not fleet.flush() and len(saved) == 5  # still inside the minute
    clock.now += 31
    assert fleet.flush() and not fleet.write_pending
    assert len(saved) == 6 and len(saved[-1]) == 200  # one write carries every change since
    assert not fleet.flush()


def test_a_persisted_agent_resumes_with_its_credential_after_a_master_restart() -> None:
    clock, saved = VirtualClock(), []
    fleet = fleet_with(clock, saved)
    owner = admitted(fleet, register())
    restarted = Fleet(clock, FleetSettings(), known=saved[-1])
    assert restarted.authenticate(owner.agent_id, credential_digest(owner.credential)) == owner.agent_id
    again = restarted.admit(register(agent_id=owner.agent_id, credential=owner.credential))
    assert isinstance(again, Admitted) and again.agent_id == owner.agent_id and again.superseded


def test_a_legacy_entry_with_credentials_in_its_url_is_dropped_at_load() -> None:
    serves = {Role.CODE_EMBEDDING: RoleCapability(role=Role.CODE_EMBEDDING, available=True, models=["m"])}
    fleet = Fleet(
        VirtualClock(),
        known={
            "ws://x@h:1": HostRecord(agent_url="ws://x@h:1", hostname=None),
            "http://h:2": HostRecord(agent_url="http://h:2", hostname=None, capabilities=serves),
        },
    )
    assert [(h.agent_url, h.agent_id) for h in fleet.hosts()] == [("http://h:2", "")]
    [info], routes = sidecar_providers(fleet.hosts(), 384)
    assert not info.eligible and routes == {}


def test_the_register_frame_never_shows_the_credential() -> None:
    frame = register(agent_id="a1b2c3d4e5f6", credential="s3cret-credential")
    assert isinstance(frame, RegisterFrame) and "s3cret-credential" not in repr(frame)
