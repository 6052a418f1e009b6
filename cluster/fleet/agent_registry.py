"""The master's view of its sidecar fleet (as in the peer): agents, liveness, hosts.

Pure logic on an injected clock; the Serve endpoint feeds it frames and socket events and acts on
what it returns (frames to send, sockets to close). Durable facts — which agents exist, their
hostnames and capabilities — go to `persist` only when they change, at most
`registry_writes_per_min` times a minute (later changes are coalesced into the next allowed write,
see `flush`); volatile state (last seen, active requests, sockets) stays in memory.

Identity: an agent is its normalised agent URL *and* an id the master issues at
registration, with a per-agent credential (a random secret; only its sha256 is kept). The
provider names, the command routes and the gate's verdicts key on the id, so a new agent is always
a new provider. A registration for the URL of a live agent is refused unless it presents that
agent's id and credential (the same sidecar reconnecting: it supersedes its older socket); once
the agent is stale, a new registration takes the URL under a new id.
"""

from __future__ import annotations

import hmac
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cluster.fleet.frames import (
    FrameRejected,
    HeartbeatFrame,
    Inbound,
    RegisterFrame,
    RoleCapability,
    capabilities,
    error_frame,
    registered_frame,
)
from cluster.fleet.identity import credential_digest, new_agent_id, new_credential, normalise_agent_url
from cluster.roles import Role
from cluster.settings import FleetSettings
from cluster.types import Clock

WRITE_WINDOW_S = 60.0
UNKNOWN_AGENT = "unknown agent: register first"
BAD_CREDENTIAL = "agent credential missing or wrong"


class HostRecord(BaseModel):
    """What is persisted about an agent (no volatile state): the registry entry in the config file.

    `credential_sha256` is the digest of the agent's credential, never the credential itself."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agent_url: str
    agent_id: str = Field(default="", description="Issued by the master at registration; '' for an older entry.")
    credential_sha256: str = Field(default="", repr=False, description="sha256 hex of the agent's credential.")
    hostname: str | None
    capabilities: dict[Role, RoleCapability] = Field(default_factory=dict)


class HostView(BaseModel):
    """A host as the admin API and the provider registry see it."""

    model_config = ConfigDict(frozen=True)

    agent_url: str
    agent_id: str
    hostname: str | None
    transport: Literal["ws", "http", "none"]
    seen_s_ago: float | None = Field(description="Seconds since its last frame or poll; None: not since start.")
    fresh: bool
    active_requests: int
    capabilities: dict[Role, RoleCapability]


class WriteBudget:
    """At most `per_minute` writes in any `WRITE_WINDOW_S`; `allow()` takes one if there is room."""

    def __init__(self, clock: Clock, per_minute: int) -> None:
        self._clock = clock
        self._per_minute = per_minute
        self._times: deque[float] = deque()

    def allow(self) -> bool:
        now = self._clock()
        while self._times and now - self._times[0] >= WRITE_WINDOW_S:
            self._times.popleft()
        if len(self._times) >= self._per_minute:
            return False
        self._times.append(now)
        return True


@dataclass
class _Connection:
    opened_at: float
    agent_id: str | None = None
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


class RegistrationRefused(FrameRejected):
    """A register the fleet refused, with the HTTP status the fallback answers it with."""

    status: int = 409


@dataclass(frozen=True)
class Admitted:
    """A registration the fleet accepted: the agent's id, and the credential issued to it (sent once)."""

    agent_id: str
    credential: str = field(repr=False)
    superseded: bool  # the same agent re-registered (it presented its id and credential)

    def frame(self) -> dict[str, Any]:
        return registered_frame(self.agent_id, self.credential)


