"""The master's view of its sidecar fleet (issue 9; peer fantom.md §6): connections, liveness, hosts.

Pure logic on an injected clock; the Serve endpoint feeds it frames and socket events and acts on
what it returns (frames to send, sockets to close). Durable facts — which agents exist, their
hostnames and capabilities — go to `persist` only when they change; volatile state (last seen,
active requests, sockets) stays in memory so the config file does not churn on every heartbeat.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cluster.roles import Role
from cluster.sidecar_protocol import (
    FrameRejected,
    HeartbeatFrame,
    Inbound,
    RegisterFrame,
    RoleCapability,
    capabilities,
    error_frame,
    registered_frame,
)
from cluster.types import Clock


class FleetSettings(BaseModel):
    """The sidecar fleet: transport switches, liveness constants (peer values), command limits.

    The fleet's bearer token is not here: it is `SamespaceSettings.fleet_token`
    (env SAMESPACE_FLEET_TOKEN), so every sidecar of a fleet shares one secret.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    websocket: bool = Field(default=True, description="Accept sidecars on the /sidecar WebSocket.")
    http_fallback: bool = Field(default=True, description="Accept the POST /sidecar/* fallback.")
    handshake_timeout_s: float = Field(default=30.0, gt=0, description="A socket must register within this.")
    ping_interval_s: float = Field(default=30.0, gt=0, description="Ping sweep period.")
    max_missed_pongs: int = Field(default=3, ge=1, description="Close after this many unanswered pings.")
    superseded_grace_s: float = Field(default=45.0, ge=0, description="An older socket of a re-registered agent lives this long.")
    stale_after_s: float = Field(default=30.0, gt=0, description="No heartbeat for this long: the host leaves the lanes.")
    command_timeout_s: float = Field(default=60.0, gt=0, description="A command unanswered this long fails (peer 60 s).")
    poll_wait_max_s: float = Field(default=25.0, gt=0, description="Longest a POST /sidecar/poll is held open.")


