"""The fleet actor: one per namespace, the master's shared state for every sidecar.

A Ray shell around `cluster.fleet.registry.Fleet` (registry and liveness), `cluster.fleet.commands.CommandDesk`
(commands and results) and `cluster.fleet.providers` (hosts as providers). Serve replicas hold
the sockets and forward frames here; whichever replica a sidecar reached, its commands flow through
this one actor. Durable registry facts are written through the config store; volatile state stays
in memory. Discovery asks `providers()`; the dispatchers' calls to sidecar providers land in
`embed`/`rerank`/`chat`/`context_window`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from typing import Any

import numpy as np
import ray
from ray.actor import ActorHandle

from cluster.config.store import ConfigStore
from cluster.errors import ConfigError, SamespaceError, UpstreamUnavailable
from cluster.fleet.registry import BAD_CREDENTIAL, UNKNOWN_AGENT, Fleet, HostRecord, HostView, RegistrationRefused
from cluster.fleet.commands import CommandDesk
from cluster.naming import FLEET_ACTOR_NAME
from cluster.cloud.openrouter import ChatResult
from cluster.providers import ProviderInfo
from cluster.settings import SamespaceSettings
from cluster.fleet.protocol import (
    FrameRejected,
    HeartbeatFrame,
    PollRequest,
    RegisterFrame,
    ResultFrame,
    config_frame,
    error_frame,
    parse_frame,
    ping_frame,
)
from cluster.fleet.providers import SidecarCalls, SidecarRoute, sidecar_providers

log = logging.getLogger("samespace.fleet")

CLOSE_SOCKET = "__close__"  # an outbox entry for the replica: close the socket instead of sending a frame
STALE_CHECK_S = 1.0


def _socket_box(connection: str) -> str:
    return f"ws:{connection}"


def _http_box(agent: str) -> str:
    return f"http:{agent}"


@ray.remote(num_cpus=0, max_restarts=-1, max_concurrency=1000)
class FleetActor:
    def __init__(self, settings: SamespaceSettings) -> None:
        self._settings = settings
        self._store = ConfigStore(settings.admin.config_path)
        try:
            known = self._store.read().sidecars
        except ConfigError as exc:  # an unreadable store: start empty, never overwrite it blindly
            log.warning("fleet registry unreadable, starting empty: %s", exc)
            known = {}
        self._fleet = Fleet(time.monotonic, settings.fleet, persist=self._persist, known=known)
        self._desk = CommandDesk()
        self._ids = itertools.count(1)
        self._routes: dict[str, SidecarRoute] = {}
        self._sidecar_calls = SidecarCalls(self._send, self._current_routes)
        self._stats: dict[str, tuple[int, int, str | None]] = {}
        self._loop_task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return "FleetActor()"

    # --- WebSocket (called by the Serve replica that holds the socket) -----------------------
    def ws_opened(self) -> str:
        self._ensure_loop()
        connection = f"c{next(self._ids)}"
        self._fleet.opened(connection)
        return connection

    def ws_frame(self, connection: str, raw: str | bytes) -> tuple[list[dict[str, Any]], bool]:
        """One inbound frame → (frames to send back, close the socket?). The replica refused any
        frame over the limit before it came here."""
        frame = parse_frame(raw)
        reply = self._fleet.on_frame(connection, frame)
        agent = self._fleet.agent_of(connection)
        if isinstance(frame, ResultFrame) and agent is not None and not reply.frames:
            self._desk.resolve(agent, frame)
        if isinstance(frame, RegisterFrame):
            if agent is not None and not reply.close:
                log.info("sidecar %s registered over WebSocket as agent %s (%s)", frame.agent_url[:200], agent, connection)
            else:
                log.info("sidecar registration refused on %s: %s", connection, reply.frames[0].get("message"))
            self._fail_retired()
        return reply.frames, reply.close

    async def ws_next(self, connection: str, wait_s: float) -> list[dict[str, Any]]:
        """Frames to send on `connection` (commands, pings), waiting up to `wait_s`; a `__close__`
        entry when the fleet dropped the socket."""
        if not self._fleet.knows_connection(connection):
            return [{"type": CLOSE_SOCKET, "reason": "closed by the fleet"}]
        return await self._desk.take(_socket_box(connection), wait_s)

    def ws_closed(self, connection: str) -> None:
        """The socket is gone: every command sent on it fails now (a superseded socket's too)."""
        agent = self._fleet.agent_of(connection)
        self._fleet.closed(connection)
        failed = self._desk.fail_outbox(_socket_box(connection), "sidecar disconnected")
        if agent is not None:
            log.info("sidecar agent %s disconnected (%s); %d commands failed over", agent, connection, failed)

    # --- HTTP fallback (the replica checked the fleet token and the body size) -----------------
    def http_register(self, raw: bytes) -> tuple[int, dict[str, Any]]:
        frame = parse_frame(raw)
        if not isinstance(frame, RegisterFrame):
            return 400, frame.frame() if isinstance(frame, FrameRejected) else error_frame("expected a register frame")
        self._ensure_loop()  # the liveness loop runs for HTTP-only fleets too
        admitted = self._fleet.admit(frame)
        self._fail_retired()
        if isinstance(admitted, RegistrationRefused):
            log.info("sidecar registration refused over HTTP: %s", admitted.message)
            return admitted.status, admitted.frame()
        log.info("sidecar %s registered over HTTP as agent %s", frame.agent_url[:200], admitted.agent_id)
        return 200, admitted.frame()

    async def http_heartbeat(self, raw: bytes, agent_id: str | None, digest: str | None) -> tuple[int, dict[str, Any]]:
        refused = self._refused(agent_id, digest)
        if refused is not None:
            return refused
        assert agent_id is not None
        frame = parse_frame(raw)
        if isinstance(frame, FrameRejected):
            return 400, frame.frame()
        if not isinstance(frame, HeartbeatFrame):
            return 400, error_frame("expected a heartbeat frame")
        self._ensure_loop()
        answer = self._fleet.http_heartbeat(agent_id, frame)
        if answer.get("type") == "error":
            return 400, answer
        return 200, {"ok": True, "commands": await self._desk.take(_http_box(agent_id), 0)}

    async def http_poll(self, raw: bytes, agent_id: str | None, digest: str | None) -> tuple[int, dict[str, Any]]:
        refused = self._refused(agent_id, digest)
        if refused is not None:
            return refused
        assert agent_id is not None
        try:
            poll = PollRequest.model_validate_json(raw)
        except ValueError:
            return 400, error_frame("poll: expected {agentUrl, waitS}")
        if poll.agent_url is not None and self._fleet.agent_id_for(poll.agent_url) != agent_id:
            return 403, error_frame("poll: agentUrl is not this agent's")
        self._ensure_loop()
        self._fleet.touch(agent_id)
        wait = min(poll.wait_s, self._settings.fleet.poll_wait_max_s)
        return 200, {"commands": await self._desk.take(_http_box(agent_id), wait)}

    def http_result(self, raw: bytes, agent_id: str | None, digest: str | None) -> tuple[int, dict[str, Any]]:
        refused = self._refused(agent_id, digest)
        if refused is not None:
            return refused
        assert agent_id is not None
        frame = parse_frame(raw)
        if isinstance(frame, FrameRejected):
            return 400, frame.frame()
        if not isinstance(frame, ResultFrame):
            return 400, error_frame("expected a result frame")
        if self._desk.agent_of(frame.id) != agent_id:  # unknown, or another agent's command
            return 404, error_frame("no pending command with that id")
        self._fleet.touch(agent_id)
        self._desk.resolve(agent_id, frame)
        return 200, {"ok": True}

    # --- reads -------------------------------------------------------------------------------
    def hosts(self) -> list[HostView]:
        return self._fleet.hosts()

    def providers(self) -> list[ProviderInfo]:
        infos, self._routes = sidecar_providers(self._fleet.hosts(), self._settings.embedding.width, self._stats)
        return infos

    # --- provider calls (the dispatchers') ---------------------------------------------------
    async def embed(self, provider: str, texts: list[str]) -> np.ndarray:
        return await self._counted(provider, self._sidecar_calls.embed(provider, texts))

    async def rerank(self, provider: str, query: str, documents: list[str]) -> list[float]:
        return await self._counted(provider, self._sidecar_calls.rerank(provider, query, documents))

    async def chat(self, provider: str, **request: Any) -> ChatResult:
        return await self._counted(provider, self._sidecar_calls.chat(provider, **request))

    async def context_window(self, provider: str) -> int | None:
        return await self._sidecar_calls.context_window(provider)

    async def push_config(self, agent_url: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Send a `config` frame to the agent at `agent_url` and await its acknowledgement (a `result`
        with the id)."""
        agent = self._fleet.agent_id_for(agent_url)
        if agent is None:
            raise UpstreamUnavailable(agent_url[:200], "no agent registered at that URL")
        box = self._outbox_of(agent, agent)
        return await self._desk.request(
            agent, box, lambda i: config_frame(i, payload), self._settings.fleet.command_timeout_s, agent, "config"
        )

    # --- internals ---------------------------------------------------------------------------
    def _current_routes(self) -> dict[str, SidecarRoute]:
        if not self._routes:  # a call before any discovery asked: derive them now
            self.providers()
        return self._routes

    async def _send(self, agent: str, provider: str, action: str, payload: dict[str, Any]) -> dict[str, Any]:
        box = self._outbox_of(agent, provider)
        return await self._desk.send(agent, box, provider, action, payload, self._settings.fleet.command_timeout_s)

    def _refused(self, agent_id: str | None, digest: str | None) -> tuple[int, dict[str, Any]] | None:
        """None when the call proves it comes from the registered agent `agent_id`; else the answer:
        409 for an unknown agent (register again), 403 for a missing or wrong credential."""
        if not self._fleet.knows(agent_id):
            return 409, error_frame(UNKNOWN_AGENT)
        if self._fleet.authenticate(agent_id, digest) is None:
            return 403, error_frame(BAD_CREDENTIAL)
        return None

    def _fail_retired(self) -> None:
        """Commands held by agents replaced or evicted by a registration fail now."""
        for agent in self._fleet.drain_retired():
            failed = self._desk.fail_agent(agent, "the sidecar agent was replaced by a new registration")
            self._desk.fail_outbox(_http_box(agent), "the sidecar agent was replaced by a new registration")
            log.info("sidecar agent %s replaced; %d commands failed over", agent, failed)

    def _outbox_of(self, agent: str, provider: str) -> str:
        """Where `agent` takes its frames: its live socket, else its HTTP polls."""
        if not self._fleet.reachable(agent):  # fail now: nobody would take it before the timeout
            raise UpstreamUnavailable(provider, "sidecar not connected (socket closed or no recent heartbeat)")
        connection = self._fleet.connection_of(agent)
        return _socket_box(connection) if connection is not None else _http_box(agent)

    async def _counted(self, provider: str, call: Any) -> Any:
        served, failures, last_error = self._stats.get(provider, (0, 0, None))
        try:
            result = await call
        except SamespaceError as exc:
            self._stats[provider] = (served, failures + 1, str(exc)[:200])
            raise
        self._stats[provider] = (served + 1, failures, last_error)
        return result

    def _persist(self, records: dict[str, HostRecord]) -> None:
        """Durable registry changes only (new agent, hostname, capabilities): read-modify-write."""
        try:
            self._store.save_sidecars(records)
        except ConfigError as exc:
            log.warning("fleet registry not written: %s", exc)

    def _ensure_loop(self) -> None:
        if self._loop_task is None:
            self._loop_task = asyncio.get_running_loop().create_task(self._liveness_loop())

    async def _liveness_loop(self) -> None:
        """Ping sweep every ping interval; stale hosts checked every second (their commands fail)."""
        ping_every = self._settings.fleet.ping_interval_s
        next_ping = time.monotonic() + ping_every
        while True:
            await asyncio.sleep(min(STALE_CHECK_S, ping_every))
            try:
                self._fleet.flush()  # registry changes deferred by the write budget
                for agent in self._fleet.newly_stale():
                    failed = self._desk.fail_agent(agent, "no heartbeat: the host left the lanes")
                    log.info("sidecar agent %s went stale; %d commands failed over", agent, failed)
                if time.monotonic() >= next_ping:
                    next_ping = time.monotonic() + ping_every
                    self._sweep()
            except Exception:  # noqa: BLE001 - the loop outlives one bad pass; logged
                log.exception("fleet liveness pass failed")

    def _sweep(self) -> None:
        for connection, why in self._fleet.sweep():
            log.info("closing sidecar socket %s: %s", connection, why)
            self._desk.fail_outbox(_socket_box(connection), f"socket closed: {why}")
            self._desk.post(_socket_box(connection), {"type": CLOSE_SOCKET, "reason": why})
        for connection in self._fleet.connections():
            self._desk.post(_socket_box(connection), ping_frame())


def get_fleet_actor(settings: SamespaceSettings) -> ActorHandle:
    return FleetActor.options(  # type: ignore[attr-defined]
        name=FLEET_ACTOR_NAME, namespace=settings.ray.namespace, lifetime="detached", get_if_exists=True
    ).remote(settings)


def find_fleet_actor(settings: SamespaceSettings) -> ActorHandle | None:
    """The fleet actor if a sidecar ever reached this cluster; discovery never starts one."""
    try:
        return ray.get_actor(FLEET_ACTOR_NAME, namespace=settings.ray.namespace)
    except ValueError:
        return None
