"""The master's fleet hub: every sidecar's frames and calls meet here, whichever Serve replica holds
the socket or took the HTTP call.

`FleetHub` composes the registry (`Fleet`: agents, liveness, hosts), the command desk (`CommandDesk`:
commands and results) and the sidecar providers (`SidecarCalls`), and answers what the sidecar
endpoints ask: the frames to send on a socket, and the HTTP status and body for each fallback call.
Pure asyncio on an injected clock and sleep; `actors.fleet.FleetActor` is its Ray shell.

Every outbox is named by one function: `socket_outbox(connection)` for a live WebSocket,
`http_outbox(agent)` for an agent reached by HTTP polls.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Coroutine
from http import HTTPStatus
from typing import Any, Protocol, TypeVar

import numpy as np

from cluster.cloud.openai_wire import ChatResult
from cluster.errors import ConfigError, SamespaceError, UpstreamUnavailable
from cluster.fleet.agent_registry import BAD_CREDENTIAL, UNKNOWN_AGENT, Fleet, HostRecord, HostView, RegistrationRefused
from cluster.fleet.commands import CommandDesk
from cluster.fleet.frames import (
    FrameRejected,
    FrameType,
    HeartbeatFrame,
    PollRequest,
    RegisterFrame,
    ResultFrame,
    config_frame,
    error_frame,
    parse_frame,
    ping_frame,
)
from cluster.fleet.sidecar_providers import SidecarCalls, SidecarRoute, sidecar_providers
from cluster.providers import ProviderInfo
from cluster.settings import SamespaceSettings
from cluster.types import Clock

__all__ = [
    "CLOSE_SOCKET",
    "STALE_CHECK_S",
    "Answer",
    "FleetHub",
    "http_outbox",
    "prove_agent",
    "socket_outbox",
]

log = logging.getLogger("samespace.fleet")

# An outbox entry for the replica that holds the socket: close it instead of sending a frame.
# Never sent to a sidecar: it names an instruction between the hub and the replica.
CLOSE_SOCKET = "__close__"
STALE_CHECK_S = 1.0
REPLACED = "the sidecar agent was replaced by a new registration"

Answer = tuple[int, dict[str, Any]]  # an HTTP fallback call's status and JSON body
Sleep = Callable[[float], Awaitable[None]]
_T = TypeVar("_T")


def socket_outbox(connection: str) -> str:
    return f"ws:{connection}"


def http_outbox(agent: str) -> str:
    return f"http:{agent}"


def prove_agent(fleet: Fleet, agent_id: str | None, digest: str | None) -> str | Answer:
    """The agent id when an HTTP call proves it comes from that registered agent; else the answer:
    409 for an unknown agent (the sidecar registers again), 403 for a missing or wrong credential."""
    if agent_id is None or not fleet.knows(agent_id):
        return HTTPStatus.CONFLICT, error_frame(UNKNOWN_AGENT)
    if fleet.authenticate(agent_id, digest) is None:
        return HTTPStatus.FORBIDDEN, error_frame(BAD_CREDENTIAL)
    return agent_id


def _bad_frame(frame: object, expected: str) -> Answer:
    """400 for a frame that is not the one this call takes: why it was refused, or what was expected."""
    body = frame.frame() if isinstance(frame, FrameRejected) else error_frame(f"expected a {expected} frame")
    return HTTPStatus.BAD_REQUEST, body


class RegistryStore(Protocol):
    """Where the registry's durable facts live (the config store, `cluster.config.store.ConfigStore`)."""

    def read_sidecars(self) -> dict[str, HostRecord]: ...

    def save_sidecars(self, records: dict[str, HostRecord]) -> None: ...