class HostRecord(BaseModel):
    """What is persisted about an agent (no volatile state): the registry entry in the config file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agent_url: str
    hostname: str | None
    capabilities: dict[Role, RoleCapability] = Field(default_factory=dict)


class HostView(BaseModel):
    """A host as the admin API and the provider registry see it."""

    model_config = ConfigDict(frozen=True)

    agent_url: str
    hostname: str | None
    transport: Literal["ws", "http", "none"]
    seen_s_ago: float | None = Field(description="Seconds since its last frame or poll; None: not since start.")
    fresh: bool
    active_requests: int
    capabilities: dict[Role, RoleCapability]


@dataclass
class _Connection:
    opened_at: float
    agent_url: str | None = None
    missed_pongs: int = 0
    superseded_at: float | None = None


@dataclass
class _Host:
    record: HostRecord
    last_seen: float | None = None
    active_requests: int = 0
    connection: str | None = None  # the live socket, when connected over WebSocket
    transport: Literal["ws", "http", "none"] = "none"
    waiting: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Reply:
    """What the endpoint must do after a frame: frames to send, and whether to close the socket."""

    frames: list[dict[str, Any]]
    close: bool = False


class Fleet:
    def __init__(
        self,
        clock: Clock,
        settings: FleetSettings | None = None,
        persist: Callable[[dict[str, HostRecord]], None] | None = None,
        known: dict[str, HostRecord] | None = None,
    ) -> None:
        self._clock = clock
        self._settings = settings or FleetSettings()
        self._persist = persist
        self._connections: dict[str, _Connection] = {}
        self._hosts: dict[str, _Host] = {url: _Host(record) for url, record in (known or {}).items()}
        self._stale: set[str] = set()

    # --- sockets -----------------------------------------------------------------------------
    def opened(self, connection: str) -> None:
        self._connections[connection] = _Connection(opened_at=self._clock())

    def closed(self, connection: str) -> None:
        state = self._connections.pop(connection, None)
        if state is not None and state.agent_url in self._hosts:
            host = self._hosts[state.agent_url]
            if host.connection == connection:
                host.connection, host.transport = None, "none"

    def on_frame(self, connection: str, frame: Inbound | FrameRejected) -> Reply:
        """Apply one inbound WebSocket frame. Bad frames get an `error` frame, never a crash.

        Any frame from a registered socket proves it alive (a pong is not the only answer)."""
        state = self._connections.get(connection)
        if state is None:
            return Reply([error_frame("unknown connection")], close=True)
        if isinstance(frame, FrameRejected):
            return Reply([frame.frame()])
        if isinstance(frame, RegisterFrame):
            return self._register(connection, state, frame)
        if state.agent_url is None:
            return Reply([error_frame(f"{frame.type} before register")])
        state.missed_pongs = 0
        if isinstance(frame, HeartbeatFrame):
            if frame.agent is not None and frame.agent != state.agent_url:
                return Reply([error_frame("heartbeat: agentUrl differs from the registered one")])
            self._heartbeat(state.agent_url, frame, transport="ws", connection=connection)
        return Reply([])  # results are matched to their commands by the caller (fleet_mail)

    def agent_of(self, connection: str) -> str | None:
        state = self._connections.get(connection)
        return state.agent_url if state is not None else None

    def knows_connection(self, connection: str) -> bool:
        return connection in self._connections

    def connections(self) -> list[str]:
        return list(self._connections)

    def reachable(self, agent: str) -> bool:
        """Whether `agent` can take a command now: it spoke within the staleness window, over a
        socket that is still open or over the HTTP fallback (a closed socket is not waited for)."""
        host = self._hosts.get(agent)
        return host is not None and host.transport != "none" and self._fresh(host, self._clock())

    def connection_of(self, agent: str) -> str | None:
        """The live socket `agent` is served on, or None (HTTP fallback, or not connected)."""
        host = self._hosts.get(agent)
        return host.connection if host is not None else None

    def sweep(self) -> list[tuple[str, str]]:
        """One liveness pass (every ping interval): (connection, why) to close; pings count as sent."""
        now = self._clock()
        closing = []
        for connection, state in list(self._connections.items()):
            if state.agent_url is None and now - state.opened_at >= self._settings.handshake_timeout_s:
                closing.append((connection, "no register within the handshake timeout"))
            elif state.superseded_at is not None and now - state.superseded_at >= self._settings.superseded_grace_s:
                closing.append((connection, "superseded by a newer socket of the same agent"))
            elif state.missed_pongs >= self._settings.max_missed_pongs:
                closing.append((connection, f"{state.missed_pongs} pings unanswered"))
            else:
                state.missed_pongs += 1  # the ping sent now; a pong resets it
        for connection, _ in closing:
            self.closed(connection)
        return closing

    # --- HTTP fallback -----------------------------------------------------------------------
    def http_register(self, frame: RegisterFrame) -> dict[str, Any]:
        """`POST /sidecar/register`: the explicit registration of an agent that cannot open a socket."""
        now = self._clock()
        host = self._hosts.get(frame.agent_url)
        if host is None:
            self._hosts[frame.agent_url] = host = _Host(HostRecord(agent_url=frame.agent_url, hostname=frame.hostname))
            self._save()
        elif frame.hostname and frame.hostname != host.record.hostname:
            host.record = host.record.model_copy(update={"hostname": frame.hostname})
            self._save()
        host.last_seen = now
        if host.connection is None:
            host.transport = "http"
        self._stale.discard(frame.agent_url)
        return registered_frame()

    def touch(self, agent: str) -> bool:
        """An HTTP poll from a known agent: it is alive (False for an unknown agent)."""
        host = self._hosts.get(agent)
        if host is None:
            return False
        host.last_seen = self._clock()
        return True

    def newly_stale(self) -> list[str]:
        """Agents whose last heartbeat just became too old (each reported once until seen again):
        they leave the lanes, and the commands they hold must fail now."""
        now = self._clock()
        found = []
        for url, host in sorted(self._hosts.items()):
            if url not in self._stale and host.last_seen is not None and not self._fresh(host, now):
                self._stale.add(url)
                found.append(url)
        return found

    def http_heartbeat(self, frame: HeartbeatFrame | FrameRejected) -> dict[str, Any]:
        """`POST /sidecar/heartbeat`: applied to a known agent only — it never creates an entry."""
        if isinstance(frame, FrameRejected):
            return frame.frame()
        agent = frame.agent
        if agent is None:
            return error_frame("heartbeat: agentUrl missing")
        if agent not in self._hosts:
            return error_frame("unknown agent: register first")
        self._heartbeat(agent, frame, transport="http", connection=None)
        return {"ok": True, "commands": []}

    # --- reads -------------------------------------------------------------------------------
    def hosts(self) -> list[HostView]:
        now = self._clock()
        return [
            HostView(
                agent_url=url,
                hostname=host.record.hostname,
                transport=host.transport,
                seen_s_ago=round(now - host.last_seen, 3) if host.last_seen is not None else None,
                fresh=self._fresh(host, now),
                active_requests=host.active_requests,
                capabilities=host.record.capabilities,
            )
            for url, host in sorted(self._hosts.items())
        ]

    def serving(self, role: Role) -> list[HostView]:
        """Hosts that serve `role` right now: fresh heartbeat, a running container for the role."""
        return [h for h in self.hosts() if h.fresh and role in h.capabilities and h.capabilities[role].available]

    # --- internals ---------------------------------------------------------------------------
    def _register(self, connection: str, state: _Connection, frame: RegisterFrame) -> Reply:
        now = self._clock()
        host = self._hosts.get(frame.agent_url)
        if host is None:
            host = self._hosts[frame.agent_url] = _Host(HostRecord(agent_url=frame.agent_url, hostname=frame.hostname))
            self._save()
        elif frame.hostname and frame.hostname != host.record.hostname:
            host.record = host.record.model_copy(update={"hostname": frame.hostname})
            self._save()
        previous = host.connection
        if previous is not None and previous != connection and previous in self._connections:
            self._connections[previous].superseded_at = now  # closed by the sweep after the grace
        state.agent_url = frame.agent_url
        host.connection, host.transport, host.last_seen = connection, "ws", now
        self._stale.discard(frame.agent_url)
        return Reply([registered_frame()])

    def _heartbeat(self, agent: str, frame: HeartbeatFrame, *, transport: Literal["ws", "http"], connection: str | None) -> None:
        host = self._hosts[agent]
        host.last_seen = self._clock()
        host.active_requests = frame.active_requests
        self._stale.discard(agent)
        if transport == "http" and host.connection is None:
            host.transport = "http"
        found = capabilities(frame.status_data)
        hostname = frame.status_data.hostname or host.record.hostname
        if found != host.record.capabilities or hostname != host.record.hostname:
            host.record = host.record.model_copy(update={"capabilities": found, "hostname": hostname})
            self._save()

    def _fresh(self, host: _Host, now: float) -> bool:
        return host.last_seen is not None and now - host.last_seen < self._settings.stale_after_s

    def _save(self) -> None:
        if self._persist is not None:
            self._persist({url: host.record for url, host in self._hosts.items()})
