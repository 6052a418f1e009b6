"""The fleet actor: one per namespace, the master's shared state for every sidecar (issue 9).

A Ray shell around `cluster.fleet.Fleet` (registry and liveness), `cluster.fleet_mail.CommandDesk`
(commands and results) and `cluster.sidecar_providers` (hosts as providers). Serve replicas hold
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

from cluster.config_store import ConfigStore
from cluster.errors import ConfigError, SamespaceError, UpstreamUnavailable
from cluster.fleet import Fleet, HostRecord, HostView
from cluster.fleet_mail import CommandDesk
from cluster.naming import FLEET_ACTOR_NAME
from cluster.openrouter import ChatResult
from cluster.providers import ProviderInfo
from cluster.settings import SamespaceSettings
from cluster.sidecar_protocol import (
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
from cluster.sidecar_providers import SidecarCalls, SidecarRoute, sidecar_providers

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
        """One inbound frame → (frames to send back, close the socket?)."""
        frame = parse_frame(raw)
        reply = self._fleet.on_frame(connection, frame)
        agent = self._fleet.agent_of(connection)
        if isinstance(frame, ResultFrame) and agent is not None and not reply.frames:
            self._desk.resolve(agent, frame)
        if isinstance(frame, RegisterFrame) and agent is not None:
            log.info("sidecar %s registered over WebSocket (%s)", agent, connection)
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
            log.info("sidecar %s disconnected (%s); %d commands failed over", agent, connection, failed)

    # --- HTTP fallback -----------------------------------------------------------------------
    def http_register(self, raw: bytes) -> tuple[int, dict[str, Any]]:
        frame = parse_frame(raw)
        if not isinstance(frame, RegisterFrame):
            return 400, frame.frame() if isinstance(frame, FrameRejected) else error_frame("expected a register frame")
        self._ensure_loop()  # the liveness loop runs for HTTP-only fleets too
        log.info("sidecar %s registered over HTTP", frame.agent_url)
        return 200, self._fleet.http_register(frame)

    async def http_heartbeat(self, raw: bytes) -> tuple[int, dict[str, Any]]:
        frame = parse_frame(raw)
        if isinstance(frame, FrameRejected):
            return 400, frame.frame()
        if not isinstance(frame, HeartbeatFrame):
            return 400, error_frame("expected a heartbeat frame")
        self._ensure_loop()
        answer = self._fleet.http_heartbeat(frame)
        if answer.get("type") == "error":
            return (409 if "unknown agent" in answer["message"] else 400), answer
        assert frame.agent is not None
        return 200, {"ok": True, "commands": await self._desk.take(_http_box(frame.agent), 0)}

    async def http_poll(self, raw: bytes) -> tuple[int, dict[str, Any]]:
        try:
            poll = PollRequest.model_validate_json(raw)
        except ValueError:
            return 400, error_frame("poll: expected {agentUrl, waitS}")
        self._ensure_loop()
        if not self._fleet.touch(poll.agent_url):
            return 409, error_frame("unknown agent: register first")
        wait = min(poll.wait_s, self._settings.fleet.poll_wait_max_s)
        return 200, {"commands": await self._desk.take(_http_box(poll.agent_url), wait)}

    def http_result(self, raw: bytes) -> tuple[int, dict[str, Any]]:
        frame = parse_frame(raw)
        if isinstance(frame, FrameRejected):
            return 400, frame.frame()
        if not isinstance(frame, ResultFrame):
            return 400, error_frame("expected a result frame")
        agent = self._desk.agent_of(frame.id)
        if agent is None or not self._fleet.touch(agent):
            return 404, error_frame("no pending command with that id")
        self._desk.resolve(agent, frame)
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

    async def push_config(self, agent: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Send a `config` frame to `agent` and await its acknowledgement (a `result` with the id)."""
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
                for agent in self._fleet.newly_stale():
                    failed = self._desk.fail_agent(agent, "no heartbeat: the host left the lanes")
                    log.info("sidecar %s went stale; %d commands failed over", agent, failed)
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