class Fleet:
    def __init__(
        self,
        clock: Clock,
        settings: FleetSettings | None = None,
        persist: Callable[[dict[str, HostRecord]], None] | None = None,
        known: dict[str, HostRecord] | None = None,
        new_id: Callable[[], str] = new_agent_id,
        new_secret: Callable[[], str] = new_credential,
    ) -> None:
        self._clock = clock
        self._settings = settings or FleetSettings()
        self._persist = persist
        self._new_id = new_id
        self._new_secret = new_secret
        self._writes = WriteBudget(clock, self._settings.registry_writes_per_min)
        self._dirty = False
        self._connections: dict[str, _Connection] = {}
        self._hosts: dict[str, _Host] = {}  # by normalised agent URL: one agent per URL
        for url, record in (known or {}).items():
            try:
                key = normalise_agent_url(record.agent_url or url)
            except ValueError:
                continue  # an entry an older master accepted (user@ in the URL): dropped, never served
            self._hosts[key] = _Host(record.model_copy(update={"agent_url": key}))
        self._ids: dict[str, str] = {h.record.agent_id: url for url, h in self._hosts.items() if h.record.agent_id}
        self._stale: set[str] = set()
        self._retired: list[str] = []

    # --- registration --------------------------------------------------------------------------
    def admit(self, frame: RegisterFrame, connection: str | None = None) -> Admitted | RegistrationRefused:
        """Register an agent (over a socket when `connection` is given, else over HTTP).

        Refused: a bad agent URL; the URL of a live agent without that agent's id and credential;
        a new agent when the registry is full of live ones."""
        now = self._clock()
        try:
            url = normalise_agent_url(frame.agent_url)
        except ValueError as exc:
            return RegistrationRefused(message=f"register: agentUrl: {exc}", status=400)
        host = self._hosts.get(url)
        same_agent = host is not None and self._proves(host, frame.agent_id, frame.credential)
        if host is not None and not same_agent and self._live(host, now):
            return RegistrationRefused(
                message=f"register: {url} is held by a live agent; only that agent (its agentId and credential) may "
                "register it again, or a new one once it is stale "
                f"({self._settings.stale_after_s:g} s without a heartbeat)"
            )
        if host is None and len(self._hosts) >= self._settings.max_hosts and not self._evict_one(now):
            return RegistrationRefused(
                message=f"register: the sidecar registry is full ({self._settings.max_hosts} live agents, "
                "fleet.max_hosts); a new agent is admitted when one goes stale",
                status=503,
            )
        credential = self._new_secret()
        if host is not None and same_agent:
            agent_id = host.record.agent_id
            host.record = host.record.model_copy(
                update={
                    "credential_sha256": credential_digest(credential),
                    "hostname": frame.hostname or host.record.hostname,
                }
            )
        else:
            if host is not None:
                self._retire(url, host)
            agent_id = self._new_id()
            while agent_id in self._ids:
                agent_id = self._new_id()
            record = HostRecord(
                agent_url=url,
                agent_id=agent_id,
                credential_sha256=credential_digest(credential),
                hostname=frame.hostname,
            )
            host = self._hosts[url] = _Host(record)
            self._ids[agent_id] = url
        host.last_seen = now
        if connection is not None:
            state = self._connections[connection]
            previous = host.connection
            if previous is not None and previous != connection and previous in self._connections:
                self._connections[previous].superseded_at = now  # closed by the sweep after the grace
            state.agent_id = agent_id
            host.connection, host.transport = connection, "ws"
        elif host.connection is None:
            host.transport = "http"
        self._stale.discard(agent_id)
        self._save()
        return Admitted(agent_id=agent_id, credential=credential, superseded=same_agent)

    def drain_retired(self) -> list[str]:
        """Agent ids replaced or evicted since the last call: the commands they hold must fail."""
        retired, self._retired = self._retired, []
        return retired

    def authenticate(self, agent_id: str | None, digest: str | None) -> str | None:
        """The agent `agent_id` when `digest` is the sha256 of its credential (constant-time), else None."""
        host = self._host(agent_id)
        if host is None or not digest or not host.record.credential_sha256:
            return None
        return agent_id if hmac.compare_digest(digest, host.record.credential_sha256) else None

    def knows(self, agent_id: str | None) -> bool:
        return self._host(agent_id) is not None

    def agent_id_for(self, agent_url: str) -> str | None:
        """The id of the agent currently registered at `agent_url` (any spelling of it)."""
        try:
            host = self._hosts.get(normalise_agent_url(agent_url))
        except ValueError:
            return None
        return host.record.agent_id if host is not None and host.record.agent_id else None

    # --- sockets -----------------------------------------------------------------------------
    def opened(self, connection: str) -> None:
        self._connections[connection] = _Connection(opened_at=self._clock())

    def closed(self, connection: str) -> None:
        state = self._connections.pop(connection, None)
        host = self._host(state.agent_id if state is not None else None)
        if host is not None and host.connection == connection:
            host.connection, host.transport = None, "none"

    def on_frame(self, connection: str, frame: Inbound | FrameRejected) -> Reply:
        """Apply one inbound WebSocket frame. Bad frames get an `error` frame, never a crash.

        Any frame from a registered socket proves it alive (a pong is not the only answer). A
        refused registration is answered and the socket closed; a socket whose agent was replaced
        by a new registration of its URL is closed."""
        state = self._connections.get(connection)
        if state is None:
            return Reply([error_frame("unknown connection")], close=True)
        if isinstance(frame, FrameRejected):
            return Reply([frame.frame()])
        if isinstance(frame, RegisterFrame):
            if state.agent_id is not None:
                return Reply([error_frame("register: this socket is registered already")])
            admitted = self.admit(frame, connection)
            if isinstance(admitted, RegistrationRefused):
                return Reply([admitted.frame()], close=True)
            return Reply([admitted.frame()])
        if state.agent_id is None:
            return Reply([error_frame(f"{frame.type} before register")])
        host = self._host(state.agent_id)
        if host is None:
            return Reply([error_frame("this socket's agent was replaced by a new registration")], close=True)
        state.missed_pongs = 0
        if isinstance(frame, HeartbeatFrame):
            if frame.agent is not None and not self._same_url(frame.agent, host):
                return Reply([error_frame("heartbeat: agentUrl differs from the registered one")])
            self._heartbeat(state.agent_id, frame, transport="ws")
        return Reply([])  # results are matched to their commands by the caller (fleet_mail)

    def agent_of(self, connection: str) -> str | None:
        """The id of the agent registered on `connection` (None before register or once replaced)."""
        state = self._connections.get(connection)
        return state.agent_id if state is not None and self._host(state.agent_id) is not None else None

    def knows_connection(self, connection: str) -> bool:
        return connection in self._connections

    def connections(self) -> list[str]:
        return list(self._connections)

    def reachable(self, agent_id: str) -> bool:
        """Whether the agent can take a command now: it spoke within the staleness window, over a
        socket that is still open or over the HTTP fallback (a closed socket is not waited for)."""
        host = self._host(agent_id)
        return host is not None and host.transport != "none" and self._fresh(host, self._clock())

    def connection_of(self, agent_id: str) -> str | None:
        """The live socket the agent is served on, or None (HTTP fallback, or not connected)."""
        host = self._host(agent_id)
        return host.connection if host is not None else None

    def sweep(self) -> list[tuple[str, str]]:
        """One liveness pass (every ping interval): (connection, why) to close; pings count as sent."""
        now = self._clock()
        closing = []
        for connection, state in list(self._connections.items()):
            if state.agent_id is None and now - state.opened_at >= self._settings.handshake_timeout_s:
                closing.append((connection, "no register within the handshake timeout"))
            elif state.agent_id is not None and self._host(state.agent_id) is None:
                closing.append((connection, "its agent was replaced by a new registration"))
            elif state.superseded_at is not None and now - state.superseded_at >= self._settings.superseded_grace_s:
                closing.append((connection, "superseded by a newer socket of the same agent"))
            elif state.missed_pongs >= self._settings.max_missed_pongs:
                closing.append((connection, f"{state.missed_pongs} pings unanswered"))
            else:
                state.missed_pongs += 1  # the ping sent now; a pong resets it
        for connection, _ in closing:
            self.closed(connection)
        return closing

    # --- HTTP fallback (the caller authenticated the agent: `authenticate`) ----------------------
    def touch(self, agent_id: str) -> bool:
        """An HTTP poll from a known agent: it is alive (False for an unknown agent)."""
        host = self._host(agent_id)
        if host is None:
            return False
        host.last_seen = self._clock()
        return True

    def newly_stale(self) -> list[str]:
        """Agents (ids) whose last heartbeat just became too old (each reported once until seen
        again): they leave the lanes, and the commands they hold must fail now."""
        now = self._clock()
        found = []
        for _, host in sorted(self._hosts.items()):
            agent_id = host.record.agent_id
            if agent_id and agent_id not in self._stale and host.last_seen is not None and not self._fresh(host, now):
                self._stale.add(agent_id)
                found.append(agent_id)
        return found

    def http_heartbeat(self, agent_id: str, frame: HeartbeatFrame | FrameRejected) -> dict[str, Any]:
        """`POST /sidecar/heartbeat` of an authenticated agent: it never creates an entry."""
        if isinstance(frame, FrameRejected):
            return frame.frame()
        host = self._host(agent_id)
        if host is None:
            return error_frame(UNKNOWN_AGENT)
        if frame.agent is not None and not self._same_url(frame.agent, host):
            return error_frame("heartbeat: agentUrl differs from the registered one")
        self._heartbeat(agent_id, frame, transport="http")
        return {"ok": True, "commands": []}

    # --- durable writes ------------------------------------------------------------------------
    def flush(self) -> bool:
        """Write the registry if a change waits and the write budget allows; whether it wrote."""
        if not self._dirty or self._persist is None or not self._writes.allow():
            return False
        self._dirty = False
        self._persist({url: host.record for url, host in self._hosts.items()})
        return True

    @property
    def write_pending(self) -> bool:
        return self._dirty and self._persist is not None

    # --- reads -------------------------------------------------------------------------------
    def hosts(self) -> list[HostView]:
        now = self._clock()
        return [
            HostView(
                agent_url=url,
                agent_id=host.record.agent_id,
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
    def _host(self, agent_id: str | None) -> _Host | None:
        url = self._ids.get(agent_id) if agent_id else None
        return self._hosts.get(url) if url is not None else None

    def _proves(self, host: _Host, agent_id: str | None, credential: str | None) -> bool:
        record = host.record
        if not agent_id or not credential or not record.agent_id or not record.credential_sha256:
            return False
        id_matches = hmac.compare_digest(agent_id.encode(), record.agent_id.encode())
        return hmac.compare_digest(credential_digest(credential), record.credential_sha256) and id_matches

    def _live(self, host: _Host, now: float) -> bool:
        """Fresh, or holding an open socket: its URL is not free for another agent."""
        return self._fresh(host, now) or (host.connection is not None and host.connection in self._connections)

    def _evict_one(self, now: float) -> bool:
        """Make room for a new agent: drop the longest-silent entry that is not live; False if all are."""
        idle = [
            (host.last_seen if host.last_seen is not None else float("-inf"), url)
            for url, host in self._hosts.items()
            if not self._live(host, now)
        ]
        if not idle:
            return False
        _, url = min(idle)
        self._retire(url, self._hosts.pop(url))
        return True

    def _retire(self, url: str, host: _Host) -> None:
        agent_id = host.record.agent_id
        if agent_id:
            self._ids.pop(agent_id, None)
            self._stale.discard(agent_id)
            self._retired.append(agent_id)

    def _same_url(self, agent_url: str, host: _Host) -> bool:
        try:
            return normalise_agent_url(agent_url) == host.record.agent_url
        except ValueError:
            return False

    def _heartbeat(self, agent_id: str, frame: HeartbeatFrame, *, transport: Literal["ws", "http"]) -> None:
        host = self._host(agent_id)
        assert host is not None  # callers looked it up
        host.last_seen = self._clock()
        host.active_requests = frame.active_requests
        self._stale.discard(agent_id)
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
        self._dirty = True
        self.flush()