class FleetHub:
    """The master's shared fleet state. Durable registry facts go to `store`; volatile state stays here."""

    def __init__(self, settings: SamespaceSettings, store: RegistryStore, *, clock: Clock, sleep: Sleep) -> None:
        self._settings = settings
        self._store = store
        self._clock = clock
        self._sleep = sleep
        try:
            known = store.read_sidecars()
        except ConfigError as exc:  # an unreadable store: start empty, never overwrite it blindly
            log.warning("fleet registry unreadable, starting empty: %s", exc)
            known = {}
        self.fleet = Fleet(clock, settings.fleet, persist=self._persist, known=known)
        self.desk = CommandDesk()
        self._ids = itertools.count(1)
        self._routes: dict[str, SidecarRoute] = {}
        self._sidecar_calls = SidecarCalls(self._send, self._current_routes)
        self._stats: dict[str, tuple[int, int, str | None]] = {}
        self._loop_task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return "FleetHub()"

    # --- WebSocket (the replica that holds the socket calls these) ---------------------------
    def ws_opened(self) -> str:
        self._ensure_loop()
        connection = f"c{next(self._ids)}"
        self.fleet.opened(connection)
        return connection

    def ws_frame(self, connection: str, raw: str | bytes) -> tuple[list[dict[str, Any]], bool]:
        """One inbound frame → (frames to send back, close the socket?). The replica refused any
        frame over the limit before it came here."""
        frame = parse_frame(raw)
        reply = self.fleet.on_frame(connection, frame)
        agent = self.fleet.agent_of(connection)
        if isinstance(frame, ResultFrame) and agent is not None and not reply.frames:
            self.desk.resolve(agent, frame)
        if isinstance(frame, RegisterFrame):
            if agent is not None and not reply.close:
                url = frame.agent_url[:200]
                log.info("sidecar %s registered over WebSocket as agent %s (%s)", url, agent, connection)
            else:
                log.info("sidecar registration refused on %s: %s", connection, reply.frames[0].get("message"))
            self._fail_retired()
        return reply.frames, reply.close

    async def ws_next(self, connection: str, wait_s: float) -> list[dict[str, Any]]:
        """Frames to send on `connection` (commands, pings), waiting up to `wait_s`; a `CLOSE_SOCKET`
        entry when the fleet dropped the socket."""
        if not self.fleet.knows_connection(connection):
            return [{"type": CLOSE_SOCKET, "reason": "closed by the fleet"}]
        return await self.desk.take(socket_outbox(connection), wait_s)

    def ws_closed(self, connection: str) -> None:
        """The socket is gone: every command sent on it fails now (a superseded socket's too)."""
        agent = self.fleet.agent_of(connection)
        self.fleet.closed(connection)
        failed = self.desk.fail_outbox(socket_outbox(connection), "sidecar disconnected")
        if agent is not None:
            log.info("sidecar agent %s disconnected (%s); %d commands failed over", agent, connection, failed)

    # --- HTTP fallback (the replica checked the fleet token and the body size) -----------------
    def http_register(self, raw: bytes) -> Answer:
        frame = parse_frame(raw)
        if not isinstance(frame, RegisterFrame):
            return _bad_frame(frame, "register")
        self._ensure_loop()  # the liveness loop runs for HTTP-only fleets too
        admitted = self.fleet.admit(frame)
        self._fail_retired()
        if isinstance(admitted, RegistrationRefused):
            log.info("sidecar registration refused over HTTP: %s", admitted.message)
            return admitted.status, admitted.frame()
        log.info("sidecar %s registered over HTTP as agent %s", frame.agent_url[:200], admitted.agent_id)
        return HTTPStatus.OK, admitted.frame()

    async def http_heartbeat(self, raw: bytes, agent_id: str | None, digest: str | None) -> Answer:
        agent = prove_agent(self.fleet, agent_id, digest)
        if not isinstance(agent, str):
            return agent
        frame = parse_frame(raw)
        if not isinstance(frame, HeartbeatFrame):
            return _bad_frame(frame, "heartbeat")
        self._ensure_loop()
        answer = self.fleet.http_heartbeat(agent, frame)
        if answer.get("type") == FrameType.ERROR:
            return HTTPStatus.BAD_REQUEST, answer
        return HTTPStatus.OK, {"ok": True, "commands": await self.desk.take(http_outbox(agent), 0)}

    async def http_poll(self, raw: bytes, agent_id: str | None, digest: str | None) -> Answer:
        agent = prove_agent(self.fleet, agent_id, digest)
        if not isinstance(agent, str):
            return agent
        try:
            poll = PollRequest.model_validate_json(raw)
        except ValueError:
            return HTTPStatus.BAD_REQUEST, error_frame("poll: expected {agentUrl, waitS}")
        if poll.agent_url is not None and self.fleet.agent_id_for(poll.agent_url) != agent:
            return HTTPStatus.FORBIDDEN, error_frame("poll: agentUrl is not this agent's")
        self._ensure_loop()
        self.fleet.touch(agent)
        wait = min(poll.wait_s, self._settings.fleet.poll_wait_max_s)
        return HTTPStatus.OK, {"commands": await self.desk.take(http_outbox(agent), wait)}

    def http_result(self, raw: bytes, agent_id: str | None, digest: str | None) -> Answer:
        agent = prove_agent(self.fleet, agent_id, digest)
        if not isinstance(agent, str):
            return agent
        frame = parse_frame(raw)
        if not isinstance(frame, ResultFrame):
            return _bad_frame(frame, "result")
        if self.desk.agent_of(frame.id) != agent:  # unknown, or another agent's command
            return HTTPStatus.NOT_FOUND, error_frame("no pending command with that id")
        self.fleet.touch(agent)
        self.desk.resolve(agent, frame)
        return HTTPStatus.OK, {"ok": True}

    # --- reads ---------------------------------------------------------------------------------
    def hosts(self) -> list[HostView]:
        return self.fleet.hosts()

    def providers(self) -> list[ProviderInfo]:
        infos, self._routes = sidecar_providers(self.fleet.hosts(), self._settings.embedding.width, self._stats)
        return infos

    # --- provider calls (the dispatchers') -----------------------------------------------------
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
        agent = self.fleet.agent_id_for(agent_url)
        if agent is None:
            raise UpstreamUnavailable(agent_url[:200], "no agent registered at that URL")
        box = self._outbox_of(agent, agent)
        return await self.desk.request(
            agent, box, lambda i: config_frame(i, payload), self._settings.fleet.command_timeout_s, agent, "config"
        )

    # --- liveness ------------------------------------------------------------------------------
    async def liveness_loop(self) -> None:
        """Ping sweep every ping interval; stale hosts checked every second (their commands fail)."""
        ping_every = self._settings.fleet.ping_interval_s
        next_ping = self._clock() + ping_every
        while True:
            await self._sleep(min(STALE_CHECK_S, ping_every))
            try:
                self.fleet.flush()  # registry changes deferred by the write budget
                for agent in self.fleet.newly_stale():
                    failed = self.desk.fail_agent(agent, "no heartbeat: the host left the lanes")
                    log.info("sidecar agent %s went stale; %d commands failed over", agent, failed)
                if self._clock() >= next_ping:
                    next_ping = self._clock() + ping_every
                    self.sweep()
            except Exception:
                log.exception("fleet liveness pass failed")

    def stop_liveness(self) -> None:
        """Cancel the liveness loop (started by the first socket or registration)."""
        if self._loop_task is not None:
            self._loop_task.cancel()
            self._loop_task = None

    def sweep(self) -> None:
        """Close the sockets the fleet dropped (their commands fail), and ping every other one."""
        for connection, why in self.fleet.sweep():
            log.info("closing sidecar socket %s: %s", connection, why)
            self.desk.fail_outbox(socket_outbox(connection), f"socket closed: {why}")
            self.desk.post(socket_outbox(connection), {"type": CLOSE_SOCKET, "reason": why})
        for connection in self.fleet.connections():
            self.desk.post(socket_outbox(connection), ping_frame())

    # --- internals -----------------------------------------------------------------------------
    def _current_routes(self) -> dict[str, SidecarRoute]:
        if not self._routes:  # a call before any discovery asked: derive them now
            self.providers()
        return self._routes

    async def _send(self, agent: str, provider: str, action: str, payload: dict[str, Any]) -> dict[str, Any]:
        box = self._outbox_of(agent, provider)
        return await self.desk.send(agent, box, provider, action, payload, self._settings.fleet.command_timeout_s)

    def _fail_retired(self) -> None:
        """Commands held by agents replaced or evicted by a registration fail now."""
        for agent in self.fleet.drain_retired():
            failed = self.desk.fail_agent(agent, REPLACED)
            self.desk.fail_outbox(http_outbox(agent), REPLACED)
            log.info("sidecar agent %s replaced; %d commands failed over", agent, failed)

    def _outbox_of(self, agent: str, provider: str) -> str:
        """Where `agent` takes its frames: its live socket, else its HTTP polls."""
        if not self.fleet.reachable(agent):  # fail now: nobody would take it before the timeout
            raise UpstreamUnavailable(provider, "sidecar not connected (socket closed or no recent heartbeat)")
        connection = self.fleet.connection_of(agent)
        return socket_outbox(connection) if connection is not None else http_outbox(agent)

    async def _counted(self, provider: str, call: Coroutine[Any, Any, _T]) -> _T:
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
            self._loop_task = asyncio.get_running_loop().create_task(self.liveness_loop())
